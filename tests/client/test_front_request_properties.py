"""Property tests of the local endpoint's request parser (issue 22 E2): generated and mutated requests.

Oracle: every request gets a clean 4xx refusal (JSON `{"error": ...}` naming what is wrong) or is passed
on to Triton (the stub answers 200); never a 5xx, an exception or a hang (each example has a deadline).
Requests are KServe v2 inference requests (JSON, or binary+json with `json-header-size`), built from valid
ones and then mutated field by field, plus raw bytes and odd Content-Types. Failures hypothesis found are
kept below as `@example` regression cases.

Bounded for `make test`: max_examples and deadline per test (the file runs in well under a minute).
"""

from __future__ import annotations

import json
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import serving_front
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from endpoint_client.front import SageMakerAPI
from endpoint_client.local_endpoint import LOOPBACK
from endpoint_client.model_registry import ModelRegistry
from endpoint_client.request_check import BINARY_MEDIA_TYPE, ELEMENT_BYTES

BOUNDED = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


class StubTriton:
    """Triton's private port: every forwarded request succeeds."""

    def __init__(self) -> None:
        self.calls = 0

    def request(self, method, path, body=None, headers=None, *, timeout, max_reply_bytes=None):
        self.calls += 1
        return 200, b'{"outputs": []}', {}

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True


def answer(body: bytes, content_type: str | None) -> tuple[int, Any, int]:
    triton = StubTriton()
    api = SageMakerAPI(triton, ping_mode="ready", default_model="m", registry=None)
    headers = {"content-type": content_type} if content_type is not None else {}
    reply = api.handle("POST", "/invocations", headers, body)
    return reply.status, json.loads(reply.body) if reply.body else None, triton.calls


def assert_clean(status: int, document: Any, calls: int) -> None:
    assert status < 500, document
    if status == 200:
        assert calls == 1
    else:
        assert 400 <= status < 500 and calls == 0
        assert isinstance(document, dict) and isinstance(document.get("error"), str) and document["error"]


JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUE = st.recursive(
    JSON_LEAF, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
DATATYPES = st.sampled_from([*ELEMENT_BYTES, "fp32", "INT128", ""]) | JSON_LEAF
DIM = st.integers(min_value=0, max_value=4) | st.integers(min_value=-3, max_value=2**64) | JSON_LEAF
SHAPE = st.lists(DIM, max_size=6) | st.lists(st.integers(min_value=2**40, max_value=2**63), min_size=30, max_size=40)


@st.composite
def tensor(draw: st.DrawFn) -> dict[str, Any]:
    """An input entry: valid, or with one field replaced, dropped or added."""
    datatype = draw(st.sampled_from(["FP32", "INT64", "BOOL", "BYTES", "UINT8"]))
    shape = draw(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=3))
    count = 1
    for dim in shape:
        count *= dim
    value = {"FP32": 1.5, "INT64": 7, "BOOL": True, "BYTES": "a", "UINT8": 255}[datatype]
    entry: dict[str, Any] = {"name": draw(st.text(min_size=1, max_size=5)), "datatype": datatype, "shape": shape}
    entry["data"] = [value] * count
    mutation = draw(st.sampled_from(["none", "datatype", "shape", "data", "drop", "add", "parameters"]))
    if mutation == "datatype":
        entry["datatype"] = draw(DATATYPES)
    elif mutation == "shape":
        entry["shape"] = draw(SHAPE | JSON_VALUE)
    elif mutation == "data":
        entry["data"] = draw(JSON_VALUE)
    elif mutation == "drop":
        del entry[draw(st.sampled_from(sorted(entry)))]
    elif mutation == "add":
        entry[draw(st.text(max_size=6))] = draw(JSON_VALUE)
    elif mutation == "parameters":
        entry["parameters"] = draw(
            st.dictionaries(st.sampled_from(["binary_data_size", "shared_memory_region", "x"]), JSON_VALUE, max_size=2)
            | JSON_VALUE
        )
    return entry


@st.composite
def inference_request(draw: st.DrawFn) -> dict[str, Any]:
    document: dict[str, Any] = {"inputs": draw(st.lists(tensor(), min_size=0, max_size=3))}
    if draw(st.booleans()):
        document["outputs"] = draw(st.lists(st.fixed_dictionaries({"name": st.text(max_size=4)}) | JSON_VALUE))
    if draw(st.booleans()):
        document["parameters"] = draw(
            st.dictionaries(st.sampled_from(["timeout", "priority", "sequence_id", "binary_data_output"]), JSON_VALUE)
            | JSON_VALUE
        )
    if draw(st.booleans()):
        document["id"] = draw(JSON_LEAF)
    return document


