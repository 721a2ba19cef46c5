"""Regression tests for the hostile review of the local endpoint and `invoke` (findings 1-13).

Limits come from what AWS publishes: InvokeEndpoint's request and reply Body are botocore's
sagemaker-runtime `BodyBlob` (max 6291456 bytes), a TargetModel is `TargetModelHeader` (1-1024,
pattern \\A\\S[\\p{Print}]*\\z), and a container must answer within 60 s (InvokeEndpoint API
reference). Triton's behaviour (500s on mistyped parameters, the first of two repeated keys read) was
measured against tritonserver 2.51 (.venv-triton) by the reviewer's scripts and again here.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import socket
import struct
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from fakes import serving_front

from endpoint_client import front as front_module
from endpoint_client import local_endpoint as local_module
from endpoint_client import model_registry as registry_module
from endpoint_client.cli import main, save_outputs
from endpoint_client.client import EndpointClient
from endpoint_client.codec import EncodedRequest
from endpoint_client.errors import EndpointClientError, EndpointError, InvalidInputError, LocalEndpointError
from endpoint_client.front import FrontServer, SageMakerAPI
from endpoint_client.inputs import inputs_from_v2_json, load_array_file, load_raw_file, parse_tensor_spec
from endpoint_client.limits import MAX_PAYLOAD_BYTES
from endpoint_client.local_endpoint import LOOPBACK, LocalEndpoint, extract_archive, free_port
from endpoint_client.model_registry import LoadedModel, ModelRegistry
from endpoint_client.presets import load_image
from endpoint_client.request_check import RequestRefused, check_invocation
from endpoint_client.sagemaker_serve import serve_plan
from endpoint_client.transport import LocalTransport, Reply, SageMakerTransport, http_request
from endpoint_client.triton_backend import ReplyTooLarge, TritonHTTP

JSON = {"content-type": "application/json"}
GOOD_INPUT = {"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
INPUT1 = '{"name":"INPUT1","datatype":"FP32","shape":[1,4],"data":[1,1,1,1]}'
# The reviewer's 170-byte attack (t2.py): Python's json keeps the last "shape", Triton reads the first.
REPEATED_SHAPE = (
    '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,100000000],"shape":[1,4],"data":[1,2,3,4]},'
    + INPUT1
    + "]}"
)
REPEATED_INPUTS = (
    '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,100000000],"data":[1,2,3,4]},' + INPUT1 + "],"
    '"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},' + INPUT1 + "]}"
)


class StubTriton:
    """Stands in for Triton's private port: one canned reply, a record of every call."""

    def __init__(self, status: int = 200, body: bytes = b'{"outputs": []}') -> None:
        self.reply = (status, body, {})
        self.calls: list[str] = []

    def request(self, method, path, body=None, headers=None, *, timeout, max_reply_bytes=None):
        self.calls.append(path)
        return self.reply

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True


def refused(body: str | bytes, content_type: str = "application/json") -> RequestRefused:
    with pytest.raises(RequestRefused) as raised:
        check_invocation(body.encode() if isinstance(body, str) else body, content_type)
    return raised.value


def multi_api(triton: StubTriton, tmp_path: Path) -> SageMakerAPI:
    registry = ModelRegistry(triton, repository=tmp_path / "repo", staging=tmp_path / "mme")
    registry.models["add_sub.tar.gz"] = LoadedModel("add_sub.tar.gz", str(tmp_path), ("add_sub.tar.gz",))
    return SageMakerAPI(triton, ping_mode="live", default_model=None, registry=registry)


# --- 1 (HIGH): a repeated JSON key -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (REPEATED_SHAPE, "shape"),
        (REPEATED_INPUTS, "inputs"),
        ('{"inputs":[' + INPUT1 + '],"parameters":{"timeout":1,"timeout":2}}', "timeout"),
        ('{"inputs":[{"name":"INPUT1","name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]}', "name"),
        ('{"inputs":[' + INPUT1 + '],"outputs":[{"name":"A","parameters":{"x":{"y":1,"y":2}}}]}', "y"),
    ],
)
def test_a_repeated_key_at_any_level_is_refused(body: str, key: str) -> None:
    """Python's json keeps a repeated key's last value and Triton's reader its first, so the size check
    saw shape [1,4] while Triton allocated [1,100000000] (review finding 1: Triton grew 32 -> 414 MB)."""
    error = refused(body)

    assert error.status == 400
    assert f"the key {key!r} appears twice in one object" in error.message


