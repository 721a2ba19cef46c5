"""The reference pipelines as stage config: docs/model-build-ensembles-and-environments.md and its stage file,
tests/configs/reference.yaml.

The page's YAML blocks marked `<!-- stage-config: FILE -->` are that file's entries, so what the page shows is
what the deploy-contract tests synthesize (tests/contract picks up every tests/configs/*.yaml). Here: the
blocks equal the file; its stand-ins have the tensors of the published configs (../shared/seed-configs); the
detection + segmentation ensemble fans `images` out to two steps and in to the Python step, passes the
ensemble rules `make synth` runs (model_build.preflight), and a mismatched step is named; `package --config`
assembles both pipelines into repositories `check` passes.
"""

from __future__ import annotations

import importlib.util
import re
import shutil

import pytest
import yaml
from google.protobuf import text_format
from synth_helpers import PROJECT_ROOT
from tritonclient.grpc import model_config_pb2 as mc

from model_build.check import check_repository
from model_build.ensemble_config import generate_ensemble
from model_build.preflight import composing_config_text, ensemble_preflight_problems
from model_build.stage_repository import assemble_repository
from stage_config import load_stage

PAGE = PROJECT_ROOT / "docs" / "model-build-ensembles-and-environments.md"
CONFIGS = PROJECT_ROOT / "tests" / "configs"
STAGE_FILE = CONFIGS / "reference.yaml"
STAND_INS = CONFIGS / "reference"
SEEDS = PROJECT_ROOT.parent / "shared" / "seed-configs"
MARKER = re.compile(r"^<!-- stage-config: (\S+) -->$")


def _page_blocks() -> list[tuple[str, dict]]:
    """(stage file, parsed YAML) of each marked block of the page."""
    lines = PAGE.read_text().splitlines()
    blocks = []
    for index, line in enumerate(lines):
        match = MARKER.match(line.strip())
        if not match:
            continue
        assert lines[index + 1] == "```yaml", f"{PAGE.name}:{index + 1}: the marker needs a yaml block below it"
        end = lines.index("```", index + 2)
        blocks.append((match.group(1), yaml.safe_load("\n".join(lines[index + 2 : end]))))
    return blocks


