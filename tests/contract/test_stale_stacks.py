"""`make stale-stacks` / the check after `make deploy` (stacks/stale_stacks.py; issue #22 A4).

Source: CloudFormation API reference, ListStacks (StackStatusFilter, StackSummaries, NextToken); calls and
responses are checked against botocore's CloudFormation service model by botocore's Stubber. `cdk deploy`
creates and updates the app's stacks only; a stack whose endpoint left the config stays deployed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from synth_helpers import PROJECT_ROOT

from stacks import stale_stacks
from stacks.stale_stacks import LIVE_STATUSES, main

WHEN = datetime(2026, 11, 27, tzinfo=UTC)


def _assembly(tmp_path: Path, names: list[str], environment: str = "aws://unknown-account/unknown-region") -> Path:
    artifacts = {
        name: {"type": "aws:cloudformation:stack", "environment": environment, "properties": {"stackName": name}}
        for name in names
    }
    artifacts["Tree"] = {"type": "cdk:tree", "properties": {"file": "tree.json"}}
    (tmp_path / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return tmp_path


def _summary(name: str, status: str = "UPDATE_COMPLETE") -> dict:
    return {"StackName": name, "StackStatus": status, "CreationTime": WHEN, "StackId": f"arn:aws:cf:{name}"}


class _Session:
    """A boto3 session with fixed credentials whose CloudFormation client is stubbed."""

    def __init__(self, client, region: str | None = "us-east-1", credentials: bool = True) -> None:
        self.client_ = client
        self.region_name = region
        self.credentials = credentials
        self.regions: list[str] = []

    def get_credentials(self):
        return object() if self.credentials else None

    def client(self, service: str, region_name: str):
        assert service == "cloudformation"
        self.regions.append(region_name)
        return self.client_


def _stubbed(pages: list[list[dict]]):
    client = boto3.client(
        "cloudformation", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    stubber = Stubber(client)
    for index, page in enumerate(pages):
        expected = {"StackStatusFilter": list(LIVE_STATUSES)}
        if index:
            expected["NextToken"] = f"token{index}"
        response = {"StackSummaries": page}
        if index < len(pages) - 1:
            response["NextToken"] = f"token{index + 1}"
        stubber.add_response("list_stacks", response, expected)
    stubber.activate()
    return client, stubber


def test_a_deployed_endpoint_stack_missing_from_the_assembly_is_reported_with_its_delete_command(
    tmp_path, capsys
) -> None:
    app = _assembly(tmp_path, ["Triton-dev-Artifacts", "Triton-dev-Build", "Triton-dev-Endpoint-triton-mme"])
    client, stubber = _stubbed(
        [
            [_summary("Triton-dev-Artifacts"), _summary("Triton-dev-Endpoint-triton-bert")],
            [
                _summary("Triton-dev-Build"),
                _summary("Triton-dev-Endpoint-triton-mme"),
                _summary("Triton-dev-SmokeAccess"),  # the pipeline's: never stale for a stage app
                _summary("Triton-dev2-Endpoint-x"),  # another stage
                _summary("Triton-dev-x-Build"),  # stage "dev-x"
                _summary("Other-Stack"),
            ],
        ]
    )
    session = _Session(client)
    assert main(["--app", str(app), "--stage", "dev"], session_factory=lambda **_: session) == 0
    stubber.assert_no_pending_responses()  # and any other call (a delete) would have raised: not stubbed
    out = capsys.readouterr().out
    assert "1 deployed stack(s) of stage dev in us-east-1" in out
    assert "Triton-dev-Endpoint-triton-bert (UPDATE_COMPLETE)" in out
    assert "aws cloudformation delete-stack --stack-name Triton-dev-Endpoint-triton-bert --region us-east-1" in out
    for other in ("SmokeAccess", "Triton-dev2", "dev-x", "Other-Stack", "triton-mme ("):
        assert other not in out
    assert "Nothing was deleted" in out


def test_fail_on_stale_exits_1_and_none_stale_says_so(tmp_path, capsys) -> None:
    app = _assembly(tmp_path, ["Triton-dev-Artifacts", "Triton-dev-Build"])
    client, _ = _stubbed([[_summary("Triton-dev-Artifacts"), _summary("Triton-dev-Endpoint-old", "CREATE_FAILED")]])
    args = ["--app", str(app), "--stage", "dev", "--fail-on-stale"]
    assert main(args, session_factory=lambda **_: _Session(client)) == 1
    assert "Triton-dev-Endpoint-old (CREATE_FAILED)" in capsys.readouterr().out
    client, _ = _stubbed([[_summary("Triton-dev-Artifacts")]])
    assert main(args, session_factory=lambda **_: _Session(client)) == 0
    assert "stale-stacks: none" in capsys.readouterr().out


def test_the_assembly_region_wins_over_the_sdk_default(tmp_path, capsys) -> None:
    app = _assembly(tmp_path, ["Triton-prod-Artifacts"], environment="aws://111111111111/eu-west-1")
    client, _ = _stubbed([[]])
    session = _Session(client, region="us-east-1")
    assert main(["--app", str(app), "--stage", "prod"], session_factory=lambda **_: session) == 0
    assert session.regions == ["eu-west-1"]
    assert "in eu-west-1" in capsys.readouterr().out


def test_a_stale_artifact_stack_names_its_termination_protection() -> None:
    stack = stale_stacks.StaleStack("Triton-old-Artifacts", "UPDATE_COMPLETE", "us-east-1")
    assert "--no-enable-termination-protection" in stack.delete_commands()[0]


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        (_Session(None, credentials=False), "skipped: no AWS credentials"),
        (_Session(None, region=None), "skipped: no region"),
    ],
    ids=["no-credentials", "no-region"],
)
def test_it_skips_in_one_line_without_credentials_or_region(tmp_path, capsys, session, expected) -> None:
    app = _assembly(tmp_path, ["Triton-dev-Artifacts"])
    assert main(["--app", str(app), "--stage", "dev"], session_factory=lambda **_: session) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"stale-stacks: {expected}") and out.count("\n") == 1


def test_without_any_credentials_in_the_environment_boto3_finds_none(tmp_path, capsys, monkeypatch) -> None:
    """The real boto3 credential chain, with nothing to find (no variables, files or instance metadata)."""
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE", raising=False)
    app = _assembly(tmp_path, ["Triton-dev-Artifacts"])
    assert main(["--app", str(app), "--stage", "dev"]) == 0
    assert capsys.readouterr().out.startswith("stale-stacks: skipped: no AWS credentials")


def test_a_missing_assembly_is_an_error_naming_the_file(tmp_path, capsys) -> None:
    assert main(["--app", str(tmp_path), "--stage", "dev"]) == 2
    assert f"ERROR: {tmp_path / 'manifest.json'}: no cloud assembly here" in capsys.readouterr().err
    _assembly(tmp_path, ["Triton-prod-Artifacts"])
    assert main(["--app", str(tmp_path), "--stage", "dev"]) == 2
    assert "no stack of stage 'dev'" in capsys.readouterr().err


def test_a_real_stage_assembly_lists_its_stacks(dev_app) -> None:
    """The manifest CDK writes (config/dev.yaml's app), read as `make stale-stacks` reads cdk.out."""
    assembly = stale_stacks.read_assembly(dev_app.outdir, "dev")
    assert assembly.stack_names == {s.stack_name for s in dev_app.assembly.stacks}
    # The stage's own region (None as shipped: config/dev.yaml leaves it out; the user's once they set it).
    assert assembly.region == dev_app.config.region


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_make_deploy_runs_the_check_after_the_deploy_and_make_stale_stacks_runs_it_alone(stage) -> None:
    import subprocess

    def dry_run(target: str) -> list[str]:
        result = subprocess.run(
            ["make", "-n", "--no-print-directory", target, f"STAGE={stage}"],
            cwd=PROJECT_ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return result.stdout.splitlines()

    outdir = "cdk.out" if stage == "dev" else f"cdk.out-{stage}"
    check = f"-m stacks.stale_stacks --app {outdir} --stage {stage}"
    deploy = dry_run("deploy")
    deploying = [i for i, line in enumerate(deploy) if " deploy --app " in line]
    checking = [i for i, line in enumerate(deploy) if check in line]
    assert len(deploying) == len(checking) == 1 and deploying[0] < checking[0], deploy
    assert any(check in line for line in dry_run("stale-stacks"))
