"""Input tensors from files and command-line specs, checked before anything is sent.

- `NAME=path.npy`: one tensor from a numpy file; `path.npz`: every array in it, by its key.
- `NAME=DTYPE:SHAPE:VALUES`, e.g. `INPUT0=FP32:1x4:1,2,3,4` (Triton datatypes; SHAPE `AxB`).
- A KServe v2 request as JSON: `{"inputs": [{"name", "datatype", "shape", "data"}]}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from tritonclient.utils import triton_to_np_dtype

from endpoint_client.errors import InvalidInputError

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


def _reshape(values: np.ndarray, shape: list[int], where: str) -> np.ndarray:
    if any(d < 0 for d in shape):
        raise InvalidInputError(f"{where}: shape {shape} has a negative dimension")
    if values.size != int(np.prod(shape)):
        raise InvalidInputError(
            f"{where}: {values.size} values do not fill shape {shape} ({int(np.prod(shape))} needed)"
        )
    return values.reshape(shape)


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
    try:
        shape = [int(d) for d in shape_text.lower().split("x")]
    except ValueError:
        raise InvalidInputError(f"{where}: shape {shape_text!r} is not dimensions joined by 'x' (e.g. 1x4)") from None
    items = [v.strip() for v in values_text.split(",") if v.strip()]
    values = _parse_values(items, dtype, where, datatype.upper())
    return name, _reshape(values, shape, where)


def _parse_values(items: list[str], dtype: np.dtype, where: str, datatype: str) -> np.ndarray:
    if dtype == np.object_:  # BYTES: each value is a UTF-8 string
        return np.array([v.encode() for v in items], dtype=np.object_)
    if dtype == np.bool_:
        truth = {"true": True, "1": True, "false": False, "0": False}
        if any(v.lower() not in truth for v in items):
            raise InvalidInputError(f"{where}: BOOL values must be true/false/1/0, got {','.join(items)!r}")
        return np.array([truth[v.lower()] for v in items], dtype=np.bool_)
    try:
        return np.array(items).astype(dtype)
    except ValueError:
        raise InvalidInputError(f"{where}: values {','.join(items)!r} are not all {datatype} numbers") from None


def load_array_file(spec: str) -> dict[str, np.ndarray]:
    """`NAME=path.npy` -> {NAME: array}; `path.npz` -> every array in the archive, by key."""
    if spec.endswith(".npz") and "=" not in spec:
        path = Path(spec)
        try:
            with np.load(path, allow_pickle=False) as archive:
                return {key: archive[key] for key in archive.files}
        except (OSError, ValueError) as error:
            raise InvalidInputError(f"{path}: not a readable .npz file ({error})") from error
    name, path_text = _split_name(spec, "INPUT0=input0.npy, or inputs.npz")
    path = Path(path_text)
    if path.suffix != ".npy":
        raise InvalidInputError(f"input {name!r}: {path} is not a .npy file (use NAME=file.npy, or a .npz alone)")
    try:
        return {name: np.load(path, allow_pickle=False)}
    except (OSError, ValueError) as error:
        raise InvalidInputError(f"input {name!r}: {path} is not a readable .npy file ({error})") from error


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
        label = f"{where}: input {entry['name']!r}"
        dtype = numpy_dtype(str(entry["datatype"]), label)
        flat = np.array(entry["data"], dtype=object).reshape(-1)
        try:
            values = (
                np.array([v.encode() if isinstance(v, str) else v for v in flat], dtype=object)
                if dtype == np.object_
                else flat.astype(dtype)
            )
        except (TypeError, ValueError):
            raise InvalidInputError(f"{label}: data are not all {entry['datatype']} values") from None
        tensors[entry["name"]] = _reshape(values, [int(d) for d in entry["shape"]], label)
    return tensors


def load_v2_json_file(path: Path) -> dict[str, np.ndarray]:
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise InvalidInputError(f"{path}: cannot read ({error.strerror})") from error
    except ValueError as error:
        raise InvalidInputError(f"{path}: not valid JSON ({error})") from error
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
