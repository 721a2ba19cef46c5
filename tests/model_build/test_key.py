"""`python -m model_build key`: the content address of a model artifact, from the app config."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli
from synth_helpers import PROJECT_ROOT

from model_build import cli
from serving_facts.content_address import model_artifact_key


def write_config(folder: Path, *, release: str = "24.09", build: dict | None = None, **overrides) -> Path:
    detector = {
        "name": "detector",
        "source": {"path": "models/detector.onnx"},
        "platform": "tensorrt_plan",
        "max_batch_size": 8,
        "tensorrt": {"precision": "fp16"},
    }
    detector.update(overrides)
    classifier = {
        "name": "classifier",
        "source": {"path": "models/classifier.onnx"},
        "platform": "onnxruntime_onnx",
        "instance_groups": [{"count": 1, "kind": "KIND_CPU"}],
    }
    document = {"stage": "test", "triton_release": release, "models": [detector, classifier]}
    if build:
        document["build"] = build
    config = folder / "test.yaml"
    config.write_text(yaml.safe_dump(document))
    return config


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "detector.onnx").write_bytes(b"onnx bytes of the detector")
    (tmp_path / "models" / "classifier.onnx").write_bytes(b"onnx bytes of the classifier")
    write_config(tmp_path)
    return tmp_path


def run_key(*argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m model_build key ARGV`, in-process."""
    result = run_cli("key", *argv)
    return result.returncode, result.stdout, result.stderr


def key_args(project: Path, model: str = "detector", config: Path | None = None) -> list[str]:
    return ["--config", str(config or project / "test.yaml"), "--model", model, "--base-dir", str(project)]


def key_of(project: Path, *args: str, model: str = "detector", config: Path | None = None) -> str:
    code, out, err = run_key(*key_args(project, model, config), *args)
    assert code == 0, err
    [line] = out.splitlines()
    return line


def test_same_inputs_give_the_same_key(project: Path) -> None:
    first = key_of(project, "--gpu-target", "sm86")
    assert first == key_of(project, "--gpu-target", "sm86")
    assert first.startswith("models/detector/") and first.endswith("/model.tar.gz")


def test_instance_type_picks_the_gpu_target_as_the_build_matcher_does(project: Path) -> None:
    assert key_of(project, "--instance-type", "ml.g5.xlarge") == key_of(project, "--gpu-target", "sm86")
    # Ampere-or-newer targets other than A10G get the A10G build with hardware compatibility ampere+:
    # one artifact for all of them.
    g6 = key_of(project, "--instance-type", "ml.g6.xlarge")
    assert g6 == key_of(project, "--instance-type", "ml.p4d.24xlarge") == key_of(project, "--gpu-target", "ampere+")
    assert g6 != key_of(project, "--instance-type", "ml.g5.2xlarge")
    assert key_of(project, "--instance-type", "ml.p3.2xlarge") == key_of(project, "--gpu-target", "sm70")


def test_a_fleet_in_the_config_changes_the_target(project: Path) -> None:
    fleet = {"fleet": {"arn": "arn:aws:codebuild:us-east-1:111111111111:fleet/l4:1", "gpu": "L4"}}
    config = write_config(project, build=fleet)
    assert key_of(project, "--instance-type", "ml.g6.xlarge", config=config) == key_of(
        project, "--gpu-target", "sm89", config=config
    )
    t4 = write_config(project, build={"fleet": {"arn": fleet["fleet"]["arn"], "gpu": "T4"}})
    assert key_of(project, "--instance-type", "ml.g4dn.xlarge", config=t4) == key_of(
        project, "--gpu-target", "sm75", config=t4
    )


def test_the_key_of_an_ensemble_built_on_a_fleet_is_the_stage_plans(tmp_path: Path) -> None:
    """`key` asks the app's artifact plan (issue #23 item 5): an ensemble's key and its composing GPU model's, on a
    stage whose `build.fleet` has L4 hosts (sm89 engines instead of the on-demand A10G's ampere+), are the keys
    `plan_stage` gives the stacks. tests/contract/test_artifact_key_parity.py checks every shipped config's
    templates."""
    from stacks.stage_plan import plan_stage
    from stage_config.loader import load_config

    document = yaml.safe_load((PROJECT_ROOT / "examples" / "config" / "ensemble.yaml").read_text())
    document["stage"] = "fleet"
    document["build"] = {"fleet": {"arn": "arn:aws:codebuild:us-east-1:111111111111:fleet/l4:1", "gpu": "L4"}}
    document["endpoints"][0]["instance_type"] = "ml.g6.xlarge"
    config_file = tmp_path / "fleet.yaml"
    config_file.write_text(yaml.safe_dump(document))
    [planned] = plan_stage(load_config(config_file), PROJECT_ROOT).endpoints.values()
    [ensemble] = planned.models
    assert ensemble.composing and {a.gpu_target for a in ensemble.composing} == {"sm89", "portable"}
    for artifact in ensemble.with_composing():
        code, out, err = run_key(
            *key_args(PROJECT_ROOT, artifact.model.name, config_file), "--instance-type", "ml.g6.xlarge", "--json"
        )
        assert code == 0, err
        printed = json.loads(out)
        assert (printed["key"], printed["gpu_target"]) == (artifact.key, artifact.gpu_target)


