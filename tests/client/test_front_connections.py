"""The local endpoint's front keeps serving whatever a client sends on the connection: a malformed or unknown request
gets a JSON error with a status line (never BaseHTTPRequestHandler's HTML page or no reply), a client that hangs up
or dribbles loses its slot at the whole-request deadline, and nothing leaves a traceback.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from fakes import StubTriton, serving_front
from test_local_endpoint_request_checks import body_of

from endpoint_client import front as front_module
from endpoint_client.front import FrontServer, SageMakerAPI
from endpoint_client.local_endpoint import LOOPBACK

# --- no request is dropped with a traceback ---------------------------------------------------------------------------


@pytest.fixture
def stub_front() -> Iterator[FrontServer]:
    """The real front (sockets, threads) on 127.0.0.1 in front of a stub Triton."""
    with serving_front(SageMakerAPI(StubTriton(), ping_mode="ready", default_model="add_sub", registry=None)) as server:
        yield server


def _with_host(raw: bytes, port: int) -> bytes:
    """The Host header the front requires (issue 22 C3), after the request line, unless one is there."""
    line, _, rest = raw.partition(b"\r\n")
    return raw if b"\r\nhost:" in b"\r\n" + rest.lower() else line + f"\r\nHost: {LOOPBACK}:{port}\r\n".encode() + rest


def send_until_head(port: int, raw: bytes, timeout: float = 10) -> bytes:
    with socket.create_connection((LOOPBACK, port), timeout=timeout) as connection:
        connection.sendall(_with_host(raw, port))
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
            if b"\r\n\r\n" in reply:
                break
        return reply


def test_a_content_length_of_unicode_digits_is_a_400(
    stub_front: FrontServer, capfd: pytest.CaptureFixture[str]
) -> None:
    """'²'.isdigit() is True but int('²') fails: it was a ValueError and no reply."""
    raw = "POST /invocations HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: \u00b2\r\n\r\n"

    reply = send_until_head(stub_front.server_address[1], raw.encode("latin-1"))

    assert reply.startswith(b"HTTP/1.1 400")
    assert "Traceback" not in capfd.readouterr().err


def test_a_client_that_hangs_up_leaves_no_traceback(stub_front: FrontServer, capfd: pytest.CaptureFixture[str]) -> None:
    body = body_of().encode()
    head = f"POST /invocations HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    for _ in range(5):
        connection = socket.create_connection((LOOPBACK, stub_front.server_address[1]))
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        connection.sendall(_with_host(head.encode() + body, stub_front.server_address[1]))
        connection.close()
    time.sleep(0.5)

    assert send_until_head(stub_front.server_address[1], head.encode() + body).startswith(b"HTTP/1.1 200")
    assert "Traceback" not in capfd.readouterr().err


# --- a whole-request deadline -----------------------------------------------------------------------------------------


def test_a_slow_client_loses_its_slot_at_the_request_deadline(
    stub_front: FrontServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 clients each sending a byte every 20 s held every slot; the per-read timeout never fired."""
    # 2.5 s: the good request below must reach the server before the slow one is cut (seconds of slack under load).
    monkeypatch.setattr(front_module, "REQUEST_READ_DEADLINE_SECONDS", 2.5)
    monkeypatch.setattr(stub_front, "slots", threading.BoundedSemaphore(1))
    port = stub_front.server_address[1]
    slow = socket.create_connection((LOOPBACK, port), timeout=10)
    slow.sendall(
        _with_host(
            b"POST /invocations HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", port
        )
    )
    time.sleep(0.3)
    body = body_of().encode()
    good = f"POST /invocations HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    assert send_until_head(port, good.encode() + body).startswith(b"HTTP/1.1 503")  # the slow one holds the slot

    started = time.monotonic()
    with pytest.raises(OSError):  # dribbling until the server cuts the connection
        while time.monotonic() - started < 8:
            slow.sendall(b" ")
            time.sleep(0.2)
            if slow.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                raise ConnectionResetError("closed by the server")
    slow.close()

    assert time.monotonic() - started < 5
    # The server thread that cut the slow client frees its slot as it ends: allow it a moment (bounded).
    deadline = time.monotonic() + 3
    reply = send_until_head(port, good.encode() + body)
    while reply.startswith(b"HTTP/1.1 503") and time.monotonic() < deadline:
        time.sleep(0.1)
        reply = send_until_head(port, good.encode() + body)
    assert reply.startswith(b"HTTP/1.1 200")


# --- the front's own refusals: methods, request lines, framing --------------------------------------------------------


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with serving_front(SageMakerAPI(StubTriton(), ping_mode="ready", default_model="m", registry=None)) as server:
        yield server.server_address[1]


def exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection((LOOPBACK, port), timeout=10) as connection:
        connection.sendall(raw)
        connection.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split(" ")[1]), headers, body


def request(port: int, method: str, extra: str = "") -> bytes:
    return f"{method} /ping HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Connection: close\r\n\r\n".encode()


@pytest.mark.parametrize("method", ["OPTIONS", "TRACE", "CONNECT", "BREW"])
def test_a_method_the_front_has_no_handler_for_is_a_json_405_with_allow(port: int, method: str) -> None:
    """BaseHTTPRequestHandler answered an HTML 501. RFC 9110 §15.5.6: a 405 MUST carry Allow."""
    status, headers, body = exchange(port, request(port, method))
    assert status == 405 and headers["content-type"] == "application/json"
    assert headers["allow"] == "GET, HEAD, POST, PUT, PATCH, DELETE" and headers["connection"] == "close"
    assert method in json.loads(body)["error"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),  # the HTTP/2 connection preface (RFC 9113 §3.4)
        (bytes.fromhex("160301007a0100007603035f") + bytes(60) + b"\r\n", 400),  # a TLS ClientHello's start
        (b"GET /ping HTTP/1.1 extra\r\n\r\n", 400),  # a malformed request line
        (b"GET /ping HTTP/x.y\r\n\r\n", 400),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
    ],
)
def test_requests_the_http_parser_refuses_get_json_with_a_status_line(port: int, raw: bytes, expected: int) -> None:
    """These were BaseHTTPRequestHandler's HTML pages (without a status line where the request
    line was not understood: it answered as HTTP/0.9)."""
    status, headers, body = exchange(port, raw)
    assert status == expected and headers["content-type"] == "application/json", body[:200]
    assert json.loads(body)["error"]


@pytest.mark.parametrize("lengths", [("4", "5"), ("4", "4"), ("0", "4")])
def test_a_request_with_several_content_lengths_is_a_400(port: int, lengths: tuple[str, str]) -> None:
    """RFC 9112 §6.3: differing Content-Length values are an unrecoverable framing error, a 400 and
    the connection closed. RFC 9110 §8.6 allows accepting identical repeats; the front refuses those too (as
    nginx does): no client sends them, and a repeat is a request-smuggling probe."""
    extra = "".join(f"Content-Length: {length}\r\n" for length in lengths) + "Content-Type: application/json\r\n"
    raw = f"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}\r\n{{}}  ".encode()
    status, headers, body = exchange(port, raw)
    assert status == 400 and headers["connection"] == "close"
    assert "2 Content-Length headers" in json.loads(body)["error"]
