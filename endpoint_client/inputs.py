"""Input tensors from files and command-line specs, checked before anything is sent.

- `NAME=path.npy`: one tensor from a numpy file; `path.npz`: every array in it, by its key.
- `NAME=DTYPE:SHAPE:VALUES`, e.g. `INPUT0=FP32:1x4:1,2,3,4` (Triton datatypes; SHAPE `AxB`).
- A KServe v2 request as JSON: `{"inputs": [{"name", "datatype", "shape", "data"}]}`.
- `NAME=FILE` raw: the file's bytes as one BYTES element (an image, a document), the way the
  reference pipelines take requests.
"""

from __future__ import annotations

import io
import json
import math
import re
import stat
import tokenize
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from tritonclient.utils import triton_to_np_dtype

from endpoint_client.errors import InvalidInputError
from endpoint_client.limits import MAX_PAYLOAD_BYTES
from endpoint_client.request_check import MAX_DIMENSIONS, element_count, json_value_test

TRITON_DATATYPES = (
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
)


def numpy_dtype(datatype: str, where: str) -> np.dtype:
    if datatype.upper() not in TRITON_DATATYPES:
        raise InvalidInputError(f"{where}: unknown datatype {datatype!r}; use one of {', '.join(TRITON_DATATYPES)}")
    return np.dtype(triton_to_np_dtype(datatype.upper()))


def _split_name(spec: str, example: str) -> tuple[str, str]:
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        raise InvalidInputError(f"{spec!r} is not NAME=... (example: {example})")
    return name, rest


# A .npy/.npz's arrays are sent as they are, so one larger than a request can hold is refused unread;
# the slack covers .npy headers. JSON request files may be larger than their binary encoding.
MAX_ARRAY_FILE_BYTES = MAX_PAYLOAD_BYTES + 64 * 1024
MAX_JSON_FILE_BYTES = 8 * MAX_PAYLOAD_BYTES


def _check_shape(shape: list[int], where: str) -> None:
    """Every element costs at least a byte of the request, so no shape may hold more than the payload limit;
    the dim count is bounded first and the product is never taken of huge dims (issue 22 C2)."""
    if len(shape) > MAX_DIMENSIONS:
        raise InvalidInputError(f"{where}: shape has {len(shape)} dimensions; at most {MAX_DIMENSIONS}")
    if any(d < 0 for d in shape):
        raise InvalidInputError(f"{where}: shape {shape} has a negative dimension")
    if element_count(shape) > MAX_PAYLOAD_BYTES:
        raise InvalidInputError(
            f"{where}: shape {str(shape)[:100]} holds over {MAX_PAYLOAD_BYTES} elements, more than a request of "
            f"{MAX_PAYLOAD_BYTES} bytes (SageMaker's limit) can carry"
        )


def _reshape(values: np.ndarray, shape: list[int], where: str) -> np.ndarray:
    _check_shape(shape, where)
    if values.size != math.prod(shape):
        raise InvalidInputError(f"{where}: {values.size} values do not fill shape {shape} ({math.prod(shape)} needed)")
    return values.reshape(shape)


def regular_file(path: Path, where: str, limit: int) -> int:
    """The size of `path`, a regular file of at most `limit` bytes (a FIFO or device would block or never end)."""
    try:
        status = path.stat()
    except OSError as error:
        raise InvalidInputError(f"{where}: cannot read {path} ({error.strerror})") from error
    if not stat.S_ISREG(status.st_mode):
        raise InvalidInputError(f"{where}: {path} is not a regular file")
    if status.st_size > limit:
        raise InvalidInputError(
            f"{where}: {path} is {status.st_size} bytes; SageMaker real-time endpoints accept at most "
            f"{MAX_PAYLOAD_BYTES} bytes per request"
        )
    return status.st_size


def read_bounded(path: Path, where: str, limit: int) -> bytes:
    """At most `limit` bytes of a regular file, read with a cap (st_size can lie, e.g. in /proc)."""
    regular_file(path, where, limit)
    try:
        with path.open("rb") as stream:
            data = stream.read(limit + 1)
    except OSError as error:
        raise InvalidInputError(f"{where}: cannot read {path} ({error.strerror})") from error
    if len(data) > limit:
        raise InvalidInputError(f"{where}: {path} is over {limit} bytes")
    return data


