"""FIFOs and other special files never block a reader (check, package, config, synth's preflight), and config
files are read up to a bound."""

from __future__ import annotations

import os

import pytest
from cli_runner import assert_one_error, run_cli
from ensemble_fixtures import (
    PRE_CONFIG,
    pipeline_repository,
    python_folder,
    python_settings,
    write_pipeline,
)
from fakes import within

from model_build.check import check_repository
from model_build.check.environment import (
    archive_problems,
)
from model_build.ensemble_config import composing_closure
from model_build.errors import InvalidModelError, ModelBuildError
from model_build.model_tree import MAX_CONFIG_BYTES, read_config_text
from model_build.package import package_repository
from model_build.preflight import preflight_problems
from model_build.requirements_lock import (
    read_locked_requirements,
)


def test_a_fifo_config_is_refused_by_every_reader(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pre").mkdir(parents=True)
    os.mkfifo(repo / "pre" / "config.pbtxt")
    with within(10):
        with pytest.raises(InvalidModelError, match="is not a regular file"):
            read_config_text(repo / "pre" / "config.pbtxt")
        # package: the closure of the requested models reads every config first (pending_environments after it).
        with pytest.raises(InvalidModelError, match=r"config.pbtxt: is not a regular file .*nothing was packaged"):
            composing_closure(repo, ["pre"])
        with pytest.raises(ModelBuildError, match="is not a regular file"):
            package_repository(repo, tmp_path / "out")
        # check: reported as a problem of the folder.
        problems = [str(p) for p in check_repository(repo, configs_only=True)]
        assert any("is not a regular file or folder (device, FIFO or socket)" in p for p in problems), problems


def test_synth_does_not_wait_on_a_fifo_config(tmp_path):
    """model_build.preflight read a python folder's config.pbtxt with read_text (for EXECUTION_ENV_PATH and an
    ensemble's composing configs): a FIFO there hung `make synth`."""
    python_folder(tmp_path, PRE_CONFIG)
    (tmp_path / "models" / "pre" / "config.pbtxt").unlink()
    os.mkfifo(tmp_path / "models" / "pre" / "config.pbtxt")
    settings = python_settings(environment={"requirements": "models/pre/requirements.txt"})
    with within(10):
        found = preflight_problems(
            settings, instance_type_name="ml.c5.xlarge", triton_release="24.09", base_dir=tmp_path
        )
    assert ("source.path", "models/pre/config.pbtxt: is not a regular file (a FIFO, device or socket); replace it "
            "with the file itself") in found, found  # fmt: skip


def test_model_build_config_does_not_wait_on_a_fifo_composing_config(tmp_path):
    stage = write_pipeline(tmp_path)
    repo = pipeline_repository(tmp_path)
    (repo / "post" / "config.pbtxt").unlink()
    os.mkfifo(repo / "post" / "config.pbtxt")
    result = run_cli("config", "--config", str(stage), "--model", "pipe", "--repository", str(repo), timeout=30)
    assert_one_error(result, "post/config.pbtxt: is not a regular file")
    assert not (repo / "pipe").exists()


def test_special_requirements_and_environment_files_do_not_block(tmp_path):
    os.mkfifo(tmp_path / "requirements.txt")
    with within(10):
        with pytest.raises(InvalidModelError, match="is not a regular file"):
            read_locked_requirements(tmp_path / "requirements.txt")
        os.mkfifo(tmp_path / "env.tar.gz")
        [message] = archive_problems(tmp_path / "env.tar.gz", "env.tar.gz")
        assert "not a regular file" in message


def test_config_size_is_bounded(tmp_path):
    """Triton configs are a few KB; a bigger file is refused before the protobuf parser sees it."""
    repo = tmp_path / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_bytes(b'name: "m"\n' + b"#" * MAX_CONFIG_BYTES)
    [problem] = [p for p in check_repository(repo, configs_only=True) if p.field == "config.pbtxt"]
    assert problem.rule == "schema" and f"at most {MAX_CONFIG_BYTES} are read" in problem.message
