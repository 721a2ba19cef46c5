"""Ensemble config.pbtxt generation (model_build/ensemble_config.py), `model_build config` for ensembles and
python environments (EXECUTION_ENV_PATH), and `package --model <ensemble>` bringing its composing models."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from ensemble_fixtures import PRE_CONFIG, pipe_settings, pipeline_repository, write_pipeline
from tritonclient.grpc import model_config_pb2 as mc

from model_build import cli
from model_build.check import check_repository
from model_build.ensemble_config import build_ensemble_config, composing_closure, generate_ensemble, parse_composing
from model_build.errors import InvalidModelError
from model_build.execution_env import with_execution_env
from model_build.package import package_repository
from serving_facts.settings import ModelSettings

BATCHED = """\
name: "cnn"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "input" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "output" data_type: TYPE_FP16 dims: [ 3 ] } ]
"""


def two_step(max_batch_size: int) -> ModelSettings:
    return ModelSettings.model_validate(
        {
            "name": "pipe",
            "platform": "ensemble",
            "max_batch_size": max_batch_size,
            "ensemble": {
                "steps": [
                    {"model": "cnn", "input_map": {"input": "x"}, "output_map": {"output": "y"}},
                ]
            },
        }
    )


def test_generated_config_is_an_ensemble_with_types_and_dims_from_the_composing_model():
    """model_config.proto: `platform: "ensemble"`, `ensemble_scheduling { step { model_name model_version
    input_map output_map } }`; model_version -1 is "the latest version"; the ensemble tensors take the data
    type and shape of the composing model's input/output they map to (core ensemble_utils.cc
    ValidateTensorConsistency)."""
    config = build_ensemble_config(two_step(8), {"cnn": parse_composing(BATCHED, "cnn", "cnn/config.pbtxt")})
    assert config.platform == "ensemble" and config.max_batch_size == 8
    assert [(io.name, io.data_type, list(io.dims)) for io in config.input] == [("x", mc.TYPE_FP32, [3])]
    assert [(io.name, io.data_type, list(io.dims)) for io in config.output] == [("y", mc.TYPE_FP16, [3])]
    (step,) = config.ensemble_scheduling.step
    assert (step.model_name, step.model_version, dict(step.input_map), dict(step.output_map)) == (
        "cnn",
        -1,
        {"input": "x"},
        {"output": "y"},
    )
    assert not config.instance_group and not config.HasField("dynamic_batching")


def test_unbatched_ensemble_over_a_batching_model_keeps_the_full_shape():
    """ensemble_utils.cc ValidateTensorConsistency: a batching and a non-batching model share a tensor when
    their full shapes agree ([-1, 3] for a batching model of dims [3])."""
    text = generate_ensemble(two_step(0), {"cnn": BATCHED})
    config = parse_composing(text, "pipe", "pipe/config.pbtxt")
    assert list(config.input[0].dims) == [-1, 3]


def test_a_step_naming_a_missing_input_is_refused_naming_the_step():
    settings = ModelSettings.model_validate(
        {
            "name": "pipe",
            "platform": "ensemble",
            "ensemble": {"steps": [{"model": "cnn", "input_map": {"images": "x"}, "output_map": {"output": "y"}}]},
        }
    )
    with pytest.raises(InvalidModelError, match=r"steps\[0\].input_map names input 'images' of model 'cnn'"):
        generate_ensemble(settings, {"cnn": BATCHED})


def test_generation_runs_check_with_the_composing_models():
    """Triton's ValidateEnsembleConfig (ensemble_utils.cc): "ensemble <e> allows maximum batch size 16, but it
    contains model <m> which only allows maximum batch size to be 8"; nothing is returned then."""
    with pytest.raises(InvalidModelError, match="only allows maximum batch size to be 8"):
        generate_ensemble(two_step(16), {"cnn": BATCHED})


def test_config_command_writes_the_ensemble_and_the_execution_env(tmp_path):
    """`model_build config --config C --model <ensemble> --repository REPO` from REPO's composing configs; a
    python model with `environment:` gets EXECUTION_ENV_PATH = $$TRITON_MODEL_DIRECTORY/python_env.tar.gz
    (python_backend README, "Creating Custom Execution Environments"), added once and then verified."""
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    assert cli.main(["config", "--config", str(stage), "--model", "pre", "--repository", str(repo)]) == 0
    once = (repo / "pre" / "config.pbtxt").read_text()
    assert cli.main(["config", "--config", str(stage), "--model", "pre", "--repository", str(repo)]) == 0
    assert (repo / "pre" / "config.pbtxt").read_text() == once
    assert 'string_value: "$$TRITON_MODEL_DIRECTORY/python_env.tar.gz"' in once
    assert once.startswith('name: "pre"')  # the user's text is kept; the parameter is appended
    assert cli.main(["config", "--config", str(stage), "--model", "pipe", "--repository", str(repo)]) == 0
    assert (repo / "pipe" / "1").is_dir() and not any((repo / "pipe" / "1").iterdir())
    assert check_repository(repo, configs_only=True) == []
    pipe = parse_composing((repo / "pipe" / "config.pbtxt").read_text(), "pipe", "pipe")
    assert [io.name for io in pipe.input] == ["image"] and [io.name for io in pipe.output] == ["labels"]


