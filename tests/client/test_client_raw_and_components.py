"""`invoke --raw NAME=FILE` (issue 15) and `--inference-component NAME` (issue 14), and the local
endpoint accepting the same addressing as SageMaker.

Sources: InvokeEndpoint's `InferenceComponentName` travels as the `X-Amzn-SageMaker-Inference-Component`
header, 1-63 characters `^[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?$` (botocore's sagemaker-runtime
service model, read below); BYTES tensors carry a 4-byte length per element in binary form (KServe v2
binary extension, tritonclient's serialize_byte_tensor).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import boto3
import botocore.session
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from endpoint_client import EndpointClient
from endpoint_client.codec import Encoding, encode_request
from endpoint_client.errors import InvalidInputError, LocalEndpointError
from endpoint_client.front import SageMakerAPI
from endpoint_client.inputs import load_raw_file, parse_shape
from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.transport import INFERENCE_COMPONENT_HEADER, INFERENCE_COMPONENT_NAME, SageMakerTransport
from model_build.package import write_model_archive

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_component_header_and_name_rule_are_the_runtime_apis() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    member = model.operation_model("InvokeEndpoint").input_shape.members["InferenceComponentName"]

    assert member.serialization == {"location": "header", "name": INFERENCE_COMPONENT_HEADER}
    assert member.metadata["max"] == 63
    for name in ("a", "add-sub", "A1-b2", "x" * 63):
        assert INFERENCE_COMPONENT_NAME.fullmatch(name)
    for name in ("", "-a", "a-", "add_sub", "a.b", "x" * 64):
        assert not INFERENCE_COMPONENT_NAME.fullmatch(name)


def test_sagemaker_transport_passes_inference_component_name() -> None:
    client = boto3.client(
        "sagemaker-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    body = json.dumps({"outputs": [{"name": "OUT", "datatype": "INT64", "shape": [1], "data": [3]}]}).encode()
    request = encode_request({"IN": np.array([1], np.int64)}, encoding=Encoding.JSON)
    with Stubber(client) as stubber:
        stubber.add_response(
            "invoke_endpoint",
            {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentType": "application/json"},
            {"EndpointName": "ep", "Body": request.body, "ContentType": "application/json",
             "InferenceComponentName": "add-sub"},
        )  # fmt: skip
        outputs = EndpointClient(SageMakerTransport("ep", client=client), encoding=Encoding.JSON).invoke(
            {"IN": np.array([1], np.int64)}, inference_component="add-sub"
        )

    assert outputs["OUT"].tolist() == [3]


def test_target_model_and_component_together_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="not both"):
        EndpointClient.for_url("http://127.0.0.1:1").invoke(
            {"IN": np.ones(1)}, target_model="m.tar.gz", inference_component="c"
        )


def test_raw_files_become_one_bytes_element(tmp_path: Path) -> None:
    image = tmp_path / "cat.jpg"
    image.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg \x00\x01")

    tensor = load_raw_file(f"image={image}", [1])["image"]
    batched = load_raw_file(f"image={image}", parse_shape("1x1", "--raw-shape"))["image"]

    assert tensor.dtype == np.object_ and tensor.shape == (1,) and tensor[0] == image.read_bytes()
    assert batched.shape == (1, 1)


def test_bad_raw_inputs_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    with big.open("wb") as stream:
        stream.truncate(7 * 1024 * 1024)  # sparse: nothing is written or read

    with pytest.raises(InvalidInputError, match="is 7340032 bytes; SageMaker real-time endpoints accept at most"):
        load_raw_file(f"x={big}", [1])
    with pytest.raises(InvalidInputError, match="cannot read"):
        load_raw_file(f"x={tmp_path / 'missing'}", [1])
    with pytest.raises(InvalidInputError, match="holds 2 elements, not 1"):
        load_raw_file(f"x={big}", [2])
    with pytest.raises(InvalidInputError, match="is not NAME="):
        load_raw_file(str(big), [1])


class _Triton:
    def request(self, method, path, body=None, headers=None, *, timeout, max_reply_bytes=None):
        return 200, b'{"outputs": []}', {}

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"


@pytest.mark.parametrize(
    ("played", "header", "status", "message"),
    [
        ("add-sub", "add-sub", 200, None),
        ("add-sub", None, 200, None),
        ("add-sub", "other", 400, "no inference component 'other' on this endpoint; it hosts 'add-sub'"),
        (None, "add-sub", 400, "this endpoint hosts no inference component (asked for 'add-sub')"),
    ],
)
def test_the_local_front_accepts_the_component_header(
    played: str | None, header: str | None, status: int, message: str | None
) -> None:
    api = SageMakerAPI(_Triton(), ping_mode="ready", default_model="add_sub", registry=None, inference_component=played)
    request = encode_request({"INPUT0": np.ones((1, 4), np.float32)}, encoding=Encoding.JSON)
    headers = {"content-type": request.content_type}
    if header:
        headers[INFERENCE_COMPONENT_HEADER.lower()] = header

    reply = api.handle("POST", "/invocations", headers, request.body)

    assert reply.status == status
    if message:
        assert message in json.loads(reply.body)["error"]


def test_a_component_name_is_checked_when_the_endpoint_is_made(tmp_path: Path) -> None:
    with pytest.raises(LocalEndpointError, match="'add_sub' is not an inference component name"):
        LocalEndpoint(tmp_path / "m.tar.gz", inference_component="add_sub")
    with pytest.raises(LocalEndpointError, match="a multi-model endpoint cannot host an inference component"):
        LocalEndpoint(multi_model=True, inference_component="c")


# --- end to end on the real local Triton ----------------------------------------------------------------

BYTES_MODEL = """name: "byte_count"
backend: "python"
max_batch_size: 0
input [ { name: "RAW" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "LENGTH" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
BYTES_MODEL_PY = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            lengths = np.array([len(raw.reshape(-1)[0])], dtype=np.int64)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("LENGTH", lengths)]))
        return responses
