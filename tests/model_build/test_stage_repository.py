"""`model_build package --config C --model M` (model_build/stage_repository.py): a stage config's model packaged
as the build assembles it, to try it on the local endpoint; and a plain `check` of the example models.

The build (model_build/buildspec.yml) writes an ONNX model's config with `model_build config --config --model
--onnx`, copies a python model's folder and adds EXECUTION_ENV_PATH, and generates an ensemble's config from
its composing configs. The same code runs here; a TensorRT model keeps the ONNX its engine is built from
(1/model.onnx) instead of the engine, which only the serving GPU's TensorRT can build
(../shared/README.md, "GPU build vs serve"), and `check` holds its config to that ONNX.
"""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

import pytest
from ensemble_fixtures import write_pipeline
from google.protobuf import text_format
from synth_helpers import PROJECT_ROOT
from tritonclient.grpc import model_config_pb2 as mc

from model_build import cli
from model_build.check import check_repository
from model_build.errors import ModelBuildError
from model_build.stage_repository import assemble_repository

MODELS = PROJECT_ROOT / "examples" / "models"
STAGE = PROJECT_ROOT / "examples" / "config" / "ensemble.yaml"
CNN_ONNX = MODELS / "image_cnn" / "1" / "model.onnx"


def _config(path: Path) -> mc.ModelConfig:
    return text_format.Parse(path.read_text(), mc.ModelConfig())


def test_a_tensorrt_model_ships_the_config_the_build_writes_and_the_onnx_of_its_engine(tmp_path, capsys):
    assert (
        cli.main(["config", "--config", str(STAGE), "--model", "image_cnn", "--onnx", str(CNN_ONNX), "--stdout"]) == 0
    )
    built = capsys.readouterr().out  # what the build writes before `model_build build` adds the engine
    argv = ["package", "--config", str(STAGE), "--model", "image_cnn", "--base-dir", str(PROJECT_ROOT),
            "--layout", "uncompressed", "--out", str(tmp_path / "out")]  # fmt: skip
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    folder = tmp_path / "out" / "image_cnn"
    assert (folder / "config.pbtxt").read_text() == built
    assert _config(folder / "config.pbtxt").platform == "tensorrt_plan"
    assert sorted(p.name for p in (folder / "1").iterdir()) == ["model.onnx"]
    assert filecmp.cmp(folder / "1" / "model.onnx", CNN_ONNX, shallow=False)
    assert f"{folder}  sha256:" in out
    assert f"note: image_cnn is a tensorrt_plan model in {STAGE}; no engine is built here" in err
    assert "image_cnn/1/model.onnx, the ONNX its engine is built from" in err


def test_the_ensemble_is_assembled_with_its_steps_as_the_build_assembles_them(tmp_path):
    repository = tmp_path / "repo"
    assembled = assemble_repository(STAGE, "image_classifier", repository, base_dir=PROJECT_ROOT)
    assert assembled.models == ("image_classifier", "image_cnn", "image_postprocess", "image_preprocess")
    assert assembled.engines_from_onnx == ("image_cnn",)
    # The ensemble's config does not depend on how image_cnn is served: the committed one.
    generated = (repository / "image_classifier" / "config.pbtxt").read_text()
    assert generated == (MODELS / "image_classifier" / "config.pbtxt").read_text()
    for model in ("image_preprocess", "image_postprocess"):  # python folders as they are (EXECUTION_ENV_PATH kept)
        assert not filecmp.dircmp(repository / model, MODELS / model).diff_files
    # check: valid with the ONNX in place of the engine; as a deployable repository, the engine is missing.
    assert check_repository(repository, engines_from_onnx=assembled.engines_from_onnx) == []
    (problem,) = check_repository(repository)[:1]
    assert (problem.model, problem.field, problem.rule) == ("image_classifier", "ensemble_scheduling.step.model_name",
                                                            "ensemble-composing-model")  # fmt: skip
    assert "version folder 1/ has no model.plan: tensorrt_plan expects it" in problem.message


def test_check_holds_the_tensorrt_config_to_its_onnx(tmp_path):
    """tensorrt_backend's ValidateIO against the engine, here against the ONNX the engine is built from."""
    repository = tmp_path / "repo"
    assemble_repository(STAGE, "image_cnn", repository, base_dir=PROJECT_ROOT)
    config = repository / "image_cnn" / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "logits"', 'name: "scores"'))
    messages = [p.message for p in check_repository(repository, engines_from_onnx=["image_cnn"])]
    assert any("scores" in m and "(engine to be built from 1/model.onnx)" in m for m in messages), messages
    (repository / "image_cnn" / "1" / "model.onnx").unlink()
    messages = [p.message for p in check_repository(repository, engines_from_onnx=["image_cnn"])]
    assert any("has no model.onnx: tensorrt_plan (engine not built yet) expects it" in m for m in messages), messages


