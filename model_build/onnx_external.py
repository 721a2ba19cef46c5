"""The files an ONNX model's tensors live in besides the .onnx file itself (ONNX "external data").

A model over 2 GiB must keep its weights outside the protobuf, and many exporters do so by
choice: each such tensor has `data_location: EXTERNAL` and an `external_data` entry `location`, a
path relative to the folder of the .onnx file (onnx `external_data_helper`; onnxruntime resolves it
the same way and refuses a path that leaves that folder: "External data path escapes model
directory"). Those files are part of the model: they are copied, hashed into the artifact key,
packaged and checked with it.

Standard library only (key.py, imported by the CDK app at synth, uses it): the protobuf wire format
is walked directly, descending only into the messages that can hold tensors (graph, nodes,
attributes, functions, training graphs) and skipping every other field by its length, so a
multi-GiB model without external data costs one pass over its structure, not over its weights.
tests/model_build/test_onnx_external.py checks it against onnx's own `external_data_helper`.
"""

from __future__ import annotations

import mmap
import os
import posixpath
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from model_build.errors import ModelBuildError

# Field numbers from onnx/onnx.proto3 (onnx 1.23).
_MODEL_GRAPH, _MODEL_TRAINING_INFO, _MODEL_FUNCTIONS = 7, 20, 25
_TRAINING_INITIALIZATION, _TRAINING_ALGORITHM = 1, 2
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER = 1, 5, 15
_NODE_ATTRIBUTE = 5
_FUNCTION_NODE, _FUNCTION_ATTRIBUTE_PROTO = 7, 11
_ATTRIBUTE_T, _ATTRIBUTE_G, _ATTRIBUTE_GRAPHS, _ATTRIBUTE_TENSORS = 5, 6, 10, 11
_ATTRIBUTE_SPARSE_TENSOR, _ATTRIBUTE_SPARSE_TENSORS = 22, 23
_SPARSE_VALUES, _SPARSE_INDICES = 1, 2
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
# Subgraphs nest (If/Loop bodies); a real model is a few levels deep, a hostile file could recurse.
_MAX_DEPTH = 64


class MalformedModelError(ModelBuildError, ValueError):
    """The file is not a well-formed ONNX protobuf (truncated, random bytes)."""


class ExternalDataError(ModelBuildError, ValueError):
    """A tensor's external data cannot be shipped with the model (missing, outside its folder, a link)."""


@dataclass(frozen=True)
class ExternalData:
    """One file referenced by the model: `location` as written in the model, `path` on disk."""

    location: str
    path: Path


