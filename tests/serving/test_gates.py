"""Gates over the synthesized endpoint stacks: cdk-nag, CDK warnings, cfn-lint (snapshots: tests/snapshots/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT

SYNTHS = ("dev", "prod", "custom")


def endpoint_stack_names(synth) -> set[str]:
    return {stack.stack_name for stack in synth.stacks.endpoints.values()}


@pytest.mark.parametrize("name", SYNTHS)
def test_no_validation_findings_on_endpoint_stacks(name, request):
    """cdk-nag's AwsSolutions pack and CDK's template validation report nothing for these stacks."""
    synth = request.getfixturevalue(name)
    ours = endpoint_stack_names(synth)
    findings = [
        (report["pluginName"], violation["ruleName"], construct["constructPath"])
        for report in synth.report["pluginReports"]
        for violation in report["violations"]
        for construct in violation["violatingConstructs"]
        if construct["constructPath"].split("/")[0] in ours
    ]
    assert findings == []
    aws_solutions = next(r for r in synth.report["pluginReports"] if r["pluginName"] == "AwsSolutions")
    assert aws_solutions["conclusion"] == "success"


@pytest.mark.parametrize("name", SYNTHS)
def test_no_cdk_warnings_on_endpoint_stacks(name, request):
    """Annotations (deprecations, unsupported props, ...) would print during `make synth`."""
    synth = request.getfixturevalue(name)
    for endpoint, messages in synth.messages.items():
        assert [m for m in messages if "info" not in m[0].lower()] == [], endpoint


def test_cfn_lint_is_clean_on_every_endpoint_template(dev, prod, custom):
    files = [str(f) for synth in (dev, prod, custom) for f in synth.template_files()]
    assert len(files) == 8
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), "--non-zero-exit-code", "warning", "--", *files], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_docs_list_every_endpoint_field_with_its_default():
    """docs/serving.md's endpoint table follows the schema (stage_config/endpoint.py)."""
    from stage_config.endpoint import DeploymentSettings, EndpointSettings

    page = (PROJECT_ROOT / "docs" / "serving.md").read_text()
    for name in EndpointSettings.model_fields:
        assert f"| `{name}` |" in page or f"### `{name}`" in page, name
    assert "| `network_isolation` | `true` |" in page and EndpointSettings.model_fields["network_isolation"].default
    wait = DeploymentSettings.model_fields["wait_seconds"].default
    assert f"| `wait_seconds` | `{wait}` |" in page