def parse_tensor_spec(spec: str) -> tuple[str, np.ndarray]:
    """`NAME=DTYPE:SHAPE:VALUES` -> (name, array)."""
    example = "INPUT0=FP32:1x4:1,2,3,4"
    name, rest = _split_name(spec, example)
    parts = rest.split(":", 2)
    if len(parts) != 3:
        raise InvalidInputError(f"tensor {name!r}: {rest!r} is not DTYPE:SHAPE:VALUES (example: {example})")
    datatype, shape_text, values_text = parts
    where = f"tensor {name!r}"
    dtype = numpy_dtype(datatype, where)
    shape = parse_shape(shape_text, where)
    items = [v.strip() for v in values_text.split(",") if v.strip()]
    values = _parse_values(items, dtype, where, datatype.upper())
    return name, _reshape(values, shape, where)


def _utf8(values: list[str], where: str, fix: str) -> list[bytes]:
    """Each value as UTF-8 bytes; a value that is not text (a command line's non-UTF-8 bytes reach Python as
    lone surrogates, as does JSON's "\\ud800") is refused by position, never a traceback (issue 22 D)."""
    encoded = []
    for index, value in enumerate(values):
        try:
            encoded.append(value.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise InvalidInputError(
                f"{where}: value {index + 1} is not UTF-8 text (character {error.start + 1} cannot be encoded); {fix}"
            ) from None
    return encoded


def _parse_values(items: list[str], dtype: np.dtype, where: str, datatype: str) -> np.ndarray:
    if dtype == np.object_:  # BYTES: each value is a UTF-8 string
        fix = "send binary data from a file instead (--raw NAME=FILE, or a .npy of bytes)"
        return np.array(_utf8(items, where, fix), dtype=np.object_)
    if dtype == np.bool_:
        truth = {"true": True, "1": True, "false": False, "0": False}
        if any(v.lower() not in truth for v in items):
            raise InvalidInputError(f"{where}: BOOL values must be true/false/1/0, got {','.join(items)!r}")
        return np.array([truth[v.lower()] for v in items], dtype=np.bool_)
    try:
        if dtype.kind in "iu":  # whole numbers, each within the type's range
            numbers = [int(v) for v in items]
            info = np.iinfo(dtype)
            wrong = [n for n in numbers if not info.min <= n <= info.max]
            if wrong:
                raise InvalidInputError(f"{where}: {wrong[0]} is outside {datatype}'s range {info.min}..{info.max}")
            return np.array(numbers, dtype=dtype)
        return fitting_floats(np.array([float(v) for v in items], dtype=np.float64), dtype, where, datatype, items)
    except (ValueError, OverflowError) as error:
        if isinstance(error, InvalidInputError):
            raise
        raise InvalidInputError(f"{where}: values {','.join(items)[:200]!r} are not all {datatype} numbers") from None


def _npy_header(stream: BinaryIO, size: int, where: str) -> int:
    """Read a .npy header (`stream` at its start, `size` bytes in all) and check what it declares against the
    bytes present and the payload limit, before numpy allocates anything: a 128-byte file declaring shape
    (10**10,) made np.load allocate 37 GiB (review M8). Returns the bytes the array takes."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        else:  # 3.0: UTF-8 field names of a structured dtype, which no Triton datatype is
            raise InvalidInputError(
                f"{where}: .npy format version {version[0]}.{version[1]} (UTF-8 field names) is not supported"
            )
    except (ValueError, EOFError, SyntaxError, TypeError, tokenize.TokenError) as error:
        # TokenError: numpy tokenizes the header dict, and one cut off mid-way ends the tokenizer (review M3)
        if isinstance(error, InvalidInputError):
            raise
        raise InvalidInputError(f"{where} is not a readable .npy file ({error})") from None
    if dtype.hasobject:
        raise InvalidInputError(f"{where}: an array of Python objects ({dtype}) cannot be read without pickle")
    _check_shape(list(shape), where)
    declared = math.prod(shape) * dtype.itemsize
    present = size - stream.tell()
    if declared > MAX_PAYLOAD_BYTES:
        raise InvalidInputError(
            f"{where}: its header declares shape {shape} of {dtype} ({declared} bytes); a request carries at most "
            f"{MAX_PAYLOAD_BYTES} bytes (SageMaker's limit)"
        )
    if declared > present:
        raise InvalidInputError(
            f"{where}: its header declares shape {shape} of {dtype} ({declared} bytes) but only {present} bytes "
            "follow it (a truncated or forged file)"
        )
    return declared


def _load_npy(data: bytes, where: str) -> np.ndarray:
    """One .npy file's bytes -> its array, header checked first."""
    _npy_header(io.BytesIO(data), len(data), where)
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except MemoryError:
        raise InvalidInputError(f"{where}: not enough memory to load it") from None
    except (OSError, ValueError, EOFError) as error:
        raise InvalidInputError(f"{where} is not a readable .npy file ({error})") from None


def _load_npz(data: bytes, path: Path) -> dict[str, np.ndarray]:
    """Every array of a .npz: the members' real sizes (the zip directory) and each member's header (against
    the bytes it really holds) are checked, and what the headers declare in all against the payload limit,
    before numpy allocates any array (review finding 12 and M8)."""
    members: dict[str, tuple[bytes, str]] = {}
    declared = 0
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zipped:
            inflated = sum(member.file_size for member in zipped.infolist())
            if inflated > MAX_ARRAY_FILE_BYTES:
                raise InvalidInputError(
                    f"{path}: its arrays take {inflated} bytes; more than a request of {MAX_PAYLOAD_BYTES} bytes "
                    "(SageMaker's limit) can carry"
                )
            for member in zipped.infolist():
                where = f"{path}: member {member.filename[:100]!r}"
                key = member.filename.removesuffix(".npy")
                if key == member.filename:
                    raise InvalidInputError(f"{where} is not a .npy array")
                if key in members:
                    raise InvalidInputError(f"{where} is in the archive twice")
                raw = zipped.read(member)  # no more than its file_size: zipfile stops there
                declared += _npy_header(io.BytesIO(raw), len(raw), where)
                members[key] = (raw, where)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, zlib.error) as error:
        if isinstance(error, InvalidInputError):
            raise
        raise InvalidInputError(f"{path}: not a readable .npz file ({error})") from None
    if declared > MAX_PAYLOAD_BYTES:
        raise InvalidInputError(
            f"{path}: its arrays take {declared} bytes; more than a request of {MAX_PAYLOAD_BYTES} bytes "
            "(SageMaker's limit) can carry"
        )
    return {key: _load_npy(raw, where) for key, (raw, where) in members.items()}


