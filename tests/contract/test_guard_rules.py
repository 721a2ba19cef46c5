"""AWS's Guard rules run on every synth; each finding is fixed or acknowledged on its own resource.

Sources: AWS Control Tower proactive controls (Control Tower Controls Reference, "Proactive controls";
the Guard rules bundled in `cdklabs-cdk-validator-cfnguard`, pinned in requirements.txt), aws-cdk-lib's
`CloudFormationValidatePlugin` (API reference: `guardRules`, "Custom Guard rules to evaluate in addition to
built-in rules"; `includeDefaultRules`) and its policy-validation report (`validation-report.json` in the cloud
assembly; aws-cdk-lib 2.275 `synthesis-validation.js`: the plugin's errors stay errors only when
`@aws-cdk/core:validateAgainstDefaultRules` is set explicitly). The reference evaluator is the cfn-guard 3.1.1
binary the cdklabs plugin bundles: the engine must find what it finds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import aws_cdk as cdk
import jsii
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from cdklabs.cdk_validator_cfnguard import CfnGuardValidator
from synth_helpers import new_app

from triton_cdk.guard import GUARD_PLUGIN, acknowledge_guard
from triton_cdk.guard_plugin import (
    VALIDATE_FLAG,
    GuardCoverageCheck,
    control_tower_rules,
    guard_rules_plugin,
    resource_types,
    rules_for,
    template_resources,
)

COVERAGE_PLUGIN = "guard-rule-coverage"


def _reports(shipped_assemblies: dict[str, Path]) -> dict[str, tuple[Path, dict]]:
    """Top-level assembly -> (its folder, its validation report); nested stage assemblies share their app's."""
    reports = {}
    for config, folder in shipped_assemblies.items():
        report = folder / "validation-report.json"
        assert report.is_file(), f"{config}: no validation report, so no plugin ran"
        reports[config] = (folder, json.loads(report.read_text()))
    return reports


def _plugin(report: dict, name: str) -> dict:
    (found,) = [r for r in report["pluginReports"] if r["pluginName"] == name]
    return found


def _is_guard_finding(violation: dict) -> bool:
    """The plugin also runs CloudFormation's default rules; Guard findings name their rule source."""
    return (violation.get("ruleMetadata") or {}).get("category", "").startswith("guard:")


def test_guard_ran_on_every_shipped_app_and_left_nothing(shipped_assemblies) -> None:
    for config, (_, report) in _reports(shipped_assemblies).items():
        guard = _plugin(report, GUARD_PLUGIN)
        assert guard["conclusion"] == "success" and guard["violations"] == [], config
        assert _plugin(report, "AwsSolutions")["violations"] == [], config
        # A plugin with nothing to report is left out of the report.
        assert [r for r in report["pluginReports"] if r["pluginName"] == COVERAGE_PLUGIN] == [], config


def test_every_acknowledgement_is_on_one_resource_with_a_reason(shipped_assemblies) -> None:
    """Narrow: acknowledged at the resource (or its L2 construct), never on a whole stack or stage."""
    for config, (_, report) in _reports(shipped_assemblies).items():
        for plugin in report["pluginReports"]:
            for finding in plugin["suppressedViolations"]:
                where = finding["acknowledgedAt"]
                paths = [c["constructPath"] for c in finding["violatingConstructs"]]
                assert len(finding["reason"]) >= 40, (config, finding["acknowledgedId"], finding["reason"])
                if plugin["pluginName"] == GUARD_PLUGIN:
                    assert all(p == where or p.startswith(f"{where}/") for p in paths), (where, paths)
                    assert where.count("/") >= 2, f"{config}: {finding['acknowledgedId']} acknowledged on {where}"


@jsii.implements(cdk.IPolicyValidationContextBeta1)
class _Templates:
    def __init__(self, paths: Iterable[str]) -> None:
        self._paths = list(paths)

    @property
    def template_paths(self) -> list[str]:
        return self._paths


def _reference_findings(template_paths: list[str], rules: list[Path]) -> set[tuple[str, str, str]]:
    """(rule, template, logical id) of every finding of the cfn-guard 3.1.1 binary (the cdklabs plugin)."""
    report = CfnGuardValidator(control_tower_rules_enabled=False, rules=[str(p) for p in rules]).validate(
        _Templates(template_paths)
    )
    return {
        (v.rule_name, str(Path(r.template_path).resolve()), r.resource_logical_id)
        for v in report.violations
        for r in v.violating_resources
    }


