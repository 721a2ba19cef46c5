"""Synth-time preflight: what the GPU build (trt-command, config, check, matcher) would refuse is found first."""

from __future__ import annotations

from pathlib import Path

import yaml
from ensemble_fixtures import PRE_CONFIG, python_folder, python_settings
from onnx_fixtures import dynamic_batch_model, sequence_model
from synth_helpers import PROJECT_ROOT

from model_build.preflight import preflight_problems
from serving_facts.settings import ModelSettings


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


# --- the python model folder against the stage settings and the instance type ---------------------------


def stage_settings(stage: Path, name: str) -> ModelSettings:
    document = yaml.safe_load(stage.read_text())
    return ModelSettings.model_validate(next(m for m in document["models"] if m["name"] == name))


def test_folder_config_is_checked_for_the_endpoint_s_instance_type(tmp_path):
    """The folder's config.pbtxt is what Triton loads: a KIND_GPU group there on a CPU instance type fails at load
    (core instance groups: no GPU), so it is refused at synth even though the stage says KIND_CPU (it did pass)."""
    python_folder(tmp_path, PRE_CONFIG.replace("KIND_CPU", "KIND_GPU"))
    settings = python_settings(
        max_batch_size=0, dynamic_batching={"enabled": False}, instance_groups=[{"count": 1, "kind": "KIND_CPU"}]
    )
    found = preflight_problems(settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path)
    messages = dict(found)
    assert "models/pre/config.pbtxt fails check" in messages["source.path"]
    assert "KIND_GPU but no GPUs are available" in messages["source.path"]
    assert messages["instance_groups[0].kind"].startswith(
        "is KIND_CPU but models/pre/config.pbtxt has instance_group[0].kind KIND_GPU"
    )


def test_folder_config_name_must_be_the_stage_model_name(tmp_path):
    """Triton: "unexpected directory name ... directory name must equal model name" (the folder is the stage's
    model name in the package)."""
    python_folder(tmp_path, PRE_CONFIG.replace('name: "pre"', 'name: "other"'))
    settings = python_settings(max_batch_size=0, dynamic_batching={"enabled": False})
    found = preflight_problems(settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path)
    assert any("unexpected directory name 'pre' for model 'other'" in message for _, message in found), found


def test_stage_values_that_contradict_the_folder_config_are_refused_naming_both(tmp_path):
    python_folder(tmp_path, PRE_CONFIG)  # max_batch_size 0, no dynamic_batching, one KIND_CPU instance
    settings = python_settings(
        max_batch_size=8,
        dynamic_batching={"max_queue_delay_microseconds": 50},
        instance_groups=[{"count": 2, "kind": "KIND_CPU"}],
    )
    found = dict(
        preflight_problems(settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path)
    )
    assert found["max_batch_size"].startswith("is 8 but models/pre/config.pbtxt has max_batch_size 0")
    assert found["dynamic_batching.enabled"].startswith("is true but models/pre/config.pbtxt has dynamic_batching")
    assert found["instance_groups[0].count"].startswith(
        "is 2 but models/pre/config.pbtxt has instance_group[0].count 1"
    )
    assert "Triton loads the folder's config.pbtxt" in found["max_batch_size"]


def test_keys_the_stage_leaves_out_are_the_folder_s_alone(tmp_path):
    python_folder(tmp_path, PRE_CONFIG)
    settings = python_settings(instance_groups=[{"kind": "KIND_CPU"}])  # count, batching: not stated
    assert (
        preflight_problems(settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path) == []
    )


def test_the_example_pipelines_agree_with_their_folders():
    for stage, name in (
        ("examples/config/ensemble.yaml", "image_preprocess"),
        ("examples/config/ensemble.yaml", "image_postprocess"),
        ("tests/configs/ensemblemme.yaml", "add_sub"),
    ):
        settings = stage_settings(PROJECT_ROOT / stage, name)
        found = preflight_problems(
            settings, instance_type_name="ml.g5.xlarge", triton_release="24.09", base_dir=PROJECT_ROOT
        )
        assert found == [], (stage, name, found)
