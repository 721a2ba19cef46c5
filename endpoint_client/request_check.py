"""Checks on an invocation request, made by the local endpoint's front before Triton sees any of it.

Triton trusts a request's declared tensor shapes and allocates for them: one 170-byte request declaring
shape [1, 4000000000] grew the server by 3.5 GB (issue 12). Here every declared size is checked against
the bytes actually sent (which SageMaker's payload limit bounds), so a hostile or careless request is
refused with a 4xx and a message that says what is wrong, and never reaches the server.

Shapes are bounded before anything is multiplied (issue 22 C2: one request declaring thousands of huge
dims pinned the front for minutes in `math.prod` and ended in a 500): at most MAX_DIMENSIONS dims, and the
element count is multiplied out dim by dim, stopping as soon as it passes what the payload can carry.

The request formats are those of Triton's SageMaker service (triton-inference-server/server
`src/sagemaker_server.cc`): `application/json` (KServe v2 JSON) or
`application/vnd.sagemaker-triton.binary+json;json-header-size=N` (a JSON header of N bytes followed
by the binary tensors that `parameters.binary_data_size` announces, KServe's binary extension).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from endpoint_client.limits import MAX_PAYLOAD_BYTES

BINARY_MEDIA_TYPE = "application/vnd.sagemaker-triton.binary+json"
JSON_MEDIA_TYPE = "application/json"
_HEADER_SIZE = re.compile(r"\s*json-header-size=(\d{1,10})\s*")

# Triton datatypes and their element sizes in bytes (KServe v2 protocol, "Tensor Data Types");
# BYTES elements are variable: in binary form each one carries a 4-byte length prefix.
ELEMENT_BYTES: dict[str, int | None] = {
    "BOOL": 1,
    "UINT8": 1,
    "UINT16": 2,
    "UINT32": 4,
    "UINT64": 8,
    "INT8": 1,
    "INT16": 2,
    "INT32": 4,
    "INT64": 8,
    "FP16": 2,
    "BF16": 2,
    "FP32": 4,
    "FP64": 8,
    "BYTES": None,
}
_BYTES_PREFIX = 4
# Every model the local endpoint runs is a Python-backend model (onnx_standin.py), whose inputs become numpy
# arrays, and numpy < 2 (.venv-triton pins it) holds at most 32 dims (NPY_MAXDIMS: "maximum supported
# dimension for an ndarray is 32"); the client holds requests to the same bound (inputs.MAX_DIMENSIONS).
# Triton's core states no limit of its own (triton-inference-server/core has no dim-count check; TensorRT
# engines take at most 8, nvinfer1::Dims::MAX_DIMS, and refuse more with the backend's own message).
MAX_DIMENSIONS = 32
# Each element costs at least one byte of the request (a JSON value and its comma, or a binary byte), and
# the request is at most SageMaker's payload limit (limits.py): more elements cannot have been sent.
MAX_ELEMENTS = MAX_PAYLOAD_BYTES


class RequestRefused(Exception):
    """A request the local endpoint answers with `status` and `{"error": message}`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def header_length_from(content_type: str | None, body_length: int) -> int | None:
    """N of `...binary+json;json-header-size=N` (1..body length), None for plain JSON; refuses the rest."""
    expected = f"send {JSON_MEDIA_TYPE} or {BINARY_MEDIA_TYPE};json-header-size=N"
    if not content_type or not content_type.strip():
        raise RequestRefused(415, f"the request has no Content-Type: {expected}")
    media, _, parameters = content_type.partition(";")
    media = media.strip().lower()
    if media == JSON_MEDIA_TYPE:
        return None
    if media != BINARY_MEDIA_TYPE:
        raise RequestRefused(415, f"unsupported Content-Type {content_type[:200]!r}: {expected}")
    match = _HEADER_SIZE.fullmatch(parameters)
    if not match:
        raise RequestRefused(
            400, f"Content-Type {content_type[:200]!r} lacks json-header-size=N (N: the JSON header's length in bytes)"
        )
    size = int(match.group(1))
    if not 0 < size <= body_length:
        raise RequestRefused(
            400,
            f"json-header-size={size} is outside the body: it must be between 1 and {body_length} (the body's length)",
        )
    return size