def test_a_stage_pipeline_with_a_packed_environment_asks_for_the_interpreter(tmp_path, capsys):
    """The pre-processing step's requirements are packed by `package`, as without --config."""
    stage = write_pipeline(tmp_path)
    argv = [
        "package",
        "--config",
        str(stage),
        "--model",
        "pipe",
        "--base-dir",
        str(tmp_path),
        "--out",
        str(tmp_path / "out"),
    ]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "need python_env.tar.gz packed from their requirements.txt" in err and "--environment-python" in err


def _stage_with(tmp_path: Path, old: str, new: str) -> Path:
    stage = write_pipeline(tmp_path)
    text = stage.read_text()
    assert old in text
    stage.write_text(text.replace(old, new))
    return stage


@pytest.mark.parametrize(
    ("old", "new", "model", "message"),
    [
        ("source: {path: models/cnn.onnx}", "source: {s3_uri: s3://bucket/cnn.onnx}", "cnn",
         "model 'cnn': source.s3_uri: only the build fetches or exports this model"),
        ("source: {path: models/cnn.onnx}", "source: {export: resnet50}", "pipe",
         "model 'cnn': source.export: only the build fetches or exports this model"),
        ("source: {path: models/cnn.onnx}", "source: {path: models/missing.onnx}", "pipe",
         "model 'cnn': source.path: 'models/missing.onnx' does not exist"),
        ("source: {path: models/cnn.onnx}", "source: {path: ../outside.onnx}", "cnn",
         "model 'cnn': source.path: '../outside.onnx' resolves to"),
        ("{model: post,", "{model: nobody,", "pipe", "models: no model named 'nobody'; configured: pre, cnn, post"),
        ("platform: ensemble", "platform: ensembel", "pipe", "models[3].platform: Input should be"),
    ],
)  # fmt: skip
def test_what_cannot_be_packaged_here_is_refused_naming_the_file_and_field(tmp_path, capsys, old, new, model, message):
    stage = _stage_with(tmp_path, old, new)
    argv = [
        "package",
        "--config",
        str(stage),
        "--model",
        model,
        "--base-dir",
        str(tmp_path),
        "--out",
        str(tmp_path / "out"),
    ]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR: {stage}: ") and message in err, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["examples/models", "--config", str(STAGE), "--model", "image_cnn"], "give a model repository REPO, or"),
        (["--model", "image_cnn"], "give a model repository REPO, or --config FILE with --model NAME"),
        (["--config", str(STAGE)], "name one model to package with --model NAME"),
        (["--config", str(STAGE), "--model", "image_cnn", "--model", "image_postprocess"], "name one model"),
        (["--config", "nowhere.yaml", "--model", "image_cnn"], "nowhere.yaml"),
    ],
)  # fmt: skip
def test_package_usage_with_a_stage_config(tmp_path, capsys, argv, message):
    assert cli.main(["package", *argv, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and message in err, err


def test_nested_ensembles_are_refused(tmp_path):
    stage = write_pipeline(tmp_path)
    text = stage.read_text() + (
        "  - name: outer\n    platform: ensemble\n    max_batch_size: 0\n    ensemble:\n      steps:\n"
        "        - {model: pipe, input_map: {image: image}, output_map: {labels: labels}}\n"
    )
    stage.write_text(text)
    with pytest.raises(ModelBuildError, match="model 'pipe': nested ensembles are not supported yet"):
        assemble_repository(stage, "outer", tmp_path / "repo", base_dir=tmp_path)


# --- a plain check of every example model ------------------------------------------------------------


def test_a_plain_check_passes_every_example_model_the_ensemble_included(capsys):
    """`python -m model_build check examples/models`, no option: add_sub, the image pipeline's three steps and
    the ensemble. image_preprocess's python_env.tar.gz is packed by `package` (never in the source folder):
    check judges its locked requirements.txt instead, and says so."""
    assert sorted(p.name for p in MODELS.iterdir()) == [
        "add_sub", "image_classifier", "image_cnn", "image_postprocess", "image_preprocess",
    ]  # fmt: skip
    assert cli.main(["check", str(MODELS)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"check: {MODELS} is a valid model repository",
        "note: image_preprocess: python_env.tar.gz is not packed yet; its requirements.txt is locked, and "
        "`model_build package --environment-python PY` packs it into the package",
    ]


def test_an_environment_still_to_be_packed_needs_locked_requirements(tmp_path, capsys):
    repository = tmp_path / "models"
    shutil.copytree(MODELS / "image_preprocess", repository / "image_preprocess")
    (repository / "image_preprocess" / "requirements.txt").write_text("numpy>=1.26\nPillow==12.0.0\n")
    assert cli.main(["check", str(repository)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("image_preprocess: parameters.EXECUTION_ENV_PATH: python_env.tar.gz is packed from "
                          "requirements.txt, which is not locked: image_preprocess/requirements.txt")  # fmt: skip
    assert "[execution-env]" in out
