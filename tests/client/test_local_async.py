"""The asynchronous flow on loopback (issue #26 part 1, "Local"): input folder -> local endpoint -> output folder.

The watcher plays SageMaker's async queue: it POSTs each request file to the container's `/invocations` (the
route Triton's SageMaker service serves, and the one an asynchronous endpoint's container is called on: SageMaker
Developer Guide, "Asynchronous inference", How It Works) and publishes `<name>.out` or `<name>.error` whole,
never over an existing file. Against a stand-in HTTP server here, and the real CPU Triton at the end.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from synth_helpers import PROJECT_ROOT

from endpoint_client import async_body
from endpoint_client.codec import JSON_CONTENT_TYPE, decode_response, encode_request
from endpoint_client.errors import EndpointError, EndpointUnreachableError, InvalidInputError
from endpoint_client.local_async import LocalAsyncInvoker, pending, publish, request_content_type, watch

MANY_OUTPUTS = 3000  # a report far larger than a pipe's 64 KiB buffer: the print meets a closed pipe


class _Echo(BaseHTTPRequestHandler):
    """Answers /invocations with the request's input names as outputs; a body with "fail" gets HTTP 400."""

    many = False

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.seen.append((self.path, self.headers["Content-Type"], body))  # type: ignore[attr-defined]
        if b"fail" in body:
            self._send(400, {"error": "input 'fail' is not an input of this model"})
            return
        count = MANY_OUTPUTS if self.many else 1
        outputs = [{"name": f"OUT{i}", "datatype": "FP32", "shape": [1], "data": [float(i)]} for i in range(count)]
        self._send(200, {"model_name": "m", "outputs": outputs})

    def _send(self, status: int, document: dict) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class _Many(_Echo):
    many = True


@contextlib.contextmanager
def _server(handler: type[BaseHTTPRequestHandler] = _Echo) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@contextlib.contextmanager
def _watcher(input_dir: Path, output_dir: Path, url: str) -> Iterator[None]:
    """`local-async` in a thread, scanning until the block ends."""
    input_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            watch(input_dir, output_dir, url, once=True, echo=lambda _: None)
            stop.wait(0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def _request(folder: Path, name: str, document: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return publish(folder, name, lambda stream: stream.write(json.dumps(document).encode()))


def test_each_request_file_gets_an_answer_or_an_error(tmp_path: Path) -> None:
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    _request(inbox, "a.json", {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}]})
    _request(inbox, "b.json", {"inputs": [{"name": "fail", "datatype": "FP32", "shape": [1], "data": [1]}]})
    (inbox / "c.txt").write_text("?")
    (inbox / ".a.json.123.tmp").write_text("half a file")  # a temporary: never read
    with _server() as server:
        answered = watch(inbox, outbox, _url(server), once=True, echo=lambda _: None)
        assert [(path, kind) for path, kind, _ in server.seen] == [("/invocations", JSON_CONTENT_TYPE)] * 2
    assert answered == 3
    assert decode_response((outbox / "a.json.out").read_bytes(), None)["OUT0"].tolist() == [0.0]
    assert "HTTP 400: input 'fail'" in (outbox / "b.json.error").read_text()
    assert "<id>.json" in (outbox / "c.txt.error").read_text()
    assert sorted(p.name for p in outbox.iterdir()) == ["a.json.out", "b.json.error", "c.txt.error"]


def test_answered_requests_are_not_sent_again_and_answers_never_replaced(tmp_path: Path) -> None:
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    _request(inbox, "a.json", {"inputs": []})
    outbox.mkdir()
    (outbox / "a.json.out").write_bytes(b"earlier answer")
    assert pending(inbox, outbox) == []
    with pytest.raises(FileExistsError):
        publish(outbox, "a.json.out", lambda stream: stream.write(b"new"))
    assert (outbox / "a.json.out").read_bytes() == b"earlier answer"
    assert [p.name for p in outbox.iterdir()] == ["a.json.out"]  # no temporary left behind