def _engine_findings(folder: Path, report: dict) -> set[tuple[str, str, str]]:
    """(rule, template, logical id) of every Guard finding in an app's report, acknowledged ones included."""
    guard = _plugin(report, GUARD_PLUGIN)
    return {
        (
            v["ruleName"],
            str((folder / c["cloudFormationResource"]["templatePath"]).resolve()),
            c["cloudFormationResource"]["logicalId"],
        )
        for v in guard["violations"] + guard["suppressedViolations"]
        if _is_guard_finding(v)
        for c in v["violatingConstructs"]
    }


def test_the_engine_finds_what_the_cfn_guard_binary_finds(shipped_assemblies, shipped_templates) -> None:
    """Every shipped app: the Guard findings of aws-cdk-lib's engine (acknowledged or not) are exactly those of
    the cfn-guard 3.1.1 binary run over the same templates with the same rule files."""
    paths = sorted({str(t.path.resolve()) for t in shipped_templates})
    rules = rules_for(template_resources(paths))
    reference = _reference_findings(paths, rules)
    engine = set().union(*(_engine_findings(f, r) for f, r in _reports(shipped_assemblies).values()))
    assert reference, "the reference found nothing: the comparison would prove nothing"
    assert engine == reference


def test_running_only_the_rules_for_present_types_finds_what_all_rules_find(shipped_templates) -> None:
    """Each Control Tower rule file reports only on the types it names, so loading the files for the types
    present finds what all 237 files find (on the dev stage's templates)."""
    paths = sorted({str(t.path) for t in shipped_templates if t.config == "config/dev"})
    assert len(paths) >= 4
    everything = _reference_findings(paths, sorted(control_tower_rules()))
    assert everything and _reference_findings(paths, rules_for(template_resources(paths))) == everything


def test_every_bundled_rule_file_names_the_types_it_reports_on() -> None:
    rules = control_tower_rules()
    assert len(rules) > 200
    assert not [path.name for path, types in rules.items() if not types]


def _bucket_app(outdir: Path, **context) -> tuple[cdk.App, cdk.Stack]:
    """A bare bucket (many Guard findings), one of them acknowledged."""
    app = new_app(outdir, **context)
    stack = cdk.Stack(app, "Stack")
    bucket = s3.Bucket(stack, "Bucket")
    acknowledge_guard(bucket, "s3_bucket_object_lock_enabled_check", "a test of the gate, not a real bucket")
    return app, stack


def _checks(app: cdk.App) -> set[str]:
    types = resource_types(app.node.find_all())
    cdk.Validations.of(app).add_plugins(guard_rules_plugin(app, types), GuardCoverageCheck(types))
    return types


def test_an_unacknowledged_guard_finding_fails_synth_after_another_is_acknowledged(tmp_path: Path) -> None:
    """aws-cdk-lib re-judges a report with acknowledged findings by the severities left: the engine's Guard
    findings are errors, so the ones left still fail the synth."""
    app, _ = _bucket_app(tmp_path)
    _checks(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    guard = _plugin(json.loads((tmp_path / "validation-report.json").read_text()), GUARD_PLUGIN)
    left = {v["ruleName"] for v in guard["violations"] if _is_guard_finding(v)}
    assert {"s3_bucket_versioning_enabled_check", "s3_lifecycle_policy_check"} <= left
    assert {v["severity"] for v in guard["violations"]} == {"error"}
    assert {v["ruleName"] for v in guard["suppressedViolations"]} == {"s3_bucket_object_lock_enabled_check"}


def test_without_the_validate_flag_the_guard_rules_refuse_to_run(tmp_path: Path) -> None:
    """Without the flag aws-cdk-lib would report the Guard findings as warnings and pass the synth."""
    app, _ = _bucket_app(tmp_path, **{VALIDATE_FLAG: False})
    with pytest.raises(ValueError, match="validateAgainstDefaultRules"):
        _checks(app)


def test_a_resource_type_added_after_the_checks_fails_synth(tmp_path: Path) -> None:
    """The engine holds the rules for the types present when the checks were enabled; a later type is refused,
    not left unchecked."""
    app, stack = _bucket_app(tmp_path)
    loaded = _checks(app)
    assert "AWS::SQS::Queue" not in loaded
    sqs.Queue(stack, "Late", enforce_ssl=True)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    coverage = _plugin(json.loads((tmp_path / "validation-report.json").read_text()), COVERAGE_PLUGIN)
    assert [v["ruleName"] for v in coverage["violations"]] == ["rules-loaded-for-every-type"]
    assert "AWS::SQS::Queue" in coverage["violations"][0]["description"]
