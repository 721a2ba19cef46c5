"""The background script runner must never flake on a script that dies before reading its request.

Issue #22 item 0: `send()` raised BrokenPipeError with the pipe still on the Popen, `communicate()` then raised
ValueError, and `stop()`'s second `communicate()` failed with "'Popen' object has no attribute '_fileobj2output'"
(CPython `subprocess.Popen._communicate` sets that mapping only on a first call that gets that far).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from triton_cdk.node_script import NodeScript, NodeScriptError

FALSE = shutil.which("false") or "false"
BIG_REQUEST = {"padding": "x" * 300_000}  # larger than a pipe's buffer: the write must meet the dead reader


@pytest.mark.parametrize("request_", [{"a": 1}, BIG_REQUEST])
@pytest.mark.parametrize("attempt", range(25))
def test_a_script_that_dies_first_is_reported_with_its_exit_status(request_: dict, attempt: int) -> None:
    """50 runs (2 request sizes x 25): always the same error, never a Popen internal error."""
    script = NodeScript(FALSE, "ignored")
    script.send(request_)
    with pytest.raises(NodeScriptError, match=r"failed \(exit 1\)"):
        script.result(timeout=30)
    script.stop()  # reaping twice is harmless
    script.stop()


@pytest.mark.parametrize("attempt", range(10))
def test_a_request_passed_to_result_on_a_dead_script_is_an_error_not_a_traceback(attempt: int) -> None:
    script = NodeScript(FALSE, "ignored")
    with pytest.raises(NodeScriptError):
        script.result(timeout=30, request=BIG_REQUEST)
    script.stop()


def test_a_script_that_runs_too_long_is_stopped(tmp_path: Path) -> None:
    slow = tmp_path / "slow-node"
    slow.write_text("#!/bin/sh\nexec sleep 60\n")
    slow.chmod(0o755)
    script = NodeScript(str(slow), "ignored")
    with pytest.raises(NodeScriptError, match="ran longer than"):
        script.result(timeout=0.5, request={"a": 1})
    assert script._process.returncode is not None
