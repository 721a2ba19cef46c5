"""Ensembles and Python environments in the stage config: cross-model rules (stage_config/app.py) and the
synth-time preflight of an ensemble (model_build/preflight.py), every problem at once with its field path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from synth_helpers import shipped_path

from stage_config.loader import ConfigError, load_config

PROJECT_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT_ROOT / "tests" / "model_build"))
from ensemble_fixtures import write_pipeline  # noqa: E402


def pipeline_stage(folder: Path, *, endpoint: dict | None = None, edit=None) -> Path:
    """dev.yaml with the fixture pipeline (absolute source paths under `folder`) on one CPU endpoint."""
    write_pipeline(folder)
    document = yaml.safe_load(shipped_path("config/dev.yaml").read_text())
    pipeline = yaml.safe_load((folder / "stage.yaml").read_text())
    for model in pipeline["models"]:
        if "source" in model:
            model["source"]["path"] = str(folder / model["source"]["path"])
        if "environment" in model:
            model["environment"]["requirements"] = str(folder / model["environment"]["requirements"])
    document["models"] = pipeline["models"]
    document["endpoints"] = [
        endpoint or {"name": "pipe", "mode": "single_model", "models": ["pipe"], "instance_type": "ml.c5.xlarge"}
    ]
    if edit:
        edit(document)
    path = folder / "dev.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def load(path: Path):
    return load_config(path, source_roots=(PROJECT_ROOT, path.parent))


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as refused:
        load(path)
    return str(refused.value)


def test_a_pipeline_loads_and_its_composing_models_need_not_be_listed(tmp_path):
    """The endpoint names only the ensemble; its composing models ship in its archive."""
    config = load(pipeline_stage(tmp_path))
    assert [m.name for m in config.served_models(["pipe"])] == ["pipe", "pre", "cnn", "post"]


def test_step_models_are_checked_all_at_once(tmp_path):
    """core model_repository_manager.cc: an ensemble loads only when every step's model is available, and
    circular dependencies are refused; nested ensembles are refused by us for now."""

    def edit(document):
        steps = document["models"][3]["ensemble"]["steps"]
        steps[0]["model"] = "missing"
        steps[2]["model"] = "pipe"
        document["models"].append(
            {"name": "outer", "platform": "ensemble", "ensemble": {"steps": [{**steps[1], "model": "pipe"}]}}
        )

    message = refusal(pipeline_stage(tmp_path, edit=edit))
    assert "models[3].ensemble.steps[0].model: unknown model 'missing'" in message
    assert "models[3].ensemble.steps[2].model: ensemble 'pipe' names itself" in message
    assert "models[4].ensemble.steps[0].model: 'pipe' is an ensemble: nested ensembles are not supported yet" in message


def test_inference_component_endpoints_refuse_ensembles(tmp_path):
    endpoint = {"name": "ic", "mode": "inference_components", "models": ["pipe"], "instance_type": "ml.c5.xlarge"}
    endpoint["inference_components"] = {}  # (without it endpoint.py fails before the cross-model rules)
    message = refusal(pipeline_stage(tmp_path, endpoint=endpoint))
    assert "endpoints[0].models: 'pipe' is an ensemble: ensembles on inference_components endpoints are not" in message


def test_composing_models_are_held_to_the_endpoint_hardware(tmp_path):
    """A TensorRT plan needs a GPU (tensorrt_backend: "TensorRT backend supports only GPU device"), also when
    it is reached through an ensemble the endpoint serves."""

    def edit(document):
        document["models"][1].update(platform="tensorrt_plan", instance_groups=[{"count": 1, "kind": "KIND_GPU"}])

    message = refusal(pipeline_stage(tmp_path, edit=edit))
    assert "endpoints[0].instance_type: model 'cnn' is a TensorRT plan and needs a GPU instance" in message


def test_preflight_names_the_step_whose_tensors_do_not_connect(tmp_path):
    """core ensemble_utils.cc ValidateTensorMapping: "in ensemble <e>, ensemble tensor <t> is mapping to
    non-existing input <i> in model <m>", reported at synth on the stage file's step."""

    def edit(document):
        document["models"][3]["ensemble"]["steps"][2]["input_map"] = {"scores": "logits"}

    message = refusal(pipeline_stage(tmp_path, edit=edit))
    assert "dev.yaml: models[3].ensemble.steps[2]: the generated ensemble fails check" in message
    assert "mapping to non-existing input scores in model post" in message


def test_preflight_names_a_type_mismatch_between_steps(tmp_path):
    """ensemble_utils.cc ValidateTensorConsistency: "inconsistent data type: TYPE_FP32 is inferred from model
    pre while TYPE_INT32 is inferred from model cnn"."""
    write_pipeline(tmp_path)
    onnx_path = tmp_path / "models" / "cnn.onnx"
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        # A Cast, so ONNX Runtime loads the graph (model_build holds ONNX Runtime models to what it loads).
        [helper.make_node("Cast", ["input"], ["output"], to=TensorProto.FLOAT)],
        "cnn",
        [helper.make_tensor_value_info("input", TensorProto.INT32, [1, 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(onnx_path))
    path = pipeline_stage(tmp_path / "again")
    (tmp_path / "again" / "models" / "cnn.onnx").write_bytes(onnx_path.read_bytes())
    message = refusal(path)
    assert "models[3].ensemble" in message and "inconsistent data type" in message


def test_unlocked_requirements_fail_at_load_naming_the_line(tmp_path):
    def edit(document):
        Path(document["models"][0]["environment"]["requirements"]).write_text("numpy==1.26.4\npillow>=10\n")

    message = refusal(pipeline_stage(tmp_path, edit=edit))
    assert "models[0].environment.requirements:" in message
    assert "line 2: 'pillow>=10' is not locked" in message


def test_a_folder_config_naming_another_environment_fails_at_load(tmp_path):
    """`model_build config` adds EXECUTION_ENV_PATH = $$TRITON_MODEL_DIRECTORY/python_env.tar.gz for
    `environment: {requirements: ...}`; a folder config that names another environment contradicts it."""

    def edit(document):
        config = Path(document["models"][0]["source"]["path"]) / "config.pbtxt"
        value = "$$TRITON_MODEL_DIRECTORY/other.tar.gz"
        parameter = f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{value}" }} }}\n'
        config.write_text(config.read_text() + parameter)

    message = refusal(pipeline_stage(tmp_path, edit=edit))
    assert "models[0].environment:" in message and "other.tar.gz" in message