"""


@pytest.fixture(scope="module")
def component_endpoint(triton_env: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("byte-count")
    model = root / "byte_count"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(BYTES_MODEL)
    (model / "1" / "model.py").write_text(BYTES_MODEL_PY)
    archive = root / "model.tar.gz"
    write_model_archive(model, archive)
    endpoint = LocalEndpoint(
        archive, environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}, triton_env=triton_env,
        workdir=root / "work", inference_component="byte-count", startup_timeout=60,
    )  # fmt: skip
    try:
        endpoint.start()
        yield endpoint
    finally:
        endpoint.stop()


def invoke_cli(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "endpoint_client", "invoke", "--url", url, *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.triton
@pytest.mark.parametrize(
    ("content", "encoding"),
    [(bytes(range(256)) * 40, "binary"), ("Grüße aus Köln\n".encode() * 100, "json")],
)
def test_cli_sends_a_raw_file_to_a_component(
    component_endpoint: LocalEndpoint, tmp_path: Path, content: bytes, encoding: str
) -> None:
    document = tmp_path / "photo.jpg"
    document.write_bytes(content)

    component = ("--inference-component", "byte-count")
    result = invoke_cli(component_endpoint.url, *component, "--raw", f"RAW={document}", "--encoding", encoding)

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["model"] == f"byte-count at {component_endpoint.url}"
    assert report["outputs"]["LENGTH"]["data"] == [len(content)]


def test_bytes_that_are_not_utf8_cannot_travel_as_json(tmp_path: Path) -> None:
    document = tmp_path / "photo.jpg"
    document.write_bytes(bytes(range(256)) * 40)

    result = invoke_cli("http://127.0.0.1:1", "--raw", f"RAW={document}", "--encoding", "json")

    assert result.returncode == 1
    assert result.stderr == (
        "ERROR: input 'RAW' (BYTES) in json encoding: its bytes are not UTF-8 text, which JSON strings must be: "
        "use the binary encoding\n"
    )


@pytest.mark.triton
def test_a_wrong_component_is_refused_by_the_local_endpoint(component_endpoint: LocalEndpoint, tmp_path: Path) -> None:
    document = tmp_path / "x.bin"
    document.write_bytes(b"abc")

    result = invoke_cli(component_endpoint.url, "--inference-component", "other", "--raw", f"RAW={document}")

    assert result.returncode == 1
    assert "HTTP 400: no inference component 'other' on this endpoint; it hosts 'byte-count'" in result.stderr
