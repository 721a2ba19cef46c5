"""`python -m model_build`'s command table: each command imports only its own module (model_build/cli.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys

from cli_runner import run_cli
from synth_helpers import PROJECT_ROOT

from model_build.commands import COMMANDS


def test_every_command_is_listed_under_its_modules_name() -> None:
    for name, module_name in COMMANDS.items():
        assert name == importlib.import_module(f"model_build.commands.{module_name}").NAME


def test_help_lists_every_command_with_its_help() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for name, module_name in COMMANDS.items():
        help_text = importlib.import_module(f"model_build.commands.{module_name}").HELP
        assert name in result.stdout and help_text.split()[0] in result.stdout


def test_a_mistyped_command_names_every_command() -> None:
    result = run_cli("uplod")
    assert result.returncode == 2
    assert all(f"'{name}'" in result.stderr for name in COMMANDS)


def test_upload_and_key_load_neither_onnx_nor_tritonclient() -> None:
    """A build runs `upload` once per file of the unpacked layout: its process loads boto3, not the model tools."""
    probe = (
        "import sys\n"
        "from model_build.cli import build_parser\n"
        "for command in ('upload', 'key'):\n"
        "    build_parser([command, '--help'])\n"
        "print(sorted(m for m in ('onnx', 'onnxruntime', 'tritonclient', 'numpy') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
