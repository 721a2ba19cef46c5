"""The local endpoint's SageMaker API (front.py) against a stand-in for Triton's private port.

Statuses follow Triton's SageMaker service (triton-inference-server/server `src/sagemaker_server.cc`,
v2.51.0): /invocations keeps Triton's status; the multi-model invoke path answers any failure with 400,
or 507 when the message reads like running out of memory. Payload limits: botocore's sagemaker-runtime
model types both InvokeEndpoint's request and reply Body as BodyBlob (max 6291456 bytes).
"""

from __future__ import annotations

import json
from pathlib import Path

from endpoint_client.front import Reply, SageMakerAPI
from endpoint_client.limits import MAX_PAYLOAD_BYTES
from endpoint_client.model_registry import LoadedModel, ModelRegistry
from endpoint_client.triton_backend import ReplyTooLarge

REQUEST = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}]}).encode()
JSON = {"content-type": "application/json"}


class StubTriton:
    """Answers every request with one canned reply and records what it was asked."""

    def __init__(self, status: int = 200, body: bytes = b'{"outputs": []}', headers: dict | None = None) -> None:
        self.reply = (status, body, headers or {})
        self.calls: list[tuple[str, str, dict]] = []

    def request(self, method: str, path: str, body=None, headers=None, *, timeout: float, max_reply_bytes=None):
        self.calls.append((method, path, dict(headers or {})))
        if max_reply_bytes is not None and len(self.reply[1]) > max_reply_bytes:
            raise ReplyTooLarge(len(self.reply[1]))  # as TritonHTTP does, from the Content-Length
        return self.reply

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True


def single(triton: StubTriton) -> SageMakerAPI:
    return SageMakerAPI(triton, ping_mode="ready", default_model="add_sub", registry=None)


def multi(triton: StubTriton, tmp_path: Path) -> SageMakerAPI:
    registry = ModelRegistry(triton, repository=tmp_path / "repo", staging=tmp_path / "mme")
    registry.models["m.tar.gz"] = LoadedModel("m.tar.gz", str(tmp_path / "mme" / "m"), ("m.tar.gz",))
    return SageMakerAPI(triton, ping_mode="live", default_model=None, registry=registry)


def test_binary_requests_and_replies_are_translated_to_and_from_kserve() -> None:
    header = REQUEST
    triton = StubTriton(headers={"inference-header-content-length": "42"})

    reply = single(triton).handle(
        "POST", "/invocations",
        {"content-type": f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}"},
        header,
    )  # fmt: skip

    assert reply.status == 200
    assert reply.content_type == "application/vnd.sagemaker-triton.binary+json;json-header-size=42"
    method, path, headers = triton.calls[0]
    assert (method, path) == ("POST", "/v2/models/add_sub/infer")
    assert headers["Inference-Header-Content-Length"] == str(len(header))


def test_invocations_keep_tritons_status_on_a_single_model_endpoint() -> None:
    reply = single(StubTriton(500, b'{"error": "boom"}')).handle("POST", "/invocations", JSON, REQUEST)

    assert (reply.status, json.loads(reply.body)) == (500, {"error": "boom"})


def test_multi_model_invocations_answer_400_or_507_like_tritons_sagemaker_service(tmp_path: Path) -> None:
    failed = multi(StubTriton(500, b'{"error": "boom"}'), tmp_path).handle(
        "POST", "/models/m.tar.gz/invoke", JSON, REQUEST
    )
    out_of_memory = multi(StubTriton(500, b'{"error": "CUDA out of memory"}'), tmp_path).handle(
        "POST", "/models/m.tar.gz/invoke", JSON, REQUEST
    )
    unknown = multi(StubTriton(), tmp_path).handle("POST", "/models/other.tar.gz/invoke", JSON, REQUEST)

    assert (failed.status, out_of_memory.status, unknown.status) == (400, 507, 404)


def test_a_reply_over_the_payload_limit_is_an_error() -> None:
    reply = single(StubTriton(200, b"x" * (MAX_PAYLOAD_BYTES + 1))).handle("POST", "/invocations", JSON, REQUEST)

    assert reply.status == 500
    assert f"SageMaker real-time endpoints return at most {MAX_PAYLOAD_BYTES} bytes" in json.loads(reply.body)["error"]


def test_a_refused_request_never_reaches_triton() -> None:
    triton = StubTriton()

    reply = single(triton).handle("POST", "/invocations", JSON, b'{"inputs": [')

    assert reply.status == 400
    assert triton.calls == []


def test_control_bodies_are_small_invocation_bodies_are_sagemaker_sized(tmp_path: Path) -> None:
    api = multi(StubTriton(), tmp_path)

    assert api.body_limit("POST", "/models") == 64 * 1024
    assert api.body_limit("POST", "/models/m.tar.gz/invoke") == MAX_PAYLOAD_BYTES
    assert api.body_limit("POST", "/invocations") == MAX_PAYLOAD_BYTES


def test_replies_leave_without_waiting_for_an_ack() -> None:
    """Issue #24: with Nagle's algorithm on, a reply body written after its headers waited for the client's
    delayed ACK (~40 ms per request; bench/front_overhead.py measured 45.8 ms against Triton's 2.2 ms). The
    handler sets TCP_NODELAY (socketserver.StreamRequestHandler.disable_nagle_algorithm) and writes headers
    and body in one write."""
    import socket as socket_module

    from endpoint_client.front import _Handler

    assert _Handler.disable_nagle_algorithm is True
    writes: list[bytes] = []

    class _Recorder:
        def write(self, data: bytes) -> int:
            writes.append(bytes(data))
            return len(data)

        def flush(self) -> None:
            pass

    handler = _Handler.__new__(_Handler)
    handler.wfile, handler.request_version, handler.command = _Recorder(), "HTTP/1.1", "POST"
    handler.requestline, handler.client_address = "POST /invocations HTTP/1.1", ("127.0.0.1", 1)
    handler.request = socket_module.socket()
    try:
        handler._send(Reply(200, b'{"ok": true}', "application/json"))
    finally:
        handler.request.close()
    assert len(writes) == 1 and writes[0].startswith(b"HTTP/1.1 200") and writes[0].endswith(b'{"ok": true}')