def _config(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


def _io(config: mc.ModelConfig) -> list[tuple]:
    return [(t.name, t.data_type, list(t.dims)) for t in [*config.input, *config.output]]


def _seed(name: str) -> mc.ModelConfig:
    path = SEEDS / name / "config.pbtxt"
    if not path.is_file():
        pytest.skip(f"no {path} (../shared beside the project)")
    return _config(path.read_text())


def test_the_pages_blocks_are_the_stage_file():
    blocks = _page_blocks()
    assert len(blocks) == 2 and {file for file, _ in blocks} == {"tests/configs/reference.yaml"}
    document = yaml.safe_load(STAGE_FILE.read_text())
    models = {model["name"]: model for model in document["models"]}
    endpoints = {endpoint["name"]: endpoint for endpoint in document["endpoints"]}
    shown_models, shown_endpoints = [], []
    for _, block in blocks:
        assert set(block) == {"models", "endpoints"}
        for model in block["models"]:
            assert model == models[model["name"]], model["name"]
            shown_models.append(model["name"])
        for endpoint in block["endpoints"]:
            assert endpoint == endpoints[endpoint["name"]], endpoint["name"]
            shown_endpoints.append(endpoint["name"])
    assert sorted(shown_models) == sorted(models) and sorted(shown_endpoints) == sorted(endpoints)


def test_the_generator_rewrites_the_committed_onnx_stand_ins():
    spec = importlib.util.spec_from_file_location("make_models", STAND_INS / "make_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, build in module.MODELS.items():
        assert build().SerializeToString() == (STAND_INS / name).read_bytes(), name


INSTANCE_TYPE = "ml.g5.xlarge"  # both endpoints of the stage


def _composing_text(config, name: str) -> str:
    """The config.pbtxt the build ships for a composing model (model_build.preflight, as at synth)."""
    return composing_config_text(
        config.model(name),
        instance_type_name=INSTANCE_TYPE,
        triton_release=config.triton_release,
        base_dir=PROJECT_ROOT,
        fleet=config.build.fleet,
    )


def test_the_stand_ins_have_the_published_tensors():
    """T5: the seed's tensors, batching and GPU instances; the detector: YOLOv5s's tensors (its generated
    config, as the build writes it)."""
    config = load_stage("reference", CONFIGS)
    t5, seed = _config(_composing_text(config, "t5_pytorch")), _seed("t5_pytorch")
    assert (t5.name, t5.backend, t5.max_batch_size, _io(t5)) == (seed.name, seed.backend, 8, _io(seed))
    assert [g.kind for g in t5.instance_group] == [mc.ModelInstanceGroup.Kind.KIND_GPU]
    assert t5.HasField("dynamic_batching")
    assert t5.parameters["EXECUTION_ENV_PATH"].string_value == "$$TRITON_MODEL_DIRECTORY/python_env.tar.gz"
    detector, yolo = _config(_composing_text(config, "detector")), _seed("yolov5s")
    assert (detector.platform, detector.max_batch_size, _io(detector)) == ("tensorrt_plan", 0, _io(yolo))


def test_the_detection_ensemble_fans_out_and_in_and_passes_the_ensemble_rules():
    config = load_stage("reference", CONFIGS)
    ensemble = config.model("detect_and_segment")
    composing = {name: config.model(name) for name in ensemble.composing_models}
    problems = ensemble_preflight_problems(
        ensemble,
        composing,
        instance_type_name=INSTANCE_TYPE,
        triton_release=config.triton_release,
        base_dir=PROJECT_ROOT,
    )
    assert problems == []
    generated = _config(generate_ensemble(ensemble, {name: _composing_text(config, name) for name in composing}))
    assert [(t.name, list(t.dims)) for t in generated.input] == [("images", [1, 3, 640, 640])]
    assert [(t.name, t.data_type) for t in generated.output] == [("result", mc.TYPE_STRING)]
    readers = [step.model_name for step in generated.ensemble_scheduling.step if "images" in step.input_map.values()]
    assert readers == ["detector", "segmenter"]  # fan-out
    (last,) = [s for s in generated.ensemble_scheduling.step if s.model_name == "postprocess"]
    assert set(last.input_map.values()) == {"detections", "masks"}  # fan-in


def test_a_post_processing_step_that_does_not_fit_is_named(tmp_path):
    base = tmp_path / "project"
    shutil.copytree(STAND_INS, base / "tests" / "configs" / "reference")
    config_text = base / "tests" / "configs" / "reference" / "postprocess" / "config.pbtxt"
    config_text.write_text(config_text.read_text().replace("dims: [ 1, 21, 160, 160 ]", "dims: [ 1, 21, 80, 80 ]"))
    config = load_stage("reference", CONFIGS)
    ensemble = config.model("detect_and_segment")
    composing = {name: config.model(name) for name in ensemble.composing_models}
    problems = ensemble_preflight_problems(
        ensemble, composing, instance_type_name=INSTANCE_TYPE, triton_release=config.triton_release, base_dir=base
    )
    (problem,) = problems
    assert problem[0] == "ensemble.steps[1]"
    assert (
        "ensemble tensor masks: inconsistent shape: [1,21,160,160] is inferred from model segmenter while "
        "[1,21,80,80] is inferred from model postprocess" in problem[1]
    )


@pytest.mark.parametrize(("model", "engines"), [("t5_pytorch", ()), ("detect_and_segment", ("detector", "segmenter"))])
def test_package_config_assembles_each_pipeline_into_a_repository_check_passes(tmp_path, model, engines):
    repository = tmp_path / "repo"
    assembled = assemble_repository(STAGE_FILE, model, repository, base_dir=PROJECT_ROOT)
    assert assembled.engines_from_onnx == engines
    assert check_repository(repository, engines_from_onnx=engines, instance_type=INSTANCE_TYPE) == []
