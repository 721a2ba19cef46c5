"""`invoke` bounds what it reads (raw files, arrays, images, JSON inputs), sends and receives (SageMaker's 6 MB
payload) and writes (output names stay inside --save-dir), and reports bad arguments as one-line errors, never a
traceback. Limits come from what AWS publishes: InvokeEndpoint's request and reply Body are botocore's
sagemaker-runtime `BodyBlob` (max 6291456 bytes), a TargetModel is `TargetModelHeader` (1-1024, pattern
\\A\\S[\\p{Print}]*\\z).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from endpoint_client.cli import main, save_outputs
from endpoint_client.client import EndpointClient
from endpoint_client.codec import EncodedRequest
from endpoint_client.errors import EndpointClientError, EndpointError, InvalidInputError
from endpoint_client.inputs import inputs_from_v2_json, load_array_file, load_raw_file, parse_shape, parse_tensor_spec
from endpoint_client.limits import MAX_PAYLOAD_BYTES
from endpoint_client.local_endpoint import LOOPBACK
from endpoint_client.presets import load_image
from endpoint_client.transport import LocalTransport, Reply, SageMakerTransport
from endpoint_client.triton_backend import ReplyTooLarge, TritonHTTP

# --- output names cannot leave --save-dir -----------------------------------------------------------------------------


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
    """A reply naming outputs outside --save-dir, through the CLI."""
    outputs = [{"name": n, "datatype": "FP32", "shape": [1], "data": [1.0]} for n in ("../escaped", "/tmp/x/abs")]
    url = fake_endpoint(json.dumps({"outputs": outputs}).encode())
    save_dir = tmp_path / "save"

    code = main(["invoke", "--url", url, "--tensor", "A=FP32:1:1", "--encoding", "json", "--save-dir", str(save_dir)])

    assert code == 1
    assert "output named '../escaped', which is not a plain file name" in capsys.readouterr().err
    assert not (tmp_path / "escaped.npy").exists() and list(save_dir.iterdir()) == []


# --- images are bounded before they are decoded -----------------------------------------------------------------------


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


# --- Triton's reply is read no further than the limit -----------------------------------------------------------------


def test_tritons_reply_is_not_read_past_the_payload_limit(fake_endpoint) -> None:
    url = fake_endpoint(b"x" * 1024, length=500_000_000)  # announces 500 MB, sends 1 KB
    triton = TritonHTTP(int(url.rsplit(":", 1)[1]))

    with pytest.raises(ReplyTooLarge) as raised:
        triton.request("POST", "/v2/models/m/infer", b"{}", timeout=10, max_reply_bytes=MAX_PAYLOAD_BYTES)

    assert raised.value.size == 500_000_000


# --- invoke bounds what it reads and sends ----------------------------------------------------------------------------


def test_raw_inputs_must_be_small_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    with pytest.raises(InvalidInputError, match="is not a regular file"):
        load_raw_file(f"x={fifo}", [1])  # used to block forever in open()
    with pytest.raises(InvalidInputError, match="is not a regular file"):
        load_raw_file("x=/dev/zero", [1])  # used to read until MemoryError


def test_array_files_are_bounded_before_numpy_inflates_them(tmp_path: Path) -> None:
    """A .npz of 778 KB on disk and, 2.4 GB in memory. The zip's own sizes are checked first."""
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


# --- values and shapes: errors, not tracebacks ------------------------------------------------------------------------


def test_an_empty_value_list_is_counted_not_a_traceback() -> None:
    """`FP32:1x4:` was a numpy TypeError (an empty list made a float64 mask)."""
    with pytest.raises(InvalidInputError, match=r"^tensor 'INPUT0': 0 values do not fill shape \[1, 4\]"):
        parse_tensor_spec("INPUT0=FP32:1x4:")


@pytest.mark.parametrize("datatype", ["FP32", "FP16", "FP64", "INT32", "UINT8", "BOOL", "BYTES"])
def test_an_empty_tensor_with_no_values_is_accepted(datatype: str) -> None:
    """A zero-element tensor (KServe v2 allows a 0 dimension) takes no values."""
    name, array = parse_tensor_spec(f"INPUT0={datatype}:0x4:")
    assert name == "INPUT0" and array.shape == (0, 4)


def test_a_npy_header_cut_off_mid_dict_is_not_a_traceback(tmp_path: Path) -> None:
    """Numpy tokenizes the header dict; one cut off raised tokenize.TokenError. The file (dims.npy): a valid magic
    and length, the dict left open."""
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1,\n"
    path = tmp_path / "dims.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(16))
    with pytest.raises(InvalidInputError, match=r"dims\.npy is not a readable \.npy file"):
        load_array_file(f"INPUT0={path}")


@pytest.mark.parametrize("shape", ["\u0663x4", "1x\u0664", "\uff11x4", "+1x4", " 1x4", "1_0x4", "-1x4", "1x", ""])
def test_a_shape_takes_ascii_digits_only(shape: str) -> None:
    """int() reads Arabic-Indic '٣' as 3 (and '+1', ' 1', '1_0'); a shape is ASCII digits and x."""
    with pytest.raises(InvalidInputError, match="is not dimensions joined by 'x'"):
        parse_shape(shape, "tensor 'INPUT0'")
    assert parse_shape("2X3", "t") == [2, 3]


# --- arguments: errors, not tracebacks --------------------------------------------------------------------------------


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
