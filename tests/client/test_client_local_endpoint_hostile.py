"""The local endpoint under attack (issue 12, item 1): it listens on loopback only and refuses hostile requests.

The finding: Triton's SageMaker service binds 0.0.0.0 (no address option in tritonserver 2.51:
triton-inference-server/server `src/command_line_parser.h`, `sagemaker_address_{"0.0.0.0"}`), and
`POST /models {"model_name", "url": "<any path>"}` from another host loaded that folder and ran its
model.py. These tests read the bound address of every listening socket of the whole process tree (the
CLI, tritonserver and its Python backend stubs) from /proc, and send hostile requests, to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from endpoint_client import EndpointClient
from endpoint_client.codec import Encoding, encode_request
from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.transport import http_request

pytestmark = pytest.mark.triton

REPO_ROOT = Path(__file__).resolve().parents[2]
BINARY = "application/vnd.sagemaker-triton.binary+json;json-header-size="


# --- reading what a process tree listens on, from /proc ----------------------------------------------------


def process_tree(root: int) -> set[int]:
    """`root` and every process descending from it (parent ids from /proc/<pid>/stat)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # exited meanwhile
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree = {root}
    grown = True
    while grown:
        children = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= children
        grown = bool(children)
    return tree


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for descriptor in descriptors:
        try:
            target = os.readlink(descriptor)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _address(hex_address: str) -> str:
    """/proc/net/tcp{,6} addresses: IPv4 as one little-endian word, IPv6 as four."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def bound_sockets(pid: int) -> list[tuple[str, str, int, int]]:
    """(protocol, address, port, pid) of every listening TCP and every bound UDP socket in pid's tree."""
    owners = {inode: member for member in process_tree(pid) for inode in socket_inodes(member)}
    found = []
    for protocol, listening_state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        try:
            lines = Path(f"/proc/{pid}/net/{protocol}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == listening_state and inode in owners:
                hex_address, hex_port = local.split(":")
                found.append((protocol, _address(hex_address), int(hex_port, 16), owners[inode]))
    return found


def is_loopback(address: str) -> bool:
    import ipaddress

    parsed = ipaddress.ip_address(address)
    mapped = parsed.ipv4_mapped if parsed.version == 6 else None
    return parsed.is_loopback or (mapped is not None and mapped.is_loopback)


def pair() -> dict[str, np.ndarray]:
    return {"INPUT0": np.arange(4, dtype=np.float32).reshape(1, 4), "INPUT1": np.ones((1, 4), np.float32)}


def test_every_socket_of_the_local_endpoint_listens_on_loopback(triton_env: Path, add_sub_archive: Path) -> None:
    """Multi-model, a model loaded (so Python backend stubs run), gRPC and metrics switched on: all loopback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "endpoint_client", "local", "--multi-model", "--port", "0",
         "--load", f"add_sub.tar.gz={add_sub_archive}", "--triton-env", str(triton_env),
         "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=false", "--env", "SAGEMAKER_TRITON_ALLOW_GRPC=true",
         "--env", "SAGEMAKER_TRITON_ALLOW_METRICS=true", "--env", "AIP_MODE=PREDICTION"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.poll() is not None else url
        outputs = EndpointClient.for_url(url).invoke(pair(), target_model="add_sub.tar.gz")
        assert outputs["OUTPUT0"].tolist() == [[1.0, 2.0, 3.0, 4.0]]

        sockets = bound_sockets(process.pid)
        processes = process_tree(process.pid)

        assert len(processes) >= 3, "the CLI, tritonserver and the model's Python backend stub"
        ports = {port for _, _, port, _ in sockets}
        assert int(url.rsplit(":", 1)[1]) in ports
        # the front, Triton's HTTP, gRPC and metrics services: at least four listeners
        assert len([s for s in sockets if s[0].startswith("tcp")]) >= 4, sockets
        assert [s for s in sockets if not is_loopback(s[1])] == []
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_a_wider_host_is_refused_before_anything_else(tmp_path: Path) -> None:
    """Servers we start listen on loopback only: --host 0.0.0.0 is refused before the archive is even read."""
    result = subprocess.run(
        [sys.executable, "-m", "endpoint_client", "local", str(tmp_path / "missing.tar.gz"), "--host", "0.0.0.0"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert result.returncode == 1
    assert result.stderr.startswith("ERROR: --host 0.0.0.0: the local endpoint listens on loopback only")
    assert "ERROR: archive" not in result.stderr and "Traceback" not in result.stderr


# --- the multi-model API ---------------------------------------------------------------------------------


def write_evil_model(folder: Path, marker: Path) -> Path:
    """A Python-backend model whose model.py leaves `marker` behind when anything imports it."""
    model = folder / "evil"
    (model / "1").mkdir(parents=True)
    config = (REPO_ROOT / "examples/models/add_sub/config.pbtxt").read_text().replace('"add_sub"', '"evil"')
    (model / "config.pbtxt").write_text(config)
    (model / "1" / "model.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return folder


def post_json(url: str, payload: object) -> tuple[int, dict]:
    status, body, _ = http_request("POST", url, json.dumps(payload).encode(), {"Content-Type": "application/json"}, 30)
    return status, json.loads(body) if body else {}


def test_loading_a_folder_outside_the_staging_area_is_refused(multi_endpoint: LocalEndpoint, tmp_path: Path) -> None:
    marker = tmp_path / "model.py-ran"
    evil = write_evil_model(tmp_path / "evil-repo", marker)
    staging = multi_endpoint.staging
    link = staging / "innocent-looking"
    link.symlink_to(evil, target_is_directory=True)
    try:
        attempts = [
            str(evil),  # the reported attack: any folder on the host
            str(evil / "evil"),
            str(link),  # a link inside the staging folder pointing out of it
            f"{staging}/../../{evil.relative_to('/')}",  # climbing out with ..
            "relative/path",
            "/",
            str(staging),  # the staging folder itself holds no archive
        ]
        for url in attempts:
            status, reply = post_json(multi_endpoint.url + "/models", {"model_name": "evil.tar.gz", "url": url})
            assert status == 400, url
            assert "url must be a folder under" in reply["error"]
    finally:
        link.unlink()

    assert not marker.exists()
    assert multi_endpoint.list_models() == []


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"model_name": "../escape", "url": "/x"}, "model_name '../escape' must be 1-255 letters"),
        ({"model_name": "a/b.tar.gz", "url": "/x"}, "model_name 'a/b.tar.gz' must be"),
        ({"model_name": "", "url": "/x"}, "model_name '' must be"),
        ({"model_name": 7, "url": "/x"}, "model_name '7' must be"),
        ({"model_name": "m", "url": "/x", "extra": 1}, "unknown field(s) extra"),
        ([1, 2], "the body must be a JSON object"),
    ],
)
def test_bad_load_requests_are_refused(multi_endpoint: LocalEndpoint, payload: object, message: str) -> None:
    status, reply = post_json(multi_endpoint.url + "/models", payload)

    assert status == 400
    assert message in reply["error"]


JSON_TYPE = {"Content-Type": "application/json"}


def test_load_bodies_are_small_and_json(multi_endpoint: LocalEndpoint) -> None:
    status, body, _ = http_request("POST", multi_endpoint.url + "/models", b"{not json", JSON_TYPE, 10)
    assert status == 400 and "the body is not valid JSON" in json.loads(body)["error"]
    status, body, _ = http_request("POST", multi_endpoint.url + "/models", b"{not json", {}, 10)
    assert status == 415 and "POST /models takes Content-Type application/json" in json.loads(body)["error"]

    status, body = raw_exchange(multi_endpoint.port, "POST", "/models", b"x" * (64 * 1024 + 1))
    assert status == 413


def test_the_model_api_is_off_on_a_single_model_endpoint(single_endpoint: LocalEndpoint, tmp_path: Path) -> None:
    marker = tmp_path / "model.py-ran"
    evil = write_evil_model(tmp_path / "evil-repo", marker)

    status, reply = post_json(single_endpoint.url + "/models", {"model_name": "evil.tar.gz", "url": str(evil)})
    listed, _, _ = http_request("GET", single_endpoint.url + "/models", None, {}, 10)

    assert status == 404 and listed == 404
    assert "the multi-model API is off: this endpoint serves one model" in reply["error"]
    assert not marker.exists()


def test_target_model_routes_invocations_on_a_multi_model_endpoint(
    multi_endpoint: LocalEndpoint, add_sub_archive: Path
) -> None:
    request = encode_request(pair(), encoding=Encoding.JSON)
    multi_endpoint.load_model("add_sub.tar.gz", add_sub_archive)
    try:
        routed, body, _ = http_request(
            "POST", multi_endpoint.url + "/invocations", request.body,
            {"Content-Type": request.content_type, "X-Amzn-SageMaker-Target-Model": "add_sub.tar.gz"}, 10,
        )  # fmt: skip
        unrouted, refusal, _ = http_request(
            "POST", multi_endpoint.url + "/invocations", request.body, {"Content-Type": request.content_type}, 10
        )
        twice, again = post_json(
            multi_endpoint.url + "/models",
            {"model_name": "add_sub.tar.gz", "url": str(multi_endpoint.staging / "add_sub.tar.gz" / "model")},
        )
    finally:
        multi_endpoint.unload_model("add_sub.tar.gz")

    assert routed == 200 and json.loads(body)["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]
    assert unrouted == 400 and "needs the model: send X-Amzn-SageMaker-Target-Model" in json.loads(refusal)["error"]
    assert twice == 409 and "is already loaded" in again["error"]


# --- invocations ---------------------------------------------------------------------------------------------


def raw_exchange(port: int, method: str, path: str, body: bytes = b"", headers: str | None = None) -> tuple[int, bytes]:
    """One request written by hand (for what urllib will not send), reply read to the end."""
    head = headers if headers is not None else f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        request = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{head}\r\n"
        connection.sendall(request.encode() + body)
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    status_line, _, rest = reply.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_huge_declared_shape_never_reaches_triton(single_endpoint: LocalEndpoint) -> None:
    """Issue 12: 170 bytes declaring [1, 4000000000] grew the server by 3.5 GB."""
    as_json = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 4_000_000_000], "datatype": "FP32", "data": [1]},
        {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]},
    ]}).encode()  # fmt: skip
    header = json.dumps(
        {"inputs": [{"name": "INPUT0", "shape": [1, 4_000_000_000], "datatype": "FP32",
                     "parameters": {"binary_data_size": 16}}]}
    ).encode()  # fmt: skip
    before = resident_bytes(single_endpoint.process.pid)

    json_status, json_reply, _ = http_request(
        "POST", single_endpoint.url + "/invocations", as_json, {"Content-Type": "application/json"}, 10
    )
    binary_status, binary_reply, _ = http_request(
        "POST", single_endpoint.url + "/invocations", header + b"\0" * 16,
        {"Content-Type": f"{BINARY}{len(header)}"}, 10,
    )  # fmt: skip

    assert len(as_json) < 200
    limit = "shape [1, 4000000000] holds over 6291456 elements, more than a request of 6291456 bytes"
    assert json_status == 400 and limit in json.loads(json_reply)["error"]
    assert binary_status == 400 and limit in json.loads(binary_reply)["error"]
    assert resident_bytes(single_endpoint.process.pid) - before < 50 * 1024 * 1024


@pytest.mark.parametrize(
    ("head", "status", "message"),
    [
        # a body over SageMaker's payload limit is refused from its Content-Length, unread
        ("Content-Length: 7340032\r\nContent-Type: application/json\r\n", 413,
         "the body is 7340032 bytes; SageMaker real-time endpoints accept at most 6291456 bytes"),
        ("Content-Type: application/json\r\n", 411, "the request has no Content-Length"),
        ("Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n", 411, "chunked bodies are not accepted"),
        ("Content-Length: -1\r\nContent-Type: application/json\r\n", 400, "Content-Length '-1' is not a number"),
        ("Content-Length: 2\r\n", 415, "the request has no Content-Type"),  # urllib always adds one
    ],
)  # fmt: skip
def test_bodies_are_held_to_the_payload_limit(
    single_endpoint: LocalEndpoint, head: str, status: int, message: str
) -> None:
    started = time.monotonic()

    reply_status, reply = raw_exchange(single_endpoint.port, "POST", "/invocations", b"{}", headers=head)

    assert reply_status == status
    assert message in json.loads(reply)["error"]
    assert time.monotonic() - started < 5  # answered at once, not after waiting for a body


@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        (b'{"inputs": []}', "text/plain", 415, "unsupported Content-Type 'text/plain'"),
        (b'{"inputs": []}', f"{BINARY}15", 400, "json-header-size=15 is outside the body"),
        (b'{"inputs": [{"name": "INPUT0", "shape": [-1, 4], "datatype": "FP32", "data": []}]}', "application/json",
         400, "shape [-1, 4] has a negative dimension"),
        (b'{"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FLOAT", "data": [1]}]}', "application/json",
         400, "unknown datatype 'FLOAT'"),
        (b"\xff\xfe{}", "application/json", 400, "the request's JSON header is not UTF-8"),
    ],
)  # fmt: skip
def test_bad_invocations_get_a_4xx_with_a_message(
    single_endpoint: LocalEndpoint, body: bytes, content_type: str, status: int, message: str
) -> None:
    headers = {"Content-Type": content_type}

    reply_status, reply, _ = http_request("POST", single_endpoint.url + "/invocations", body, headers, 10)

    assert reply_status == status
    assert message in json.loads(reply)["error"]


def test_unknown_routes_and_methods(single_endpoint: LocalEndpoint) -> None:
    assert http_request("GET", single_endpoint.url + "/v2/models/add_sub", None, {}, 10)[0] == 404
    assert http_request("GET", single_endpoint.url + "/invocations", None, {}, 10)[0] == 405
    assert http_request("DELETE", single_endpoint.url + "/ping", None, {}, 10)[0] == 405
    request = encode_request(pair(), encoding=Encoding.JSON)
    status, reply, _ = http_request(
        "POST", single_endpoint.url + "/invocations", request.body,
        {"Content-Type": request.content_type, "X-Amzn-SageMaker-Target-Model": "add_sub.tar.gz"}, 10,
    )  # fmt: skip
    assert status == 400 and "is for multi-model endpoints" in json.loads(reply)["error"]


def test_tritons_private_port_loads_no_model(single_endpoint: LocalEndpoint) -> None:
    """Triton's repository API (which can load a model from files sent in the request) is locked on a
    single-model endpoint, with a header value no client can send (issue 22 C1, triton_backend.py); inference
    and health stay open (they load nothing)."""
    private = f"http://127.0.0.1:{single_endpoint.triton.port}"
    load = json.dumps({"parameters": {"config": "{}", "file:1/model.py": "cHJpbnQoKQ=="}}).encode()

    health, _, _ = http_request("GET", private + "/v2/health/ready", None, {}, 10)
    loaded, reply, _ = http_request("POST", private + "/v2/repository/models/evil/load", load, {}, 10)

    assert (health, loaded) == (200, 403)
    assert "This API is restricted, expecting header 'local-endpoint-locked'" in json.loads(reply)["error"]


def test_the_endpoint_still_serves_after_the_hostile_requests(single_endpoint: LocalEndpoint) -> None:
    outputs = EndpointClient.for_url(single_endpoint.url).invoke(pair())

    assert outputs["OUTPUT0"].tolist() == [[1.0, 2.0, 3.0, 4.0]]
    assert single_endpoint.process.poll() is None