def check_invocation(body: bytes, content_type: str | None) -> int | None:
    """Refuse (RequestRefused) anything Triton should not see; return the JSON header length (None: plain JSON)."""
    header_length = header_length_from(content_type, len(body))
    header = body if header_length is None else body[:header_length]
    document = strict_json(header, "the request's JSON header")
    if not isinstance(document, dict):
        raise RequestRefused(400, "the request's JSON header must be an object with an 'inputs' list")
    if "id" in document and not isinstance(document["id"], str):
        raise RequestRefused(400, "the request's 'id' must be a string")  # Triton: 500 "non-string as string"
    _check_parameters(document.get("parameters", {}), "the request's parameters", _REQUEST_PARAMETERS)
    inputs = document.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise RequestRefused(
            400, 'the request needs "inputs": a non-empty list of {"name", "datatype", "shape", "data"}'
        )
    binary_bytes = sum(_check_input(entry, index, header_length is not None) for index, entry in enumerate(inputs))
    if header_length is not None and binary_bytes != len(body) - header_length:
        raise RequestRefused(
            400,
            f"the inputs announce {binary_bytes} bytes of binary data (parameters.binary_data_size) but "
            f"{len(body) - header_length} bytes follow the {header_length}-byte JSON header",
        )
    outputs = document.get("outputs", [])
    if not isinstance(outputs, list):
        raise RequestRefused(400, "'outputs' must be a list of {\"name\": ...}")
    for index, output in enumerate(outputs):
        if not isinstance(output, dict) or not isinstance(output.get("name"), str):
            raise RequestRefused(400, f'outputs[{index}] must be an object with a "name" string')
        _check_parameters(output.get("parameters", {}), f"output {output['name'][:100]!r}", _OUTPUT_PARAMETERS)
    return header_length


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """object_pairs_hook: Python's json keeps a repeated key's last value, Triton's parser its first, so a
    request could show this check one shape and Triton another (review finding 1): refuse repeats."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _DuplicateKey(f"the key {repeated[:100]!r} appears twice in one object")
    return document


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: Python reads inf, Triton answers 500 "Number too big"
        raise ValueError(f"the number {text[:50]} is too large for a double")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN / Infinity: Python extensions that Triton refuses


def strict_json(text: bytes, what: str) -> Any:
    """JSON as Triton reads it, or RequestRefused(400): no repeated keys at any level, finite numbers."""
    try:
        return json.loads(
            text.decode("utf-8"), object_pairs_hook=_unique_keys, parse_float=_finite_float, parse_constant=_no_constant
        )
    except UnicodeDecodeError as error:
        raise RequestRefused(400, f"{what} is not UTF-8 ({error.reason} at byte {error.start})") from None
    except _DuplicateKey as error:
        raise RequestRefused(400, f"{what}: {error}; send each key once") from None
    except ValueError as error:
        raise RequestRefused(400, f"{what} is not valid JSON: {error}") from None
    except RecursionError:
        raise RequestRefused(400, f"{what} is nested too deeply") from None


# The parameters Triton's HTTP service reads with a fixed JSON type (triton-inference-server/server
# `src/http_server.cc`, v2.51.0: a wrong type is its 500 "Unable to parse 'x': attempt to access JSON
# non-boolean as boolean"); on SageMaker a 5XX counts against the endpoint, so the front answers 400.
_UINT64_MAX = 2**64 - 1
_INT64_MAX = 2**63 - 1


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_uint64(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _UINT64_MAX


def _is_sequence_id(value: Any) -> bool:
    return _is_uint64(value) or isinstance(value, str)


_REQUEST_PARAMETERS = {
    "sequence_id": ("a whole number >= 0 or a string", _is_sequence_id),
    "sequence_start": ("true or false", _is_bool),
    "sequence_end": ("true or false", _is_bool),
    "priority": ("a whole number >= 0", _is_uint64),
    "timeout": ("a whole number >= 0 (microseconds)", _is_uint64),
    "binary_data_output": ("true or false", _is_bool),
}
_OUTPUT_PARAMETERS = {
    "binary_data": ("true or false", _is_bool),
    "classification": ("a whole number >= 0", _is_uint64),
}
_INPUT_PARAMETERS = {"binary_data_size": ("a whole number >= 0", _is_uint64)}


def _check_parameters(parameters: Any, where: str, typed: dict[str, tuple[str, Any]]) -> None:
    if not isinstance(parameters, dict):
        raise RequestRefused(400, f"{where} must be an object")
    if any(isinstance(key, str) and key.startswith("shared_memory") for key in parameters):
        raise RequestRefused(400, f"{where}: shared memory is not available through a SageMaker endpoint")
    for key, (expected, valid) in typed.items():
        if key in parameters and not valid(parameters[key]):
            shown = json.dumps(parameters[key])[:50]
            raise RequestRefused(400, f"{where}: parameter {key!r} must be {expected}, not {shown}")


def _check_input(entry: Any, index: int, binary_allowed: bool) -> int:
    """Check one input; return the binary bytes it announces (0 for JSON data)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise RequestRefused(400, f'inputs[{index}] must be an object with a non-empty "name" string')
    where = f"input {entry['name'][:100]!r}"
    datatype = entry.get("datatype")
    if not isinstance(datatype, str) or datatype not in ELEMENT_BYTES:
        raise RequestRefused(
            400, f"{where}: unknown datatype {str(datatype)[:50]!r}; Triton's datatypes are {', '.join(ELEMENT_BYTES)}"
        )
    shape = entry.get("shape")
    if not isinstance(shape, list):
        raise RequestRefused(400, f"{where}: 'shape' must be a list of whole numbers")
    if len(shape) > MAX_DIMENSIONS:  # before anything else looks at the dims
        raise RequestRefused(
            400, f"{where}: shape has {len(shape)} dimensions; a tensor has at most {MAX_DIMENSIONS} (numpy's limit)"
        )
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise RequestRefused(400, f"{where}: 'shape' must be a list of whole numbers")
    if any(d < 0 for d in shape):
        raise RequestRefused(400, f"{where}: shape {_shown(shape)} has a negative dimension")
    if any(d > _INT64_MAX for d in shape):  # Triton's dims are int64; a larger one was its 500
        raise RequestRefused(400, f"{where}: a dimension of shape {_shown(shape)} is over 2^63-1")
    count = element_count(shape)
    if count > MAX_ELEMENTS:
        raise RequestRefused(
            400,
            f"{where}: shape {_shown(shape)} holds over {MAX_ELEMENTS} elements, more than a request of "
            f"{MAX_PAYLOAD_BYTES} bytes (SageMaker's limit) can carry",
        )
    parameters = entry.get("parameters", {})
    _check_parameters(parameters, where, _INPUT_PARAMETERS)
    if "binary_data_size" in parameters:
        return _check_binary(where, datatype, shape, count, parameters["binary_data_size"], binary_allowed, entry)
    if "data" not in entry:
        raise RequestRefused(400, f"{where} needs 'data' (or parameters.binary_data_size with the binary Content-Type)")
    values = _count_values(entry["data"], datatype, where, limit=count)
    if values != count:
        raise RequestRefused(400, f"{where}: shape {_shown(shape)} holds {count} values but 'data' has {values}")
    return 0


