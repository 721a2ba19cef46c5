"""AWS's Guard rules run on every synth; each finding is fixed or acknowledged on its own resource.

Sources: AWS Control Tower proactive controls (Control Tower Controls Reference, "Proactive controls";
the Guard rules bundled in `cdklabs-cdk-validator-cfnguard`, pinned in requirements.txt) and
aws-cdk-lib's policy-validation report (`validation-report.json` in the cloud assembly). aws-cdk-lib
2.275 judges a report with acknowledged findings by the severities left, and the Guard plugin sets
none: triton_cdk/guard.py's StrictGuardValidator makes them errors, proven below.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import jsii
import pytest
from aws_cdk import aws_s3 as s3
from cdklabs.cdk_validator_cfnguard import CfnGuardValidator

from triton_cdk.guard import GUARD_PLUGIN, acknowledge_guard
from triton_cdk.guard_plugin import StrictGuardValidator, control_tower_rules


def _reports(shipped_templates) -> dict[str, dict]:
    """Top-level assembly -> its validation report (nested stage assemblies share their app's)."""
    reports = {}
    for shipped in shipped_templates:
        if ":assembly-" in shipped.config:
            continue
        report = Path(shipped.path).parent / "validation-report.json"
        assert report.is_file(), f"{shipped.config}: no validation report, so no plugin ran"
        reports[shipped.config] = json.loads(report.read_text())
    return reports


def _plugin(report: dict, name: str) -> dict:
    (found,) = [r for r in report["pluginReports"] if r["pluginName"] == name]
    return found


def test_guard_ran_on_every_shipped_app_and_left_nothing(shipped_templates) -> None:
    for config, report in _reports(shipped_templates).items():
        guard = _plugin(report, GUARD_PLUGIN)
        assert guard["conclusion"] == "success" and guard["violations"] == [], config
        assert _plugin(report, "AwsSolutions")["violations"] == [], config


def test_every_acknowledgement_is_on_one_resource_with_a_reason(shipped_templates) -> None:
    """Narrow: acknowledged at the resource (or its L2 construct), never on a whole stack or stage."""
    for config, report in _reports(shipped_templates).items():
        for plugin in report["pluginReports"]:
            for finding in plugin["suppressedViolations"]:
                where = finding["acknowledgedAt"]
                paths = [c["constructPath"] for c in finding["violatingConstructs"]]
                assert len(finding["reason"]) >= 40, (config, finding["acknowledgedId"], finding["reason"])
                if plugin["pluginName"] == GUARD_PLUGIN:
                    assert all(p == where or p.startswith(f"{where}/") for p in paths), (where, paths)
                    assert where.count("/") >= 2, f"{config}: {finding['acknowledgedId']} acknowledged on {where}"


def _synth_one_bucket(outdir: Path, plugin: object) -> None:
    """A bare bucket (many Guard findings), one of them acknowledged; only `plugin` runs."""
    app = cdk.App(outdir=str(outdir))
    cdk.Validations.of(app).add_plugins(plugin)
    bucket = s3.Bucket(cdk.Stack(app, "Stack"), "Bucket")
    acknowledge_guard(bucket, "s3_bucket_object_lock_enabled_check", "a test of the gate, not a real bucket")
    app.synth()


def test_the_plain_guard_plugin_stops_failing_once_anything_is_acknowledged(tmp_path: Path) -> None:
    """Why StrictGuardValidator exists: this synth passes with nine findings left."""
    _synth_one_bucket(tmp_path, CfnGuardValidator())
    assert _plugin(json.loads((tmp_path / "validation-report.json").read_text()), GUARD_PLUGIN)["violations"]


def test_an_unacknowledged_guard_finding_fails_synth(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        _synth_one_bucket(tmp_path, StrictGuardValidator())
    guard = _plugin(json.loads((tmp_path / "validation-report.json").read_text()), GUARD_PLUGIN)
    assert {"s3_bucket_versioning_enabled_check", "s3_lifecycle_policy_check"} <= {
        v["ruleName"] for v in guard["violations"]
    }
    assert [v["ruleName"] for v in guard["suppressedViolations"]] == ["s3_bucket_object_lock_enabled_check"]


def test_every_bundled_rule_file_names_the_types_it_reports_on() -> None:
    rules = control_tower_rules()
    assert len(rules) > 200
    assert not [path.name for path, types in rules.items() if not types]


@jsii.implements(cdk.IPolicyValidationContextBeta1)
class _Templates:
    def __init__(self, paths: list[str]) -> None:
        self._paths = paths

    @property
    def template_paths(self) -> list[str]:
        return self._paths


def _findings(report: cdk.PolicyValidationPluginReportBeta1) -> set[tuple[str, str]]:
    return {(v.rule_name, r.resource_logical_id) for v in report.violations for r in v.violating_resources}


def test_running_only_the_rules_for_present_types_finds_what_all_rules_find(shipped_templates) -> None:
    """StrictGuardValidator runs the rule files whose types the templates hold: same findings, less time."""
    paths = sorted({str(t.path) for t in shipped_templates if t.config == "config/dev"})
    assert len(paths) >= 4
    everything = CfnGuardValidator().validate(_Templates(paths))
    selected = StrictGuardValidator().validate(_Templates(paths))
    assert _findings(everything) and _findings(selected) == _findings(everything)