def test_a_repeated_key_is_refused_in_a_binary_header_and_on_the_multi_model_route(tmp_path: Path) -> None:
    header = REPEATED_SHAPE.encode()
    binary = f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}"
    assert refused(header, binary).status == 400

    triton = StubTriton()
    reply = multi_api(triton, tmp_path).handle("POST", "/models/add_sub.tar.gz/invoke", JSON, REPEATED_SHAPE.encode())
    control = multi_api(triton, tmp_path).handle(
        "POST", "/models", JSON, b'{"model_name":"a","model_name":"b","url":"/x"}'
    )

    assert reply.status == 400 and "'shape' appears twice" in json.loads(reply.body)["error"]
    assert control.status == 400 and "'model_name' appears twice" in json.loads(control.body)["error"]
    assert triton.calls == []  # Triton never saw either


@pytest.mark.triton
@pytest.mark.parametrize("body", [REPEATED_SHAPE, REPEATED_INPUTS])
def test_the_live_endpoint_answers_repeated_keys_with_400(single_endpoint: LocalEndpoint, body: str) -> None:
    status, reply, _ = http_request(
        "POST", single_endpoint.url + "/invocations", body.encode(), {"Content-Type": "application/json"}, 30
    )

    assert status == 400
    assert "appears twice" in json.loads(reply)["error"]


# --- 2 (MEDIUM): gRPC loads no model ------------------------------------------------------------------------


@pytest.mark.triton
def test_grpc_load_model_with_inline_files_is_refused(triton_env: Path, add_sub_archive: Path, tmp_path: Path) -> None:
    """With SAGEMAKER_TRITON_ALLOW_GRPC=true, gRPC's load_model took a config and an inline model.py from
    any local process and ran it (review finding 2). Triton's `--grpc-restricted-protocol` (tritonserver
    --help, 2.51: `<protocols>:<key>=<value>`) locks the model-repository protocol with a value no gRPC
    metadata can carry (issue 22 C1: no secret on the command line)."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    grpc_port = free_port()
    marker = tmp_path / "ran"
    config = json.dumps({"name": "pwn", "backend": "python", "max_batch_size": 0})
    code = f"open({str(marker)!r}, 'w').write('x')\nclass TritonPythonModel:\n    pass\n".encode()
    endpoint = LocalEndpoint(
        add_sub_archive,
        environment={
            "SAGEMAKER_TRITON_ALLOW_GRPC": "true",
            "SAGEMAKER_TRITON_GRPC_PORT": str(grpc_port),
            "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
        },
        triton_env=triton_env,
        workdir=tmp_path / "work",
        startup_timeout=60,
    )
    try:
        endpoint.start()
        client = grpcclient.InferenceServerClient(f"{LOOPBACK}:{grpc_port}")
        with pytest.raises(Exception, match="This protocol is restricted"):
            client.load_model("pwn", config=config, files={"file:1/model.py": code})
        with pytest.raises(Exception, match="This protocol is restricted"):
            client.get_model_repository_index()
    finally:
        endpoint.stop()
    assert not marker.exists()


# --- 3 (MEDIUM): output names cannot leave --save-dir ----------------------------------------------------


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/absolute", "a/b", "..", ".", "a\\b", "nul\x00"])
def test_an_output_name_that_is_not_a_file_name_is_refused(tmp_path: Path, name: str) -> None:
    save_dir = tmp_path / "save" / "here"
    outputs = {"fine": np.zeros(1, np.float32), name: np.ones(1, np.float32)}

    with pytest.raises(InvalidInputError, match="is not a plain file name; nothing was saved"):
        save_outputs(outputs, save_dir)

    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == []


@pytest.fixture
def fake_endpoint() -> Iterator[callable]:
    """A server on 127.0.0.1 that answers every POST with a body of our choosing (a hostile endpoint)."""
    servers: list[ThreadingHTTPServer] = []

    def start(body: bytes, content_type: str = "application/json", length: int | None = None) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client stopped reading, as it should
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://{LOOPBACK}:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_invoke_does_not_write_outside_save_dir(
    fake_endpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reviewer's fake.py `traverse` reply, through the CLI."""
    outputs = [{"name": n, "datatype": "FP32", "shape": [1], "data": [1.0]} for n in ("../escaped", "/tmp/x/abs")]
    url = fake_endpoint(json.dumps({"outputs": outputs}).encode())
    save_dir = tmp_path / "save"

    code = main(["invoke", "--url", url, "--tensor", "A=FP32:1:1", "--encoding", "json", "--save-dir", str(save_dir)])

    assert code == 1
    assert "output named '../escaped', which is not a plain file name" in capsys.readouterr().err
    assert not (tmp_path / "escaped.npy").exists() and list(save_dir.iterdir()) == []


