"""`... | head` ends the CLIs quietly (issue #27 item 8): on a closed stdout pipe, exit 141 or 0, never a traceback.

Python ignores SIGPIPE, so a write to a pipe whose reader exited raises BrokenPipeError; the Python docs' "Note on
SIGPIPE" and pip point stdout at devnull and exit (model_build.cli.run_cli, shared by both CLIs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from synth_helpers import PROJECT_ROOT

OUTPUTS = 3000  # ~100 bytes of report each: far more than a pipe's 64 KiB buffer, so the write meets the closed pipe


class _ManyOutputs(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        outputs = [{"name": f"OUT{i}", "datatype": "FP32", "shape": [1], "data": [float(i)]} for i in range(OUTPUTS)]
        body = json.dumps({"model_name": "m", "outputs": outputs}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ManyOutputs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _piped_into_head(command: str) -> subprocess.CompletedProcess[str]:
    """`command | head -c 1` in bash; the return code is the Python program's (PIPESTATUS[0])."""
    script = f'{command} | head -c 1 >/dev/null; exit "${{PIPESTATUS[0]}}"'
    return subprocess.run(["bash", "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)


def test_invoke_into_head_ends_quietly(url: str) -> None:
    result = _piped_into_head(
        f"{sys.executable} -m endpoint_client invoke --url {url} --encoding json --tensor x=FP32:1:1"
    )
    assert result.returncode in (0, 141), result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    assert result.stderr == ""


# A model_build command whose stdout is long (like `check` on a repository with many problems), run through the
# CLI's own run_cli.
LONG_COMMAND = """
import argparse, sys
from model_build.cli import run_cli

def run(args):
    for _ in range(5000):
        print("x" * 99)
    return 0

parser = argparse.ArgumentParser()
parser.set_defaults(run=run)
sys.exit(run_cli(parser, []))
"""


def test_model_build_cli_into_head_ends_quietly() -> None:
    result = _piped_into_head(f"{sys.executable} -c '{LONG_COMMAND}'")
    assert result.returncode in (0, 141), result.stderr
    assert result.stderr == ""


def test_without_the_handler_the_same_pipe_shows_a_traceback() -> None:
    """The set-up really meets a closed pipe: a plain print of the same size fails loudly."""
    result = _piped_into_head(f"{sys.executable} -c 'print(\"x\" * 500000)'")
    assert "BrokenPipeError" in result.stderr


def test_a_broken_pipe_elsewhere_is_not_hidden() -> None:
    """A BrokenPipeError from a socket (stdout still open) is an unknown error: it keeps its traceback."""
    import argparse

    from model_build.cli import run_cli

    def fail(args: argparse.Namespace) -> int:
        raise BrokenPipeError("socket")

    parser = argparse.ArgumentParser()
    parser.set_defaults(run=fail)
    with pytest.raises(BrokenPipeError):
        run_cli(parser, [])
