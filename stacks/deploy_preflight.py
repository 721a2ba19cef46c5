"""Checks `make deploy|diff|destroy|deploy-pipeline` run before anything reaches AWS (issue #27 items 1 and 4).

1. **Placeholders**: a string value matching `replace[-_ ]?me` (any case) in a config file that the deploy reads
   (the stage's file and the files of the stages it promotes from; for the pipeline, config/pipeline.yaml and
   every stage it deploys) refuses `deploy` and `deploy-pipeline`, naming file, line, field and what to put
   there. The shipped configs carry such placeholders (`artifacts.bucket_name: triton-models-dev-replace-me`,
   `source.connection_arn: ...connection/REPLACE-ME`) so that they synthesize on a fresh clone; `make synth`
   only warns (app.py calls `warn_placeholders`).
2. **Credentials**: when boto3 cannot resolve credentials (AWS_PROFILE, `--profile NAME` in CDK_ARGS, the
   environment, shared files, SSO, instance metadata), one message names the command and how to pass a
   profile, instead of the CDK CLI's "Unable to resolve AWS account to use" after a full synth.

    python -m stacks.deploy_preflight deploy --stage dev --config-dir config [--cdk-args "--profile NAME"]
    python -m stacks.deploy_preflight deploy-pipeline --config-dir config

Exit 0: go ahead; 1: refused (the message says why); 2: usage.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from model_build.config_yaml import ConfigFileError, clip, read_config_document
from stage_config.placeholders import PLACEHOLDER, field_name, string_values

# What to put in a known placeholder field (the shipped configs' placeholders); any other field gets GENERIC.
HINTS = {
    "artifacts.bucket_name": (
        "a globally unique S3 bucket name of your own (bucket names are shared by every AWS account), "
        "e.g. triton-models-<stage>-<account id>"
    ),
    "source.connection_arn": (
        "the ARN of a CodeConnections connection you authorised in the console (Developer Tools > Settings > "
        "Connections), arn:aws:codeconnections:<region>:<account>:connection/<id>; docs/pipeline.md"
    ),
}
GENERIC = 'your own value (README.md, "Configuration", describes the field)'
COMMANDS = ("deploy", "diff", "destroy", "deploy-pipeline", "pipeline-configured")
# `make synth` synthesizes the pipeline only once config/pipeline.yaml is set up (issue #27 item 2).
NOT_CONFIGURED = 3
# The commands that write to AWS what the configs say: a placeholder refuses them; the others only warn.
REFUSING = ("deploy", "deploy-pipeline")


@dataclass(frozen=True)
class Placeholder:
    file: Path
    field: str
    line: int | None
    value: str

    def hint(self) -> str:
        return HINTS.get(re.sub(r"\[\d+\]", "", self.field), GENERIC)

    def where(self) -> str:
        """`config/dev.yaml:11`: relative to the current folder when inside it (as make shows paths)."""
        try:
            shown = self.file.absolute().relative_to(Path.cwd())
        except ValueError:
            shown = self.file
        return f"{shown}:{self.line}" if self.line else str(shown)

    def message(self) -> str:
        return f"{self.where()}: {self.field}: {clip(self.value, 80)!r} is a placeholder; set it to {self.hint()}"


def read_document(path: Path) -> Any:
    """The file's document, or None when it cannot be read (synth then reports it, naming file and line)."""
    try:
        return read_config_document(path)
    except (ConfigFileError, OSError):
        return None


def find_placeholders(path: Path) -> list[Placeholder]:
    """Every string value of the YAML document at `path` that is (or contains) a replace-me placeholder."""
    document = read_document(path)
    if document is None:
        return []
    return [
        Placeholder(path, field_name(loc), document.line_of(loc), value)
        for loc, value in string_values(document.data)
        if PLACEHOLDER.search(value)
    ]


def stage_files(stage: str, config_dir: Path) -> list[Path]:
    """config_dir/<stage>.yaml and the files of the stages it promotes from (prod reads dev's bucket)."""
    files: list[Path] = []
    current: str | None = stage
    while isinstance(current, str) and (path := config_dir / f"{current}.yaml") not in files:
        files.append(path)
        document = read_document(path)
        current = document.data.get("promote_from") if document is not None else None
    return files


def pipeline_files(config_dir: Path) -> list[Path]:
    """config_dir/pipeline.yaml and the files of every stage it deploys (`stages: [{name: ...}]`)."""
    path = config_dir / "pipeline.yaml"
    files = [path]
    document = read_document(path)
    stages = document.data.get("stages") if document is not None else None
    for entry in stages if isinstance(stages, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str):
            files += [f for f in stage_files(name, config_dir) if f not in files]
    return files


