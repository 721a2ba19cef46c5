"""The local endpoint's request checks (request_check.py), without a server.

Sources: the payload limit is botocore's sagemaker-runtime service model (`BodyBlob` "max", the type of
InvokeEndpoint's Body); the two request formats are Triton's SageMaker service's
(`src/sagemaker_server.cc`: application/json, or application/vnd.sagemaker-triton.binary+json;
json-header-size=N) with KServe v2's `parameters.binary_data_size` for binary tensors.
"""

from __future__ import annotations

import json
import time

import botocore.session
import numpy as np
import pytest

from endpoint_client.codec import Encoding, encode_request
from endpoint_client.limits import MAX_PAYLOAD_BYTES
from endpoint_client.request_check import RequestRefused, check_invocation, header_length_from

BINARY = "application/vnd.sagemaker-triton.binary+json;json-header-size="


def test_the_payload_limit_is_the_one_in_the_sagemaker_runtime_service_model() -> None:
    """botocore's model of InvokeEndpoint: Body is a BodyBlob whose "max" is SageMaker's real-time limit."""
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    body = model.operation_model("InvokeEndpoint").input_shape.members["Body"]

    assert body.metadata["max"] == MAX_PAYLOAD_BYTES


def refused(body: bytes | str, content_type: str | None = "application/json") -> RequestRefused:
    data = body.encode() if isinstance(body, str) else body
    with pytest.raises(RequestRefused) as raised:
        check_invocation(data, content_type)
    return raised.value


def tensor(**fields: object) -> str:
    entry = {"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]} | fields
    return json.dumps({"inputs": [entry]})


def test_a_huge_declared_shape_is_refused_in_both_encodings() -> None:
    """Issue 12: a 170-byte request declaring [1, 4000000000] made Triton allocate 3.5 GB."""
    as_json = tensor(shape=[1, 4_000_000_000], data=[1.0])
    header = json.dumps(
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4_000_000_000],
                     "parameters": {"binary_data_size": 4}}]}
    ).encode()  # fmt: skip

    assert len(as_json) < 170
    limit = "holds over 6291456 elements, more than a request of 6291456 bytes (SageMaker's limit) can carry"
    assert refused(as_json).message == f"input 'INPUT0': shape [1, 4000000000] {limit}"
    error = refused(header + b"\0\0\0\0", f"{BINARY}{len(header)}")
    assert error.status == 400 and limit in error.message


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([2**62] * 5000, "shape has 5000 dimensions; a tensor has at most 32 (numpy's limit)"),
        ([1] * 33, "shape has 33 dimensions; a tensor has at most 32"),
        ([2**63 - 1] * 32, "holds over 6291456 elements"),
        ([3] * 32, "holds over 6291456 elements"),
    ],
)
def test_dims_are_bounded_before_they_are_multiplied(shape: list[int], message: str) -> None:
    """Issue 22 C2: thousands of huge dims pinned the front in math.prod for minutes, then a 500. The count
    is bounded first (numpy < 2's NPY_MAXDIMS, 32: every local model runs in the Python backend on numpy),
    and the product stops once it passes what SageMaker's 6 MiB payload (botocore BodyBlob max) can carry."""
    # This process's CPU time, not the wall clock: other work on a shared machine must not fail the bound.
    started = time.process_time()

    error = refused(tensor(shape=shape, data=[1.0]))

    assert time.process_time() - started < 1.0
    assert error.status == 400 and message in error.message
    assert len(error.message) < 400  # the shape is shown shortened


def test_a_zero_dim_makes_an_empty_tensor_whatever_the_other_dims() -> None:
    error = refused(tensor(shape=[0, 2**63 - 1], data=[1.0]))

    assert error.message.endswith("holds 0 values but 'data' has 1")


