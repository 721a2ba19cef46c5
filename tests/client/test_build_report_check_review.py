"""Issue 25 review items on the build check's side: generated integer inputs that every index table accepts,
per-input ranges, `tensorrt.accuracy.check: false`, `tensorrt.accuracy.samples`, a tuning variant that fails to load,
and options refused before any measurement.

Sources: ONNX Runtime's Gather refuses an index beyond its table ("indices element out of data bounds",
onnxruntime/core/providers/cpu/tensor/gather.cc); BERT's token_type_ids index a 2-row table (type_vocab_size 2).
InvokeEndpoint's request body is at most 6 MB (botocore sagemaker-runtime BodyBlob max 6291456), the bound on
--samples files and generated inputs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client import build_check_cli
from endpoint_client.build_check import MAX_GENERATED_BYTES, opt_inputs
from endpoint_client.build_tune import tune
from endpoint_client.errors import InvalidInputError, LocalEndpointError
from model_build import cli as model_build_cli
from serving_facts.settings import ModelSettings

MODEL = "segments"


def _gather_model(path: Path) -> Path:
    """OUTPUT = table[token_type_ids] with a 2-row table, as BERT's token-type embedding."""
    ids = helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", 4])
    out = helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, ["batch", 4, 3])
    table = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "token_type_ids"], ["OUTPUT"], axis=0)], MODEL, [ids], [out], [table]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _stage(tmp_path: Path, accuracy: str = "") -> Path:
    config = tmp_path / "stage.yaml"
    config.write_text(
        f"""triton_release: "24.09"
models:
  - name: {MODEL}
    source: {{path: reference.onnx}}
    platform: tensorrt_plan
    max_batch_size: 8
    dynamic_batching: {{preferred_batch_sizes: [4]}}
    instance_groups: [{{count: 1, kind: KIND_GPU}}]
    tensorrt: {{precision: fp32{accuracy}}}
"""
    )
    return config


