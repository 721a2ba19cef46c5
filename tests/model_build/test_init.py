"""`python -m model_build init`: a models: entry proposed from an ONNX file, proven like the build proves it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from onnx_fixtures import dynamic_batch_model, fixed_model, sequence_model
from synth_helpers import PROJECT_ROOT

from model_build.cli import main
from model_build.errors import ModelBuildError
from model_build.proposal import propose_model


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with a copy of config/dev.yaml and a models/ folder; the CLI runs from it."""
    (tmp_path / "config").mkdir()
    shutil.copy(PROJECT_ROOT / "config" / "dev.yaml", tmp_path / "config" / "dev.yaml")
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_dynamic_batch_model_gets_batching_and_tensorrt(project):
    onnx_path = dynamic_batch_model(project / "models" / "classifier.onnx")
    proposal = propose_model(onnx_path.relative_to(project), "classifier", instance_type_name="ml.g5.xlarge")
    assert proposal.entry["platform"] == "tensorrt_plan"
    assert proposal.entry["max_batch_size"] == 16
    assert proposal.entry["instance_groups"] == [{"count": 2, "kind": "KIND_GPU"}]
    assert "shapes" not in proposal.entry["tensorrt"]
    assert proposal.adjust == []


def test_sequence_axes_get_one_range_per_dim_param(project):
    """Inputs sharing an ONNX dim_param ('seq') get the same min/opt/max: TensorRT needs them equal at run time."""
    onnx_path = sequence_model(project / "models" / "bert.onnx")
    proposal = propose_model(onnx_path.relative_to(project), "bert", triton_release="24.09")
    shapes = {s["input"]: (s["min"], s["opt"], s["max"]) for s in proposal.entry["tensorrt"]["shapes"]}
    assert set(shapes) == {"tokens", "mask"}
    assert shapes["tokens"] == shapes["mask"]
    assert all(len(values) == 1 for values in shapes["tokens"])  # the batch axis is Triton's, not in shapes
    assert any("seq" in item for item in proposal.adjust)


def test_fixed_batch_model_does_not_batch(project):
    """Triton batches only on a dynamic first axis: a [1, 8] export is served with max_batch_size 0."""
    onnx_path = fixed_model(project / "models" / "fixed.onnx", leading=1)
    proposal = propose_model(onnx_path.relative_to(project), "fixed")
    assert proposal.entry["max_batch_size"] == 0
    assert proposal.entry["dynamic_batching"] == {"enabled": False}
    assert any("no dynamic first axis" in note for note in proposal.notes)


def test_cpu_instance_gets_onnx_runtime(project):
    onnx_path = dynamic_batch_model(project / "models" / "cpu.onnx")
    proposal = propose_model(onnx_path.relative_to(project), "cpu_model", instance_type_name="ml.c5.xlarge")
    assert proposal.entry["platform"] == "onnxruntime_onnx"
    assert proposal.entry["instance_groups"] == [{"count": 1, "kind": "KIND_CPU"}]
    assert "tensorrt" not in proposal.entry


def test_cli_prints_yaml_that_loads(project, capsys):
    sequence_model(project / "models" / "bert.onnx")
    assert main(["init", "--onnx", "models/bert.onnx", "--triton-release", "24.09"]) == 0
    out = capsys.readouterr().out
    assert "# ADJUST tensorrt.shapes" in out
    (entry,) = yaml.safe_load(out)
    assert entry["name"] == "bert"
    assert entry["source"] == {"path": "models/bert.onnx"}


def test_cli_appends_to_a_stage_file_which_still_loads(project, capsys):
    from stage_config.loader import load_config

    dynamic_batch_model(project / "models" / "classifier.onnx")
    before = (project / "config" / "dev.yaml").read_text()
    assert main(["init", "--onnx", "models/classifier.onnx", "--append", "config/dev.yaml"]) == 0
    after = (project / "config" / "dev.yaml").read_text()
    assert after.startswith(before.split("\nendpoints:")[0])  # comments and earlier entries untouched
    config = load_config(project / "config" / "dev.yaml", source_roots=(project,))
    assert "classifier" in {model.name for model in config.models}
    assert "# platform: TensorRT engine" in after


def test_cli_refuses_a_duplicate_name_and_leaves_the_file(project, capsys):
    dynamic_batch_model(project / "models" / "resnet50.onnx")
    before = (project / "config" / "dev.yaml").read_text()
    assert main(["init", "--onnx", "models/resnet50.onnx", "--append", "config/dev.yaml"]) == 1
    assert "exists already" in capsys.readouterr().err
    assert (project / "config" / "dev.yaml").read_text() == before


def test_cli_refuses_a_file_outside_the_project(project, tmp_path_factory, capsys):
    outside = dynamic_batch_model(tmp_path_factory.mktemp("elsewhere") / "m.onnx")
    assert main(["init", "--onnx", str(outside)]) == 1
    assert "must be inside the project" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["init", "--onnx", "models/missing.onnx"], "no such ONNX file"),
        (["init", "--onnx", "models/m.onnx", "--name", "../evil"], "not a valid model name"),
        (["init", "--onnx", "models/m.onnx", "--instance-type", "ml.g5.huge"], "--instance-type: unknown instance"),
    ],
)
def test_cli_refusals_name_the_argument(project, capsys, argv, message):
    dynamic_batch_model(project / "models" / "m.onnx")
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_random_bytes_are_refused_cleanly(project, capsys):
    (project / "models" / "junk.onnx").write_bytes(b"\x00\x01not a model")
    assert main(["init", "--onnx", "models/junk.onnx"]) == 1
    assert "junk.onnx" in capsys.readouterr().err