@pytest.mark.parametrize(
    "change",
    [
        {"max_batch_size": 16},
        {"tensorrt": {"precision": "fp32"}},
        {"dynamic_batching": {"max_queue_delay_microseconds": 500}},
        {"instance_groups": [{"count": 1, "kind": "KIND_GPU"}]},
    ],
)
def test_any_build_setting_changes_the_key(project: Path, change: dict) -> None:
    before = key_of(project, "--gpu-target", "sm86")
    write_config(project, **change)
    assert key_of(project, "--gpu-target", "sm86") != before


def test_release_gpu_target_and_source_bytes_change_the_key(project: Path) -> None:
    before = key_of(project, "--gpu-target", "sm86")
    assert key_of(project, "--gpu-target", "sm89") != before
    write_config(project, release="24.05")
    assert key_of(project, "--gpu-target", "sm86") != before
    write_config(project)
    assert key_of(project, "--gpu-target", "sm86") == before
    (project / "models" / "detector.onnx").write_bytes(b"onnx bytes of the detector, retrained")
    assert key_of(project, "--gpu-target", "sm86") != before


def test_portable_models_share_one_key_across_gpus(project: Path) -> None:
    cpu = key_of(project, "--instance-type", "ml.c5.xlarge", model="classifier")
    assert cpu == key_of(project, "--instance-type", "ml.g5.xlarge", model="classifier")
    assert cpu == key_of(project, "--gpu-target", "sm75", model="classifier")


def test_json_output(project: Path) -> None:
    code, out, _ = run_key(*key_args(project), "--instance-type", "ml.g5.xlarge", "--json")
    document = json.loads(out)
    assert code == 0
    assert set(document) == {"key", "digest", "source", "gpu_target"}
    assert document["gpu_target"] == "sm86"
    assert document["source"].startswith("file:") and len(document["source"]) == len("file:") + 64
    assert document["key"] == model_artifact_key("detector", document["digest"])
    assert document["key"] == key_of(project, "--instance-type", "ml.g5.xlarge")
    _, out, _ = run_key(*key_args(project, "classifier"), "--gpu-target", "sm86", "--json")
    assert json.loads(out)["gpu_target"] == "portable"


def test_the_repository_config_keys_export_recipes() -> None:
    config = str(PROJECT_ROOT / "config" / "dev.yaml")
    code, out, _ = run_key("--config", config, "--model", "resnet50", "--instance-type", "ml.g5.xlarge", "--json")
    document = json.loads(out)
    assert code == 0
    assert document["source"] == "export:resnet50:v1"
    assert document["key"].startswith("models/resnet50/")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu-target", "volta"], "--gpu-target 'volta' is not valid; use an SM tag like sm86, ampere+ or portable"),
        (["--instance-type", "ml.g5.xlarg"], "--instance-type: unknown instance type 'ml.g5.xlarg' (did you mean"),
        (
            ["--instance-type", "ml.c5.xlarge"],
            "model 'detector' is a tensorrt_plan model and needs a GPU; ml.c5.xlarge",
        ),
        (
            ["--instance-type", "ml.g4dn.xlarge"],
            "--instance-type: ml.g4dn.xlarge (T4) cannot be matched. Options:",
        ),
    ],
)
def test_refusals(project: Path, args: list[str], message: str) -> None:
    code, out, err = run_key(*key_args(project), *args)
    assert (code, out) == (1, "")
    assert err.startswith(f"ERROR: {message}")


def test_missing_source_file_and_unknown_model(project: Path) -> None:
    (project / "models" / "detector.onnx").unlink()
    code, _, err = run_key(*key_args(project), "--gpu-target", "sm86")
    assert code == 1
    # The app's loader's message (the same config rules as `cdk synth`), with the line.
    assert f"{project / 'test.yaml'}: models[0].source.path: 'models/detector.onnx' does not exist" in err
    (project / "models" / "detector.onnx").write_bytes(b"onnx bytes of the detector")
    code, _, err = run_key(*key_args(project, "nope"), "--gpu-target", "sm86")
    assert code == 1
    assert "models: no model named 'nope'; configured: detector, classifier" in err


def test_a_target_is_required(project: Path) -> None:
    with pytest.raises(SystemExit) as usage, contextlib.redirect_stderr(io.StringIO()):
        cli.main(["key", *key_args(project)])
    assert usage.value.code == 2
