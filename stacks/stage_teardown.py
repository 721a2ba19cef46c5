"""`make destroy` without a cloud assembly: delete the stage's deployed stacks found in CloudFormation (#27 item 3).

`make destroy` destroys from the stage's assembly (`cdk destroy --app <assembly>`, no synth needed); when the
config no longer synthesizes (a model file removed) and no earlier assembly exists, this lists the deployed
`Triton-<stage>-*` stacks (CloudFormation `ListStacks`, stacks/stale_stacks.py) and deletes them in reverse
dependency order (endpoints, then the build stack, then the artifact stack, whose exports they import), after
the same question `cdk destroy` asks; `--force` (as in `CDK_ARGS=--force`) skips the question. Stacks only the
pipeline deploys (`Triton-<stage>-SmokeAccess`) are left to the pipeline, as `cdk destroy` of the stage app does.

    python -m stacks.stage_teardown --stage dev [--region R] [--cdk-args "--profile NAME --force"]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from stacks.deploy_preflight import profile_from_cdk_args, read_document, stage_files
from stacks.stale_stacks import Assembly, StaleStack, deployed_stage_stacks, stale_stacks


def config_region(stage: str, config_dir: Path) -> str | None:
    """The stage file's `region`, read as plain YAML (the config may no longer validate)."""
    document = read_document(stage_files(stage, config_dir)[0])
    region = document.data.get("region") if document is not None else None
    return region if isinstance(region, str) and region else None


def forced(cdk_args: str) -> bool:
    """`cdk destroy --force` / `-f` in CDK_ARGS: delete without asking, as the CDK CLI does."""
    try:
        words = shlex.split(cdk_args)
    except ValueError:
        words = cdk_args.split()
    return "--force" in words or "-f" in words


def confirm(stacks: list[StaleStack], ask: Callable[[str], str]) -> bool:
    names = ", ".join(stack.name for stack in stacks)
    try:
        answer = ask(f"Are you sure you want to delete: {names} (y/n)? ")
    except EOFError:  # no terminal: never delete without an answer
        return False
    return answer.strip().lower() in ("y", "yes")


def delete_in_order(client: Any, stacks: list[StaleStack], out: TextIO) -> int:
    """Delete each stack and wait for it, in the given order; stop at the first failure (exit status)."""
    import botocore.exceptions

    for stack in stacks:
        print(f"{stack.name}: destroying...", file=out, flush=True)
        try:
            client.delete_stack(StackName=stack.name)
            client.get_waiter("stack_delete_complete").wait(StackName=stack.name)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            print(f"ERROR: {stack.name}: not deleted: {error}", file=sys.stderr)
            if "TerminationProtection" in str(error) or "termination protection" in str(error).lower():
                print(f"  turn protection off first: {stack.delete_commands()[0]}", file=sys.stderr)
            return 1
        print(f"{stack.name}: destroyed", file=out, flush=True)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m stacks.stage_teardown", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", required=True)
    parser.add_argument("--config-dir", type=Path, default=Path("config"), help="default: config")
    parser.add_argument("--region", help="Default: - the stage file's region, else the AWS SDK's (AWS_REGION...)")
    parser.add_argument("--cdk-args", default="", help="CDK_ARGS as make passes them (--profile, --force are used)")
    return parser


def main(
    argv: Iterable[str] | None = None,
    *,
    session_factory: Callable[..., Any] | None = None,
    ask: Callable[[str], str] | None = None,
) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else None)
    import boto3
    import botocore.exceptions

    factory = session_factory or boto3.Session
    profile = profile_from_cdk_args(args.cdk_args)
    session = factory(profile_name=profile) if profile else factory()
    # The CDK CLI reads AWS_REGION as well as boto3's AWS_DEFAULT_REGION and the profile's region.
    region = args.region or config_region(args.stage, args.config_dir) or os.environ.get("AWS_REGION")
    region = region or session.region_name
    if not region:
        where = f"{args.config_dir}/{args.stage}.yaml"
        print(f"ERROR: no region for stage {args.stage}: {where} sets none; set AWS_REGION", file=sys.stderr)
        return 1
    client = session.client("cloudformation", region_name=region)
    try:
        deployed = deployed_stage_stacks(client, args.stage)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
        print(f"ERROR: could not list the stacks of {region}: {error}", file=sys.stderr)
        return 1
    # Every deployed stage stack is "stale" against an empty assembly: the same order and filter as stale-stacks.
    stacks = stale_stacks(deployed, Assembly(frozenset(), None), region)
    if not stacks:
        print(f"destroy: no deployed Triton-{args.stage}-* stack in {region}; nothing to destroy")
        return 0
    print(f"destroy: no cloud assembly of stage {args.stage}; its deployed stacks in {region} (CloudFormation):")
    for stack in stacks:
        print(f"  {stack.name} ({stack.status})")
    if not forced(args.cdk_args) and ask is None and not sys.stdin.isatty():
        # As `cdk destroy` does: never delete without an answer, and say how to decide without a terminal.
        print(
            "ERROR: deleting stacks cannot be undone and no terminal is attached to confirm it; nothing was "
            "deleted (CDK_ARGS=--force deletes without asking)",
            file=sys.stderr,
        )
        return 1
    if not forced(args.cdk_args) and not confirm(stacks, ask or input):
        print("Nothing was deleted.")
        return 0
    return delete_in_order(client, stacks, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
