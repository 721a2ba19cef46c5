"""Hostile review of the local endpoint's front, second round: M7 (an ensemble archive loaded under one of its
step names; any failure of the endpoint itself is a 5xx answer, never a dropped connection) and LOW11 (bounded
connections, a raised listen backlog, idle keep-alive connections closed, 503s that arrive as 503s, not resets).

No Triton server: the front runs on 127.0.0.1 and a free port in front of stubs; every loop is bounded in
count and time. The end-to-end case of M7 (the example ensemble archive on the real local Triton) is in
test_image_example.py. The connection limits are endpoint_client/limits.py's (MAX_CONNECTIONS,
MAX_REFUSING_CONNECTIONS, LISTEN_BACKLOG, IDLE_CONNECTION_TIMEOUT_SECONDS), passed smaller here so the tests
stay short; the reviewer's scale (400 idle connections, 80 concurrent 256 KB clients) was run once by hand.
"""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from fakes import serving_front

from endpoint_client import model_registry as registry_module
from endpoint_client.front import FrontServer, SageMakerAPI
from endpoint_client.limits import LISTEN_BACKLOG, MAX_CONNECTIONS
from endpoint_client.local_endpoint import LOOPBACK
from endpoint_client.model_registry import ModelRegistry

REPO_ROOT = Path(__file__).resolve().parents[2]
MODELS = REPO_ROOT / "examples" / "models"
IMAGE_PIPELINE = ("image_classifier", "image_preprocess", "image_cnn", "image_postprocess")
JSON = {"content-type": "application/json"}


class StubTriton:
    """Stands in for Triton's private port: health, inference (optionally slow) and the repository index, where
    a model is READY as soon as its folder is in `repository` (as if Triton's poll ran at once)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: list[str] = []
        self.repository: Path | None = None

    def request(self, method, path, body=None, headers=None, *, timeout, max_reply_bytes=None):
        self.calls.append(path)
        time.sleep(self.delay)
        return 200, b'{"outputs": []}', {}

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True

    def model_state(self, model: str, *, timeout: float = 10.0) -> tuple[str, str] | None:
        self.calls.append(f"state {model}")
        return ("READY", "") if self.model_ready(model) else None

    def model_ready(self, model: str, *, timeout: float = 10.0) -> bool:
        return self.repository is not None and (self.repository / model).is_dir()


def exchange(port: int, raw: bytes, timeout: float = 20, *, head_first: bool = False) -> bytes:
    """Send `raw`, read until the server closes or the whole reply (by Content-Length) is in. `head_first`:
    the headers, a pause, then the body in pieces, as a client whose body is still on its way."""
    raw = raw.replace(b"\r\nHost: x\r\n", f"\r\nHost: {LOOPBACK}:{port}\r\n".encode(), 1)  # what the front requires
    with socket.create_connection((LOOPBACK, port), timeout=timeout) as connection:
        if head_first:
            head, _, body = raw.partition(b"\r\n\r\n")
            connection.sendall(head + b"\r\n\r\n")
            time.sleep(0.1)
            for start in range(0, len(body), 64 * 1024):
                connection.sendall(body[start : start + 64 * 1024])
        else:
            connection.sendall(raw)
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
            head, separator, body = reply.partition(b"\r\n\r\n")
            if separator:
                lengths = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
                if lengths and len(body) >= int(lengths[0].split(b":")[1]):
                    break
        return reply


def post(path: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def status_of(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def body_of(reply: bytes) -> dict:
    return json.loads(reply.partition(b"\r\n\r\n")[2])


# --- M7: an ensemble archive loaded under one of its step names ----------------------------------------------


def stage_image_pipeline(staging: Path) -> Path:
    """The example ensemble's model folders (configs only), as `load_model` extracts its archive."""
    folder = staging / "image_preprocess" / "model"
    for model in IMAGE_PIPELINE:
        (folder / model / "1").mkdir(parents=True)
        shutil.copyfile(MODELS / model / "config.pbtxt", folder / model / "config.pbtxt")
    return folder


def multi_model_api(tmp_path: Path, triton: StubTriton) -> SageMakerAPI:
    registry = ModelRegistry(triton, repository=tmp_path / "repo", staging=tmp_path / "mme")
    registry.repository.mkdir()
    triton.repository = registry.repository
    return SageMakerAPI(triton, ping_mode="live", default_model=None, registry=registry)


