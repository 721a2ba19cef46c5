"""One error hierarchy on the synth side (issue #23 item 9): every refusal is a `TritonCdkError`, which app.py
catches and prints as `ERROR: ...` with exit 1 and no traceback (the pypa/build pattern in ../shared/STYLE.md)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT

from stacks.promotion import PromotionError
from stage_config import ConfigError
from triton_cdk.errors import InvalidPropsError, TritonCdkError

# Raised by the library's constructs: each a bare builtin exception a user would see as a traceback.
BARE = {"ValueError", "TypeError", "Exception", "RuntimeError"}


def test_the_app_side_refusals_are_triton_cdk_errors() -> None:
    assert issubclass(ConfigError, TritonCdkError)
    assert issubclass(PromotionError, TritonCdkError)
    assert issubclass(InvalidPropsError, TritonCdkError) and issubclass(InvalidPropsError, ValueError)


def _bare_raises(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        if "handlers" in path.parts:  # Lambda handlers run in AWS, not at synth
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = getattr(node.exc.func, "id", None)
                if name in BARE:
                    found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}: raise {name}")
    return found


def test_the_construct_library_raises_no_bare_builtin_error() -> None:
    """Constructs refuse props with InvalidPropsError (the config package is the app's; see its own tests)."""
    found = [line for line in _bare_raises(PROJECT_ROOT / "triton_cdk") if not line.startswith("stage_config/")]
    assert found == []


def _app_module():
    spec = importlib.util.spec_from_file_location("app_under_test", PROJECT_ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_app_py_prints_a_construct_refusal_without_a_traceback(monkeypatch, capsys) -> None:
    app = _app_module()

    def refuse(*args, **kwargs):
        raise InvalidPropsError("TritonEndpoint Triton-dev/Endpoint: at least one production variant is required")

    monkeypatch.setattr(app, "create_app", refuse)
    monkeypatch.setattr(sys, "argv", ["app.py"])
    with pytest.raises(SystemExit) as exit_info:
        app.main()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: the stage's constructs refused their settings\n")
    assert "at least one production variant is required" in err and "Traceback" not in err


def test_app_py_ends_a_failed_validation_with_one_error_line(monkeypatch, capsys) -> None:
    """aws-cdk-lib prints the validation report, then raises `ValidationFailed: ...`: one ERROR line, exit 1."""
    app = _app_module()

    class _Failing:
        def synth(self) -> None:
            raise RuntimeError("ValidationFailed: Validation failed. A copy of this report can be found in: x.json\nat")

    monkeypatch.setattr(app, "create_app", lambda *a, **k: (_Failing(), None))
    monkeypatch.setattr(sys, "argv", ["app.py"])
    with pytest.raises(SystemExit) as exit_info:
        app.main()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    # Warnings may come first (placeholders: `make synth` warns once); the error is the last line, alone.
    assert err.endswith(
        "\nERROR: ValidationFailed: Validation failed. A copy of this report can be found in: x.json\n"
    ) or (err == "ERROR: ValidationFailed: Validation failed. A copy of this report can be found in: x.json\n")
    assert "Traceback" not in err


def test_a_shared_facts_error_is_one_error_line_of_either_cli(capsys) -> None:
    """serving_facts' errors (issue #23 item 1) are ServingFactErrors, not ToolErrors: run_cli, shared by both CLIs,
    prints them as `ERROR: ...` and exits 1 like its own."""
    import argparse

    from model_build.cli import run_cli
    from serving_facts.releases import UnknownReleaseError

    def refuse(args: argparse.Namespace) -> int:
        raise UnknownReleaseError("triton_release '99.99' is not a release the SageMaker SDK knows")

    parser = argparse.ArgumentParser()
    parser.set_defaults(run=refuse)
    assert run_cli(parser, []) == 1
    assert capsys.readouterr().err == "ERROR: triton_release '99.99' is not a release the SageMaker SDK knows\n"