def conv_model(path: Path, min_height: int) -> Path:
    """[batch, 1, height, width] through a Conv whose kernel is `min_height` tall: shorter inputs fail."""
    from onnx import TensorProto, helper
    from onnx_fixtures import OPSET, save

    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, "height", "width"])
    y = helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 1, "h", "w"])
    weight = helper.make_tensor("weight", TensorProto.FLOAT, [1, 1, min_height, 1], [0.5] * min_height)
    graph = helper.make_graph([helper.make_node("Conv", ["image", "weight"], ["features"])], "ocr", [x], [y], [weight])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def test_guessed_shapes_are_run_in_onnx_runtime_and_the_failing_axis_named(project):
    """Issue #22 B4: the 1/128/512 guess is run in ONNX Runtime at min, opt and max (zero inputs, batch 1); a graph
    that needs height 48 refuses min 1, and the message names the axis (height, axis 2), not the width."""
    onnx_path = conv_model(project / "models" / "ocr.onnx", min_height=48)

    with pytest.raises(ModelBuildError, match=r"guessed tensorrt\.shapes min \(input 'image' axis 2 = 1\) fails"):
        propose_model(onnx_path.relative_to(project), "ocr", instance_type_name="ml.g5.xlarge")


def test_guessed_shapes_that_run_are_proposed(project):
    """The same graph with a 1-tall kernel runs at every guess: the proposal carries them as ADJUST lines."""
    onnx_path = conv_model(project / "models" / "conv.onnx", min_height=1)
    proposal = propose_model(onnx_path.relative_to(project), "conv", instance_type_name="ml.g5.xlarge")
    (shape,) = proposal.entry["tensorrt"]["shapes"]
    assert (shape["min"], shape["opt"], shape["max"]) == ([1, 1, 1], [1, 128, 128], [1, 512, 512])


def test_g4dn_without_a_fleet_gets_onnx_runtime_and_the_fleet_requirement(project):
    """Issue #27 item 7: ml.g4dn's T4 is built by neither of CodeBuild's on-demand GPU builds (SMALL = A10G, LARGE =
    V100; ../shared/README.md, serving_facts/matching.py), so a TensorRT entry would be refused at synth: init proposes
    ONNX Runtime on the GPU and its note names build.fleet."""
    onnx_path = dynamic_batch_model(project / "models" / "classifier.onnx")
    proposal = propose_model(onnx_path.relative_to(project), "classifier", instance_type_name="ml.g4dn.xlarge")
    assert proposal.entry["platform"] == "onnxruntime_onnx"
    assert proposal.entry["instance_groups"] == [{"count": 2, "kind": "KIND_GPU"}]
    assert "tensorrt" not in proposal.entry
    (note,) = [note for note in proposal.notes if note.startswith("platform:")]
    assert "needs build.fleet" in note and "T4" in note


def test_g4dn_with_a_t4_fleet_gets_tensorrt(project):
    """With build.fleet of T4 hosts matching_build targets ml.g4dn: TensorRT is proposed (CodeBuild reserved fleets,
    ../shared/README.md)."""
    from model_build.commands.init import _Fleet

    onnx_path = dynamic_batch_model(project / "models" / "classifier.onnx")
    fleet = _Fleet("arn:aws:codebuild:us-east-1:123456789012:fleet/t4:1", "T4")
    proposal = propose_model(
        onnx_path.relative_to(project), "classifier", instance_type_name="ml.g4dn.xlarge", fleet=fleet
    )
    assert proposal.entry["platform"] == "tensorrt_plan"


def test_p3_with_a_release_that_builds_on_v100_gets_tensorrt(project):
    """ml.p3's V100 is CodeBuild LARGE's GPU (../shared/README.md): TensorRT while the release supports Volta."""
    onnx_path = dynamic_batch_model(project / "models" / "classifier.onnx")
    proposal = propose_model(
        onnx_path.relative_to(project), "c", instance_type_name="ml.p3.2xlarge", triton_release="24.09"
    )
    assert proposal.entry["platform"] == "tensorrt_plan"


def test_cli_g4dn_append_writes_a_config_that_synth_accepts(project, capsys):
    """The appended g4dn entry passes the app's build/serve match (the rule synth applies) for an endpoint on g4dn."""
    from serving_facts.catalogue import instance_type
    from serving_facts.matching import BuildMatchError, match_build
    from stage_config.loader import load_config

    dynamic_batch_model(project / "models" / "classifier.onnx")
    argv = ["init", "--onnx", "models/classifier.onnx", "--instance-type", "ml.g4dn.xlarge"]
    assert main([*argv, "--append", "config/dev.yaml"]) == 0
    config = load_config(project / "config" / "dev.yaml", source_roots=(project,))
    assert config.model("classifier").platform == "onnxruntime_onnx"
    with pytest.raises(BuildMatchError):  # what a tensorrt_plan entry would have met at synth
        match_build(instance_type("ml.g4dn.xlarge"), config.triton_release)
    assert "needs build.fleet" in (project / "config" / "dev.yaml").read_text()


def test_g4dn_with_a_fleet_of_another_gpu_gets_onnx_runtime_and_the_refusal(project):
    """A fleet whose GPU cannot build for T4 (V100 hosts: another architecture) is refused by matching.match_build,
    so init proposes ONNX Runtime and carries that refusal."""
    from model_build.commands.init import _Fleet

    onnx_path = dynamic_batch_model(project / "models" / "classifier.onnx")
    fleet = _Fleet("arn:aws:codebuild:us-east-1:123456789012:fleet/v100:1", "V100")
    proposal = propose_model(
        onnx_path.relative_to(project), "classifier", instance_type_name="ml.g4dn.xlarge", fleet=fleet
    )
    assert proposal.entry["platform"] == "onnxruntime_onnx"
    assert any("build.fleet has V100 hosts" in note for note in proposal.notes)
