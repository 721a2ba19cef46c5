"""`smoke.raw_inputs` sample paths the OS refuses are config errors, never tracebacks.

Sources: Linux path_resolution(7) (ELOOP for a symlink loop, ENAMETOOLONG over NAME_MAX 255 per component /
PATH_MAX 4096); Python's os.stat raises ValueError "embedded null byte" for a NUL.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from synth_helpers import shipped_path

from stage_config import ConfigError, load_stage
from stage_config.pipeline import _raw_input_problems, load_pipeline


def _pipeline(tmp_path: Path, raw_inputs: dict) -> Path:
    for stage in ("dev", "prod"):
        shutil.copy(shipped_path(f"config/{stage}.yaml"), tmp_path / f"{stage}.yaml")
    document = yaml.safe_load(shipped_path("config/pipeline.yaml").read_text())
    document["smoke"]["raw_inputs"] = raw_inputs
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    return path


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a\x00b", "smoke.raw_inputs.resnet50.input: the value holds a NUL character"),
        ("x" * 1025, "smoke.raw_inputs.resnet50.input: String should have at most 1024 characters"),
        ("x" * 300, "smoke.raw_inputs.resnet50.input: 'xxxxx"),  # one component over NAME_MAX
        ("", "smoke.raw_inputs.resnet50.input: String should have at least 1 character"),
        ("missing.jpg", "'missing.jpg' does not exist"),
        ("/etc/hostname", "is not a file inside the project"),
        ("config", "'config' is not a regular file"),
    ],
)
def test_sample_paths_are_refused_cleanly(tmp_path, value, expected):
    with pytest.raises(ConfigError) as refused:
        load_pipeline(_pipeline(tmp_path, {"resnet50": {"input": value}}), tmp_path)
    assert expected in str(refused.value), str(refused.value)


def test_a_symlink_loop_is_refused(tmp_path):
    """ELOOP (path_resolution(7)): a link to itself, and two links to each other."""
    os.symlink("self", tmp_path / "self")
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    stages = {"dev": load_stage("dev")}
    for name in ("self", "a"):
        problems = _raw_input_problems({"resnet50": {"input": name}}, stages, tmp_path)
        assert len(problems) == 1 and problems[0][0] == "smoke.raw_inputs.resnet50.input", problems
        assert "loop of symbolic links" in problems[0][1] or "cannot be read" in problems[0][1], problems


def test_an_unreadable_folder_on_the_way_is_refused(tmp_path):
    (tmp_path / "closed").mkdir()
    (tmp_path / "closed" / "x.jpg").write_bytes(b"x")
    (tmp_path / "closed").chmod(0)
    try:
        problems = _raw_input_problems({"resnet50": {"input": "closed/x.jpg"}}, {"dev": load_stage("dev")}, tmp_path)
    finally:
        (tmp_path / "closed").chmod(0o755)
    if os.geteuid() == 0:  # root reads it anyway
        assert problems == []
    else:
        assert "cannot be read" in problems[0][1]
