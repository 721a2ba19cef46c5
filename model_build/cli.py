"""`python -m model_build`: the only place that catches errors (pypa/build style)."""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys
from collections.abc import Sequence
from contextlib import contextmanager

from model_build.commands import COMMANDS
from model_build.errors import ToolError
from serving_facts.errors import ServingFactError


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. When `argv` starts with a command's name, only that command's module is imported (the
    others get a bare subparser): `upload` and `key`, run many times in a build, then load neither onnx nor
    tritonclient (about 0.3 s of every process). Otherwise (`--help`, a typo) every command is listed with its help.
    """
    parser = argparse.ArgumentParser(
        prog="python -m model_build",
        description="Build, check, package and upload Triton model repositories for SageMaker.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = argv[0] if argv and argv[0] in COMMANDS else None
    for name, module_name in COMMANDS.items():
        if chosen is not None and name != chosen:
            subparsers.add_parser(name)
            continue
        command = importlib.import_module(f"model_build.commands.{module_name}")
        sub = subparsers.add_parser(command.NAME, help=command.HELP, description=command.HELP)
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    return run_cli(build_parser(arguments), arguments)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, like Ctrl-C's KeyboardInterrupt: every `finally` and cleanup runs
    (temporary archives removed, a pip's process group ended, work folders deleted) before the exit."""


def _raise_terminated(signum, frame) -> None:
    # Once: a second SIGTERM while the cleanup runs must not cut the cleanup short (SIGKILL still ends it all).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


@contextmanager
def _sigterm_as_exception():
    """Python's default for SIGTERM ends the process on the spot, skipping every `finally`; CodeBuild, a CI
    runner or `kill` stop a command with it. Handled like SIGINT while a command runs (main thread only)."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: signals cannot be handled there
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has exited (`... | head`): poll reports POLLERR on its write end."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no real stdout (a test's capture)
        return False


def _quiet_stdout() -> None:
    """`... | head` closed the pipe: like pip and the Python docs' SIGPIPE note, point stdout at devnull so that the
    interpreter's final flush of the unwritten rest cannot raise again, and exit quietly (128 + SIGPIPE, as a
    shell reports a command SIGPIPE ended)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run_cli(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse and run; the one place errors become exit codes (shared with endpoint_client's CLI)."""
    args = parser.parse_args(argv)  # usage errors exit 2 from argparse
    try:
        with _sigterm_as_exception():
            code = int(args.run(args))
        sys.stdout.flush()  # here, not at exit, where a closed pipe would print "Exception ignored ..."
        return code
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # another pipe or socket: an unknown error, with its traceback
        _quiet_stdout()
        return 128 + signal.SIGPIPE
    except (ToolError, ServingFactError) as error:  # the shared facts' errors are the user's input too
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    except Terminated:
        print("ERROR: terminated (SIGTERM); stopped and cleaned up", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("ERROR: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
