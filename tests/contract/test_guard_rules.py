"""AWS's Guard rules run on every synth; each finding is fixed or acknowledged on its own resource.

Sources: AWS Control Tower proactive controls (Control Tower Controls Reference, "Proactive controls";
the Guard rules bundled in `cdklabs-cdk-validator-cfnguard`, pinned in requirements.txt, with the cfn-guard
3.1.1 binary it bundles) and aws-cdk-lib's policy-validation report (`validation-report.json` in the cloud
assembly; aws-cdk-lib 2.275 `synthesis-validation.js`: a report with acknowledged findings is re-judged by the
severities left, and a plugin that throws is reported as failed). The reference is the cdklabs plugin itself,
registered as its README shows: the background run (triton_cdk/guard_plugin.py) must find what it finds.
"""

from __future__ import annotations

import json
import re
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
    GuardRun,
    _only_owner_can_change,
    _package_member,
    _private_cache_root,
    control_tower_rules,
    rules_for,
    template_resource_types,
)


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
    for config, (_, report) in _reports(shipped_assemblies).items():
        guard = _plugin(report, GUARD_PLUGIN)
        assert guard["conclusion"] == "success" and guard["violations"] == [], config
        assert _plugin(report, "AwsSolutions")["violations"] == [], config
        # The plugin that starts the run reports nothing, and a plugin with nothing to report is left out.
        assert [r for r in report["pluginReports"] if r["pluginName"] == f"{GUARD_PLUGIN}-start"] == [], config


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


def _reference_findings(template_paths: list[str], rules: list[Path] | None = None) -> set[tuple[str, str, str]]:
    """(rule, template, logical id) of every finding of the cdklabs plugin, run in the jsii kernel as its README
    registers it: with every bundled Control Tower rule, or with the rule files `rules`."""
    validator = (
        CfnGuardValidator()
        if rules is None
        else CfnGuardValidator(control_tower_rules_enabled=False, rules=[str(p) for p in rules])
    )
    report = validator.validate(_Templates(template_paths))
    return {
        (v.rule_name, str(Path(r.template_path).resolve()), r.resource_logical_id)
        for v in report.violations
        for r in v.violating_resources
    }


def _background_findings(folder: Path, report: dict) -> set[tuple[str, str, str]]:
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


def test_the_background_run_finds_what_the_cdklabs_plugin_finds(shipped_assemblies, shipped_templates) -> None:
    """Every shipped app: the Guard findings of the background run (acknowledged or not) are exactly those of
    the cdklabs plugin run in the jsii kernel over the same templates with the same rule files."""
    paths = sorted({str(t.path.resolve()) for t in shipped_templates})
    reference = _reference_findings(paths, rules_for(template_resource_types(paths)))
    background = set().union(*(_background_findings(f, r) for f, r in _reports(shipped_assemblies).values()))
    assert reference, "the reference found nothing: the comparison would prove nothing"
    assert background == reference


def test_running_only_the_rules_for_present_types_finds_what_all_rules_find(shipped_templates) -> None:
    """Loading the files for the types present finds what all 237 files find (on the dev stage's templates)."""
    paths = sorted({str(t.path) for t in shipped_templates if t.config == "config/dev"})
    assert len(paths) >= 4
    everything = _reference_findings(paths)
    assert everything and _reference_findings(paths, rules_for(template_resource_types(paths))) == everything


