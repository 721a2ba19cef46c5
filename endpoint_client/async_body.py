"""An asynchronous request's body, streamed: the same bytes `invoke` sends, never held whole in memory.

An asynchronous request travels through S3 and may be far larger than a real-time one: "requests with large
payload sizes (up to 1GB)" (SageMaker Developer Guide, "Asynchronous inference"), so the body is a sequence of
parts (bytes in memory, or a slice of a file) that is read a chunk at a time by the S3 upload or the local
input folder's writer.

- `--input NAME=FILE.npy` of a numeric array: the file's data section is streamed as the tensor's binary data
  (binary+json encoding); only the .npy header is read up front. Other inputs (`--tensor`, `--raw`,
  `--inputs-json`, presets, .npz) are built as `invoke` builds them (endpoint_client.inputs, in memory, each
  within the real-time limit) and sent beside them.
- `--body FILE --content-type TYPE`: a body already encoded, sent as it is.

The JSON header is built like tritonclient's `InferenceServerClient.generate_request_body`
(`tritonclient/http/_utils.py` `_get_inference_request`): tests compare the two byte for byte.
"""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import rapidjson
import tritonclient.http as triton_http
from tritonclient.utils import np_to_triton_dtype

from endpoint_client.codec import BINARY_CONTENT_TYPE_PREFIX, EncodedRequest, Encoding, encode_request
from endpoint_client.errors import InvalidInputError
from endpoint_client.inputs import regular_file
from endpoint_client.request_check import MAX_DIMENSIONS

# "large payload sizes (up to 1GB)": SageMaker Developer Guide, "Asynchronous inference" (async-inference.html).
MAX_ASYNC_PAYLOAD_BYTES = 1_000_000_000
CHUNK_BYTES = 8 * 1024 * 1024  # what one read() returns at most: the S3 transfer's part size order
# The body's ContentType travels in InvokeEndpointAsync's X-Amzn-SageMaker-Content-Type header: botocore's
# sagemaker-runtime model, shape Header: max 1024, pattern \p{ASCII}*.
MAX_CONTENT_TYPE_CHARS = 1024


@dataclass(frozen=True)
class FilePart:
    path: Path
    offset: int
    length: int


@dataclass
class StreamedBody:
    """The body as parts; `size` and `content_type` are known before a byte is read."""

    parts: list[bytes | FilePart]
    content_type: str
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = sum(len(p) if isinstance(p, bytes) else p.length for p in self.parts)

    def open(self) -> BinaryIO:
        """A stream whose read(n) returns n bytes until the end (a raw read may stop at a part's end, which
        s3transfer would take for the end of the body)."""
        return io.BufferedReader(_PartsReader(self.parts), buffer_size=CHUNK_BYTES)

    def read_all(self) -> bytes:
        """The whole body in memory: only for small bodies (tests, the local real-time-sized flow)."""
        with self.open() as reader:
            return reader.read()


