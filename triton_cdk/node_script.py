"""A Node.js script run beside the synth: a JSON request on stdin, a JSON result on stdout.

The validation plugins that run outside the jsii kernel use it (triton_cdk/cfn_rules.py, triton_cdk/guard_plugin.py).
The script runs in a process group of its own, so stopping it also stops what it started (cfn-guard).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from typing import Any


class NodeScriptError(RuntimeError):
    """The script ran too long, failed, or wrote no JSON; the message continues "the <script> ..."."""


class NodeScript:
    """`node -e <script> <args>`, started on creation (OSError when `node` cannot be started)."""

    def __init__(self, node: str, script: str, *args: str) -> None:
        self._process = subprocess.Popen(
            [node, "-e", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def send(self, request: Any) -> None:
        """Writes the request and closes stdin, so the script can start on it now.

        A script that died before reading it is reported by result(), with its exit status and stderr: the
        broken pipe is not an error here. stdin is detached from the Popen before writing: a Popen still holding
        a half-written broken pipe fails in communicate() with a ValueError and leaves its state half-set
        (CPython's Popen._communicate), after which stop() could not reap it (the flake of issue #22 item 0).
        """
        stdin, self._process.stdin = self._process.stdin, None
        try:
            stdin.write(json.dumps(request).encode())  # a few KiB: never fills the pipe
            stdin.flush()
        except BrokenPipeError:
            pass
        finally:
            with contextlib.suppress(OSError):  # a broken pipe's buffered bytes cannot be flushed: drop them
                stdin.close()

    def result(self, timeout: float, request: Any = None) -> Any:
        """The script's JSON output, after sending `request` if it was not sent yet."""
        data = None if request is None else json.dumps(request).encode()
        try:
            out, err = self._process.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise NodeScriptError(f"ran longer than {timeout} s") from None
        except (OSError, ValueError) as error:  # it died before reading the request
            self.stop()
            raise NodeScriptError(f"failed: {error}") from error
        if self._process.returncode != 0:
            raise NodeScriptError(f"failed (exit {self._process.returncode}): {err.decode(errors='replace')[-2000:]}")
        try:
            return json.loads(out)
        except ValueError as error:
            raise NodeScriptError(f"wrote no JSON result ({error}): {out[:200]!r}") from error

    def stop(self) -> None:
        """Stops the script's process group and reaps it.

        wait() and plain close() rather than a second communicate(): after a failed communicate() its
        internal state may be half-set, and a killed process needs nothing read from its pipes.
        """
        with contextlib.suppress(OSError):  # already gone
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        for pipe in (self._process.stdin, self._process.stdout, self._process.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