def warn_placeholders(files: Iterable[Path], refused_by: str = "make deploy", stream: TextIO | None = None) -> int:
    """One `WARNING:` line per placeholder (for `make synth`: it synthesizes, a deploy refuses); their count."""
    found = [p for path in files for p in find_placeholders(path)]
    for placeholder in found:
        print(f"WARNING: {placeholder.message()} (`{refused_by}` refuses it)", file=stream or sys.stderr)
    return len(found)


def profile_from_cdk_args(cdk_args: str) -> str | None:
    """NAME of `--profile NAME` / `--profile=NAME` in CDK_ARGS (the CDK CLI's option), else None."""
    try:
        words = shlex.split(cdk_args)
    except ValueError:
        words = cdk_args.split()
    for index, word in enumerate(words):
        if word == "--profile" and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("--profile="):
            return word.removeprefix("--profile=")
    return None


def make_command(command: str, stage: str | None, config_dir: Path) -> str:
    """The make command line a user runs (`make deploy STAGE=prod`), for messages."""
    parts = ["make", command]
    if stage and stage != "dev":
        parts.append(f"STAGE={stage}")
    if config_dir != Path("config"):
        parts.append(f"CONFIG_DIR={config_dir}")
    return " ".join(parts)


def credentials_problem(command: str, profile: str | None, session_factory: Callable[..., Any]) -> str | None:
    """None when boto3 resolves credentials (the CDK CLI's chain: AWS_PROFILE, the profile, environment, SSO,
    instance metadata); else the message saying which command needs them and how to pass a profile."""
    import botocore.exceptions

    how = (
        f'pass a profile: `AWS_PROFILE=name {command}` or `{command} CDK_ARGS="--profile name"` '
        "(after `aws sso login --profile name` for an SSO profile), or export AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY"
    )
    try:
        session = session_factory(profile_name=profile) if profile else session_factory()
        credentials = session.get_credentials()
    except botocore.exceptions.BotoCoreError as error:
        return f"`{command}` needs AWS credentials, and they could not be resolved ({error}); {how}"
    if credentials is None:
        return (
            f"`{command}` needs AWS credentials, and none were found (boto3 looked at the environment, "
            f"AWS_PROFILE or the default profile, SSO and instance metadata, as the CDK CLI does); {how}"
        )
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m stacks.deploy_preflight", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=COMMANDS, help="the make target about to run")
    parser.add_argument("--stage", default="dev", help="the stage (config-dir/<stage>.yaml); not for deploy-pipeline")
    parser.add_argument("--config-dir", type=Path, default=Path("config"), help="default: config")
    parser.add_argument("--cdk-args", default="", help="CDK_ARGS as make passes them (its --profile is used)")
    return parser


def pipeline_configured(config_dir: Path, stream: TextIO | None = None) -> bool:
    """Whether `<config_dir>/pipeline.yaml` exists and holds no placeholder; else one NOTE line saying why the
    pipeline is left out and how to synthesize it anyway."""
    stream = stream or sys.stderr
    path = config_dir / "pipeline.yaml"
    if not path.is_file():
        print(f"NOTE: no {path}: the promotion pipeline is not synthesized (docs/pipeline.md)", file=stream)
        return False
    found = find_placeholders(path)
    if found:
        fields = ", ".join(p.field for p in found)
        print(
            f"NOTE: {path} is not set up yet (placeholder: {fields}): the promotion pipeline is not synthesized; "
            "`make synth-pipeline` synthesizes it anyway (docs/pipeline.md)",
            file=stream,
        )
        return False
    return True


def main(argv: Iterable[str] | None = None, *, session_factory: Callable[..., Any] | None = None) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else None)
    if args.command == "pipeline-configured":
        return 0 if pipeline_configured(args.config_dir) else NOT_CONFIGURED
    pipeline = args.command == "deploy-pipeline"
    command = make_command(args.command, None if pipeline else args.stage, args.config_dir)
    files = pipeline_files(args.config_dir) if pipeline else stage_files(args.stage, args.config_dir)
    if args.command in REFUSING:
        found = [p for path in files for p in find_placeholders(path)]
        if found:
            lines = [f"ERROR: `{command}` refused: the config still holds placeholder values (nothing was deployed)"]
            lines += [f"  {p.message()}" for p in found]
            print("\n".join(lines), file=sys.stderr)
            return 1
    if session_factory is None:
        import boto3

        session_factory = boto3.Session
    problem = credentials_problem(command, profile_from_cdk_args(args.cdk_args), session_factory)
    if problem:
        print(f"ERROR: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
