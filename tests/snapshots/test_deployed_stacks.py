"""One snapshot per deployed stack: dev's and prod's artifact, build and endpoint stacks, and the pipeline.

These are the templates `make synth`, `make synth STAGE=prod` and `make synth-pipeline` write (each app
synthesized once per session, tests/synth_helpers.py). Content digests are masked, so a snapshot changes
when the infrastructure changes, not when a model file or a Python source does: asset hashes, artifact
digests in S3 keys, and the digest prefixes CDK or the app put into logical ids and names.

An intended template change is accepted with
    .venv/bin/python -m pytest tests/snapshots --snapshot-update
and reviewed in the diff of tests/snapshots/__snapshots__/.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

# The stacks `make deploy` / the pipeline deploy, per app fixture (tests/conftest.py).
DEPLOYED = {
    "dev_app": ["Artifacts", "Build", "Endpoint-triton-bert", "Endpoint-triton-mme"],
    "prod_app": ["Artifacts", "Build", "Endpoint-triton-bert", "Endpoint-triton-mme"],
    "pipeline_app": ["Pipeline"],
}
CASES = [(app, stack) for app, stacks in DEPLOYED.items() for stack in stacks]

# A 64-hex sha256 (asset hashes, artifact digests in S3 keys and names) -> <digest>.
DIGEST = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
# A 12-hex digest prefix in a construct id, with the 8-character hash CDK appends to a logical id
# (e.g. EnsureArtifactsbertbasesm86Handle<12 hex><8 HEX>) -> <digest12><HASH>. Account ids are all
# digits, so a run needs a letter a-f to count.
DIGEST_PREFIX_ID = re.compile(r"(?=[0-9]{0,11}[a-f])[0-9a-f]{12}[0-9A-F]{8}(?![0-9A-Za-z])")
# A shorter digest prefix somewhere in a name (e.g. a model or job name) -> <digest12>.
DIGEST_PREFIX = re.compile(r"(?<![0-9A-Za-z])(?=[0-9]{0,11}[a-f])[0-9a-f]{12}(?![0-9a-f])")

# CDK Pipelines' asset-publishing step names the asset's destination with a hash of it:
# `publish "<asset hash>:current_account-current_region-<8 hex>"`; it changes with the asset's content.
ASSET_DESTINATION = re.compile(r"(<digest>:[A-Za-z0-9_-]+?)-[0-9a-f]{8}(?![0-9a-f])")


def normalized(template: dict) -> dict:
    text = json.dumps(template, sort_keys=True)
    text = DIGEST.sub("<digest>", text)
    text = DIGEST_PREFIX_ID.sub("<digest12><HASH>", text)
    text = DIGEST_PREFIX.sub("<digest12>", text)
    text = ASSET_DESTINATION.sub(r"\1-<hash8>", text)
    return json.loads(text)


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def _stack_name(app, suffix: str) -> str:
    if suffix == "Pipeline":
        return app.stack.stack_name
    return f"Triton-{app.config.stage}-{suffix}"


# Stacks only the pipeline deploys, inside its stages' nested assemblies: (pipeline stage, stack name).
PIPELINE_ONLY = [("dev", "Triton-dev-SmokeAccess"), ("prod", "Triton-prod-SmokeAccess")]


@pytest.mark.parametrize(("stage", "stack_name"), PIPELINE_ONLY, ids=[name for _, name in PIPELINE_ONLY])
def test_pipeline_only_stack_snapshot(stage: str, stack_name: str, pipeline_app, snapshot_json) -> None:
    assert normalized(pipeline_app.stage_templates(stage)[stack_name]) == snapshot_json


def test_every_pipeline_only_stack_has_a_snapshot(dev_app, prod_app, pipeline_app) -> None:
    """What a pipeline stage deploys beyond the stage app's stacks (snapshotted above) has its snapshot here."""
    for stage, app in {"dev": dev_app, "prod": prod_app}.items():
        extra = set(pipeline_app.stage_templates(stage)) - {s.stack_name for s in app.assembly.stacks}
        assert extra == {name for s, name in PIPELINE_ONLY if s == stage}, stage