@pytest.mark.parametrize(
    ("content_type", "status", "message"),
    [
        (None, 415, "the request has no Content-Type: send application/json or"),
        ("", 415, "the request has no Content-Type"),
        ("text/plain", 415, "unsupported Content-Type 'text/plain'"),
        ("application/vnd.sagemaker-triton.binary+json", 400, "lacks json-header-size=N"),
        (f"{BINARY}abc", 400, "lacks json-header-size=N"),
        (f"{BINARY}-5", 400, "lacks json-header-size=N"),
        (f"{BINARY}0", 400, "json-header-size=0 is outside the body: it must be between 1 and 10"),
        (f"{BINARY}11", 400, "json-header-size=11 is outside the body"),
        (f"{BINARY}99999999999", 400, "lacks json-header-size=N"),  # more digits than any body
    ],
)
def test_content_types(content_type: str | None, status: int, message: str) -> None:
    with pytest.raises(RequestRefused) as raised:
        header_length_from(content_type, 10)

    assert raised.value.status == status
    assert message in raised.value.message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"inputs": [', "the request's JSON header is not valid JSON: Expecting value"),
        (b'{"inputs": "\xff"}', "the request's JSON header is not UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "the request's JSON header is nested too deeply"),
        ("[]", "must be an object with an 'inputs' list"),
        ('{"inputs": []}', 'the request needs "inputs": a non-empty list'),
        ('{"inputs": [7]}', 'inputs[0] must be an object with a non-empty "name" string'),
        (tensor(shape=[1, -4]), "input 'INPUT0': shape [1, -4] has a negative dimension"),
        (tensor(shape=[1, "4"]), "input 'INPUT0': 'shape' must be a list of whole numbers"),
        (tensor(shape=[True, 4]), "'shape' must be a list of whole numbers"),
        (tensor(shape=[1, 4.0]), "'shape' must be a list of whole numbers"),
        (tensor(datatype="FP128"), "input 'INPUT0': unknown datatype 'FP128'; Triton's datatypes are BOOL, UINT8"),
        (tensor(data=[1, 2, 3]), "shape [1, 4] holds 4 values but 'data' has 3"),
        (tensor(data=[1, 2, 3, "x"]), "'data' holds \"x\", not a FP32 value"),
        (tensor(datatype="INT32", data=[1, 2, 3, 4.5]), "'data' holds 4.5, not a INT32 value"),
        (tensor(datatype="BOOL", data=[1, 0, 1, 0]), "not a BOOL value"),
        (tensor(data=None), "'data' holds null, not a FP32 value"),
        (tensor(parameters={"shared_memory_region": "r"}), "shared memory is not available"),
        (tensor(parameters={"binary_data_size": 16}), "binary_data_size needs Content-Type"),
        (tensor()[:-1] + ', "outputs": 3}', "'outputs' must be a list"),
        ('{"inputs": [{"name": "a", "datatype": "FP32", "shape": [1]}]}', "input 'a' needs 'data'"),
        ('{"parameters": [], "inputs": []}', "the request's parameters must be an object"),
    ],
)
def test_malformed_json_requests_are_refused_with_400(body: str | bytes, message: str) -> None:
    error = refused(body)

    assert error.status == 400
    assert message in error.message


def binary_request(entry: dict, payload: bytes) -> tuple[bytes, str]:
    header = json.dumps({"inputs": [entry]}).encode()
    return header + payload, f"{BINARY}{len(header)}"


@pytest.mark.parametrize(
    ("entry", "payload", "message"),
    [
        ({"datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 4}}, b"1234",
         "shape [2] of FP32 is 8 bytes but binary_data_size is 4"),
        ({"datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}}, b"12345678",
         "the inputs announce 4 bytes of binary data (parameters.binary_data_size) but 8 bytes follow"),
        ({"datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": -4}}, b"",
         "parameter 'binary_data_size' must be a whole number >= 0, not -4"),
        ({"datatype": "BYTES", "shape": [1000], "parameters": {"binary_data_size": 8}}, b"\0" * 8,
         "shape [1000] of BYTES needs at least 4000 bytes (a 4-byte length per element)"),
        ({"datatype": "FP32", "shape": [1], "data": [1.0], "parameters": {"binary_data_size": 4}}, b"1234",
         "has both 'data' and parameters.binary_data_size"),
    ],
)  # fmt: skip
def test_malformed_binary_requests_are_refused_with_400(entry: dict, payload: bytes, message: str) -> None:
    body, content_type = binary_request({"name": "INPUT0", **entry}, payload)

    error = refused(body, content_type)

    assert error.status == 400
    assert message in error.message


@pytest.mark.parametrize("encoding", list(Encoding))
def test_what_the_client_sends_passes(encoding: Encoding) -> None:
    inputs = {
        "INPUT0": np.ones((2, 4), np.float32),
        "IDS": np.arange(6, dtype=np.int64).reshape(1, 2, 3),
        "FLAGS": np.array([True, False]),
        "TEXT": np.array([b"hello", b"", "w\u00f6rld".encode()], dtype=np.object_),
        "EMPTY": np.zeros((0, 3), np.float32),
    }
    request = encode_request(inputs, outputs=["OUTPUT0"], encoding=encoding)

    header_length = check_invocation(request.body, request.content_type)

    if encoding is Encoding.BINARY:
        assert request.content_type == f"{BINARY}{header_length}"
    else:
        assert header_length is None
