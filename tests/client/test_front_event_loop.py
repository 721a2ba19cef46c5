"""front_async.py: the local endpoint's front on one asyncio event loop (issue #24; not the endpoint's front yet,
see its docstring), held to what the threaded front's tests check, and what it adds.

- The HTTP parser's refusals are JSON with a status line (review L1): 405 with Allow for a method the front does
  not serve (RFC 9110 §15.5.6), 505 for HTTP/2's preface (RFC 9113 §3.4), 400 for a TLS ClientHello or a malformed
  request line, 414 for a request line over 65536 bytes (http.server's limit); several Content-Length headers are a
  400 (RFC 9112 §6.3); a body without Content-Length, or chunked, is a 411; Content-Length '-1' is not a number.
- A client that half-closes after its request still reads the reply; an idle connection is closed after the idle
  timeout; over the connection limit a client reads a 503 with Connection: close, its body drained first.
- Invocations reach Triton through aiohttp's client over a pool of keep-alive connections (at most
  MAX_CONCURRENT_REQUESTS), without Accept-Encoding (Triton compresses a reply when asked: a gzip body would
  reach the client labelled application/json), and a Triton that does not answer is a JSON 502.
- `Expect: 100-continue` gets its interim reply before the body is read, as http.server sent it (RFC 9110
  §10.1.1); aiohttp's low-level server leaves it to the handler.
No Triton server: a small HTTP/1.1 server on 127.0.0.1 stands in for Triton's KServe port.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from endpoint_client.front import SageMakerAPI
from endpoint_client.front_async import AsyncFrontServer
from endpoint_client.local_endpoint import LOOPBACK
from endpoint_client.triton_backend import TritonHTTP

REQUEST = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}]}).encode()


@contextlib.contextmanager
def serving_front(api: SageMakerAPI, **limits: float) -> Iterator[AsyncFrontServer]:
    """front_async.py's server on 127.0.0.1 and a free port, served from a thread; always shut down."""
    server = AsyncFrontServer(LOOPBACK, 0, api, **limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _exchange(port: int, raw: bytes, *, half_close: bool = True) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection((LOOPBACK, port), timeout=10) as connection:
        connection.sendall(raw)
        if half_close:
            connection.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert lines[0].startswith("HTTP/1.1 "), lines[0]
    return int(lines[0].split(" ")[1]), headers, body


class _Stub:
    """A stand-in for TritonHTTP: its blocking client runs on the front's worker threads."""

    def request(self, method, path, body=None, headers=None, *, timeout, max_reply_bytes=None):
        return 200, b'{"outputs": []}', {}

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True


class _KServe(ThreadingHTTPServer):
    """Answers POST .../infer with a canned JSON reply on keep-alive HTTP/1.1; records each request's client
    port and headers."""

    daemon_threads = True

    def __init__(self) -> None:
        self.seen: list[tuple[int, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                server.seen.append((self.client_address[1], {k.lower(): v for k, v in self.headers.items()}))
                reply = b'{"model_name": "m", "outputs": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__((LOOPBACK, 0), Handler)


@pytest.fixture
def kserve() -> Iterator[_KServe]:
    server = _KServe()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _post(port: int, body: bytes, extra: str = "") -> bytes:
    head = (
        f"POST /invocations HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
    )
    with socket.create_connection((LOOPBACK, port), timeout=10) as connection:
        connection.sendall(head.encode() + body)
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    return reply


def test_invocations_reuse_keep_alive_connections_to_triton_and_ask_for_no_compression(kserve: _KServe) -> None:
    api = SageMakerAPI(TritonHTTP(kserve.server_address[1]), ping_mode="ready", default_model="m", registry=None)
    with serving_front(api) as server:
        replies = [_post(server.server_address[1], REQUEST) for _ in range(20)]
    assert all(reply.startswith(b"HTTP/1.1 200") and reply.endswith(b'"outputs": []}') for reply in replies)
    assert len(kserve.seen) == 20
    assert len({port for port, _ in kserve.seen}) <= 2, "one connection per request: no keep-alive pool"
    assert all("accept-encoding" not in headers for _, headers in kserve.seen)


def test_a_triton_that_does_not_answer_is_a_json_502() -> None:
    with socket.socket() as closed:
        closed.bind((LOOPBACK, 0))
        port = closed.getsockname()[1]  # nothing listens there
    api = SageMakerAPI(TritonHTTP(port), ping_mode="ready", default_model="m", registry=None)
    with serving_front(api) as server:
        reply = _post(server.server_address[1], REQUEST)
    assert reply.startswith(b"HTTP/1.1 502")
    assert "not answering" in json.loads(reply.partition(b"\r\n\r\n")[2])["error"]


def test_expect_100_continue_gets_the_interim_reply_before_the_body_is_sent() -> None:
    api = SageMakerAPI(_Stub(), ping_mode="ready", default_model="m", registry=None)
    with serving_front(api) as server:
        port = server.server_address[1]
        head = (
            f"POST /invocations HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(REQUEST)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
        )
        with socket.create_connection((LOOPBACK, port), timeout=10) as connection:
            connection.sendall(head.encode())
            assert connection.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"  # the body is not sent yet
            connection.sendall(REQUEST)
            reply = b""
            while chunk := connection.recv(65536):
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b'{"outputs": []}')


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with serving_front(SageMakerAPI(_Stub(), ping_mode="ready", default_model="m", registry=None)) as server:
        yield server.server_address[1]


@pytest.mark.parametrize(
    ("raw", "expected", "message"),
    [
        (b"BREW /ping HTTP/1.1\r\nHost: {host}\r\n\r\n", 405, "BREW"),
        (b"OPTIONS /ping HTTP/1.1\r\nHost: {host}\r\n\r\n", 405, "OPTIONS"),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "HTTP/2"),
        (bytes.fromhex("160301007a0100007603035f") + bytes(60) + b"\r\n", 400, "HTTP/1.1"),
        (b"GET /ping HTTP/1.1 extra\r\n\r\n", 400, "malformed"),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414, "too long"),
        (b"POST /invocations HTTP/1.1\r\nHost: {host}\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400,
         "2 Content-Length headers"),
        (b"POST /invocations HTTP/1.1\r\nHost: {host}\r\nContent-Length: -1\r\n\r\n{}", 400,
         "Content-Length '-1' is not a number"),
        (b"POST /invocations HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\n\r\n{}",
         411, "the request has no Content-Length"),
        (b"POST /invocations HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n{}", 411,
         "chunked bodies are not accepted"),
        (b"POST /invocations HTTP/1.1\r\nHost: evil.example:{port}\r\nContent-Length: 2\r\n\r\n{}", 400,
         "DNS rebinding"),
        (b"GET /ping HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\n\r\n", 400, "the body ended after 0 of 5"),
    ],
)  # fmt: skip
def test_refusals_are_json_with_a_status_line_and_close_the_connection(
    port: int, raw: bytes, expected: int, message: str
) -> None:
    raw = raw.replace(b"{host}", f"{LOOPBACK}:{port}".encode()).replace(b"{port}", str(port).encode())
    status, headers, body = _exchange(port, raw)
    assert status == expected and headers["content-type"] == "application/json", body[:200]
    assert message in json.loads(body)["error"] and headers["connection"] == "close"
    if status == 405:
        assert headers["allow"] == "GET, HEAD, POST, PUT, PATCH, DELETE"


def test_an_idle_connection_is_closed_and_an_overloaded_one_reads_a_drained_503() -> None:
    api = SageMakerAPI(_Stub(), ping_mode="ready", default_model="m", registry=None)
    # The first connection must stay open (idle) while the second is refused: seconds of slack under load.
    with serving_front(api, max_connections=1, max_refusing=1, idle_timeout=2.0) as server:
        port = server.server_address[1]
        with socket.create_connection((LOOPBACK, port), timeout=10) as first:
            first.sendall(f"GET /ping HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\n\r\n".encode())
            assert first.recv(65536).startswith(b"HTTP/1.1 200")  # served, kept alive
            body = REQUEST * 100
            head = (
                f"POST /invocations HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            status, headers, reply = _exchange(port, head.encode() + body, half_close=False)
            assert status == 503 and headers["connection"] == "close" and headers["retry-after"] == "1"
            assert "retry" in json.loads(reply)["error"]
            started = time.monotonic()
            assert first.recv(1) == b""  # idle past the timeout: closed by the server
            assert time.monotonic() - started < 6