def _built(tmp_path: Path, config: Path) -> tuple[Path, Path]:
    reference = _gather_model(tmp_path / "reference.onnx")
    repository = tmp_path / "repo"
    argv = ["config", "--config", str(config), "--model", MODEL, "--onnx", str(reference), "--repository"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert model_build_cli.main([*argv, str(repository)]) == 0
    (repository / MODEL / "1").mkdir()
    _gather_model(repository / MODEL / "1" / "model.onnx")
    return reference, repository


def _run(argv: list[str]) -> tuple[int, str]:
    stderr = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
        code = build_check_cli.main(argv)
    return code, stderr.getvalue()


def _argv(tmp_path: Path, config: Path, reference: Path, repository: Path, *extra: str) -> list[str]:
    return [
        *("--config", str(config), "--model", MODEL, "--repository", str(repository), "--onnx", str(reference)),
        *("--out", str(tmp_path / "report.json"), "--concurrency", "1", "--seconds", "0.3", "--startup-timeout", "60"),
        *extra,
    ]


def test_a_gather_on_segment_ids_passes_with_the_generated_defaults(triton_env: Path, tmp_path: Path):
    """Integers default to 0/1: a correct model indexing a 2-row table is not failed by its own check."""
    config = _stage(tmp_path)
    reference, repository = _built(tmp_path, config)
    code, stderr = _run(_argv(tmp_path, config, reference, repository, "--triton-env", str(triton_env)))
    assert code == 0, stderr
    assert json.loads((tmp_path / "report.json").read_text())["accuracy"]["passed"] is True


def test_values_a_model_refuses_point_to_input_ranges_and_samples(triton_env: Path, tmp_path: Path):
    """ids 5-9 into a 2-row table: ONNX Runtime's Gather refuses them; one ERROR line says how to give valid ones."""
    config = _stage(tmp_path, ", accuracy: {input_ranges: {token_type_ids: [5, 9]}}")
    reference, repository = _built(tmp_path, config)
    code, stderr = _run(_argv(tmp_path, config, reference, repository, "--triton-env", str(triton_env)))
    assert code == 1 and "tensorrt.accuracy.input_ranges" in stderr and "Traceback" not in stderr, stderr
    assert not (tmp_path / "report.json").exists()


def test_check_false_skips_the_comparison_and_says_so(triton_env: Path, tmp_path: Path):
    """With check: false nothing is compared and the report records it (passed null, not true); the speed is still
    measured."""
    config = _stage(tmp_path, ", accuracy: {check: false}")
    reference, repository = _built(tmp_path, config)
    code, stderr = _run(_argv(tmp_path, config, reference, repository, "--triton-env", str(triton_env)))
    assert code == 0, stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["accuracy"]["checked"] is False and report["accuracy"]["passed"] is None and report["speed"]


def _config() -> mc.ModelConfig:
    config = mc.ModelConfig(name="bert", max_batch_size=8)
    config.input.add(name="token_type_ids", data_type=mc.TYPE_INT32, dims=[16])
    config.input.add(name="input_ids", data_type=mc.TYPE_INT64, dims=[16])
    config.input.add(name="scale", data_type=mc.TYPE_FP32, dims=[16])
    return config


BASE = {"name": "bert", "source": {"export": "bert_base"}, "max_batch_size": 8}


def test_generated_integers_are_0_or_1_unless_a_range_is_given():
    plain = opt_inputs(_config(), ModelSettings.model_validate(BASE))
    assert set(np.unique(plain["token_type_ids"])) <= {0, 1} and set(np.unique(plain["input_ids"])) == {0, 1}
    ranged = ModelSettings.model_validate(
        {**BASE, "tensorrt": {"accuracy": {"input_ranges": {"input_ids": [100, 30521], "scale": [-2, 2]}}}}
    )
    tensors = opt_inputs(_config(), ranged)
    assert tensors["input_ids"].min() >= 100 and tensors["input_ids"].max() <= 30521
    assert tensors["input_ids"].max() > 1000 and -2 <= tensors["scale"].min() < 0 and tensors["scale"].max() < 2
    assert set(np.unique(tensors["token_type_ids"])) <= {0, 1}


@pytest.mark.parametrize(
    ("ranges", "message"),
    [({"nope": [0, 1]}, "nope not inputs of model 'bert'"), ({"token_type_ids": [0, 2**40]}, "TYPE_INT32 integer"),
     ({"input_ids": [0.2, 0.8]}, "holds no TYPE_INT64 integer")],
)  # fmt: skip
def test_input_ranges_are_checked_against_the_models_inputs(ranges, message):
    settings = ModelSettings.model_validate({**BASE, "tensorrt": {"accuracy": {"input_ranges": ranges}}})
    with pytest.raises(InvalidInputError, match=message):
        opt_inputs(_config(), settings)


def test_generated_inputs_are_capped_like_samples():
    """A wrong opt shape must not allocate gigabytes: each generated input at most one request's 6 MB."""
    config = mc.ModelConfig(name="big", max_batch_size=8)
    config.input.add(name="x", data_type=mc.TYPE_FP32, dims=[-1])
    settings = ModelSettings.model_validate(
        {**BASE, "tensorrt": {"shapes": [{"input": "x", "min": [1], "opt": [1_000_000], "max": [1_000_000]}]}}
    )
    with pytest.raises(InvalidInputError, match=f"at most {MAX_GENERATED_BYTES} bytes"):
        opt_inputs(config, settings)


class _Server:
    """Loads fail for 3 instances (as when three engines do not fit the GPU); records what was unloaded."""

    url = "http://unused"

    def __init__(self) -> None:
        self.unloaded: list[str] = []

    def load(self, model: str) -> None:
        if model.endswith("__tune2"):
            raise LocalEndpointError(f"load of {model!r} failed: HTTP 400: out of memory\nlog tail")

    def unload(self, model: str) -> None:
        self.unloaded.append(model)


def test_a_variant_that_fails_to_load_is_recorded_and_the_rest_measured(monkeypatch: pytest.MonkeyPatch):
    settings = ModelSettings.model_validate({**BASE, "tune": {"slo_p99_ms": 100, "concurrency": [1], "seconds": 1}})
    row = {"concurrency": 1, "errors": 0, "inferences_per_second": 10.0, "latency_ms": {"p99": 5.0}}

    class _Level:
        def as_dict(self) -> dict:
            return row

    monkeypatch.setattr("endpoint_client.build_check.speed_sweep", lambda *args: [_Level()])
    monkeypatch.setattr("endpoint_client.build_check.host_facts", lambda: ("GPU", None))
    server = _Server()
    result = tune(server, settings, {})
    counts = [(c["instance_count"], c.get("failed")) for c in result["candidates"]]
    assert counts[:2] == [(1, None), (2, None)] and counts[2][0] == 3
    assert counts[2][1] == "load of 'bert__tune2' failed: HTTP 400: out of memory" and result["best"] is not None
    assert "bert__tune2" in server.unloaded


def test_bad_files_are_refused_before_the_measurement(tmp_path: Path):
    """Missing --onnx, a non-executable --tritonserver, a corrupt build-info.json, --out under a file, in /proc or a
    dangling link, string samples and a tensorrt.accuracy.samples the build did not pass: one ERROR line each, no
    server started."""
    config = _stage(tmp_path)
    reference, repository = _built(tmp_path, config)
    server = tmp_path / "tritonserver"
    server.write_text("#!/bin/sh\n")
    os.chmod(server, 0o644)
    cases = [
        (["--onnx", str(tmp_path / "missing.onnx")], "--onnx"),
        (["--tritonserver", str(server)], "not an executable file"),
    ]
    for extra, message in cases:
        code, stderr = _run([*_argv(tmp_path, config, reference, repository), *extra])
        assert code == 1 and message in stderr and "Traceback" not in stderr, stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = _argv(tmp_path, config, reference, repository, "--triton-env", str(tmp_path))
    code, stderr = _run([*argv, "--out", str(blocker / "report.json")])
    assert code == 1 and "is not a folder" in stderr
    code, stderr = _run([*argv, "--out", "/proc/report.json"])
    assert code == 1 and "--out /proc/report.json: cannot create it" in stderr, stderr
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere" / "x.json")
    code, stderr = _run([*argv, "--out", str(tmp_path / "dangling.json")])
    assert code == 1 and "already exists (a file or link)" in stderr and not (tmp_path / "nowhere").exists()
    strings = tmp_path / "strings.npz"
    np.savez(strings, token_type_ids=np.array([["a"] * 4]))
    code, stderr = _run([*argv, "--samples", str(strings)])
    assert code == 1 and "compares numeric or boolean inputs" in stderr and "Traceback" not in stderr, stderr
    (repository / MODEL / "build-info.json").write_text("{not json")
    code, stderr = _run(argv)
    assert code == 1 and "not a build-info.json" in stderr
    sampled = _stage(tmp_path, ", accuracy: {samples: data/in.npz}")
    code, stderr = _run(_argv(tmp_path, sampled, reference, repository, "--triton-env", str(tmp_path)))
    assert code == 1 and "pass that file as --samples" in stderr
