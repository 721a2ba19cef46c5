"""Request bodies and replies in the two encodings Triton's SageMaker service understands.

Binary+JSON (`application/vnd.sagemaker-triton.binary+json;json-header-size=N`) carries a KServe v2
JSON header followed by the raw tensor bytes: compact and fast. Plain KServe v2 JSON
(`application/json`) is readable but larger and slower. Both are produced and read by tritonclient's
own `generate_request_body` / `parse_response_body` (../shared/README.md, "Invocation").
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from endpoint_client.errors import InvalidInputError

BINARY_CONTENT_TYPE_PREFIX = "application/vnd.sagemaker-triton.binary+json;json-header-size="
JSON_CONTENT_TYPE = "application/json"
_HEADER_SIZE = re.compile(r"json-header-size=(\d+)")


# Not enum.StrEnum (3.11): this module runs in the CodeBuild GPU build on the Triton image's Python 3.10 (buildspec,
# tests/model_build/test_build_image_python.py); __str__ gives StrEnum's str() and f-string value on every Python.
class Encoding(str, enum.Enum):  # noqa: UP042 -- runs on the Triton image's Python 3.10 (buildspec)
    BINARY = "binary"
    JSON = "json"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class EncodedRequest:
    body: bytes
    content_type: str


def encode_request(
    inputs: Mapping[str, np.ndarray],
    *,
    outputs: Sequence[str] = (),
    encoding: Encoding = Encoding.BINARY,
) -> EncodedRequest:
    """Build the body and Content-Type of one inference request; `outputs` empty asks for all outputs."""
    if not inputs:
        raise InvalidInputError(
            "no inputs given: pass at least one tensor (--input, --tensor, --inputs-json or a preset)"
        )
    binary = encoding is Encoding.BINARY
    infer_inputs = []
    for name, array in inputs.items():
        array = np.asarray(array)
        try:
            datatype = np_to_triton_dtype(array.dtype)
        except Exception as error:  # tritonclient raises bare errors for unsupported dtypes
            raise InvalidInputError(f"input {name!r}: numpy dtype {array.dtype} has no Triton datatype") from error
        if datatype is None:
            raise InvalidInputError(f"input {name!r}: numpy dtype {array.dtype} has no Triton datatype")
        infer_input = triton_http.InferInput(name, list(array.shape), datatype)
        try:
            infer_input.set_data_from_numpy(array, binary_data=binary)
        except InferenceServerException as error:
            # e.g. FP16/BF16 cannot be written as JSON numbers, bytes that are not UTF-8 as JSON strings
            if datatype == "BYTES" and "UTF-8" in error.message():
                message = "its bytes are not UTF-8 text, which JSON strings must be: use the binary encoding"
            else:
                message = error.message()[:300]  # tritonclient's messages can quote the whole tensor
            raise InvalidInputError(f"input {name!r} ({datatype}) in {encoding} encoding: {message}") from error
        infer_inputs.append(infer_input)
    requested = [triton_http.InferRequestedOutput(name, binary_data=binary) for name in outputs] or None
    body, json_size = triton_http.InferenceServerClient.generate_request_body(infer_inputs, outputs=requested)
    body = body if isinstance(body, bytes) else body.encode("utf-8")
    if json_size is None:
        # With no outputs named, tritonclient asks for *binary* outputs (parameters.binary_data_output,
        # a reserved parameter it will not let us pass): a plain-JSON request wants a plain-JSON reply.
        document = json.loads(body)
        document.get("parameters", {}).pop("binary_data_output", None)
        if not document.get("parameters", True):
            del document["parameters"]
        return EncodedRequest(json.dumps(document).encode(), JSON_CONTENT_TYPE)
    return EncodedRequest(body, f"{BINARY_CONTENT_TYPE_PREFIX}{json_size}")


def header_length(content_type: str | None) -> int | None:
    """N from `...;json-header-size=N`; None for plain JSON (the whole body is the header)."""
    match = _HEADER_SIZE.search(content_type or "")
    return int(match.group(1)) if match else None


def decode_response(body: bytes, content_type: str | None) -> dict[str, np.ndarray]:
    """Every output of a reply, by name, as numpy arrays (in the order the server sent them)."""
    result = triton_http.InferenceServerClient.parse_response_body(body, header_length=header_length(content_type))
    names = [output["name"] for output in result.get_response().get("outputs", [])]
    return {name: result.as_numpy(name) for name in names}


def error_message(body: bytes) -> str:
    """Triton's `{"error": "..."}` text, or the body itself when it is not that (e.g. an empty 404)."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return text or "(empty reply)"
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        return parsed["error"]
    return text
