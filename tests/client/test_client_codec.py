"""Request bodies and reply parsing (tritonclient's own encoder/decoder), without a server."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from endpoint_client.codec import (
    BINARY_CONTENT_TYPE_PREFIX,
    JSON_CONTENT_TYPE,
    Encoding,
    decode_response,
    encode_request,
    error_message,
    header_length,
)
from endpoint_client.errors import InvalidInputError

INPUTS = {
    "INPUT0": np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32),
    "IDS": np.array([[7, 8]], dtype=np.int32),
}


def test_binary_request_is_json_header_then_raw_tensor_bytes() -> None:
    request = encode_request(INPUTS, outputs=["OUTPUT0"], encoding=Encoding.BINARY)

    assert request.content_type.startswith(BINARY_CONTENT_TYPE_PREFIX)
    size = header_length(request.content_type)
    header = json.loads(request.body[:size])
    assert [(i["name"], i["datatype"], i["shape"]) for i in header["inputs"]] == [
        ("INPUT0", "FP32", [1, 4]),
        ("IDS", "INT32", [1, 2]),
    ]
    assert [i["parameters"]["binary_data_size"] for i in header["inputs"]] == [16, 8]
    assert header["outputs"] == [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]
    assert request.body[size:] == INPUTS["INPUT0"].tobytes() + INPUTS["IDS"].tobytes()


def test_json_request_is_plain_kserve_v2() -> None:
    request = encode_request(INPUTS, encoding=Encoding.JSON)

    assert request.content_type == JSON_CONTENT_TYPE
    document = json.loads(request.body)
    assert document["inputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]
    assert document["inputs"][1] == {"name": "IDS", "shape": [1, 2], "datatype": "INT32", "data": [7, 8]}
    assert "outputs" not in document  # none asked for: the server returns all...
    assert "parameters" not in document  # ...as JSON (tritonclient alone would ask for binary outputs)


def test_binary_reply_is_decoded_by_its_header_size() -> None:
    out0 = np.arange(8, dtype=np.float32).reshape(2, 4)
    out1 = np.array([[1, 2]], dtype=np.int64)
    header = json.dumps(
        {
            "model_name": "add_sub",
            "outputs": [
                {"name": "OUTPUT0", "datatype": "FP32", "shape": [2, 4], "parameters": {"binary_data_size": 32}},
                {"name": "OUTPUT1", "datatype": "INT64", "shape": [1, 2], "parameters": {"binary_data_size": 16}},
            ],
        }
    ).encode()
    body = header + out0.tobytes() + out1.tobytes()

    outputs = decode_response(body, f"{BINARY_CONTENT_TYPE_PREFIX}{len(header)}")

    assert list(outputs) == ["OUTPUT0", "OUTPUT1"]
    np.testing.assert_array_equal(outputs["OUTPUT0"], out0)
    np.testing.assert_array_equal(outputs["OUTPUT1"], out1)
    assert outputs["OUTPUT1"].dtype == np.int64


def test_json_reply_is_decoded_whole() -> None:
    body = json.dumps(
        {"outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 2], "data": [0.5, -1.5]}]}
    ).encode()

    outputs = decode_response(body, "application/json")

    np.testing.assert_array_equal(outputs["OUTPUT0"], np.array([[0.5, -1.5]], dtype=np.float32))


def test_bytes_tensors_round_trip_in_binary_encoding() -> None:
    words = np.array([[b"hello", b"triton"]], dtype=np.object_)
    request = encode_request({"TEXT": words})
    size = header_length(request.content_type)
    raw = request.body[size:]
    # Triton's BYTES wire format: each element as a 4-byte little-endian length, then its bytes.
    assert raw == struct.pack("<I", 5) + b"hello" + struct.pack("<I", 6) + b"triton"


def test_no_inputs_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="no inputs given"):
        encode_request({})


def test_a_dtype_triton_lacks_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="input 'Z': numpy dtype complex64 has no Triton datatype"):
        encode_request({"Z": np.ones(2, dtype=np.complex64)})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"error":"Request for unknown model"}', "Request for unknown model"),
        (b"", "(empty reply)"),
        (b"upstream timed out", "upstream timed out"),
        (b'{"message":"other"}', '{"message":"other"}'),
    ],
)
def test_error_message_reads_tritons_error_json(body: bytes, expected: str) -> None:
    assert error_message(body) == expected


def test_header_length_only_for_binary_content_type() -> None:
    assert header_length(f"{BINARY_CONTENT_TYPE_PREFIX}123") == 123
    assert header_length("application/json") is None
    assert header_length(None) is None


def test_bf16_in_json_encoding_is_refused_with_the_input_name() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")  # tritonclient's own BF16 support comes from it

    with pytest.raises(InvalidInputError, match=r"input 'HALF' \(BF16\) in json encoding: BF16 inputs must be sent"):
        encode_request({"HALF": np.ones((1, 2), dtype=ml_dtypes.bfloat16)}, encoding=Encoding.JSON)