# --- 4 (MEDIUM): requests Triton answers with 500 get a 400 first ---------------------------------------


def _request(entry: dict | None = None, **top: object) -> str:
    return json.dumps({"inputs": [entry or GOOD_INPUT], **top})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_request(parameters={"binary_data_output": "yes"}), "'binary_data_output' must be true or false"),
        (_request(outputs=[{"name": "O", "parameters": {"binary_data": "yes"}}]), "'binary_data' must be true"),
        (_request(outputs=[{"name": "O", "parameters": {"classification": -5}}]), "'classification' must be a whole"),
        (_request(parameters={"timeout": -1}), "'timeout' must be a whole number >= 0"),
        (_request(parameters={"priority": "high"}), "'priority' must be a whole number >= 0"),
        (_request(parameters={"sequence_start": "x"}), "'sequence_start' must be true or false"),
        (_request(parameters={"sequence_id": -1}), "'sequence_id' must be a whole number >= 0 or a string"),
        (_request(id=5), "'id' must be a string"),
        (_request(dict(GOOD_INPUT, datatype="INT64", data=[2**63, 1, 1, 1])), "holds 9223372036854775808, not a"),
        (_request(dict(GOOD_INPUT, datatype="UINT64", data=[-1, 1, 1, 1])), "holds -1, not a UINT64 value"),
        (_request(dict(GOOD_INPUT, datatype="INT8", data=[300, 1, 1, 1])), "holds 300, not a INT8 value"),
        (_request(dict(GOOD_INPUT, shape=[0, 2**64 + 1], data=[])), "is over 2^63-1"),
        ('{"inputs":[{"name":"I","datatype":"FP32","shape":[1],"data":[1e999]}]}', "too large for a double"),
        ('{"inputs":[{"name":"I","datatype":"FP32","shape":[1],"data":[NaN]}]}', "NaN is not JSON"),
        (_request(dict(GOOD_INPUT, datatype=[])), "unknown datatype"),  # finding 7: was a TypeError
        (_request(dict(GOOD_INPUT, datatype={})), "unknown datatype"),
    ],
)
def test_what_triton_answers_with_500_is_refused_with_400(body: str, message: str) -> None:
    """Each of these got a 500 from tritonserver 2.51 (e.g. "Unable to parse 'timeout': attempt to access
    JSON non-unsigned-integer as unsigned-integer", src/http_server.cc); on SageMaker a 5XX counts as the
    model's failure (Invocation5XXErrors), so the front answers 400 with what is wrong."""
    error = refused(body)

    assert error.status == 400
    assert message in error.message


def test_the_types_triton_accepts_still_pass() -> None:
    body = _request(
        parameters={"timeout": 2**64 - 1, "sequence_id": "abc", "sequence_start": True, "priority": 0},
        id="request-1",
        outputs=[{"name": "O", "parameters": {"binary_data": False, "classification": 2}}],
    )

    assert check_invocation(body.encode(), "application/json") is None


def test_a_triton_json_parse_500_becomes_a_400() -> None:
    """A parse error Triton reports as 500 that the check does not know yet is still the request's fault."""
    triton = StubTriton(500, b'{"error":"Unable to parse \'x\': attempt to access JSON non-boolean as boolean"}')
    api = SageMakerAPI(triton, ping_mode="ready", default_model="add_sub", registry=None)

    assert api.handle("POST", "/invocations", JSON, _request().encode()).status == 400
    other = SageMakerAPI(StubTriton(500, b'{"error":"boom"}'), ping_mode="ready", default_model="m", registry=None)
    assert other.handle("POST", "/invocations", JSON, _request().encode()).status == 500


# --- 6 (MEDIUM): images are bounded before they are decoded -----------------------------------------------


def _ppm(path: Path, width: int, height: int) -> Path:
    path.write_bytes(f"P6 {width} {height} 255\n".encode() + bytes(width * height * 3))
    return path