@BOUNDED
@given(inference_request())
@example({"inputs": [{"name": "X", "datatype": "FP32", "shape": [2**62] * 5000, "data": [1.0]}]})  # C2: math.prod
@example({"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 2], "data": [1.0, None]}]})
@example({"inputs": [{"name": "X", "datatype": "INT64", "shape": [1], "data": [True]}]})
def test_a_json_request_is_refused_cleanly_or_passed_on(document: dict[str, Any]) -> None:
    assert_clean(*answer(json.dumps(document).encode(), "application/json"))


@BOUNDED
@given(inference_request(), st.binary(max_size=64), st.integers(min_value=-5, max_value=5))
def test_a_binary_request_is_refused_cleanly_or_passed_on(document: dict[str, Any], tail: bytes, shift: int) -> None:
    header = json.dumps(document).encode()
    content_type = f"{BINARY_MEDIA_TYPE};json-header-size={len(header) + shift}"
    assert_clean(*answer(header + tail, content_type))


@BOUNDED
@given(
    st.binary(max_size=200) | JSON_VALUE.map(lambda v: json.dumps(v).encode()),
    st.none()
    | st.sampled_from(["application/json", "text/plain", BINARY_MEDIA_TYPE, f"{BINARY_MEDIA_TYPE};json-header-size=3"])
    | st.text(max_size=40),
)
@example(b'{"inputs": [', "application/json")
@example(b"\xff\xfe", "application/json")
@example(b"[" * 100_000 + b"]" * 100_000, "application/json")  # nested too deeply
def test_any_body_and_content_type_is_refused_cleanly_or_passed_on(body: bytes, content_type: str | None) -> None:
    assert_clean(*answer(body, content_type))


MODEL_MANAGEMENT = st.fixed_dictionaries(
    {},
    optional={
        "model_name": st.text(max_size=12) | JSON_LEAF,
        "url": st.sampled_from(["/", "/etc", "../mme", "relative", ""]) | st.text(max_size=12) | JSON_LEAF,
        "extra": JSON_VALUE,
    },
)


@BOUNDED
@given(
    st.sampled_from(["GET", "POST", "DELETE", "PUT", "HEAD"]),
    st.sampled_from(["/models", "/models/", "/models/a.tar.gz", "/models/a/invoke", "/models/%2e%2e", "/x"])
    | st.text(max_size=20).map(lambda t: "/models/" + t),
    MODEL_MANAGEMENT.map(lambda d: json.dumps(d).encode()) | st.binary(max_size=64),
    st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded"]),
)
def test_model_management_is_refused_cleanly(method: str, path: str, body: bytes, content_type: str) -> None:
    """The multi-model routes with nothing staged: every request is a clean 4xx (a GET of the empty listing
    a 200); Triton is never asked to load anything."""
    triton = StubTriton()
    with tempfile.TemporaryDirectory() as folder:
        registry = ModelRegistry(triton, repository=Path(folder) / "repo", staging=Path(folder) / "mme")
        api = SageMakerAPI(triton, ping_mode="live", default_model=None, registry=registry)
        reply = api.handle(method, path, {"content-type": content_type}, body)
        document = json.loads(reply.body) if reply.body else None

        assert reply.status < 500, document
        assert reply.status == 200 or (isinstance(document, dict) and document.get("error"))
        assert registry.listing() == [] and triton.calls == 0


HEADER_VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)


@pytest.fixture(scope="module")
def front_port() -> Iterator[int]:
    """One real front (sockets, threads) on 127.0.0.1 for every example."""
    api = SageMakerAPI(StubTriton(), ping_mode="ready", default_model="m", registry=None)
    with serving_front(api) as server:
        yield server.server_address[1]


@settings(max_examples=100, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "BREW"]),
    st.sampled_from(["/ping", "/invocations", "/models", "/models/a/invoke", "/", "//x", "/ping?x=1", "*"]),
    st.sampled_from(["{port}", "localhost:{port}", "evil.example:{port}", "127.0.0.1", "[::1]:{port}", None]),
    st.sampled_from(["", "0", "5", "-1", "99999999999", "\u00b2", None]) | HEADER_VALUE,
    st.sampled_from(["application/json", "text/plain", None]) | HEADER_VALUE,
    st.binary(max_size=32),
)
def test_a_raw_http_request_gets_a_clean_answer_or_a_closed_connection(
    front_port: int,
    method: str,
    path: str,
    host: str | None,
    length: str | None,
    content_type: str | None,
    body: bytes,
) -> None:
    """The real front with hand-written requests: a status below 500 with a JSON error for every refusal (a
    method it has no handler for is a JSON 405, review L1), or the connection closed; never a hang."""
    port = front_port
    lines = [f"{method} {path} HTTP/1.1"]
    if host is not None:
        lines.append("Host: " + (host.format(port=port) if host != "{port}" else f"127.0.0.1:{port}"))
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    raw = ("\r\n".join([*lines, "Connection: close"]) + "\r\n\r\n").encode("utf-8") + body
    with socket.create_connection((LOOPBACK, port), timeout=10) as connection:
        connection.sendall(raw)
        connection.shutdown(socket.SHUT_WR)  # no more bytes: a declared body longer than sent ends here
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk

    if reply:
        status = int(reply.split(b" ", 2)[1])
        assert status < 500, reply[:300]
        if status >= 400 and method != "HEAD":
            assert b"Content-Type: application/json" in reply and b'"error"' in reply, reply[:300]