_ASCII_WHOLE_NUMBER = re.compile(r"[0-9]+")
_INFINITY_WORDS = ("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def fitting_floats(
    values: np.ndarray, dtype: np.dtype, where: str, datatype: str, written: list[str] | None = None
) -> np.ndarray:
    """`values` (float64) as `dtype`; a value that the type cannot hold is refused, not made infinite (review
    LOW12: FP16 1e10 became inf with a RuntimeWarning). Infinity and NaN written as such are kept."""
    with np.errstate(over="ignore", invalid="ignore"):
        converted = values.astype(dtype)
    overflowed = np.isinf(converted) & ~np.isinf(values)
    if written is not None:  # a literal beyond float64 (1e400) is already infinite: only "inf" may be
        # dtype=bool: an empty list would otherwise make a float64 array that `&` refuses (review M2)
        words = [v.strip().lower() not in _INFINITY_WORDS for v in written]
        overflowed |= np.isinf(values) & np.array(words, dtype=np.bool_)
    if overflowed.any():
        index = int(np.argmax(overflowed))
        value = written[index] if written is not None else repr(float(values.flat[index]))
        limit = f"{float(np.finfo(dtype).max):.8g}"  # 65504, 3.4028235e+38, 1.7976931e+308
        raise InvalidInputError(f"{where}: {value} is outside {datatype}'s range -{limit}..{limit}")
    return converted


def load_array_file(spec: str) -> dict[str, np.ndarray]:
    """`NAME=path.npy` -> {NAME: array}; `path.npz` -> every array in the archive, by key. The file is read
    once, bounded; each array's header is checked before numpy allocates it."""
    if spec.endswith(".npz") and "=" not in spec:
        path = Path(spec)
        return _load_npz(read_bounded(path, str(path), MAX_ARRAY_FILE_BYTES), path)
    name, path_text = _split_name(spec, "INPUT0=input0.npy, or inputs.npz")
    path = Path(path_text)
    if path.suffix != ".npy":
        raise InvalidInputError(f"input {name!r}: {path} is not a .npy file (use NAME=file.npy, or a .npz alone)")
    data = read_bounded(path, f"input {name!r}", MAX_ARRAY_FILE_BYTES)
    return {name: _load_npy(data, f"input {name!r}: {path}")}


