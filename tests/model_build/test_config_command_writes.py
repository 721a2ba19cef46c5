"""`model_build config` writes only into the repository's own folders, and a --repository that is not a
writable folder is a clear error, not a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_runner import assert_one_error, run_cli
from ensemble_fixtures import (
    pipeline_repository,
    write_pipeline,
)
from synth_helpers import PROJECT_ROOT


def test_a_symlinked_model_folder_is_refused_and_nothing_is_written_outside(tmp_path):
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "pipe").symlink_to(outside)
    result = run_cli("config", "--config", str(stage), "--model", "pipe", "--repository", str(repo))
    assert_one_error(result, "pipe: is a symbolic link", "nothing was written")
    assert list(outside.iterdir()) == []
    # A python model with `environment:` (EXECUTION_ENV_PATH is added to its config) too.
    shutil.move(repo / "pre", outside / "pre")
    (repo / "pre").symlink_to(outside / "pre")
    before = (outside / "pre" / "config.pbtxt").read_bytes()
    result = run_cli("config", "--config", str(stage), "--model", "pre", "--repository", str(repo))
    assert_one_error(result, "pre: is a symbolic link")
    assert (outside / "pre" / "config.pbtxt").read_bytes() == before


@pytest.mark.parametrize(("path", "make"), [("1", "file"), ("config.pbtxt", "folder")])
def test_a_version_file_or_a_config_folder_is_a_clear_error(tmp_path, path, make):
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    (repo / "pipe").mkdir()
    if make == "file":
        (repo / "pipe" / path).write_text("")
    else:
        (repo / "pipe" / path).mkdir()
    result = run_cli("config", "--config", str(stage), "--model", "pipe", "--repository", str(repo))
    assert_one_error(result, f"pipe/{path}: is not a", "nothing was written")


@pytest.mark.parametrize("target", ["file", "/proc/1", "/dev/null"])
def test_config_repository_that_is_not_a_writable_folder(tmp_path: Path, target: str) -> None:
    repository = tmp_path / "a-file" if target == "file" else Path(target)
    if target == "file":
        repository.write_text("not a folder")
    onnx = PROJECT_ROOT.parent / "shared" / "triton-configs" / "valid" / "simple" / "1" / "model.onnx"
    result = run_cli(
        "config",
        *("--onnx", str(onnx), "--name", "m", "--platform", "onnxruntime_onnx", "--instance-kind", "KIND_CPU"),
        *("--repository", str(repository)),
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"ERROR: --repository {repository}: "), result.stderr
