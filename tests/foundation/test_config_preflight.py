"""`make synth` fails on a model the GPU build would refuse, naming the model and the setting (preflight)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from synth_helpers import shipped_path

from stage_config.loader import ConfigError, load_config

PROJECT_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT_ROOT / "tests" / "model_build"))
from onnx_fixtures import dynamic_batch_model, sequence_model  # noqa: E402


def stage_file(folder: Path, model: dict, instance_type: str = "ml.g5.xlarge") -> Path:
    document = yaml.safe_load(shipped_path("config/dev.yaml").read_text())
    document["models"] = [model]
    document["endpoints"] = [
        {"name": "mine", "mode": "single_model", "models": [model["name"]], "instance_type": instance_type}
    ]
    path = folder / "dev.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_dynamic_axes_without_shapes_fail_at_load_naming_model_and_setting(tmp_path):
    onnx_path = sequence_model(tmp_path / "bert.onnx")
    path = stage_file(tmp_path, {"name": "bert", "source": {"path": str(onnx_path)}, "max_batch_size": 8})
    with pytest.raises(ConfigError) as refused:
        load_config(path, source_roots=(PROJECT_ROOT, tmp_path))
    message = str(refused.value)
    assert "models[0].source.path" in message
    assert "tensorrt.shapes" in message
    assert "model 'bert' served by endpoints[0] on ml.g5.xlarge" in message


def test_ampere_plus_for_volta_fails_at_load(tmp_path):
    onnx_path = dynamic_batch_model(tmp_path / "m.onnx")
    model = {"name": "m", "source": {"path": str(onnx_path)}, "tensorrt": {"hardware_compatibility": "ampere+"}}
    path = stage_file(tmp_path, model, instance_type="ml.p3.2xlarge")
    with pytest.raises(ConfigError, match=r"models\[0\]\.tensorrt\.hardware_compatibility: ampere\+ engines run"):
        load_config(path, source_roots=(PROJECT_ROOT, tmp_path))


def test_a_buildable_local_model_loads(tmp_path):
    onnx_path = dynamic_batch_model(tmp_path / "m.onnx")
    path = stage_file(tmp_path, {"name": "m", "source": {"path": str(onnx_path)}})
    assert load_config(path, source_roots=(PROJECT_ROOT, tmp_path)).models[0].name == "m"


def test_errors_name_files_relative_to_the_project_root():
    """Messages show `config/dev.yaml`, not an absolute path (README: commands run from the project root)."""
    from stage_config.loader import shown_path

    assert shown_path(PROJECT_ROOT / "config" / "dev.yaml") == Path("config/dev.yaml")
