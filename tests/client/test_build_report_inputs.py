"""What the build report sends and tries, without a server: inputs at the engine's optimisation shapes, user samples
checked against the model's inputs, the tuning grid and the config lines it proposes.

Sources: the engine's profile is model_build.trt.shape_profiles (opt batch = tensorrt.opt_batch_size, else the
largest preferred batch size; dynamic axes from tensorrt.shapes[].opt); Triton's config.pbtxt fields
instance_group.count, dynamic_batching.preferred_batch_size and max_queue_delay_microseconds (model_config.proto).
"""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.build_check import check_samples, opt_inputs
from endpoint_client.build_tune import Candidate, candidates, config_lines
from endpoint_client.errors import InvalidInputError
from serving_facts.settings import ModelSettings


def _config() -> mc.ModelConfig:
    config = mc.ModelConfig(name="bert", max_batch_size=16)
    config.input.add(name="input_ids", data_type=mc.TYPE_INT64, dims=[-1])
    config.input.add(name="mask", data_type=mc.TYPE_BOOL, dims=[-1])
    config.input.add(name="scale", data_type=mc.TYPE_FP16, dims=[2])
    return config


SETTINGS = ModelSettings.model_validate(
    {
        "name": "bert",
        "source": {"export": "bert_base"},
        "max_batch_size": 16,
        "dynamic_batching": {"preferred_batch_sizes": [4, 8], "max_queue_delay_microseconds": 200},
        "tensorrt": {"shapes": [{"input": "input_ids", "min": [1], "opt": [128], "max": [512]},
                                {"input": "mask", "min": [1], "opt": [128], "max": [512]}]},
    }
)  # fmt: skip


def test_generated_inputs_are_the_engines_opt_shapes_per_dtype_and_deterministic():
    tensors = opt_inputs(_config(), SETTINGS)
    assert {name: list(a.shape) for name, a in tensors.items()} == {
        "input_ids": [8, 128],  # batch: the largest preferred size; seq: tensorrt.shapes opt
        "mask": [8, 128],
        "scale": [8, 2],
    }
    assert tensors["input_ids"].dtype == np.int64 and tensors["input_ids"].max() < 10
    assert tensors["mask"].dtype == np.bool_ and tensors["scale"].dtype == np.float16
    again = opt_inputs(_config(), SETTINGS)
    assert all(np.array_equal(tensors[name], again[name]) for name in tensors)


def test_a_bytes_input_needs_samples():
    config = _config()
    config.input.add(name="text", data_type=mc.TYPE_STRING, dims=[1])
    with pytest.raises(InvalidInputError, match="--samples"):
        opt_inputs(config, SETTINGS)


def test_samples_must_name_exactly_the_models_inputs():
    with pytest.raises(InvalidInputError, match="missing mask, scale; not inputs of the model: extra"):
        check_samples(_config(), {"input_ids": np.zeros((1, 4)), "extra": np.zeros(1)}, "--samples")


def test_the_grid_is_every_combination_and_empty_lists_keep_the_models_values():
    tuned = ModelSettings.model_validate({**SETTINGS.model_dump(), "tune": {"slo_p99_ms": 50}})
    assert candidates(tuned) == [Candidate(n, 200, (4, 8)) for n in (1, 2, 3)]
    grid = {"instance_counts": [1, 2], "max_queue_delay_microseconds": [0, 500], "preferred_batch_sizes": [[16]]}
    tuned = ModelSettings.model_validate({**SETTINGS.model_dump(), "tune": {"slo_p99_ms": 50, "candidates": grid}})
    assert len(candidates(tuned)) == 4 and Candidate(2, 500, (16,)) in candidates(tuned)


def test_the_proposal_is_stage_config_lines():
    best = {"inferences_per_second": 812.25, "concurrency": 8, "latency_ms": {"p99": 41.2}}
    tuned = ModelSettings.model_validate({**SETTINGS.model_dump(), "tune": {"slo_p99_ms": 50}})
    lines = config_lines(tuned, Candidate(2, 100, (8, 16)), best, "NVIDIA A10G").splitlines()
    assert lines[0] == "# tune (NVIDIA A10G): 812.2 inferences/s at concurrency 8, p99 41.2 ms <= 50 ms"
    assert lines[1:] == [
        "instance_groups: [{count: 2, kind: KIND_GPU}]",
        "dynamic_batching: {preferred_batch_sizes: [8, 16], max_queue_delay_microseconds: 100}",
    ]
