"""Load-test inputs generated from a model's `config.pbtxt` (`loadtest --model-config`).

Each input gets its config dims (a variable extent, -1, becomes 1), with the batch axis Triton prepends when
`max_batch_size` > 0 set to `--batch-size`; values are random (fixed seed) in the input's data type: floats in
[0, 1), integers in [0, 10) (small enough to be valid token or class ids), booleans. TYPE_STRING inputs carry
bytes whose meaning only the model knows (an image, text), so they are refused with the options that give them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.errors import InvalidInputError
from endpoint_client.limits import MAX_PAYLOAD_BYTES

# Triton's config data types that map to a NumPy dtype (the build check uses the same table).
NUMPY_TYPES = {
    "TYPE_BOOL": np.bool_,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
}


def read_config(path: Path) -> tuple[Path, mc.ModelConfig]:
    file = path / "config.pbtxt" if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise InvalidInputError(f"--model-config {file}: cannot read it ({reason})") from None
    config = mc.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as error:
        raise InvalidInputError(f"--model-config {file}: not a Triton model config: {error}") from None
    return file, config


def generated_inputs(path: Path, *, batch_size: int, seed: int = 0) -> tuple[dict[str, np.ndarray], int]:
    """(tensors, inferences per request): the request's batch size when the model batches, else 1."""
    file, config = read_config(path)
    if not config.input:
        raise InvalidInputError(f"{file}: input: the config names no inputs, so none can be generated")
    batching = config.max_batch_size > 0
    if batching and batch_size > config.max_batch_size:
        raise InvalidInputError(
            f"--batch-size {batch_size}: {file} allows at most max_batch_size {config.max_batch_size}"
        )
    if not batching and batch_size != 1:
        raise InvalidInputError(f"--batch-size {batch_size}: {file} has max_batch_size 0 (no batching); leave it 1")
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}
    size = 0
    for spec in config.input:
        type_name = mc.DataType.Name(spec.data_type)
        if type_name not in NUMPY_TYPES:
            raise InvalidInputError(
                f"{file}: input {spec.name!r} is {type_name}: generated inputs cover numeric and boolean types; "
                "give this input as invoke does (--raw NAME=FILE, --input, --tensor or --inputs-json)"
            )
        shape = ([batch_size] if batching else []) + [1 if d < 0 else int(d) for d in spec.dims]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        size += count * np.dtype(NUMPY_TYPES[type_name]).itemsize
        if size > MAX_PAYLOAD_BYTES:
            raise InvalidInputError(
                f"{file}: input {spec.name!r} {shape}: the generated request exceeds SageMaker's "
                f"{MAX_PAYLOAD_BYTES}-byte payload limit; use a smaller --batch-size"
            )
        tensors[spec.name] = _values(rng, NUMPY_TYPES[type_name], shape)
    return tensors, batch_size if batching else 1


def _values(rng: np.random.Generator, dtype: type, shape: list[int]) -> np.ndarray:
    if dtype is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.floating):
        return rng.random(size=shape).astype(dtype)
    return rng.integers(0, 10, size=shape).astype(dtype)