def inputs_from_v2_json(document: Any, where: str) -> dict[str, np.ndarray]:
    """A KServe v2 inference request (`{"inputs": [...]}`) -> {name: array}."""
    if not isinstance(document, dict) or not isinstance(document.get("inputs"), list):
        raise InvalidInputError(
            f'{where}: expected a KServe v2 request {{"inputs": [{{"name", "datatype", "shape", "data"}}]}}'
        )
    tensors: dict[str, np.ndarray] = {}
    for index, entry in enumerate(document["inputs"]):
        missing = [k for k in ("name", "datatype", "shape", "data") if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise InvalidInputError(f"{where}: inputs[{index}] lacks {', '.join(missing)}")
        if not isinstance(entry["name"], str) or not entry["name"]:
            raise InvalidInputError(f"{where}: inputs[{index}].name must be a non-empty string")
        label = f"{where}: input {entry['name'][:100]!r}"
        if not isinstance(entry["datatype"], str):
            raise InvalidInputError(f"{label}: datatype must be a string such as FP32")
        dtype = numpy_dtype(entry["datatype"], label)
        shape = entry["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise InvalidInputError(f"{label}: shape must be a list of whole numbers, e.g. [1, 4]")
        _check_shape(shape, label)
        try:
            flat = np.array(entry["data"], dtype=object).reshape(-1)
        except (TypeError, ValueError, RecursionError):
            raise InvalidInputError(f"{label}: data are not all {entry['datatype']} values") from None
        datatype = entry["datatype"].upper()
        valid = json_value_test(datatype)
        wrong = next((value for value in flat if not valid(value)), _NONE)
        if wrong is not _NONE:  # JSON true/null in a number tensor would be sent as 1 / nan (issue 22 D)
            boolean_or_null = wrong is None or isinstance(wrong, bool)
            hint = " (true/false are for BOOL tensors; null is no value)" if boolean_or_null else ""
            raise InvalidInputError(f"{label}: data holds {_json_text(wrong)}, not a {datatype} value{hint}")
        if dtype == np.object_:
            values = np.array(_utf8(list(flat), label, "BYTES data in JSON must be text"), dtype=object)
        elif dtype.kind == "f":
            values = fitting_floats(flat.astype(np.float64), dtype, label, datatype)
        else:
            values = flat.astype(dtype)
        tensors[entry["name"]] = _reshape(values, shape, label)
    return tensors


_NONE = object()


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value)[:50]
    except (TypeError, ValueError):
        return repr(value)[:50]


def _finite_json_number(text: str) -> float:
    """A JSON number beyond float64 (1e400) is refused rather than read as infinity."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:50]} is too large for a double")
    return value


def load_v2_json_file(path: Path) -> dict[str, np.ndarray]:
    text = read_bounded(path, str(path), MAX_JSON_FILE_BYTES)
    try:
        document = json.loads(text, parse_float=_finite_json_number)
    except ValueError as error:  # UnicodeDecodeError included
        raise InvalidInputError(f"{path}: not valid JSON ({error})") from error
    except RecursionError:
        raise InvalidInputError(f"{path}: the JSON is nested too deeply") from None
    return inputs_from_v2_json(document, str(path))


def merge(*groups: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Combine tensors from several sources; the same name twice is an error, not a silent override."""
    merged: dict[str, np.ndarray] = {}
    for group in groups:
        for name, array in group.items():
            if name in merged:
                raise InvalidInputError(f"input {name!r} is given twice")
            merged[name] = array
    return merged


def parse_shape(text: str, where: str) -> list[int]:
    dimensions = text.lower().split("x")
    # ASCII digits only: int() also reads other scripts' digits ("٣" is 3), "+1", " 1" and "1_0" (review L4)
    if not all(_ASCII_WHOLE_NUMBER.fullmatch(d) for d in dimensions):
        raise InvalidInputError(f"{where}: shape {text[:100]!r} is not dimensions joined by 'x' (e.g. 1x4)")
    shape = [int(d) for d in dimensions]
    _check_shape(shape, where)
    return shape


def load_raw_file(spec: str, shape: list[int]) -> dict[str, np.ndarray]:
    """`NAME=FILE` -> {NAME: a BYTES tensor of `shape` (one element) holding the file's bytes}."""
    name, path_text = _split_name(spec, "image=cat.jpg")
    path = Path(path_text)
    if int(np.prod(shape)) != 1:
        raise InvalidInputError(f"--raw-shape {'x'.join(map(str, shape))} holds {int(np.prod(shape))} elements, not 1")
    data = read_bounded(path, f"input {name!r}", MAX_PAYLOAD_BYTES)  # a bigger one could not be sent
    return {name: np.array([data], dtype=np.object_).reshape(shape)}
