"""`python -m model_build`: the only place that catches errors (pypa/build style)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from model_build.commands import COMMAND_MODULES
from model_build.errors import ToolError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m model_build",
        description="Build, check, package and upload Triton model repositories for SageMaker.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        command = importlib.import_module(f"model_build.commands.{module_name}")
        sub = subparsers.add_parser(command.NAME, help=command.HELP, description=command.HELP)
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(build_parser(), argv)


def run_cli(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse and run; the one place errors become exit codes (shared with endpoint_client's CLI)."""
    args = parser.parse_args(argv)  # usage errors exit 2 from argparse
    try:
        return int(args.run(args))
    except ToolError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ERROR: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
