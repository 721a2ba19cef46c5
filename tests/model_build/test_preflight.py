"""Synth-time preflight: what the GPU build (trt-command, config, check, matcher) would refuse is found first."""

from __future__ import annotations

from pathlib import Path

from onnx_fixtures import dynamic_batch_model, sequence_model

from model_build.preflight import preflight_problems
from model_build.settings import ModelSettings


def settings_for(path: str, **fields) -> ModelSettings:
    return ModelSettings.model_validate({"name": "m", "source": {"path": path}, **fields})


def problems(tmp_path: Path, settings: ModelSettings, instance: str = "ml.g5.xlarge", release: str = "24.09"):
    return preflight_problems(settings, instance_type_name=instance, triton_release=release, base_dir=tmp_path)


def test_a_buildable_model_has_no_problems(tmp_path):
    dynamic_batch_model(tmp_path / "m.onnx")
    assert problems(tmp_path, settings_for("m.onnx")) == []


def test_dynamic_axis_without_shapes_fails_at_synth_naming_the_setting(tmp_path):
    """trtexec needs a range for every dynamic axis besides the batch (trt-command refuses it in the build)."""
    sequence_model(tmp_path / "m.onnx")
    (field, message), *_ = problems(tmp_path, settings_for("m.onnx"))
    assert field == "source.path"
    assert "tensorrt.shapes" in message


def test_ampere_plus_on_volta_is_refused(tmp_path):
    """TensorRT hardware compatibility ampere+ engines never run on V100 (../shared/README.md)."""
    dynamic_batch_model(tmp_path / "m.onnx")
    settings = settings_for("m.onnx", tensorrt={"hardware_compatibility": "ampere+"})
    found = problems(tmp_path, settings, instance="ml.p3.2xlarge")
    assert ("tensorrt.hardware_compatibility", found[0][1]) == found[0]
    assert "V100" in found[0][1]


def test_tensorrt_on_a_cpu_type_is_refused(tmp_path):
    dynamic_batch_model(tmp_path / "m.onnx")
    ((field, _),) = problems(tmp_path, settings_for("m.onnx"), instance="ml.c5.xlarge")
    assert field == "platform"


def test_a_file_that_is_no_model_is_refused_with_its_name(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"\x08\x07garbage")
    ((field, message),) = problems(tmp_path, settings_for("m.onnx"))
    assert field == "source.path" and "m.onnx" in message


def test_exported_models_are_checked_for_the_matcher_only(tmp_path):
    settings = ModelSettings.model_validate({"name": "m", "source": {"export": "resnet50"}})
    assert problems(tmp_path, settings) == []