@pytest.mark.parametrize("step", ["image_preprocess", "image_cnn", "image_postprocess"])
def test_an_ensemble_loaded_under_a_step_name_is_a_409_naming_the_clash_and_nothing_is_copied(
    tmp_path: Path, step: str
) -> None:
    """It was a FileExistsError in the server thread and a dropped connection (curl rc 52)."""
    triton = StubTriton()
    api = multi_model_api(tmp_path, triton)
    folder = stage_image_pipeline(tmp_path / "mme")

    reply = api.handle("POST", "/models", JSON, json.dumps({"model_name": step, "url": str(folder)}).encode())

    assert reply.status == 409
    message = json.loads(reply.body)["error"]
    assert f"model_name {step!r} is also the name of a step of the archive's ensemble 'image_classifier'" in message
    assert "load the archive under another name (e.g. image_classifier.tar.gz)" in message
    assert list((tmp_path / "repo").iterdir()) == [] and triton.calls == []
    assert api.registry.listing() == []


def test_the_same_archive_loads_under_a_name_of_its_own(tmp_path: Path) -> None:
    triton = StubTriton()
    api = multi_model_api(tmp_path, triton)
    folder = stage_image_pipeline(tmp_path / "mme")

    reply = api.handle(
        "POST", "/models", JSON, json.dumps({"model_name": "image_classifier.tar.gz", "url": str(folder)}).encode()
    )

    assert reply.status == 200
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == sorted(
        ["image_classifier.tar.gz", *IMAGE_PIPELINE[1:]]
    )
    assert triton.calls == ["state image_classifier.tar.gz"]  # loaded by its rename into the polled repository


