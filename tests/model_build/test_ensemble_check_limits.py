"""`check` on hand-written ensembles stays fast and bounded: tensors per step (linear time) and one nesting
limit shared by check and package."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from model_build.check import check_repository
from model_build.check.ensemble import MAX_ENSEMBLE_DEPTH, nesting_message
from model_build.ensemble_config import composing_closure
from model_build.errors import InvalidModelError
from serving_facts.settings import MAX_STEP_TENSORS


def hand_written_ensemble(root: Path, tensors: int, steps: int = 1) -> Path:
    model = mc.ModelConfig(name="m", backend="python", max_batch_size=0)
    for i in range(tensors):
        model.input.add(name=f"in{i}", data_type=mc.TYPE_FP32, dims=[1])
        model.output.add(name=f"out{i}", data_type=mc.TYPE_FP32, dims=[1])
    model.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    ensemble = mc.ModelConfig(name="e", platform="ensemble", max_batch_size=0)
    for i in range(tensors):
        ensemble.input.add(name=f"t0_{i}", data_type=mc.TYPE_FP32, dims=[1])
        ensemble.output.add(name=f"t{steps}_{i}", data_type=mc.TYPE_FP32, dims=[1])
    for s in range(steps):
        step = ensemble.ensemble_scheduling.step.add(model_name="m", model_version=-1)
        for i in range(tensors):
            step.input_map[f"in{i}"] = f"t{s}_{i}"
            step.output_map[f"out{i}"] = f"t{s + 1}_{i}"
    for config in (model, ensemble):
        (root / config.name).mkdir(parents=True)
        (root / config.name / "config.pbtxt").write_text(text_format.MessageToString(config))
    return root


def test_a_step_over_the_tensor_limit_is_refused_fast(tmp_path):
    """N=4000 inputs took 77 s and 600 MB (a map scan per input, every output linked to every input)."""
    repo = hand_written_ensemble(tmp_path / "repo", 4000)
    # This process's CPU time, not the wall clock: other work on a shared machine must not fail the bound.
    started = time.process_time()
    problems = check_repository(repo, configs_only=True)
    assert time.process_time() - started < 15
    assert [(p.field, p.rule) for p in problems] == [("ensemble_scheduling.step[0].input_map", "ensemble-mapping")]
    assert f"maps 4000 tensors in its input_map; at most {MAX_STEP_TENSORS} are checked" in problems[0].message


def test_steps_at_the_limit_are_checked_in_linear_time(tmp_path):
    """16 steps of 256 inputs and 256 outputs each: 65,536 input-output pairs per step for Triton's graph."""
    repo = hand_written_ensemble(tmp_path / "repo", MAX_STEP_TENSORS, steps=16)
    started = time.process_time()
    assert check_repository(repo, configs_only=True) == []
    assert time.process_time() - started < 15


def ensemble_chain(root: Path, length: int) -> Path:
    """e0 -> e1 -> ... -> e<length-1> -> m: `length` nested ensembles over one python model."""
    model = mc.ModelConfig(name="m", backend="python", max_batch_size=0)
    model.input.add(name="x", data_type=mc.TYPE_FP32, dims=[1])
    model.output.add(name="y", data_type=mc.TYPE_FP32, dims=[1])
    model.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    configs = [model]
    for i in range(length):
        ensemble = mc.ModelConfig(name=f"e{i}", platform="ensemble", max_batch_size=0)
        ensemble.input.add(name="x", data_type=mc.TYPE_FP32, dims=[1])
        ensemble.output.add(name="y", data_type=mc.TYPE_FP32, dims=[1])
        step = ensemble.ensemble_scheduling.step.add(model_name=f"e{i + 1}" if i + 1 < length else "m")
        step.model_version = -1
        step.input_map["x"] = "x"
        step.output_map["y"] = "y"
        configs.append(ensemble)
    for config in configs:
        (root / config.name / "1").mkdir(parents=True)
        (root / config.name / "config.pbtxt").write_text(text_format.MessageToString(config))
    return root


def test_check_and_package_share_one_nesting_limit(tmp_path):
    deep = ensemble_chain(tmp_path / "deep", MAX_ENSEMBLE_DEPTH + 1)
    problems = [p for p in check_repository(deep, configs_only=True) if p.rule == "ensemble-depth"]
    assert [(p.model, p.message) for p in problems] == [("e0", nesting_message("e0"))]
    with pytest.raises(InvalidModelError) as error:
        composing_closure(deep, ["e0"])
    assert str(error.value).endswith(nesting_message("e0"))
    limit = ensemble_chain(tmp_path / "limit", MAX_ENSEMBLE_DEPTH)
    assert not [p for p in check_repository(limit, configs_only=True) if p.rule == "ensemble-depth"]
    assert len(composing_closure(limit, ["e0"])) == MAX_ENSEMBLE_DEPTH + 1


def test_a_long_chain_does_not_exhaust_the_recursion_limit(tmp_path):
    repo = ensemble_chain(tmp_path / "repo", 1100)  # deeper than Python's recursion limit (1000)
    problems = check_repository(repo, configs_only=True)
    assert any(p.rule == "ensemble-depth" and p.model == "e0" for p in problems)