class _PartsReader(io.RawIOBase):
    """A read-only stream over the parts, opening each file only while it is read."""

    def __init__(self, parts: Sequence[bytes | FilePart]) -> None:
        self._parts = list(parts)
        self._index = 0
        self._done = 0  # bytes of the current part already returned
        self._file: BinaryIO | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._index < len(self._parts):
            part = self._parts[self._index]
            length = len(part) if isinstance(part, bytes) else part.length
            wanted = min(len(buffer), length - self._done, CHUNK_BYTES)
            if wanted <= 0:
                self._next()
                continue
            if isinstance(part, bytes):
                chunk = part[self._done : self._done + wanted]
            else:
                if self._file is None:
                    self._file = part.path.open("rb")
                    self._file.seek(part.offset)
                chunk = self._file.read(wanted)
                if not chunk:
                    raise InvalidInputError(f"{part.path}: the file got shorter while it was being sent")
            buffer[: len(chunk)] = chunk
            self._done += len(chunk)
            return len(chunk)
        return 0

    def _next(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._index += 1
        self._done = 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        super().close()


@dataclass(frozen=True)
class StreamedArray:
    """An input whose bytes stay in their file: a numeric .npy's data section, or a --raw file as one BYTES
    element (tritonclient's BYTES serialization: a 4-byte little-endian length, then the bytes)."""

    name: str
    datatype: str
    shape: list[int]
    data: FilePart
    prefix: bytes = b""  # sent before the file's bytes

    @property
    def size(self) -> int:
        return len(self.prefix) + self.data.length


def open_npy(name: str, path: Path) -> StreamedArray:
    """The header of `path` checked against the bytes present and the asynchronous payload limit."""
    where = f"input {name!r}: {path}"
    size = regular_file(path, f"input {name!r}", MAX_ASYNC_PAYLOAD_BYTES + 64 * 1024)
    try:
        with path.open("rb") as stream:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
            else:
                raise InvalidInputError(f"{where}: .npy format version {version} is not supported")
            offset = stream.tell()
    except OSError as error:
        raise InvalidInputError(f"{where}: cannot read it ({error.strerror})") from None
    except (ValueError, EOFError, SyntaxError, TypeError) as error:
        if isinstance(error, InvalidInputError):
            raise
        raise InvalidInputError(f"{where} is not a readable .npy file ({error})") from None
    shape = list(shape)
    if len(shape) > MAX_DIMENSIONS or any(d < 0 for d in shape):
        raise InvalidInputError(f"{where}: shape {str(shape)[:100]} is not a tensor shape (at most {MAX_DIMENSIONS})")
    if dtype.hasobject or fortran or dtype.byteorder == ">":
        raise InvalidInputError(
            f"{where}: only C-ordered little-endian numeric arrays stream; this one is {dtype}"
            f"{' in Fortran order' if fortran else ''} (BYTES tensors: --raw, or a .npy within the real-time limit)"
        )
    try:
        datatype = np_to_triton_dtype(dtype)
    except Exception:  # tritonclient raises bare errors for dtypes it does not know
        datatype = None
    if datatype is None:
        raise InvalidInputError(f"{where}: numpy dtype {dtype} has no Triton datatype")
    if _bytes_over(shape, dtype.itemsize, MAX_ASYNC_PAYLOAD_BYTES):
        raise InvalidInputError(
            f"{where}: shape {str(shape)[:100]} of {dtype} is over {MAX_ASYNC_PAYLOAD_BYTES} bytes, the largest "
            "asynchronous payload (SageMaker Developer Guide, 'Asynchronous inference': up to 1GB)"
        )
    declared = math.prod(shape) * dtype.itemsize
    if declared > size - offset:
        raise InvalidInputError(
            f"{where}: its header declares shape {shape} of {dtype} ({declared} bytes) but only {size - offset} "
            "bytes follow it (a truncated or forged file)"
        )
    return StreamedArray(name, datatype, shape, FilePart(path, offset, declared))


def _bytes_over(shape: list[int], itemsize: int, limit: int) -> bool:
    """Whether `shape` of `itemsize`-byte elements takes more than `limit` bytes: multiplied dim by dim, stopping
    as soon as it passes (never a product of huge numbers, as request_check.element_count)."""
    if 0 in shape:
        return False
    total = itemsize
    for dim in shape:
        total *= dim
        if total > limit:
            return True
    return False


def binary_body(
    streamed: Sequence[StreamedArray], in_memory: Mapping[str, np.ndarray], outputs: Sequence[str] = ()
) -> StreamedBody:
    """binary+json: tritonclient's header for every input, then each input's bytes in the header's order."""
    names = [s.name for s in streamed]
    repeated = sorted({n for n in names if names.count(n) > 1} | (set(names) & set(in_memory)))
    if repeated:
        raise InvalidInputError(f"input {repeated[0]!r} is given twice")
    tensors: list[dict] = []
    data: list[bytes | FilePart] = []
    for name, array in in_memory.items():
        encode_request({name: array}, encoding=Encoding.BINARY)  # the checks `invoke` makes, with its messages
        infer_input = triton_http.InferInput(name, list(np.asarray(array).shape), np_to_triton_dtype(array.dtype))
        infer_input.set_data_from_numpy(np.asarray(array), binary_data=True)
        tensors.append(infer_input._get_tensor())
        raw = infer_input._get_binary_data()
        data.append(raw if raw is not None else b"")
    for array in streamed:
        tensors.append(
            {
                "name": array.name,
                "shape": array.shape,
                "datatype": array.datatype,
                "parameters": {"binary_data_size": array.size},
            }
        )
        data.extend([array.prefix, array.data])
    if not tensors:
        raise InvalidInputError(
            "no inputs given: pass at least one tensor (--input, --tensor, --inputs-json or a preset)"
        )
    request: dict = {"inputs": tensors}
    if outputs:
        request["outputs"] = [triton_http.InferRequestedOutput(n, binary_data=True)._get_tensor() for n in outputs]
    else:
        request["parameters"] = {"binary_data_output": True}
    header = rapidjson.dumps(request).encode()  # tritonclient's own serializer: the same bytes
    total = len(header) + sum(len(p) if isinstance(p, bytes) else p.length for p in data)
    if total > MAX_ASYNC_PAYLOAD_BYTES:
        raise InvalidInputError(
            f"the request is {total} bytes; asynchronous endpoints take at most {MAX_ASYNC_PAYLOAD_BYTES} "
            "(SageMaker Developer Guide, 'Asynchronous inference': up to 1GB)"
        )
    return StreamedBody([header, *[p for p in data if not (isinstance(p, bytes) and not p)]], _binary_type(header))


def _binary_type(header: bytes) -> str:
    return f"{BINARY_CONTENT_TYPE_PREFIX}{len(header)}"


def encoded_body(request: EncodedRequest) -> StreamedBody:
    return StreamedBody([request.body], request.content_type)


def file_body(path: Path, content_type: str) -> StreamedBody:
    """`--body FILE --content-type TYPE`: the file as it is, streamed."""
    if not content_type or len(content_type) > MAX_CONTENT_TYPE_CHARS or not content_type.isascii():
        raise InvalidInputError(
            f"--content-type {content_type[:100]!r}: 1-{MAX_CONTENT_TYPE_CHARS} ASCII characters "
            "(InvokeEndpointAsync ContentType, botocore sagemaker-runtime model)"
        )
    if not content_type.isprintable():
        raise InvalidInputError(f"--content-type {content_type[:100]!r}: no control characters in a header")
    size = regular_file(path, "--body", MAX_ASYNC_PAYLOAD_BYTES)
    if size > MAX_ASYNC_PAYLOAD_BYTES:  # regular_file's message names the real-time limit: say ours
        raise InvalidInputError(f"--body {path}: over {MAX_ASYNC_PAYLOAD_BYTES} bytes")
    return StreamedBody([FilePart(path, 0, size)], content_type)


def open_raw(spec: str, shape: list[int]) -> StreamedArray:
    """`--raw NAME=FILE`: the file as the one element of a BYTES tensor of `shape`, as `invoke --raw` sends it
    (endpoint_client.inputs.load_raw_file), streamed instead of read, up to the asynchronous payload limit."""
    name, sep, path_text = spec.partition("=")
    if not sep or not name or not path_text:
        raise InvalidInputError(f"{spec!r} is not NAME=FILE (example: image=cat.jpg)")
    if math.prod(shape) != 1:
        raise InvalidInputError(f"--raw-shape {'x'.join(map(str, shape))} holds {math.prod(shape)} elements, not 1")
    path = Path(path_text)
    size = regular_file(path, f"input {name!r}", MAX_ASYNC_PAYLOAD_BYTES)
    return StreamedArray(name, "BYTES", list(shape), FilePart(path, 0, size), struct.pack("<I", size))


def split_npy_specs(specs: Sequence[str]) -> tuple[list[StreamedArray], list[str]]:
    """`--input` specs: NAME=FILE.npy streamed (when numeric), the rest (.npz, BYTES arrays) left to inputs.py."""
    streamed, rest = [], []
    for spec in specs:
        name, sep, path_text = spec.partition("=")
        if sep and name and path_text.endswith(".npy") and _numeric_npy(Path(path_text)):
            streamed.append(open_npy(name, Path(path_text)))
        else:
            rest.append(spec)
    return streamed, rest


def _numeric_npy(path: Path) -> bool:
    """Whether `path` is a .npy of a numeric array (an object array, or anything unreadable, goes to inputs.py,
    which says what is wrong with it)."""
    try:
        with path.open("rb") as stream:
            version = np.lib.format.read_magic(stream)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            _, _, dtype = read(stream)
    except (OSError, ValueError, EOFError, SyntaxError, TypeError):
        return False
    return not dtype.hasobject