def test_a_thin_or_empty_or_huge_image_is_refused(tmp_path: Path) -> None:
    """A 6 KB 2000x1 PPM made resnet50's preset allocate 7.7 GB (short side scaled to 256)."""
    with pytest.raises(InvalidInputError, match="its long side may be at most 20 times its short side"):
        load_image(_ppm(tmp_path / "wide.ppm", 2000, 1))
    with pytest.raises(InvalidInputError, match="it has no pixels"):
        load_image(_ppm(tmp_path / "zero.ppm", 0, 0))
    (tmp_path / "huge.ppm").write_bytes(b"P6 100000 100000 255\n" + bytes(30))
    with pytest.raises(InvalidInputError, match="at most 25000000 pixels"):
        load_image(tmp_path / "huge.ppm")
    np.save(tmp_path / "thin.npy", np.zeros((1, 100000, 3), np.uint8))
    with pytest.raises(InvalidInputError, match="at most 20 times"):
        load_image(tmp_path / "thin.npy")

    assert load_image(_ppm(tmp_path / "ok.ppm", 64, 48)).shape == (48, 64, 3)


def test_a_zero_by_zero_image_is_an_error_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = _ppm(tmp_path / "z.ppm", 0, 0)

    code = main(["invoke", "--url", "http://127.0.0.1:1", "--preset", "resnet50", "--image", str(image)])

    assert code == 1 and "ERROR: image" in capsys.readouterr().err


# --- 7 (LOW): no request is dropped with a traceback ------------------------------------------------------


@pytest.fixture
def stub_front() -> Iterator[FrontServer]:
    """The real front (sockets, threads) on 127.0.0.1 in front of a stub Triton."""
    with serving_front(SageMakerAPI(StubTriton(), ping_mode="ready", default_model="add_sub", registry=None)) as server:
        yield server


def _with_host(raw: bytes, port: int) -> bytes:
    """The Host header the front requires (issue 22 C3), after the request line, unless one is there."""
    line, _, rest = raw.partition(b"\r\n")
    return raw if b"\r\nhost:" in b"\r\n" + rest.lower() else line + f"\r\nHost: {LOOPBACK}:{port}\r\n".encode() + rest


def _exchange(port: int, raw: bytes, timeout: float = 10) -> bytes:
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

    reply = _exchange(stub_front.server_address[1], raw.encode("latin-1"))

    assert reply.startswith(b"HTTP/1.1 400")
    assert "Traceback" not in capfd.readouterr().err


def test_a_client_that_hangs_up_leaves_no_traceback(stub_front: FrontServer, capfd: pytest.CaptureFixture[str]) -> None:
    body = _request().encode()
    head = f"POST /invocations HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    for _ in range(5):
        connection = socket.create_connection((LOOPBACK, stub_front.server_address[1]))
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        connection.sendall(_with_host(head.encode() + body, stub_front.server_address[1]))
        connection.close()
    time.sleep(0.5)

    assert _exchange(stub_front.server_address[1], head.encode() + body).startswith(b"HTTP/1.1 200")
    assert "Traceback" not in capfd.readouterr().err


# --- 8 (LOW): --model-name stays inside the archive ----------------------------------------------------------


