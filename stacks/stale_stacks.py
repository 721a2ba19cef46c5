"""Stale stacks: the deployed `Triton-<stage>-*` stacks that the stage's cloud assembly no longer has.

`cdk deploy` only creates and updates the stacks of the app: when an endpoint leaves config/<stage>.yaml its
stack stays deployed, keeps billing its instances and keeps importing the artifact stack's exports (issue #22
A4). `cdk destroy` cannot remove it either (the stack is no longer in the app). This check compares the
assembly (`cdk.out/manifest.json`) with CloudFormation's `ListStacks` and prints the command that removes each
stale stack; it never deletes anything.

    python -m stacks.stale_stacks --app cdk.out --stage dev [--region R] [--profile P] [--fail-on-stale]

Run by `make deploy` (after the deploy) and `make stale-stacks`. Without AWS credentials (none that boto3 can
resolve) or without a region, it says in one line that it skipped and why, and exits 0. With
`--fail-on-stale`, stale stacks or a failed listing exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a stage's stack name continues with after `Triton-<stage>-` (stacks/stage.py, stacks/pipeline_stage.py).
STAGE_STACKS = ("Artifacts", "Build")
ENDPOINT_STACK = "Endpoint-"
# Deployed by the pipeline only, never by `make deploy`: absent from a stage app's assembly without being stale.
PIPELINE_ONLY = ("SmokeAccess",)
# Every ListStacks status but DELETE_COMPLETE (CloudFormation API reference, ListStacks.StackStatusFilter).
LIVE_STATUSES = (
    "CREATE_IN_PROGRESS",
    "CREATE_FAILED",
    "CREATE_COMPLETE",
    "ROLLBACK_IN_PROGRESS",
    "ROLLBACK_FAILED",
    "ROLLBACK_COMPLETE",
    "DELETE_IN_PROGRESS",
    "DELETE_FAILED",
    "UPDATE_IN_PROGRESS",
    "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
    "UPDATE_COMPLETE",
    "UPDATE_FAILED",
    "UPDATE_ROLLBACK_IN_PROGRESS",
    "UPDATE_ROLLBACK_FAILED",
    "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
    "UPDATE_ROLLBACK_COMPLETE",
    "REVIEW_IN_PROGRESS",
    "IMPORT_IN_PROGRESS",
    "IMPORT_COMPLETE",
    "IMPORT_ROLLBACK_IN_PROGRESS",
    "IMPORT_ROLLBACK_FAILED",
    "IMPORT_ROLLBACK_COMPLETE",
)


class StaleStackError(Exception):
    """A problem with the inputs (assembly, stage): printed as `ERROR: ...`, exit 2."""


@dataclass(frozen=True)
class Assembly:
    """The stage's stacks in a cloud assembly, and the one region they name (None: environment-agnostic)."""

    stack_names: frozenset[str]
    region: str | None


@dataclass(frozen=True)
class StaleStack:
    name: str
    status: str
    region: str

    def delete_commands(self) -> list[str]:
        region = f" --region {self.region}"
        commands = [
            f"aws cloudformation delete-stack --stack-name {self.name}{region}",
            f"aws cloudformation wait stack-delete-complete --stack-name {self.name}{region}",
        ]
        if self.name.endswith("-Artifacts"):
            # Termination protection is on (stacks/artifact_stack.py); its key and buckets are retained anyway.
            commands.insert(
                0,
                f"aws cloudformation update-termination-protection --no-enable-termination-protection "
                f"--stack-name {self.name}{region}",
            )
        return commands


def read_assembly(app: Path, stage: str) -> Assembly:
    """The `Triton-<stage>-*` stacks of the cloud assembly at `app` (cdk.out), from its manifest.json."""
    manifest_file = app / "manifest.json"
    try:
        manifest = json.loads(manifest_file.read_text())
    except FileNotFoundError:
        raise StaleStackError(f"{manifest_file}: no cloud assembly here; run `make synth-stage` first") from None
    except (OSError, ValueError) as error:
        raise StaleStackError(f"{manifest_file}: cannot read the cloud assembly manifest: {error}") from None
    names, regions = set(), set()
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        name = artifact.get("properties", {}).get("stackName", artifact_id)
        if not is_stage_stack(name, stage):
            continue
        names.add(name)
        region = artifact.get("environment", "").rpartition("/")[2]
        if region and region != "unknown-region":
            regions.add(region)
    if not names:
        raise StaleStackError(f"{manifest_file}: no stack of stage {stage!r} (Triton-{stage}-*); wrong --stage?")
    if len(regions) > 1:
        raise StaleStackError(f"{manifest_file}: the stage's stacks name several regions {sorted(regions)}")
    return Assembly(frozenset(names), regions.pop() if regions else None)