def element_count(shape: list[int]) -> int:
    """The product of `shape` (whole numbers >= 0), or MAX_ELEMENTS + 1 once it passes MAX_ELEMENTS: never a
    product of huge numbers (0 anywhere makes it 0, whatever the other dims)."""
    if 0 in shape:
        return 0
    count = 1
    for dim in shape:
        count *= dim
        if count > MAX_ELEMENTS:
            return MAX_ELEMENTS + 1
    return count


def _shown(shape: list[int]) -> str:
    text = str(shape)
    return text if len(text) <= 100 else text[:100] + "...]"


def _check_binary(
    where: str, datatype: str, shape: list[int], count: int, size: Any, binary_allowed: bool, entry: dict
) -> int:
    if not binary_allowed:
        message = f"{where}: binary_data_size needs Content-Type {BINARY_MEDIA_TYPE};json-header-size=N"
        raise RequestRefused(400, message)
    if "data" in entry:
        raise RequestRefused(400, f"{where} has both 'data' and parameters.binary_data_size; give one")
    if not _is_uint64(size):
        raise RequestRefused(400, f"{where}: binary_data_size must be a whole number >= 0")
    element = ELEMENT_BYTES[datatype]
    if element is not None and size != count * element:
        raise RequestRefused(
            400,
            f"{where}: shape {_shown(shape)} of {datatype} is {count * element} bytes but binary_data_size is {size}",
        )
    if element is None and count * _BYTES_PREFIX > size:
        raise RequestRefused(
            400,
            f"{where}: shape {_shown(shape)} of BYTES needs at least {count * _BYTES_PREFIX} bytes (a 4-byte length "
            f"per element) but binary_data_size is {size}",
        )
    return size


def _count_values(data: Any, datatype: str, where: str, *, limit: int) -> int:
    """Leaf values of (possibly nested) JSON data, each of the datatype's JSON type; stops past `limit`."""
    expected = json_value_test(datatype)
    count = 0
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not expected(item):
            raise RequestRefused(400, f"{where}: 'data' holds {json.dumps(item)[:50]}, not a {datatype} value")
        count += 1
        if count > limit:
            break
    return count


def json_value_test(datatype: str):
    """A test for one JSON value of `datatype`: BYTES a string, BOOL true/false, every number type a number and
    never true/false/null (Python's bool is an int: `true` would be sent as 1); integers must fit the type
    (Triton answered an INT64 2^63 or a UINT64 -1 with 500 "attempt to access JSON non-signed-integer as
    signed-integer")."""
    if datatype == "BYTES":
        return lambda v: isinstance(v, str)
    if datatype == "BOOL":
        return lambda v: isinstance(v, bool)
    if datatype.startswith(("FP", "BF")):
        return lambda v: isinstance(v, int | float) and not isinstance(v, bool) and abs(v) <= _DOUBLE_MAX
    bits = 8 * (ELEMENT_BYTES[datatype] or 0)
    low, high = (0, 2**bits - 1) if datatype.startswith("UINT") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


_DOUBLE_MAX = 1.7976931348623157e308
