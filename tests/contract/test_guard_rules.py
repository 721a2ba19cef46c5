"""AWS's Guard rules run on every synth; each finding is fixed or acknowledged on its own resource.

Sources: AWS Control Tower proactive controls (Control Tower Controls Reference, "Proactive controls";
the Guard rules bundled in `cdklabs-cdk-validator-cfnguard`, pinned in requirements.txt, with the cfn-guard
3.1.1 binary it bundles) and aws-cdk-lib's policy-validation report (`validation-report.json` in the cloud
assembly; aws-cdk-lib 2.275 `synthesis-validation.js`: a report with acknowledged findings is re-judged by the
severities left, and a plugin that throws is reported as failed). The reference is the cdklabs plugin itself,
registered as its README shows: the strict wrapper (triton_cdk/guard_plugin.py) must find what it finds.
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
from contract_helpers import plain_guard_findings, read_assembly_templates
from synth_helpers import new_app

from triton_cdk.guard import GUARD_PLUGIN, acknowledge_guard
from triton_cdk.guard_plugin import StrictGuardValidator


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


def test_guard_ran_on_every_shipped_app_and_left_nothing(shipped_assemblies) -> None:
    """Every check of every shipped app (cdk-nag AwsSolutions, the Guard rules, the API-constraint gate,
    CloudFormation's default rules: each plugin in the report) concluded success with nothing left unacknowledged.
    The areas' fixtures of these same configurations synthesize without the checks (tests/synth_helpers.py
    `checks=False`): they are judged here, once per configuration."""
    for config, (_, report) in _reports(shipped_assemblies).items():
        guard = _plugin(report, GUARD_PLUGIN)
        assert guard["conclusion"] == "success" and guard["violations"] == [], config
        assert _plugin(report, "AwsSolutions")["violations"] == [], config
        for plugin in report["pluginReports"]:
            assert plugin["conclusion"] == "success" and plugin["violations"] == [], (config, plugin["pluginName"])


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


def _reference_findings(template_paths: list[str]) -> set[tuple[str, str, str]]:
    """(rule, template, logical id) of every finding of the cdklabs plugin, as its README registers it."""
    return plain_guard_findings(CfnGuardValidator().validate(_Templates(template_paths)))


def _app_findings(folder: Path, report: dict) -> set[tuple[str, str, str]]:
    """(rule, template, logical id) of every Guard finding in an app's report, acknowledged ones included."""
    guard = _plugin(report, GUARD_PLUGIN)
    return {
        (
            v["ruleName"],
            str((folder / c["cloudFormationResource"]["templatePath"]).resolve()),
            c["cloudFormationResource"]["logicalId"],
        )
        for v in guard["violations"] + guard["suppressedViolations"]
        for c in v["violatingConstructs"]
    }


def test_the_app_finds_what_the_cdklabs_plugin_finds(shipped_assemblies, guard_reference) -> None:
    """Every shipped app: the Guard findings in its report (acknowledged or not) are exactly those of the plain
    cdklabs plugin, registered as its README shows (no props), over every template of the configuration: the
    wrapper changes severities, never what is found. The plain plugin's findings are those it returned to the
    wrapper during the shared synth (tests/contract/conftest.py records them with the props it was created with and
    the templates it was given); where that synth came from an earlier cache, the plugin runs here."""
    reference: set[tuple[str, str, str]] = set()
    for label, folder in shipped_assemblies.items():
        templates = {str(t.path.resolve()) for t in read_assembly_templates(label, folder)}
        recording = guard_reference[label]
        if recording is None:
            reference |= _reference_findings(sorted(templates))
            continue
        assert recording.props and all(props == {} for props in recording.props), (label, recording.props)
        assert recording.templates == templates, label
        reference |= recording.findings
    found = set().union(*(_app_findings(f, r) for f, r in _reports(shipped_assemblies).values()))
    assert reference, "the reference found nothing: the comparison would prove nothing"
    assert found == reference


def test_the_recorded_reference_is_what_the_plain_plugin_finds(shipped_assemblies, guard_reference) -> None:
    """The recording is the plugin's own answer: for the smallest recorded configuration with findings, running the
    plain plugin again over its templates finds the same."""
    recorded = {label: recording for label, recording in guard_reference.items() if recording and recording.findings}
    assert recorded, "no synth recorded the plugin's findings"
    label = min(recorded, key=lambda label: len(recorded[label].templates))
    assert _reference_findings(sorted(recorded[label].templates)) == recorded[label].findings


def _bucket_app(outdir: Path, **context) -> tuple[cdk.App, cdk.Stack]:
    """A bare bucket (many Guard findings), one of them acknowledged."""
    app = new_app(outdir, **context)
    stack = cdk.Stack(app, "Stack")
    bucket = s3.Bucket(stack, "Bucket")
    acknowledge_guard(bucket, "s3_bucket_object_lock_enabled_check", "a test of the gate, not a real bucket")
    return app, stack


def _checks(app: cdk.App, **props) -> None:
    cdk.Validations.of(app).add_plugins(StrictGuardValidator(**props))


def _guard_report(outdir: Path) -> dict:
    return _plugin(json.loads((outdir / "validation-report.json").read_text()), GUARD_PLUGIN)


def test_the_plain_cdklabs_plugin_stops_failing_once_anything_is_acknowledged(tmp_path: Path) -> None:
    """Why every finding of the run is an error: registered as is, this synth passes with findings left."""
    app, _ = _bucket_app(tmp_path)
    cdk.Validations.of(app).add_plugins(CfnGuardValidator())
    app.synth()
    assert _guard_report(tmp_path)["violations"]


def test_an_unacknowledged_guard_finding_fails_synth_after_another_is_acknowledged(tmp_path: Path) -> None:
    app, _ = _bucket_app(tmp_path)
    _checks(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    guard = _guard_report(tmp_path)
    assert {"s3_bucket_versioning_enabled_check", "s3_lifecycle_policy_check"} <= {
        v["ruleName"] for v in guard["violations"]
    }
    assert {v["severity"] for v in guard["violations"]} == {"error"}
    assert {v["ruleName"] for v in guard["suppressedViolations"]} == {"s3_bucket_object_lock_enabled_check"}


def test_a_resource_type_added_after_the_checks_is_checked(tmp_path: Path) -> None:
    """The rules run over the synthesized templates, not the constructs present when the checks were added."""
    app, stack = _bucket_app(tmp_path)
    _checks(app)
    sqs.Queue(stack, "Late", enforce_ssl=True)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert "sqs_queue_encrypted_check" in {v["ruleName"] for v in _guard_report(tmp_path)["violations"]}


def test_the_wrapper_reports_under_the_plugins_name_and_rules() -> None:
    """Acknowledgements are `cdk-validator-cfnguard::<rule>`: the wrapper keeps the plugin's name and rule ids."""
    plain, strict = CfnGuardValidator(), StrictGuardValidator()
    assert strict.name == plain.name == GUARD_PLUGIN
    assert strict.rule_ids == plain.rule_ids and len(strict.rule_ids) > 200
