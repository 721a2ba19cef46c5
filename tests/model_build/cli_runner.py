"""The one way model_build tests run the command line: `model_build.cli.main(argv)` in this process.

What a user sees (stdout, stderr, the exit code) is captured as `python -m model_build` would print it; an
uncaught exception fails the test with its traceback instead of printing one. Tests that need a process of
their own (signals, process groups) start one themselves and say why.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

from fakes import within
from synth_helpers import PROJECT_ROOT

from model_build import cli


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*argv: str, cwd: Path = PROJECT_ROOT, timeout: float | None = None) -> CliResult:
    """`python -m model_build *argv` run from `cwd`; `timeout` fails the test (SIGALRM) instead of hanging it."""
    stdout, stderr = io.StringIO(), io.StringIO()
    limit = within(timeout) if timeout is not None else contextlib.nullcontext()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), limit:
        try:
            code = cli.main(list(argv))
        except SystemExit as exit_:  # argparse's usage errors (2) and --help (0)
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return CliResult(code, stdout.getvalue(), stderr.getvalue())


def assert_one_error(result: CliResult, *expected: str) -> None:
    """Exit 1 with one `ERROR: ...` message containing every `expected` text."""
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("ERROR: "), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr
