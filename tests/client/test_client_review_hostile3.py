"""Third hostile review of the local endpoint, `invoke` and the front (review-hostile: H1, M1-M3, L1, L2, L4).

H1: an archive whose chain of symlinks expands past PATH_MAX gets through Python 3.11.7's
`tarfile.extractall(filter="data")` and writes outside the extraction folder (CVE-2025-4517, fixed in CPython
3.11.13/3.12.11/3.13.4; the construction is CPython's own test_realpath_limit_attack, via the reviewer's
mk_escape.py). M1 needs the real CPU Triton (`single_endpoint`); everything else runs without it.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import stat
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fakes import serving_front

from endpoint_client.client import EndpointClient
from endpoint_client.errors import InvalidInputError, LocalEndpointError
from endpoint_client.front import SageMakerAPI
from endpoint_client.inputs import load_array_file, parse_shape, parse_tensor_spec
from endpoint_client.local_endpoint import LOOPBACK, LocalEndpoint, extract_archive
from endpoint_client.shm_guard import restrict_regions

REPO_ROOT = Path(__file__).resolve().parents[2]
ESCAPED = "PWNED-by-archive.txt"


# --- H1: links in an archive ------------------------------------------------------------------------------


def _add(tar: tarfile.TarFile, name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", content: bytes = b""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755
    info.linkname = linkname
    info.size = len(content) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(content) if kind == tarfile.REGTYPE else None)


def escape_archive(path: Path, destination_length: int, target: str) -> Path:
    """The reviewer's mk_escape.py (CPython's test_realpath_limit_attack): symlinks a..p each to a folder of a
    long name, so that `escape` -> a/b/.../p/lll.../<target> expands past PATH_MAX (4096) for an extraction
    folder of `destination_length` characters and os.path.realpath stops resolving; `escape/PWNED...` then
    lands in `target`, relative to the extraction folder."""
    steps = "abcdefghijklmnop"
    component = "d" * ((4096 - destination_length - 1) // (len(steps) + 1))
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        folder = ""
        for step in steps:
            _add(tar, os.path.join(folder, component), tarfile.DIRTYPE)
            _add(tar, os.path.join(folder, step), tarfile.SYMTYPE, linkname=component)
            folder = os.path.join(folder, component)
        link = os.path.join(*steps, "l" * 254)
        _add(tar, link, tarfile.SYMTYPE, linkname=os.path.join(*[".."] * len(steps)))
        _add(tar, "escape", tarfile.SYMTYPE, linkname=os.path.join(link, target))
        _add(tar, f"escape/{ESCAPED}", content=b"written outside the extraction folder\n")
    return path


def everything_under(folder: Path) -> set[str]:
    return {str(Path(root, name).relative_to(folder)) for root, dirs, files in os.walk(folder) for name in dirs + files}


@pytest.mark.skipif(sys.platform != "linux", reason="PATH_MAX 4096 is Linux's")
def test_the_reviewers_archive_really_escapes_a_plain_data_filter_extraction_on_this_python(tmp_path: Path) -> None:
    """Proof that the construction below is an attack here: on a CPython without the CVE-2025-4517 fix,
    extractall(filter="data") writes outside the folder; a fixed one refuses (tarfile.FilterError)."""
    folder = tmp_path / "plain" / "into"
    folder.mkdir(parents=True)
    archive = escape_archive(tmp_path / "escape.tar.gz", len(str(folder)), "../..")
    with tarfile.open(archive) as tar:
        try:
            tar.extractall(folder, filter="data")
        except tarfile.FilterError:
            return  # a fixed CPython
    assert (tmp_path / ESCAPED).is_file()


def test_an_archive_escaping_through_a_symlink_chain_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """Review H1 (CVE-2025-4517): every link member is refused before anything is extracted; the extraction
    folder would be tmp_path/work/.model-extracting-XXXXXXXX, so the archive is built for that length."""
    destination = tmp_path / "work" / "model"
    length = len(str(destination.parent / ".model-extracting-")) + 8
    archive = escape_archive(tmp_path / "escape.tar.gz", length, "../..")

    with pytest.raises(LocalEndpointError, match=r"member 'a' is a symbolic link .*refused, nothing extracted"):
        extract_archive(archive, destination)
    assert everything_under(tmp_path) == {"escape.tar.gz"}


def test_the_cli_refuses_the_reviewers_archive_without_a_traceback_or_a_file_outside(tmp_path: Path) -> None:
    """Review H1's repro: `endpoint_client local ARCHIVE --port 0` (the single-model path; --load uses the
    same extract_archive). The archive is refused before Triton is looked for."""
    archive = escape_archive(tmp_path / "esc.tar.gz", 41, "../../" + tmp_path.name)
    result = subprocess.run(
        [sys.executable, "-m", "endpoint_client", "local", str(archive), "--port", "0"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "is a symbolic link" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / ESCAPED).exists() and everything_under(tmp_path) == {"esc.tar.gz"}


@pytest.mark.parametrize(
    ("kind", "linkname", "described"),
    [
        (tarfile.SYMTYPE, "config.pbtxt", "symbolic link (to 'config.pbtxt')"),  # even one pointing inside
        (tarfile.LNKTYPE, "/etc/passwd", "hard link (to '/etc/passwd')"),
        (tarfile.CHRTYPE, "", "device"),
        (tarfile.BLKTYPE, "", "device"),
        (tarfile.FIFOTYPE, "", "FIFO"),
    ],
)
def test_any_member_but_a_file_or_folder_is_refused_before_anything_is_written(
    tmp_path: Path, kind: bytes, linkname: str, described: str
) -> None:
    """model_build/archive.py `_tar_header` writes only DIRTYPE and REGTYPE members (and `model_build check`
    refuses links in a repository), so a packaged model never holds anything else (review H1)."""
    archive = tmp_path / "m.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        _add(tar, "m", tarfile.DIRTYPE)
        _add(tar, "m/config.pbtxt", content=b'backend: "python"\n')
        _add(tar, "m/odd", kind, linkname=linkname)
    with pytest.raises(LocalEndpointError, match=re.escape(f"member 'm/odd' is a {described}")):
        extract_archive(archive, tmp_path / "out" / "model")
    assert everything_under(tmp_path) == {"m.tar.gz"}


def test_an_archive_is_extracted_into_a_fresh_private_folder_and_replaces_an_earlier_one(tmp_path: Path) -> None:
    """Review H1: a fresh folder (mode 0700) renamed into place; what an earlier extraction left is gone."""

    def archive(name: str) -> Path:
        path = tmp_path / f"{name}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            _add(tar, name, tarfile.DIRTYPE)
            _add(tar, f"{name}/config.pbtxt", content=b"x")
        return path

    destination = tmp_path / "staging" / "model"
    extract_archive(archive("first"), destination)
    assert stat.S_IMODE(destination.stat().st_mode) == 0o700
    extract_archive(archive("second"), destination)
    assert everything_under(destination) == {"second", "second/config.pbtxt"}
    assert everything_under(destination.parent) == {"model", "model/second", "model/second/config.pbtxt"}


# --- M1: the Python backend's shared memory ---------------------------------------------------------------


def test_the_python_backends_shared_memory_regions_are_owner_only(single_endpoint: LocalEndpoint) -> None:
    """Review M1: /dev/shm/local_endpoint_<pid>_<port>_<uuid> carried every request's tensors at 0644 (Boost
    fchmod()s them past the umask: shm_guard.py). Stat them while the endpoint runs, after an inference."""
    inputs = {"INPUT0": np.full((1, 4), 13371337.0, np.float32), "INPUT1": np.ones((1, 4), np.float32)}
    EndpointClient.for_url(single_endpoint.url, model_name="add_sub").invoke(inputs)
    regions = [Path("/dev/shm", name) for name in os.listdir("/dev/shm") if name.startswith(single_endpoint.shm_prefix)]
    assert regions, f"no /dev/shm/{single_endpoint.shm_prefix}* while the endpoint runs"
    modes = {region.name: oct(stat.S_IMODE(region.stat().st_mode)) for region in regions}
    assert set(modes.values()) == {"0o600"}, modes


def test_restrict_regions_touches_only_this_prefix(tmp_path: Path) -> None:
    """Review M1: the guard chmods the endpoint's own regions only."""
    (tmp_path / "local_endpoint_1_2_a").write_bytes(b"x")
    (tmp_path / "local_endpoint_1_22_b").write_bytes(b"x")
    for path in tmp_path.iterdir():
        path.chmod(0o644)
    assert restrict_regions("local_endpoint_1_2_", tmp_path) == [tmp_path / "local_endpoint_1_2_a"]
    assert stat.S_IMODE((tmp_path / "local_endpoint_1_2_a").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "local_endpoint_1_22_b").stat().st_mode) == 0o644


# --- M2, M3, L4: invoke's inputs --------------------------------------------------------------------------


def test_an_empty_value_list_is_counted_not_a_traceback() -> None:
    """Review M2: `FP32:1x4:` was a numpy TypeError (an empty list made a float64 mask)."""
    with pytest.raises(InvalidInputError, match=r"^tensor 'INPUT0': 0 values do not fill shape \[1, 4\]"):
        parse_tensor_spec("INPUT0=FP32:1x4:")


@pytest.mark.parametrize("datatype", ["FP32", "FP16", "FP64", "INT32", "UINT8", "BOOL", "BYTES"])
def test_an_empty_tensor_with_no_values_is_accepted(datatype: str) -> None:
    """Review M2: a zero-element tensor (KServe v2 allows a 0 dimension) takes no values."""
    name, array = parse_tensor_spec(f"INPUT0={datatype}:0x4:")
    assert name == "INPUT0" and array.shape == (0, 4)


def test_a_npy_header_cut_off_mid_dict_is_not_a_traceback(tmp_path: Path) -> None:
    """Review M3: numpy tokenizes the header dict; one cut off raised tokenize.TokenError. The reviewer's
    file (dims.npy) rebuilt: a valid magic and length, the dict left open."""
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1,\n"
    path = tmp_path / "dims.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(16))
    with pytest.raises(InvalidInputError, match=r"dims\.npy is not a readable \.npy file"):
        load_array_file(f"INPUT0={path}")


@pytest.mark.parametrize("shape", ["\u0663x4", "1x\u0664", "\uff11x4", "+1x4", " 1x4", "1_0x4", "-1x4", "1x", ""])
def test_a_shape_takes_ascii_digits_only(shape: str) -> None:
    """Review L4: int() reads Arabic-Indic '٣' as 3 (and '+1', ' 1', '1_0'); a shape is ASCII digits and x."""
    with pytest.raises(InvalidInputError, match="is not dimensions joined by 'x'"):
        parse_shape(shape, "tensor 'INPUT0'")
    assert parse_shape("2X3", "t") == [2, 3]


# --- L1, L2: the front's own refusals ---------------------------------------------------------------------


class _Triton:
    def request(self, method, path, body=None, headers=None, *, timeout, max_reply_bytes=None):
        return 200, b'{"outputs": []}', {}

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with serving_front(SageMakerAPI(_Triton(), ping_mode="ready", default_model="m", registry=None)) as server:
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
    """Review L1: BaseHTTPRequestHandler answered an HTML 501. RFC 9110 §15.5.6: a 405 MUST carry Allow."""
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
    """Review L1: these were BaseHTTPRequestHandler's HTML pages (without a status line where the request
    line was not understood: it answered as HTTP/0.9)."""
    status, headers, body = exchange(port, raw)
    assert status == expected and headers["content-type"] == "application/json", body[:200]
    assert json.loads(body)["error"]


@pytest.mark.parametrize("lengths", [("4", "5"), ("4", "4"), ("0", "4")])
def test_a_request_with_several_content_lengths_is_a_400(port: int, lengths: tuple[str, str]) -> None:
    """Review L2. RFC 9112 §6.3: differing Content-Length values are an unrecoverable framing error, a 400 and
    the connection closed. RFC 9110 §8.6 allows accepting identical repeats; the front refuses those too (as
    nginx does): no client sends them, and a repeat is a request-smuggling probe."""
    extra = "".join(f"Content-Length: {length}\r\n" for length in lengths) + "Content-Type: application/json\r\n"
    raw = f"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}\r\n{{}}  ".encode()
    status, headers, body = exchange(port, raw)
    assert status == 400 and headers["connection"] == "close"
    assert "2 Content-Length headers" in json.loads(body)["error"]
