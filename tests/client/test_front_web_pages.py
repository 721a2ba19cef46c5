"""What a web page can send the local endpoint's front is refused (issue 22 C3).

- DNS rebinding: a page on a name its owner re-points to 127.0.0.1 talks to the front as its own origin,
  but its requests carry that name in `Host` (RFC 9110 7.2), so the front answers only `localhost` and
  loopback literals with its own port.
- Cross-site posts: a page may send a request to another origin without a CORS preflight only with the
  CORS-safelisted Content-Types `text/plain`, `application/x-www-form-urlencoded` and `multipart/form-data`
  (WHATWG Fetch standard, "CORS-safelisted request-header"); `POST /models` takes `application/json` only.

No Triton: the front runs on 127.0.0.1 and a free port in front of a stub.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from fakes import serving_front

from endpoint_client.front import SageMakerAPI, host_refusal
from endpoint_client.local_endpoint import LOOPBACK
from endpoint_client.model_registry import ModelRegistry


class StubTriton:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def request(self, method, path, body=None, headers=None, *, timeout, max_reply_bytes=None):
        self.calls.append(path)
        return 200, b'{"outputs": []}', {}

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "127.0.0.2:8080", "[::1]:8080", " 127.0.0.1:8080 "],
)
def test_loopback_hosts_with_the_port_are_accepted(host: str) -> None:
    assert host_refusal([host], 8080) is None


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        (["evil.example:8080"], "is not this machine"),
        (["evil.example"], "is not this machine"),
        (["localhost.evil.example:8080"], "is not this machine"),
        (["10.0.0.5:8080"], "is not this machine"),
        (["0.0.0.0:8080"], "is not this machine"),
        (["::1"], "is not this machine"),  # an IPv6 literal needs its brackets
        (["[127.0.0.1]:8080"], "is not this machine"),
        (["127.0.0.1"], "lacks the port: send 127.0.0.1:8080"),
        (["127.0.0.1:9090"], "names another port than this endpoint's, 8080"),
        (["127.0.0.1:08080x"], "names another port"),
        (["[::1"], "is not host[:port]"),
        ([], "send exactly one Host header (got 0)"),
        (["127.0.0.1:8080", "evil.example:8080"], "send exactly one Host header (got 2)"),
    ],
)
def test_other_hosts_are_refused(hosts: list[str], message: str) -> None:
    assert message in (host_refusal(hosts, 8080) or "")


def test_no_port_is_accepted_on_port_80_only() -> None:
    assert host_refusal(["localhost"], 80) is None


def exchange(port: int, head: str, body: bytes = b"") -> tuple[int, dict]:
    with socket.create_connection((LOOPBACK, port), timeout=10) as connection:
        connection.sendall(head.encode() + body)
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    status_line, _, rest = reply.partition(b"\r\n")
    body_text = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(body_text) if body_text else {}


def single_api(triton: StubTriton) -> SageMakerAPI:
    return SageMakerAPI(triton, ping_mode="ready", default_model="add_sub", registry=None)


@pytest.mark.parametrize("path", ["/ping", "/invocations", "/models"])
def test_a_rebound_name_is_refused_on_every_route_before_the_body_is_read(path: str) -> None:
    triton = StubTriton()
    body = json.dumps({"inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": [1.0]}]}).encode()
    with serving_front(single_api(triton)) as server:
        port = server.server_address[1]
        head = (
            f"POST {path} HTTP/1.1\r\nHost: rebound.example:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        status, reply = exchange(port, head, body)
        assert triton.calls == []
        good = head.replace(f"rebound.example:{port}", f"127.0.0.1:{port}")
        if path == "/invocations":
            assert exchange(port, good, body)[0] == 200  # the same request with this machine's name

    assert status == 400 and "DNS rebinding" in reply["error"]


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
    ],
)
def test_model_management_takes_json_only(tmp_path: Path, content_type: str | None) -> None:
    """A page's form or fetch() with a safelisted type reaches the front without a preflight: 415, unread."""
    (tmp_path / "mme" / "m" / "model" / "m").mkdir(parents=True)
    registry = ModelRegistry(StubTriton(), repository=tmp_path / "repo", staging=tmp_path / "mme")
    api = SageMakerAPI(StubTriton(), ping_mode="live", default_model=None, registry=registry)
    body = json.dumps({"model_name": "m", "url": str(tmp_path / "mme" / "m" / "model")}).encode()
    headers = {"content-type": content_type} if content_type else {}

    reply = api.handle("POST", "/models", headers, body)

    assert reply.status == 415
    assert "POST /models takes Content-Type application/json" in json.loads(reply.body)["error"]
    assert not (tmp_path / "repo").exists() and registry.listing() == []


def test_json_with_a_charset_is_accepted_on_model_management(tmp_path: Path) -> None:
    registry = ModelRegistry(StubTriton(), repository=tmp_path / "repo", staging=tmp_path / "mme")
    api = SageMakerAPI(StubTriton(), ping_mode="live", default_model=None, registry=registry)

    reply = api.handle("POST", "/models", {"content-type": "application/json; charset=utf-8"}, b'{"model_name": 1}')

    assert reply.status == 400 and "model_name" in json.loads(reply.body)["error"]  # past the type check
