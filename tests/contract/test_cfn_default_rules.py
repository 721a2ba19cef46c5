"""CloudFormation's default rules run exactly once on every stage synth, in the background, with the report
aws-cdk-lib's own plugin gives.

Sources: aws-cdk-lib 2.275's `CloudFormationValidatePlugin` (API reference: "Validates CloudFormation templates
against the default rules"; `PLUGIN_NAME`), `AppProps.builtinCloudFormationValidation` ("Whether to run the
built-in CloudFormation validation plugin") and its `synthesis-validation.js` (the built-in copy is added per
app unless switched off; the plugin's findings are judged by its name, `CloudFormation Validate`). The reference
is aws-cdk-lib's plugin itself, in the jsii kernel and built in: the background engine (triton_cdk/cfn_rules.py)
must report what it reports.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from collections.abc import Callable
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from synth_helpers import PROJECT_ROOT, cdk_context, new_app

from stacks.app_factory import create_app
from triton_cdk.cfn_rules import PLUGIN_NAME, CloudFormationDefaultRules, engine_package_version
from triton_cdk.config import load_stage

NODE_MODULES = PROJECT_ROOT / "node_modules"


def _bad_bucket(stack: cdk.Stack) -> None:
    """An error (an unknown property), a warning (a value out of its enum) and a pseudo parameter."""
    bucket = s3.CfnBucket(stack, "Bad", bucket_name=f"b-{cdk.Aws.ACCOUNT_ID}-{cdk.Aws.REGION}")
    bucket.add_property_override("NoSuchProperty", 1)
    bucket.add_property_override("VersioningConfiguration.Status", "Sometimes")


def _synth_report(tmp_path: Path, add_rules: Callable[[cdk.App], None] | None) -> list[dict]:
    """The CloudFormation Validate reports of an app with `_bad_bucket` in an environment-bound stack; only the
    built-in copy when `add_rules` is None."""
    if add_rules is None:
        app = new_app(tmp_path)
    else:
        app = cdk.App(outdir=str(tmp_path), context=cdk_context(), builtin_cloud_formation_validation=False)
        add_rules(app)
    _bad_bucket(cdk.Stack(app, "Stack", env=cdk.Environment(account="123456789012", region="eu-west-1")))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    return [r for r in report["pluginReports"] if r["pluginName"] == PLUGIN_NAME]


def _add(rules: CloudFormationDefaultRules) -> Callable[[cdk.App], None]:
    return lambda app: cdk.Validations.of(app).add_plugins(rules)


def _without_traces(reports: list[dict]) -> str:
    text = json.dumps(reports, sort_keys=True)
    return re.sub(r'"stackTraces": \[[^\]]*\]', "", text)


@pytest.fixture(scope="module")
def builtin_report(tmp_path_factory) -> list[dict]:
    return _synth_report(tmp_path_factory.mktemp("builtin"), None)


def test_the_plugin_name_is_aws_cdk_libs() -> None:
    assert PLUGIN_NAME == cdk.CloudFormationValidatePlugin.PLUGIN_NAME


def test_the_npm_engine_is_the_python_aws_cdk_lib() -> None:
    """package.json pins aws-cdk-lib and constructs at requirements.txt's versions, and `npm ci` installed them."""
    requirements = dict(
        line.split("==") for line in (PROJECT_ROOT / "requirements.txt").read_text().splitlines() if "==" in line
    )
    pins = json.loads((PROJECT_ROOT / "package.json").read_text())["devDependencies"]
    lock = json.loads((PROJECT_ROOT / "package-lock.json").read_text())["packages"]
    for package in ("aws-cdk-lib", "constructs"):
        assert pins[package] == requirements[package] == importlib.metadata.version(package), package
        assert lock[f"node_modules/{package}"]["version"] == pins[package], package
    assert engine_package_version(NODE_MODULES) == importlib.metadata.version("aws-cdk-lib")


def test_the_reference_finds_an_error_a_warning_and_fails(builtin_report) -> None:
    (report,) = builtin_report
    assert report["conclusion"] == "failure"
    assert {(v["ruleName"], v["severity"]) for v in report["violations"]} >= {("F3002", "error"), ("W3030", "warning")}


def test_the_background_engine_reports_what_the_built_in_plugin_reports(tmp_path: Path, builtin_report, capfd) -> None:
    background = _synth_report(tmp_path, _add(CloudFormationDefaultRules(node_modules=NODE_MODULES)))
    assert PLUGIN_NAME not in capfd.readouterr().err  # no fallback note: it did run in the background
    assert _without_traces(background) == _without_traces(builtin_report)


def test_without_node_modules_it_runs_in_process_with_the_same_report(tmp_path: Path, builtin_report) -> None:
    in_process = _synth_report(tmp_path, _add(CloudFormationDefaultRules()))
    assert _without_traces(in_process) == _without_traces(builtin_report)


def _other_version(tmp_path: Path) -> Path:
    """A node_modules whose aws-cdk-lib is not this app's."""
    package = tmp_path / "node_modules" / "aws-cdk-lib"
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"version": "2.0.0"}))
    return package.parent


@pytest.mark.parametrize(
    ("props", "note"),
    [
        ({"node_modules": Path("/nonexistent")}, "/nonexistent/aws-cdk-lib is missing"),
        ({"node_modules": _other_version}, "aws-cdk-lib is 2.0.0, this app's aws-cdk-lib is 2.275.0"),
        ({"node_modules": NODE_MODULES, "node": "/nonexistent/node"}, "cannot start /nonexistent/node"),
        ({"node_modules": NODE_MODULES, "node": "false"}, "the background engine failed (exit 1"),
    ],
)
def test_an_engine_that_cannot_run_falls_back_and_says_so(tmp_path, builtin_report, capfd, props, note) -> None:
    """Never fewer checks: the plugin runs in the synth's process, and stderr says why."""
    props = {k: v(tmp_path) if callable(v) else v for k, v in props.items()}
    reports = _synth_report(tmp_path, _add(CloudFormationDefaultRules(**props)))
    assert note in capfd.readouterr().err
    assert _without_traces(reports) == _without_traces(builtin_report)


def test_an_engine_never_used_is_stopped() -> None:
    """An app whose synth fails before validation (or never runs) leaves no engine behind: `close`, also
    registered to run at exit."""
    rules = CloudFormationDefaultRules(node_modules=NODE_MODULES)
    process = rules._engine._process
    assert process is not None and process.poll() is None
    rules.close()
    assert process.poll() is not None


@pytest.mark.parametrize("in_background", [True, False])
def test_a_stage_app_runs_the_default_rules_once(tmp_path: Path, capfd, in_background: bool) -> None:
    """create_app either switches aws-cdk-lib's built-in copy off and adds the background engine, or (app.py
    under `cdk synth --no-validation`) keeps the built-in copy: a finding is reported once, by one plugin, and
    nothing fell back."""
    app, stacks = create_app(
        load_stage("dev"), default_rules_in_background=in_background, outdir=str(tmp_path), context=cdk_context()
    )
    _bad_bucket(stacks.artifacts)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert PLUGIN_NAME not in capfd.readouterr().err
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (plugin,) = [r for r in report["pluginReports"] if r["pluginName"] == PLUGIN_NAME]
    assert [v["ruleName"] for v in plugin["violations"]].count("F3002") == 1