def is_stage_stack(name: str, stage: str) -> bool:
    """`Triton-<stage>-Artifacts`, `-Build`, `-Endpoint-<name>` or a pipeline-only stack; not another stage's
    (`Triton-dev-x-Build` belongs to stage `dev-x`, not `dev`)."""
    prefix = f"Triton-{stage}-"
    if not name.startswith(prefix):
        return False
    rest = name.removeprefix(prefix)
    return rest in STAGE_STACKS or rest in PIPELINE_ONLY or rest.startswith(ENDPOINT_STACK)


def deployed_stage_stacks(client: Any, stage: str) -> dict[str, str]:
    """{stack name: status} of the stage's live stacks, from CloudFormation `ListStacks` (every page)."""
    found = {}
    for page in client.get_paginator("list_stacks").paginate(StackStatusFilter=list(LIVE_STATUSES)):
        for summary in page.get("StackSummaries", []):
            if is_stage_stack(summary["StackName"], stage):
                found[summary["StackName"]] = summary["StackStatus"]
    return found


def stale_stacks(deployed: dict[str, str], assembly: Assembly, region: str) -> list[StaleStack]:
    """Deployed stage stacks the assembly lacks, endpoints first (they import the artifact stack's exports)."""
    stale = [
        StaleStack(name, status, region)
        for name, status in deployed.items()
        if name not in assembly.stack_names and name.rpartition("-")[2] not in PIPELINE_ONLY
    ]
    order = {"Build": 1, "Artifacts": 2}  # endpoints (0), then the build, then the artifact stack
    return sorted(stale, key=lambda s: (order.get(s.name.rpartition("-")[2], 0), s.name))


def report(stale: Sequence[StaleStack], stage: str, region: str) -> str:
    if not stale:
        return f"stale-stacks: none (every deployed Triton-{stage}-* stack in {region} is in the assembly)"
    lines = [
        f"stale-stacks: {len(stale)} deployed stack(s) of stage {stage} in {region} are no longer in the app "
        "(removed from the config). They keep running and billing; `cdk deploy` never deletes them and "
        "`cdk destroy` cannot (they are not in the app). Nothing was deleted. To remove them:"
    ]
    for stack in stale:
        lines.append(f"  {stack.name} ({stack.status}):")
        lines += [f"    {command}" for command in stack.delete_commands()]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m stacks.stale_stacks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", type=Path, required=True, help="the stage's cloud assembly (e.g. cdk.out)")
    parser.add_argument("--stage", required=True, help="the stage (config/<stage>.yaml)")
    parser.add_argument("--region", help="Default: - the assembly's region, else the AWS SDK's (AWS_REGION...)")
    parser.add_argument("--profile", help="Default: - the AWS SDK's (AWS_PROFILE, default profile)")
    parser.add_argument("--fail-on-stale", action="store_true", help="exit 1 on stale stacks or a failed listing")
    return parser


def main(argv: Iterable[str] | None = None, *, session_factory: Callable[..., Any] | None = None) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else None)
    try:
        assembly = read_assembly(args.app, args.stage)
    except StaleStackError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    import boto3
    import botocore.exceptions

    factory = session_factory or boto3.Session
    try:
        session = factory(profile_name=args.profile) if args.profile else factory()
        credentials = session.get_credentials()
    except botocore.exceptions.BotoCoreError as error:
        print(f"stale-stacks: skipped: AWS credentials could not be resolved ({error})")
        return 1 if args.fail_on_stale else 0
    if credentials is None:
        print("stale-stacks: skipped: no AWS credentials (boto3 found none in the environment, profile or metadata)")
        return 0
    region = args.region or assembly.region or session.region_name
    if not region:
        print("stale-stacks: skipped: no region (the stage's config sets none; set AWS_REGION or pass --region)")
        return 0
    try:
        deployed = deployed_stage_stacks(session.client("cloudformation", region_name=region), args.stage)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
        print(f"stale-stacks: could not list the stacks of {region}: {error}")
        return 1 if args.fail_on_stale else 0
    stale = stale_stacks(deployed, assembly, region)
    print(report(stale, args.stage, region))
    return 1 if stale and args.fail_on_stale else 0


if __name__ == "__main__":
    sys.exit(main())
