"""app.py refuses a bad configuration before writing anything, with a message a user can act on."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from synth_helpers import PROJECT_ROOT

from serving_facts.errors import ServingFactError


def test_bad_config_fails_synth_before_any_template_is_written(tmp_path: Path) -> None:
    config = yaml.safe_load((PROJECT_ROOT / "config" / "dev.yaml").read_text())
    config["endpoints"][0]["autoscaling"]["min_capacity"] = 5
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(config))
    outdir = tmp_path / "cdk.out"
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps({"stage": "dev", "config_dir": str(config_dir)}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run([sys.executable, "app.py"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "ERROR: invalid configuration" in result.stderr
    assert f"{config_dir / 'dev.yaml'}: endpoints[0].autoscaling: min_capacity 5 > max_capacity 2" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(outdir.glob("*.template.json")) if outdir.exists() else True


def test_plain_python_app_py_reads_cdk_json_like_the_cli(tmp_path: Path) -> None:
    """`python app.py` without the CDK CLI (which passes cdk.json's context in CDK_CONTEXT_JSON) gets the same
    feature flags: without them aws-cdk-lib applies other defaults and the Guard rules would not be errors."""
    outdir = tmp_path / "cdk.out"
    env = {k: v for k, v in os.environ.items() if k != "CDK_CONTEXT_JSON"}
    env.update({"CDK_OUTDIR": str(outdir), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"})
    result = subprocess.run([sys.executable, "app.py"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in outdir.glob("*.template.json")) == [
        "Triton-dev-Artifacts.template.json",
        "Triton-dev-Build.template.json",
        "Triton-dev-Endpoint-triton-bert.template.json",
        "Triton-dev-Endpoint-triton-mme.template.json",
    ]


def _app_module(monkeypatch: pytest.MonkeyPatch, *, load_stage=None, synth_error: RuntimeError | None = None):
    """app.py loaded in-process (its `main()` is what `python app.py` runs), with the config loading and the app
    replaced: the error handling is tested without a synth or a subprocess."""
    spec = importlib.util.spec_from_file_location("_app_entry", PROJECT_ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class _App:
        def synth(self):
            raise synth_error

    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps({"stage": "dev"}))
    monkeypatch.setattr(module, "load_stage", load_stage or (lambda *_: SimpleNamespace(promote_from=None)))
    monkeypatch.setattr(module, "create_app", lambda *_, **__: (_App(), None))
    monkeypatch.setattr(module, "warn_placeholders", lambda *_, **__: None)
    monkeypatch.setattr(module, "stage_files", lambda *_: [])
    return module


def _exit_message(module, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        module.main()
    assert exited.value.code == 1
    return capsys.readouterr().err


def test_a_construct_validation_error_is_printed_whole(monkeypatch, capsys) -> None:
    """aws-cdk-lib's "Validation failed with the following errors:" (core/lib/private/synthesis.js) lists one error
    per line and points at no report: every line is printed, no traceback."""
    error = RuntimeError(
        "ValidationFailedWithErrors: Validation failed with the following errors:\n"
        "  [Triton-dev-Endpoint-x/Endpoint] first problem\n"
        "  [Triton-dev-Endpoint-x/Scaling] second problem"
    )
    err = _exit_message(_app_module(monkeypatch, synth_error=error), capsys)
    assert err.startswith("ERROR: ValidationFailedWithErrors: Validation failed with the following errors:")
    assert "first problem" in err and "second problem" in err
    assert "Traceback" not in err


def test_a_plugin_report_is_pointed_at_in_one_line(monkeypatch, capsys) -> None:
    """After the validation plugins aws-cdk-lib prints the report and raises "Validation failed. A copy of this
    report can be found in: <file>" (core/lib/private/synthesis-validation.js): that line only."""
    error = RuntimeError("ValidationFailed: Validation failed. A copy of this report can be found in: /x/report.json")
    err = _exit_message(_app_module(monkeypatch, synth_error=error), capsys)
    assert err == "ERROR: ValidationFailed: Validation failed. A copy of this report can be found in: /x/report.json\n"


def test_a_shared_fact_error_is_one_error_line(monkeypatch, capsys) -> None:
    """serving_facts.errors.ServingFactError (catalogue, releases, drivers) is caught like TritonCdkError."""

    def refuse(*_):
        raise ServingFactError("unknown instance type 'ml.zz.large'")

    err = _exit_message(_app_module(monkeypatch, load_stage=refuse), capsys)
    assert err == "ERROR: unknown instance type 'ml.zz.large'\n"