def test_config_command_refuses_missing_composing_configs_and_another_env_path(tmp_path, capsys):
    stage = write_pipeline(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    assert cli.main(["config", "--config", str(stage), "--model", "pipe", "--repository", str(repo)]) == 1
    assert "needs its composing models' configs first" in capsys.readouterr().err
    assert not (repo / "pipe").exists()
    text = 'backend: "python"\nparameters { key: "EXECUTION_ENV_PATH" value { string_value: "/opt/env.tar.gz" } }\n'
    with pytest.raises(InvalidModelError, match=r"'/opt/env\.tar\.gz', but the stage config's environment: needs"):
        with_execution_env(text, "$$TRITON_MODEL_DIRECTORY/python_env.tar.gz", "pre/config.pbtxt")


def test_composing_closure_follows_steps_and_refuses_missing_folders(tmp_path):
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    cli.main(["config", "--config", str(stage), "--model", "pipe", "--repository", str(repo)])
    assert composing_closure(repo, ["pipe"]) == ["cnn", "pipe", "post", "pre"]
    assert composing_closure(repo, ["cnn"]) == ["cnn"]
    (repo / "post" / "config.pbtxt").unlink()
    (repo / "post" / "1" / "model.py").unlink()
    (repo / "post" / "1").rmdir()
    (repo / "post").rmdir()
    with pytest.raises(InvalidModelError, match="step model 'post' has no folder"):
        composing_closure(repo, ["pipe"])


def _names(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return {name.split("/", 1)[0] for name in tar.getnames()}


def test_package_an_ensemble_brings_its_composing_models(tmp_path):
    """docker/sagemaker/serve (triton-inference-server/server): several model folders in a single-model
    archive need SAGEMAKER_TRITON_DEFAULT_MODEL_NAME; `--model <ensemble>` makes the ensemble that model."""
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    cli.main(["config", "--config", str(stage), "--model", "pipe", "--repository", str(repo)])
    # post only: no environment asked for (pre's EXECUTION_ENV_PATH is not added in this test).
    (single,) = package_repository(repo, tmp_path / "single", models=["pipe"])
    assert single.models == ("cnn", "pipe", "post", "pre")
    assert _names(single.path) == {"cnn", "pipe", "post", "pre"}
    (multi,) = package_repository(repo, tmp_path / "multi", models=["pipe"], layout="multi")
    assert multi.path.name == "pipe.tar.gz" and _names(multi.path) == {"cnn", "pipe", "post", "pre"}
    unpacked = package_repository(repo, tmp_path / "unpacked", models=["pipe"], layout="uncompressed")
    assert sorted(a.path.name for a in unpacked) == ["cnn", "pipe", "post", "pre"]
    assert (tmp_path / "unpacked" / "pipe" / "1").is_dir()


def test_package_asks_for_an_environment_python_when_one_must_be_packed(tmp_path, capsys):
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    for model in ("pre", "pipe"):
        cli.main(["config", "--config", str(stage), "--model", model, "--repository", str(repo)])
    code = cli.main(["package", str(repo), "--model", "pipe", "--out", str(tmp_path / "out")])
    assert code == 1
    assert "pass --environment-python PY" in capsys.readouterr().err
    assert not (tmp_path / "out" / "model.tar.gz").exists()


def test_an_ensemble_key_follows_its_composing_models(tmp_path, capsys):
    """An ensemble's archive holds its composing model folders: its content address covers their digests
    (serving_facts.content_address.ensemble_source), so a change to a composing model gives the ensemble a new key."""
    stage = write_pipeline(tmp_path).rename(tmp_path / "pipe.yaml")  # `key` loads it as the app: named after its stage
    argv = ["key", "--config", str(stage), "--model", "pipe", "--instance-type", "ml.c5.xlarge"]
    argv += ["--base-dir", str(tmp_path), "--json"]
    assert cli.main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["source"].startswith("ensemble:") and first["gpu_target"] == "portable"
    (tmp_path / "models" / "post" / "1" / "model.py").write_text("# changed\n")
    assert cli.main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["key"] != first["key"] and second["key"].startswith("models/pipe/")


def test_a_prebuilt_archive_is_named_where_it_lies_in_the_model_folder():
    """python_backend README: EXECUTION_ENV_PATH "$$TRITON_MODEL_DIRECTORY/<path>" names a file of the model
    folder; a prebuilt `environment: {archive: ...}` keeps its place in the source folder."""
    from model_build.execution_env import execution_env_value

    settings = ModelSettings.model_validate(
        {
            "name": "pre",
            "platform": "python",
            "source": {"path": "models/pre"},
            "environment": {"archive": "models/pre/envs/conda.tar.gz"},
        }
    )
    assert execution_env_value(settings) == "$$TRITON_MODEL_DIRECTORY/envs/conda.tar.gz"
    locked = settings.model_copy(update={"environment": None})
    assert execution_env_value(locked) is None


def test_the_batch_size_is_named_as_the_cause():
    """Triton takes an unbatched model's first dim as the batching ensemble's batch axis (core ensemble_utils.cc
    ValidateTensorConsistency compares the full shapes); with a single dim nothing is left for the ensemble."""
    document = pipe_settings()
    document["max_batch_size"] = 8
    settings = ModelSettings.model_validate(document)
    composing = {"pre": parse_composing(PRE_CONFIG, "pre", "pre/config.pbtxt")}
    composing["cnn"] = parse_composing(
        'name: "cnn"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\n'
        'input [{name: "input" data_type: TYPE_FP32 dims: [1, 3]}]\n'
        'output [{name: "output" data_type: TYPE_FP32 dims: [1, 3]}]\n',
        "cnn",
        "cnn/config.pbtxt",
    )
    composing["post"] = parse_composing(PRE_CONFIG.replace('"pre"', '"post"'), "post", "post/config.pbtxt")
    with pytest.raises(InvalidModelError) as error:
        build_ensemble_config(settings, composing)
    assert error.value.step == 0 and error.value.field == "input_map"
    assert "ensemble 'pipe' batches (max_batch_size 8) but steps[0]'s model 'pre' does not" in str(error.value)
    assert "must specify 'dims'" not in str(error.value)
