"""`make` installs the CLIs as console scripts: they work from any folder once .venv is active (README)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
# Subprocesses on purpose: what is tested is the installed executable, which only a process of its own runs.


@pytest.mark.parametrize(("script", "expected"), [("model-build", "init"), ("triton-endpoint", "invoke")])
def test_console_script_runs_outside_the_project(script, expected, tmp_path):
    executable = BIN / script
    assert executable.exists(), f"{script} is not installed in {BIN}: `make` runs `pip install --no-deps -e .`"
    result = subprocess.run([str(executable), "--help"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_a_refusal_from_the_console_script_is_one_error_line(tmp_path):
    result = subprocess.run(
        [str(BIN / "model-build"), "init", "--onnx", "missing.onnx"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "ERROR: missing.onnx: no such ONNX file"