@pytest.mark.parametrize("name", ["../../../tmp/x/trav", "/tmp/x/trav", "..", "a/b"])
def test_a_model_name_outside_the_archive_is_refused(tmp_path: Path, name: str) -> None:
    repository = tmp_path / "opt-ml-model"
    (repository / "add_sub").mkdir(parents=True)
    (tmp_path / "x" / "trav").mkdir(parents=True)  # a real folder the name would reach

    with pytest.raises(LocalEndpointError, match="must name a model folder at the top of the archive"):
        serve_plan(
            {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": name},
            model_repository=repository,
            multi_model_repository=tmp_path / "mme",
        )


# --- 9 (LOW): a whole-request deadline ------------------------------------------------------------------------


def test_a_slow_client_loses_its_slot_at_the_request_deadline(
    stub_front: FrontServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """t3.py: 64 clients each sending a byte every 20 s held every slot; the per-read timeout never fired."""
    monkeypatch.setattr(front_module, "REQUEST_READ_DEADLINE_SECONDS", 1.0)
    monkeypatch.setattr(stub_front, "slots", threading.BoundedSemaphore(1))
    port = stub_front.server_address[1]
    slow = socket.create_connection((LOOPBACK, port), timeout=10)
    slow.sendall(
        _with_host(
            b"POST /invocations HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", port
        )
    )
    time.sleep(0.3)
    body = _request().encode()
    good = f"POST /invocations HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    assert _exchange(port, good.encode() + body).startswith(b"HTTP/1.1 503")  # the slow one holds the slot

    started = time.monotonic()
    with pytest.raises(OSError):  # dribbling until the server cuts the connection
        while time.monotonic() - started < 5:
            slow.sendall(b" ")
            time.sleep(0.2)
            if slow.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                raise ConnectionResetError("closed by the server")
    slow.close()

    assert time.monotonic() - started < 3
    # The server thread that cut the slow client frees its slot as it ends: allow it a moment (bounded).
    deadline = time.monotonic() + 3
    reply = _exchange(port, good.encode() + body)
    while reply.startswith(b"HTTP/1.1 503") and time.monotonic() < deadline:
        time.sleep(0.1)
        reply = _exchange(port, good.encode() + body)
    assert reply.startswith(b"HTTP/1.1 200")


# --- 10 (LOW): archives and loaded models are bounded ------------------------------------------------------


def _tar_gz(path: Path, files: dict[str, int]) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as compressed, tarfile.open(fileobj=compressed, mode="w|") as tar:
        for name, size in files.items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(bytes(size)))
    return path


def test_a_tar_bomb_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tarbomb.py: a 1 MB archive unpacked to 1.1 GB. Scaled down: 100x the archive, at least the floor."""
    monkeypatch.setattr(local_module, "MIN_ARCHIVE_ALLOWANCE_BYTES", 1024 * 1024)
    bomb = _tar_gz(tmp_path / "bomb.tar.gz", {"m/config.pbtxt": 10, "m/1/zeros.bin": 8 * 1024 * 1024})
    destination = tmp_path / "out"

    with pytest.raises(LocalEndpointError, match="refused as a likely tar bomb"):
        extract_archive(bomb, destination)
    assert not destination.exists()

    monkeypatch.setattr(local_module, "MAX_ARCHIVE_MEMBERS", 3)
    many = _tar_gz(tmp_path / "many.tar.gz", {f"m/{i}": 1 for i in range(4)})
    with pytest.raises(LocalEndpointError, match="holds more than 3 files"):
        extract_archive(many, tmp_path / "out2")

    extract_archive(_tar_gz(tmp_path / "ok.tar.gz", {"m/config.pbtxt": 10}), tmp_path / "ok")
    assert (tmp_path / "ok" / "m" / "config.pbtxt").is_file()


def test_loading_beyond_the_most_models_is_a_507(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "MAX_LOADED_MODELS", 1)
    staged = tmp_path / "mme" / "b" / "model" / "add_sub"
    staged.mkdir(parents=True)
    triton = StubTriton()
    api = multi_api(triton, tmp_path)

    reply = api.handle("POST", "/models", JSON, json.dumps({"model_name": "b", "url": str(staged.parent)}).encode())

    assert reply.status == 507 and "unload one first" in json.loads(reply.body)["error"]
    assert triton.calls == []


# --- 11 (LOW): Triton's reply is read no further than the limit ------------------------------------------


def test_tritons_reply_is_not_read_past_the_payload_limit(fake_endpoint) -> None:
    url = fake_endpoint(b"x" * 1024, length=500_000_000)  # announces 500 MB, sends 1 KB
    triton = TritonHTTP(int(url.rsplit(":", 1)[1]))

    with pytest.raises(ReplyTooLarge) as raised:
        triton.request("POST", "/v2/models/m/infer", b"{}", timeout=10, max_reply_bytes=MAX_PAYLOAD_BYTES)

    assert raised.value.size == 500_000_000


# --- 12 (LOW): invoke bounds what it reads and sends --------------------------------------------------------


def test_raw_inputs_must_be_small_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    with pytest.raises(InvalidInputError, match="is not a regular file"):
        load_raw_file(f"x={fifo}", [1])  # used to block forever in open()
    with pytest.raises(InvalidInputError, match="is not a regular file"):
        load_raw_file("x=/dev/zero", [1])  # used to read until MemoryError


def test_array_files_are_bounded_before_numpy_inflates_them(tmp_path: Path) -> None:
    """bomb.npz: 778 KB on disk, 2.4 GB in memory. The zip's own sizes are checked first."""
    bomb = tmp_path / "bomb.npz"
    np.savez_compressed(bomb, a=np.zeros(2 * MAX_PAYLOAD_BYTES, np.uint8))
    assert bomb.stat().st_size < 100_000 and zipfile.is_zipfile(bomb)

    with pytest.raises(InvalidInputError, match=r"its arrays take \d+ bytes; more than a request"):
        load_array_file(str(bomb))


def test_an_oversized_request_is_refused_before_it_is_sent() -> None:
    class Recording:
        sent: list[EncodedRequest] = []

        def send(self, request: EncodedRequest, **_: object) -> Reply:
            self.sent.append(request)
            return Reply(b"{}", "application/json")

        def describe(self, target_model: str | None) -> str:
            return "m"

    transport = Recording()
    client = EndpointClient(transport)

    with pytest.raises(InvalidInputError, match="SageMaker real-time endpoints accept at most 6291456 bytes"):
        client.invoke({"x": np.zeros(MAX_PAYLOAD_BYTES, np.uint8)})
    assert transport.sent == []


def test_a_reply_over_the_payload_limit_is_not_read(fake_endpoint) -> None:
    url = fake_endpoint(b"x" * (MAX_PAYLOAD_BYTES + 10))

    with pytest.raises(EndpointClientError, match="sent a reply of more than 6291456 bytes"):
        LocalTransport(url).send(EncodedRequest(b"{}", "application/json"))


def test_a_sagemaker_reply_over_the_payload_limit_is_not_read() -> None:
    from botocore.response import StreamingBody

    big = b"x" * (MAX_PAYLOAD_BYTES + 1)

    class Runtime:
        def invoke_endpoint(self, **_: object) -> dict:
            return {"Body": StreamingBody(io.BytesIO(big), len(big)), "ContentType": "application/json"}

    with pytest.raises(EndpointError, match="the reply is over 6291456 bytes"):
        SageMakerTransport("ep", client=Runtime()).send(EncodedRequest(b"{}", "application/json"))


# --- 13 (LOW): errors, not tracebacks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("INPUT0=INT8:1:300", "300 is outside INT8's range -128..127"),
        ("INPUT0=UINT8:1:-1", "-1 is outside UINT8's range 0..255"),
        ("INPUT0=UINT64:1:18446744073709551616", "outside UINT64's range"),
        ("X=FP32:4294967296x4294967296:", "more than a request of 6291456 bytes"),
    ],
)
def test_bad_tensor_specs_are_input_errors(spec: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_tensor_spec(spec)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "A", "datatype": "FP32", "shape": ["a"], "data": [1]}, "shape must be a list of whole numbers"),
        ({"name": "A", "datatype": "FP32", "shape": None, "data": [1]}, "shape must be a list of whole numbers"),
        ({"name": ["A"], "datatype": "FP32", "shape": [1], "data": [1]}, "name must be a non-empty string"),
        ({"name": "A", "datatype": 5, "shape": [1], "data": [1]}, "datatype must be a string"),
        ({"name": "A", "datatype": "BYTES", "shape": [1], "data": [{"a": 1}]}, "not a BYTES value"),
    ],
)
def test_bad_v2_json_inputs_are_input_errors(entry: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        inputs_from_v2_json({"inputs": [entry]}, "f.json")


@pytest.mark.parametrize(
    "argv",
    [
        ("local", "--port", "70000"),
        ("local", "--port", "-1"),
        ("invoke", "--url", "http://127.0.0.1:1", "--target-model", "a\r\nX: 1", "--tensor", "A=FP32:1:1"),
    ],
)
def test_bad_ports_and_target_models_are_usage_errors(capsys: pytest.CaptureFixture[str], argv: tuple) -> None:
    with pytest.raises(SystemExit) as raised:
        main(list(argv))

    assert raised.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--url", "http://[::1"), "ERROR: --url must look like http://127.0.0.1:8080"),
        (("--url", "http://127.0.0.1:1", "--target-model", "\u20ac"), "a local endpoint takes printable ASCII"),
        (("--url", "http://127.0.0.1:1", "--save-dir", "/proc/1/x"), "ERROR: --save-dir /proc/1/x: cannot create"),
    ],
)
def test_bad_invoke_arguments_are_errors_before_anything_is_sent(
    capsys: pytest.CaptureFixture[str], extra: tuple, message: str
) -> None:
    code = main(["invoke", *extra, "--tensor", "A=FP32:1:1"])
    err = capsys.readouterr().err

    assert code == 1
    assert message in err and "cannot reach" not in err and "Traceback" not in err


def test_a_deeply_nested_inputs_json_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)

    code = main(["invoke", "--url", "http://127.0.0.1:1", "--inputs-json", str(deep)])

    assert code == 1 and "nested too deeply" in capsys.readouterr().err


def test_save_dir_on_a_file_fails_before_the_inference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "afile"
    a_file.write_text("")

    code = main(["invoke", "--url", "http://127.0.0.1:1", "--tensor", "A=FP32:1:1", "--save-dir", str(a_file)])
    err = capsys.readouterr().err

    assert code == 1 and f"--save-dir {a_file}: cannot create it" in err and "cannot reach" not in err
