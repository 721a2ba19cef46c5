"""A user's own config/ passes the checks: the shipped config filled in as README.md says, before the first deploy.

Sources: README.md "Before the first deploy" (account and region in each stage's file, a globally unique
`artifacts.bucket_name` instead of the `replace-me` placeholder) and "Promote dev → prod" (the placeholder
`connection_arn` replaced by an authorised connection, prod's account in dev's `artifacts.reader_accounts` when
prod is another account); the comments of config/*.yaml, whose commented-out lines the user uncomments. The tests
that assert the shipped example's own values read the shipped copy (tests/shipped_config/, synth_helpers
SHIPPED_CONFIG_DIR), so `make test` stays green for this user; this file checks the user's side: no placeholder is
left, every deploy goes on to the credentials check, and the pipeline loads and synthesizes across the two accounts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from synth_helpers import SHIPPED_CONFIG_DIR, Synthesized, deploy_path_differences, synth_pipeline, synth_stage

from stacks.deploy_preflight import find_placeholders, main, pipeline_configured
from stage_config.pipeline import load_pipeline

TOOLING, DEV, PROD = "111111111111", "111111111111", "222222222222"
CONNECTION = f"arn:aws:codeconnections:us-east-1:{TOOLING}:connection/0a1b2c3d-4e5f-4789-abcd-ef0123456789"

# (shipped text, the user's text) per file: each shipped text must be in the shipped file once (the comment or
# placeholder the user follows), so a change of the shipped comments shows here.
USER_EDITS: dict[str, list[tuple[str, str]]] = {
    "dev.yaml": [
        ('# account: "111111111111"\n# region: us-east-1\n', f'account: "{DEV}"\nregion: us-east-1\n'),
        ("bucket_name: triton-models-dev-replace-me", "bucket_name: acme-triton-models-dev-7f3a"),
        ('# reader_accounts: ["333333333333"]', f'reader_accounts: ["{PROD}"]'),
        ("notifications:\n  emails: []", "notifications:\n  emails: [ml-platform@example.com]"),
    ],
    "prod.yaml": [
        ('# account: "111111111111"\n# region: us-east-1\n', f'account: "{PROD}"\nregion: eu-west-1\n'),
        ("notifications:\n  emails: []", "notifications:\n  emails: [ml-platform@example.com, oncall@example.com]"),
    ],
    "pipeline.yaml": [
        ('# account: "111111111111"\n# region: us-east-1\n', f'account: "{TOOLING}"\nregion: us-east-1\n'),
        ("arn:aws:codeconnections:us-east-1:111111111111:connection/REPLACE-ME", CONNECTION),
        ("repository: owner/repo", "repository: acme/triton-sagemaker"),
    ],
}


def fill_in(folder: Path) -> Path:
    """The shipped config/ copied to `folder` and filled in as a user does (USER_EDITS); returns `folder`."""
    shutil.copytree(SHIPPED_CONFIG_DIR, folder)
    for name, edits in USER_EDITS.items():
        path = folder / name
        text = path.read_text()
        for shipped, filled in edits:
            assert text.count(shipped) == 1, f"{name}: the shipped text {shipped!r} a user edits is gone"
            text = text.replace(shipped, filled)
        path.write_text(text)
    return folder


@pytest.fixture(scope="module")
def user_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fill_in(tmp_path_factory.mktemp("user") / "config")


@pytest.fixture(scope="module")
def user_pipeline(user_config: Path) -> Synthesized:
    return synth_pipeline(user_config)


class _Session:
    """A boto3 session stand-in that finds credentials (the preflight's last check)."""

    def get_credentials(self) -> object:
        return object()


def test_no_placeholder_is_left_and_every_deploy_goes_on_to_the_credentials_check(user_config: Path, capsys) -> None:
    for name in USER_EDITS:
        assert find_placeholders(user_config / name) == [], name
    assert pipeline_configured(user_config)  # `make synth` synthesizes the pipeline too
    for argv in (["deploy", "--stage", "dev"], ["deploy", "--stage", "prod"], ["deploy-pipeline"]):
        assert main([*argv, "--config-dir", str(user_config)], session_factory=lambda **_: _Session()) == 0, argv
    assert capsys.readouterr().err == ""


def test_the_pipeline_loads_across_two_accounts_without_a_warning(user_config: Path, capsys) -> None:
    pipeline, stages = load_pipeline(user_config / "pipeline.yaml", user_config)
    assert (pipeline.account, pipeline.region) == (TOOLING, "us-east-1")
    assert (stages["dev"].account, stages["dev"].region) == (DEV, "us-east-1")
    assert (stages["prod"].account, stages["prod"].region) == (PROD, "eu-west-1")
    assert not pipeline.source.is_placeholder and pipeline.source.connection_arn == CONNECTION
    assert capsys.readouterr().err == ""  # set up: neither "for checking only" nor a missing reader account


def test_the_pipeline_synthesizes_each_stage_into_its_own_account(user_pipeline: Synthesized) -> None:
    stack = user_pipeline.stack
    assert (stack.account, stack.region) == (TOOLING, "us-east-1")
    (source,) = user_pipeline.pipeline_stages()[0]["Actions"]
    assert source["Configuration"]["ConnectionArn"] == CONNECTION
    assert source["Configuration"]["FullRepositoryId"] == "acme/triton-sagemaker"
    for stage, environment in (("dev", f"aws://{DEV}/us-east-1"), ("prod", f"aws://{PROD}/eu-west-1")):
        folder = user_pipeline.outdir / f"assembly-{stack.stack_name}-{stage}"
        manifest = json.loads((folder / "manifest.json").read_text())
        stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
        assert stacks and {a["environment"] for a in stacks} == {environment}, stage
    dev_artifacts = json.dumps(user_pipeline.stage_templates("dev")["Triton-dev-Artifacts"])
    assert f"{PROD}:root" in dev_artifacts  # prod's account may read dev's artifacts (reader_accounts)


def test_each_stage_is_the_same_app_on_either_deploy_path(user_config: Path, user_pipeline: Synthesized) -> None:
    """With accounts set, CDK adds what an environment-agnostic synth leaves out (a log group's resource policy
    for the build role); `make deploy` and the pipeline must still deploy the same stacks (tests/pipeline/
    test_pipeline_stacks_match_stage_apps.py for config/ as it is)."""
    for stage in ("dev", "prod"):
        assert deploy_path_differences(user_pipeline, stage, synth_stage(stage, user_config, checks=False)) == []


def test_the_filled_in_stages_add_no_logs_resource_policy(user_pipeline: Synthesized) -> None:
    """With accounts set, no account-level CloudWatch Logs resource policy (10 per account and Region:
    tests/contract/test_log_rules.py) is added by any stage's stack."""
    for stage in ("dev", "prod"):
        for name, template in user_pipeline.stage_templates(stage).items():
            types = {r["Type"] for r in template["Resources"].values()}
            assert "AWS::Logs::ResourcePolicy" not in types, (stage, name)