def test_no_rule_file_finds_anything_on_a_type_it_is_skipped_for(tmp_path: Path) -> None:
    """One template per resource type that any rule file names (every spelling: two headers write
    `AWS::AutoScaling::AutoscalingGroup`), one bare resource each; all 237 files run over all of them. Every
    finding on a template must come from a file `rules_for` selects for that template's type, so no type
    present can ever skip a file that would find something."""
    rules = control_tower_rules()
    types = sorted(set().union(*rules.values()))
    assert "AWS::AutoScaling::AutoScalingGroup" in types and len(types) > 50
    type_of: dict[str, str] = {}
    for number, resource_type in enumerate(types):
        path = tmp_path / f"t{number}.json"
        path.write_text(json.dumps({"Resources": {"R": {"Type": resource_type, "Properties": {}}}}))
        type_of[str(path.resolve())] = resource_type
    findings = _reference_findings(sorted(type_of))
    assert len({template for _, template, _ in findings}) > 30, "too few findings to prove anything"
    rule_texts = {path: path.read_text() for path in rules}
    for rule_name, template, _ in findings:
        files = {path for path, text in rule_texts.items() if re.search(rf"\brule\s+{re.escape(rule_name)}\b", text)}
        assert files, rule_name
        assert files & set(rules_for([type_of[template]])), (rule_name, type_of[template])


def test_no_rule_for_the_types_present_is_a_pass_without_running_cfn_guard(tmp_path: Path) -> None:
    """cfn-guard refuses to run without rules; the cdklabs plugin would run all and find nothing."""
    template = tmp_path / "t.json"
    template.write_text(json.dumps({"Resources": {"H": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}))
    assert rules_for(template_resource_types([str(template)])) == []
    assert GuardRun(node="false").report([str(template)]) == {"success": True, "violations": []}
    assert not _reference_findings([str(template)])


def test_every_bundled_rule_file_names_the_types_it_checks() -> None:
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


def _checks(app: cdk.App, **run_props) -> None:
    run = GuardRun(**run_props)
    cdk.Validations.of(app).add_plugins(run.starter, run.checker)


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
    """The rule files are chosen from the synthesized templates, not from the constructs when the checks
    were added: a queue added later still meets its rules."""
    app, stack = _bucket_app(tmp_path)
    _checks(app)
    sqs.Queue(stack, "Late", enforce_ssl=True)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert "sqs_queue_encrypted_check" in {v["ruleName"] for v in _guard_report(tmp_path)["violations"]}


def test_a_run_that_cannot_start_fails_the_synth(tmp_path: Path) -> None:
    """No Node.js for the run: the plugin is reported as failed and the synth fails, never passes unchecked."""
    app, _ = _bucket_app(tmp_path)
    _checks(app, node=str(tmp_path / "no-such-node"))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    guard = _guard_report(tmp_path)
    assert guard["conclusion"] == "failure"
    assert "cannot start the Guard rules" in json.dumps(guard)


def test_a_run_that_crashes_fails_the_synth(tmp_path: Path) -> None:
    """`false` exits 1 without a report."""
    app, _ = _bucket_app(tmp_path)
    _checks(app, node="false")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert "failed (exit 1)" in json.dumps(_guard_report(tmp_path))


def test_the_cache_is_used_only_where_no_other_user_can_change_it(tmp_path: Path, monkeypatch) -> None:
    """The cache holds code and a binary every synth runs: a folder others may write to, or one below such a
    folder without the sticky bit, is refused (the files are then read into a fresh temp folder)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared / "cache"))
    shared.chmod(0o777)
    assert _private_cache_root() is None
    shared.chmod(0o1777)  # sticky, like /tmp
    assert _private_cache_root() == (shared / "cache" / "triton-cdk" / "cfn-guard-rules").resolve()
    (shared / "cache" / "triton-cdk").chmod(0o777)
    assert _private_cache_root() is None
    link = tmp_path / "link"
    link.symlink_to(shared)
    (shared / "cache" / "triton-cdk").chmod(0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(link / "cache"))
    assert _private_cache_root() == (shared / "cache" / "triton-cdk" / "cfn-guard-rules").resolve()
    assert _only_owner_can_change(tmp_path)


def test_package_names_that_climb_out_are_not_extracted() -> None:
    assert not _package_member("package/lib/../../x.js")
    assert not _package_member("/package/lib/plugin.js")
    assert _package_member("package/lib/plugin.js")
