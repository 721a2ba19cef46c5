"""CloudFormation's default rules run exactly once on every synth: aws-cdk-lib's own built-in plugin.

Sources: aws-cdk-lib 2.275's `CloudFormationValidatePlugin` (API reference: "Validates CloudFormation templates
against the default rules"; `PLUGIN_NAME` "CloudFormation Validate"), `AppProps.builtinCloudFormationValidation`
("Whether to run the built-in CloudFormation validation plugin"; default true) and cdk.json's
`@aws-cdk/core:validateAgainstDefaultRules`. Issue #23: no runner of our own; the built-in copy obeys
`cdk synth --no-validation`.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from synth_helpers import PROJECT_ROOT, cdk_context

from stacks.app_factory import create_app
from stage_config import load_stage

PLUGIN_NAME = "CloudFormation Validate"


def _bad_bucket(stack: cdk.Stack) -> None:
    """An error (an unknown property) and a warning (a value out of its enum)."""
    bucket = s3.CfnBucket(stack, "Bad")
    bucket.add_property_override("NoSuchProperty", 1)
    bucket.add_property_override("VersioningConfiguration.Status", "Sometimes")


def test_the_plugin_name_is_aws_cdk_libs() -> None:
    assert cdk.CloudFormationValidatePlugin().name == PLUGIN_NAME


def test_cdk_json_turns_the_default_rules_on() -> None:
    context = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
    assert context.get("@aws-cdk/core:validateAgainstDefaultRules") is True


def test_a_stage_app_runs_the_default_rules_once(tmp_path: Path) -> None:
    """create_app keeps aws-cdk-lib's built-in copy and adds no other: a finding is reported once."""
    app, stacks = create_app(load_stage("dev"), outdir=str(tmp_path), context=cdk_context())
    _bad_bucket(stacks.artifacts)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (plugin,) = [r for r in report["pluginReports"] if r["pluginName"] == PLUGIN_NAME]
    rules = [v["ruleName"] for v in plugin["violations"]]
    assert rules.count("F3002") == 1, rules


def test_every_shipped_app_ran_the_default_rules_and_they_found_nothing(shipped_assemblies) -> None:
    """A plugin with nothing to report is left out of the report, so absence or an empty success both pass;
    a failure or a finding does not."""
    for config, folder in shipped_assemblies.items():
        report = json.loads((folder / "validation-report.json").read_text())
        for plugin in report["pluginReports"]:
            if plugin["pluginName"] == PLUGIN_NAME:
                assert plugin["conclusion"] == "success" and not plugin["violations"], (config, plugin)