def _varint(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise MalformedModelError("truncated or malformed protobuf varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int | tuple[int, int]]]:
    """(field number, wire type, value): varints as int, length-delimited fields as (start, end)."""
    pos = start
    while pos < end:
        tag, pos = _varint(data, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise MalformedModelError("protobuf field number 0")
        if wire == 0:
            value, pos = _varint(data, pos, end)
            yield number, wire, value
        elif wire == 2:
            length, pos = _varint(data, pos, end)
            if pos + length > end:
                raise MalformedModelError("truncated protobuf: a field runs past the end of its message")
            yield number, wire, (pos, pos + length)
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > end:
                raise MalformedModelError("truncated protobuf: a fixed-size field runs past the end")
        else:
            # Groups (3, 4) are not used by onnx.proto; anything else is not protobuf at all.
            raise MalformedModelError(f"protobuf wire type {wire} is not valid in an ONNX model")


def _string(data: memoryview, span: tuple[int, int]) -> str:
    try:
        return bytes(data[span[0] : span[1]]).decode("utf-8")
    except UnicodeDecodeError as error:
        raise MalformedModelError(f"external data entry is not UTF-8 text ({error})") from None


def _tensor(data: memoryview, start: int, end: int) -> Iterator[str]:
    location = None
    external = False
    for number, wire, value in _fields(data, start, end):
        if number == _TENSOR_DATA_LOCATION and wire == 0:
            external = value == _EXTERNAL
        elif number == _TENSOR_EXTERNAL_DATA and wire == 2:
            key = entry_value = None
            for entry_number, entry_wire, span in _fields(data, *value):
                if entry_wire == 2 and entry_number == _ENTRY_KEY:
                    key = _string(data, span)
                elif entry_wire == 2 and entry_number == _ENTRY_VALUE:
                    entry_value = _string(data, span)
            if key == "location":
                location = entry_value or ""
    if external:
        if location is None:
            raise MalformedModelError("a tensor has data_location EXTERNAL but no 'location' entry")
        yield location


def _walk(data: memoryview, start: int, end: int, kind: str, depth: int) -> Iterator[str]:
    """Locations of the external tensors in the message `kind` held in data[start:end]."""
    if depth > _MAX_DEPTH:
        raise MalformedModelError(f"subgraphs nested more than {_MAX_DEPTH} deep")
    children = _CHILDREN[kind]
    for number, wire, value in _fields(data, start, end):
        if wire != 2 or number not in children:
            continue
        child = children[number]
        if child == "tensor":
            yield from _tensor(data, *value)
        else:
            yield from _walk(data, *value, child, depth + 1)


# message kind -> {field number: kind of the embedded message}
_CHILDREN: dict[str, dict[int, str]] = {
    "model": {_MODEL_GRAPH: "graph", _MODEL_TRAINING_INFO: "training", _MODEL_FUNCTIONS: "function"},
    "training": {_TRAINING_INITIALIZATION: "graph", _TRAINING_ALGORITHM: "graph"},
    "graph": {_GRAPH_NODE: "node", _GRAPH_INITIALIZER: "tensor", _GRAPH_SPARSE_INITIALIZER: "sparse"},
    "function": {_FUNCTION_NODE: "node", _FUNCTION_ATTRIBUTE_PROTO: "attribute"},
    "node": {_NODE_ATTRIBUTE: "attribute"},
    "attribute": {
        _ATTRIBUTE_T: "tensor",
        _ATTRIBUTE_TENSORS: "tensor",
        _ATTRIBUTE_G: "graph",
        _ATTRIBUTE_GRAPHS: "graph",
        _ATTRIBUTE_SPARSE_TENSOR: "sparse",
        _ATTRIBUTE_SPARSE_TENSORS: "sparse",
    },
    "sparse": {_SPARSE_VALUES: "tensor", _SPARSE_INDICES: "tensor"},
}


def external_locations(model_path: Path) -> list[str]:
    """The distinct `location`s of the model's external tensors, in first-seen order.

    Raises MalformedModelError when the file is not a well-formed protobuf; OSError when it cannot be read.
    """
    with open(model_path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        if size == 0:
            return []
        with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            data = memoryview(mapped)
            try:
                return list(dict.fromkeys(_walk(data, 0, size, "model", 0)))
            finally:
                data.release()


def check_location(location: str) -> str | None:
    """Why `location` cannot be shipped with the model (None when it can): it must name a file inside
    the model file's folder, as onnxruntime and onnx.checker require."""
    if not location:
        return "location is empty"
    if "\\" in location or "\0" in location:
        return f"location {location!r} holds a backslash or NUL; use a plain relative path"
    if posixpath.isabs(location):
        return f"location {location!r} is an absolute path; it must be relative to the model file's folder"
    normal = posixpath.normpath(location)
    if normal == ".." or normal.startswith("../") or normal == ".":
        return f"location {location!r} leaves the model file's folder"
    return None


def external_data(model_path: Path) -> list[ExternalData]:
    """Every file the model's tensors are stored in, validated: a relative path inside the model file's
    folder, through no symlink, to a regular file. Raises ExternalDataError naming what is wrong (or
    MalformedModelError)."""
    model_path = Path(model_path)
    folder = model_path.parent
    found = []
    for location in external_locations(model_path):
        problem = check_location(location)
        if problem:
            raise ExternalDataError(f"external data {problem}")
        path = folder / posixpath.normpath(location)
        # Each component below the folder is looked at without following links: a symlink anywhere
        # on the way could lead out of the folder (and is not packaged).
        current = folder
        for part in Path(posixpath.normpath(location)).parts:
            current = current / part
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                raise ExternalDataError(
                    f"external data file {location!r} does not exist beside the model ({path})"
                ) from None
            if stat.S_ISLNK(info.st_mode):
                raise ExternalDataError(
                    f"external data {location!r} goes through a symbolic link ({current}); "
                    "store the data file itself beside the model"
                )
        if not stat.S_ISREG(info.st_mode):
            raise ExternalDataError(f"external data {location!r} is not a regular file ({path})")
        found.append(ExternalData(location, path))
    return found


def copy_with_external_data(source: Path, target: Path) -> list[Path]:
    """Copy the ONNX model `source` to `target` with every external data file it names, each to the
    same relative location beside `target`; data first and the model last, each written atomically.
    Returns the data files written. Raises ExternalDataError / MalformedModelError like external_data."""
    from model_build.atomic import atomic_path

    source, target = Path(source), Path(target)
    written = []
    for item in external_data(source):
        destination = target.parent / posixpath.normpath(item.location)
        if destination == target:
            raise ExternalDataError(f"external data {item.location!r} has the model file's own name {target.name}")
        destination.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(destination) as temp:
            shutil.copyfile(item.path, temp)
        written.append(destination)
    with atomic_path(target) as temp:
        shutil.copyfile(source, temp)
    return written