@pytest.mark.parametrize(("app_fixture", "stack"), CASES, ids=[f"{a.removesuffix('_app')}-{s}" for a, s in CASES])
def test_deployed_stack_snapshot(app_fixture: str, stack: str, request, snapshot_json) -> None:
    app = request.getfixturevalue(app_fixture)
    assert normalized(app.template_of(_stack_name(app, stack))) == snapshot_json


def _stack_regions(assembly_dir: Path) -> set[str]:
    manifest = json.loads((assembly_dir / "manifest.json").read_text())
    stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    return {a["environment"].rsplit("/", 1)[1] for a in stacks} - {"unknown-region"}


def _support_stacks(pipeline_app) -> set[str]:
    """The pipeline's cross-region support stacks (each holds the artifact replication bucket of one region):
    aws-cdk-lib aws-codepipeline (pipeline.js, private/cross-region-support-stack.js) adds one named
    `<pipeline stack>-support-<region>` per region other than the pipeline's where an action runs. None as shipped
    (no region anywhere); one per other region of the stages (and waves) once a user sets them (README, "Before
    the first deploy"), which `make deploy-pipeline` deploys too."""
    name = pipeline_app.stack.stack_name
    own = pipeline_app.assembly.get_stack_by_name(name).environment.region
    regions = set().union(*(_stack_regions(d) for d in pipeline_app.outdir.glob(f"assembly-{name}-*")))
    return {f"{name}-support-{region}" for region in regions - {own}}


def test_pipeline_support_stack_snapshots(pipeline_app, snapshot_json) -> None:
    """Every cross-region support stack of the pipeline, by name: `{}` as shipped."""
    stacks = sorted(_support_stacks(pipeline_app))
    assert {name: normalized(pipeline_app.template_of(name)) for name in stacks} == snapshot_json


def test_every_deployed_stack_has_a_snapshot(dev_app, prod_app, pipeline_app) -> None:
    """A new stack in a shipped app needs its snapshot here (the pipeline's support stacks: the test above)."""
    for fixture, app in {"dev_app": dev_app, "prod_app": prod_app, "pipeline_app": pipeline_app}.items():
        found = {s.stack_name for s in app.assembly.stacks}
        expected = {_stack_name(app, s) for s in DEPLOYED[fixture]}
        if fixture == "pipeline_app":
            expected |= _support_stacks(app)
        assert found == expected, fixture


HANDLE = "AWS::CloudFormation::WaitConditionHandle"


def test_normalizing_masks_digests_and_keeps_everything_else() -> None:
    digest = "a12f3bc238b02d22d2ff399deb28bea87464d03696c007161e4b83bd6d77c4b3"
    key = f"models/bert_base/{digest}/model.tar.gz"
    template = {
        "Resources": {
            "EnsureArtifactsbertbasesm86Handleb152491467d618EB88D5": {"Type": HANDLE},
            "Model0301700E": {"Properties": {"Key": key, "S3Key": f"{digest}.zip"}},
        },
        "Mappings": {"Image": {"ca-west-1": {"gpu": "204538143572.dkr.ecr.ca-west-1.amazonaws.com/x:24.09-py3"}}},
    }
    assert normalized(template) == {
        "Resources": {
            "EnsureArtifactsbertbasesm86Handle<digest12><HASH>": {"Type": HANDLE},
            "Model0301700E": {"Properties": {"Key": "models/bert_base/<digest>/model.tar.gz", "S3Key": "<digest>.zip"}},
        },
        "Mappings": {"Image": {"ca-west-1": {"gpu": "204538143572.dkr.ecr.ca-west-1.amazonaws.com/x:24.09-py3"}}},
    }


def test_normalizing_masks_the_asset_publishing_destination_hash() -> None:
    digest = "a12f3bc238b02d22d2ff399deb28bea87464d03696c007161e4b83bd6d77c4b3"
    spec = f'cdk-assets publish "{digest}:current_account-current_region-6845ee30"'
    assert normalized({"BuildSpec": spec}) == {
        "BuildSpec": 'cdk-assets publish "<digest>:current_account-current_region-<hash8>"'
    }