def test_an_unreachable_endpoint_becomes_an_error_file(tmp_path: Path) -> None:
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    _request(inbox, "a.json", {"inputs": []})
    with _server() as server:
        url = _url(server)
    watch(inbox, outbox, url, once=True, echo=lambda _: None)
    assert "cannot reach" in (outbox / "a.json.error").read_text()


def test_a_binary_request_file_names_its_header_size(tmp_path: Path) -> None:
    request = encode_request({"INPUT0": np.arange(4, dtype=np.float32)})
    path = tmp_path / "r.bin"
    path.write_bytes(request.body)
    assert request_content_type(path) == request.content_type


def test_invoker_writes_the_request_and_reads_the_answer(tmp_path: Path) -> None:
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    body = async_body.encoded_body(encode_request({"INPUT0": np.arange(4, dtype=np.float32)}))
    with _server() as server, _watcher(inbox, outbox, _url(server)):
        invoker = LocalAsyncInvoker(inbox, outbox, progress=lambda _: None)
        name = invoker.submit(body)
        reply = invoker.wait(name, timeout=30)
        (_, content_type, sent) = server.seen[0]
    assert name.endswith(".bin") and sent == body.read_all() and content_type == body.content_type
    assert decode_response(reply.body, reply.content_type)["OUT0"].tolist() == [0.0]


def test_invoker_reports_the_error_file(tmp_path: Path) -> None:
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    body = async_body.encoded_body(encode_request({"fail": np.arange(4, dtype=np.float32)}))
    with _server() as server, _watcher(inbox, outbox, _url(server)):
        invoker = LocalAsyncInvoker(inbox, outbox, progress=lambda _: None)
        with pytest.raises(EndpointError, match="HTTP 400"):
            invoker.wait(invoker.submit(body), timeout=30)


def test_invoker_without_a_watcher_times_out_naming_the_command(tmp_path: Path) -> None:
    body = async_body.encoded_body(encode_request({"x": np.arange(4, dtype=np.float32)}))
    invoker = LocalAsyncInvoker(tmp_path / "in", tmp_path / "out", progress=lambda _: None, sleep=lambda _: None)
    with pytest.raises(EndpointUnreachableError, match="local-async"):
        invoker.wait(invoker.submit(body), timeout=0.01)


def test_watch_refuses_a_missing_input_folder_and_a_bad_url(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="--input-dir"):
        watch(tmp_path / "missing", tmp_path / "out", "http://127.0.0.1:1", once=True)
    with pytest.raises(InvalidInputError, match="--url"):
        watch(tmp_path, tmp_path / "out", "ftp://x", once=True)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "endpoint_client", *args]