def test_a_step_named_in_the_ensemble_config_but_absent_from_the_archive_clashes_too(tmp_path: Path) -> None:
    """An archive of the ensemble alone (its steps loaded from elsewhere): served under a step's name, the
    ensemble would run itself as that step."""
    api = multi_model_api(tmp_path, StubTriton())
    folder = tmp_path / "mme" / "x" / "model"
    (folder / "image_classifier" / "1").mkdir(parents=True)
    shutil.copyfile(MODELS / "image_classifier" / "config.pbtxt", folder / "image_classifier" / "config.pbtxt")

    reply = api.handle("POST", "/models", JSON, json.dumps({"model_name": "image_cnn", "url": str(folder)}).encode())

    assert reply.status == 409 and "'image_cnn'" in json.loads(reply.body)["error"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (FileExistsError(errno.EEXIST, "File exists", "/tmp/x/tmp-sagemaker/m"), "FileExistsError: File exists: /tmp"),
        (OSError(errno.ENOSPC, "No space left on device"), "OSError: No space left on device"),
        (RuntimeError("something unforeseen"), "RuntimeError: something unforeseen"),
    ],
)
def test_an_error_while_loading_is_a_500_with_a_message_never_a_dropped_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, expected: str
) -> None:
    """SageMakerAPI.handle turns what a load raises into a JSON 5xx on the same connection; the copies it made
    are removed; the front keeps serving."""

    def failing_copy(source: Path, target: Path) -> None:
        Path(target).mkdir()
        raise error

    monkeypatch.setattr(registry_module.shutil, "copytree", failing_copy)
    api = multi_model_api(tmp_path, StubTriton())
    folder = stage_image_pipeline(tmp_path / "mme")
    load = json.dumps({"model_name": "image_classifier.tar.gz", "url": str(folder)}).encode()

    with serving_front(api) as server:
        port = server.server_address[1]
        reply = exchange(port, post("/models", load))
        assert status_of(reply) == 500, reply
        message = body_of(reply)["error"]
        assert message.startswith("POST /models failed on the local endpoint: ") and expected in message
        assert status_of(exchange(port, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")) == 200
    assert list((tmp_path / "repo").iterdir()) == []


# --- LOW11: the front's connections -----------------------------------------------------------------------------


def uint8_request(elements: int) -> bytes:
    """A valid KServe JSON request of about 2 bytes per element."""
    data = ",".join(["0"] * elements)
    return f'{{"inputs":[{{"name":"x","datatype":"UINT8","shape":[{elements}],"data":[{data}]}}]}}'.encode()


def test_the_limits_are_documented_and_the_backlog_is_raised() -> None:
    page = (REPO_ROOT / "docs" / "client-and-local-endpoint.md").read_text()
    assert f"more than {MAX_CONNECTIONS} connections at once" in page
    assert FrontServer.request_queue_size == LISTEN_BACKLOG >= 1024


def test_idle_connections_are_bounded_in_threads_and_closed_after_the_idle_timeout() -> None:
    """The reviewer's 400 idle connections held 392 threads for 30 s and took 53 s to open (backlog 5).
    Scaled down: 60 idle connections to a front that serves 8 (and refuses 4 more) at a time."""
    api = SageMakerAPI(StubTriton(), ping_mode="ready", default_model="m", registry=None)
    baseline = threading.active_count()
    with serving_front(api, max_connections=8, max_refusing=4, idle_timeout=1.0) as server:
        port = server.server_address[1]
        started = time.monotonic()
        clients = [socket.create_connection((LOOPBACK, port), timeout=5) for _ in range(60)]
        opened = time.monotonic() - started
        try:
            most_threads = 0
            closed: set[int] = set()
            deadline = time.monotonic() + 30
            while len(closed) < len(clients) and time.monotonic() < deadline:
                most_threads = max(most_threads, threading.active_count() - baseline)
                for index, client in enumerate(clients):
                    if index not in closed:
                        with contextlib.suppress(BlockingIOError):
                            if client.recv(1, socket.MSG_DONTWAIT) == b"":
                                closed.add(index)  # the server closed it: idle past the timeout
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()
    assert opened < 5, f"opening 60 connections took {opened:.1f} s"
    assert len(closed) == 60, f"{60 - len(closed)} idle connections still open after 30 s"
    assert most_threads <= 1 + 8 + 4 + 2, most_threads  # serve_forever, 8 served, 4 refusing, slack


def test_an_idle_keep_alive_connection_is_closed_and_a_busy_one_is_not() -> None:
    api = SageMakerAPI(StubTriton(), ping_mode="ready", default_model="m", registry=None)
    with (
        serving_front(api, idle_timeout=1.5) as server,
        socket.create_connection(server.server_address, timeout=10) as client,
    ):
        ping = f"GET /ping HTTP/1.1\r\nHost: {LOOPBACK}:{server.server_address[1]}\r\n\r\n".encode()
        for _ in range(4):  # requests closer together than the timeout keep the connection (1.2 s of slack)
            client.sendall(ping)
            assert client.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(0.3)
        started = time.monotonic()
        assert client.recv(1) == b""  # then idle: closed by the server
        assert 0.5 < time.monotonic() - started < 6


@pytest.mark.parametrize("overload", ["connections", "requests"])
def test_overloaded_clients_read_a_503_with_connection_close_never_a_reset(
    overload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """80 clients at once, each sending a 256 KB body: 19 got ConnectionResetError, the 503 sent without
    reading their body. Beyond the connection or request limit each now reads a 503 (body drained first)."""
    api = SageMakerAPI(StubTriton(delay=0.3), ping_mode="ready", default_model="m", registry=None)
    limits = {"max_connections": 4, "max_refusing": 2} if overload == "connections" else {}
    raw = post("/invocations", uint8_request(128 * 1024))
    assert len(raw) > 256 * 1024
    results: list[bytes | BaseException] = []

    def client() -> None:
        try:
            results.append(exchange(port, raw, timeout=30, head_first=True))
        except OSError as error:
            results.append(error)

    with serving_front(api, **limits) as server:
        port = server.server_address[1]
        if overload == "requests":
            monkeypatch.setattr(server, "slots", threading.BoundedSemaphore(4))
        threads = [threading.Thread(target=client) for _ in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads)

    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == [], errors[:3]
    statuses = [status_of(reply) for reply in results]
    assert set(statuses) == {200, 503} and statuses.count(200) >= 4
    for reply in results:
        if status_of(reply) == 503:
            head = reply.partition(b"\r\n\r\n")[0].lower()
            assert b"connection: close" in head and b"retry-after: 1" in head
            assert "retry" in body_of(reply)["error"]