def test_cli_local_async_once_and_invoke_async_local(tmp_path: Path) -> None:
    """Both commands as a user runs them: the watcher (--once) and invoke-async --local-input-dir."""
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    with _server() as server, _watcher(inbox, outbox, _url(server)):
        result = subprocess.run(
            [
                *_cli("invoke-async", "--local-input-dir", str(inbox), "--local-output-dir", str(outbox)),
                "--tensor",
                "INPUT0=FP32:1x4:1,2,3,4",
                "--wait-timeout",
                "60",
            ],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["outputs"]["OUT0"]["data"] == [0.0]
    assert "queued" in result.stderr
    _request(inbox, "later.json", {"inputs": []})
    with _server() as server:
        once = subprocess.run(
            _cli(
                "local-async", "--input-dir", str(inbox), "--output-dir", str(outbox), "--url", _url(server), "--once"
            ),
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert once.returncode == 0, once.stderr
    assert once.stdout.strip() == "later.json -> later.json.out"


def test_invoke_async_into_head_ends_quietly(tmp_path: Path) -> None:
    """`invoke-async ... | head` exits 141 or 0 without a traceback, like `invoke` (test_cli_broken_pipe.py)."""
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    with _server(_Many) as server, _watcher(inbox, outbox, _url(server)):
        command = " ".join(
            [
                *_cli("invoke-async", "--local-input-dir", str(inbox), "--local-output-dir", str(outbox)),
                "--tensor",
                "x=FP32:1:1",
                "--encoding",
                "json",
            ]
        )
        result = subprocess.run(
            ["bash", "-c", f'{command} 2>{tmp_path}/err | head -c 1 >/dev/null; exit "${{PIPESTATUS[0]}}"'],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    stderr = (tmp_path / "err").read_text()
    assert result.returncode in (0, 141), stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr


# --- the real CPU Triton -----------------------------------------------------------------------------------


@pytest.mark.triton
def test_the_local_endpoint_answers_through_the_folders(single_endpoint, tmp_path: Path) -> None:
    """The packaged example (add_sub) served by the local endpoint, asked through the async folders."""
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "a.npy", a)  # streamed from the file by invoke-async
    with _watcher(inbox, outbox, single_endpoint.url):
        result = subprocess.run(
            [
                *_cli("invoke-async", "--local-input-dir", str(inbox), "--local-output-dir", str(outbox)),
                "--input",
                f"INPUT0={tmp_path}/a.npy",
                "--tensor",
                "INPUT1=FP32:2x4:" + ",".join(["2"] * 8),
                "--save-dir",
                str(tmp_path / "saved"),
                "--wait-timeout",
                "120",
            ],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "saved" / "OUTPUT0.npy"), a + 2)
    np.testing.assert_array_equal(np.load(tmp_path / "saved" / "OUTPUT1.npy"), a - 2)
    with _watcher(inbox, outbox, single_endpoint.url):
        refused = subprocess.run(
            [
                *_cli("invoke-async", "--local-input-dir", str(inbox), "--local-output-dir", str(outbox)),
                "--tensor",
                "INPUT0=FP32:1x4:1,2,3,4",
                "--wait-timeout",
                "120",
            ],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert refused.returncode == 1 and "\nERROR: " in refused.stderr
    assert "INPUT1" in refused.stderr and "Traceback" not in refused.stderr


def test_links_fifos_and_folders_in_the_input_folder_get_an_error_not_a_read(tmp_path: Path) -> None:
    """A link is not followed (it could point anywhere), a FIFO never opened blocking (it would hang the watcher),
    a folder not read: each is answered with an .error naming it."""
    import os

    inbox, outbox = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"inputs": []}')
    (inbox / "link.json").symlink_to(secret)
    os.mkfifo(inbox / "pipe.json")
    (inbox / "folder.json").mkdir()
    with _server() as server:
        watch(inbox, outbox, _url(server), once=True, echo=lambda _: None)
        assert server.seen == []
    assert "a link is not followed" in (outbox / "link.json.error").read_text()
    assert "not a regular file" in (outbox / "pipe.json.error").read_text()
    assert (outbox / "folder.json.error").exists()


@pytest.mark.parametrize("inherited_sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["terminal", "sigint-ignored"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_watcher_stops_cleanly_on_ctrl_c_and_sigterm(tmp_path: Path, signum: int, inherited_sigint) -> None:
    """Like `local`: a signal stops the watcher with exit 0 and one line, no traceback, no temporary left; also
    when started with SIGINT ignored (a script's background job, `nohup`: children inherit SIG_IGN and Python
    keeps it, so without its own handler the watcher ignored Ctrl-C and this test hung under such a runner)."""
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    before = signal.signal(signal.SIGINT, inherited_sigint)  # what the child inherits (tests run in the main thread)
    try:
        process = subprocess.Popen(
            _cli("local-async", "--input-dir", str(inbox), "--output-dir", str(outbox), "--url", "http://127.0.0.1:9"),
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        deadline = time.monotonic() + 60
        while not outbox.exists() and time.monotonic() < deadline:  # the watcher creates it once started
            time.sleep(0.1)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert "stopping" in stderr and "Traceback" not in stderr
    assert list(outbox.iterdir()) == []
