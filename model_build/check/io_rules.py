"""Triton's rules for inputs, outputs, batch inputs and batch outputs (`ValidateModelIOConfig`).

From triton-inference-server/core `src/model_config_utils.cc`: `ValidateIOShape`, `ValidateModelInput`,
`ValidateModelOutput`, `ValidateNonLinearFormatIO`, `ValidateBatchIO`. One problem per tensor (the
first rule it breaks, as Triton reports it) and per batch input/output.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from tritonclient.grpc import model_config_pb2 as pb

from model_build.check.problems import Problem
from model_build.check.schema import TENSORRT_PLATFORM, ModelConfig

WILDCARD = -1
DataType = pb.DataType


def element_count(dims: Iterable[int]) -> int:
    """Triton's GetElementCount: -1 when any dimension is variable; 0 for an empty shape."""
    dims = list(dims)
    if not dims:
        return 0
    if WILDCARD in dims:
        return WILDCARD
    return math.prod(dims)


def _chunk_counts(dims: Iterable[int]) -> list[int]:
    """Element counts of the runs between variable-size dimensions ([2, 4, -1, 6] -> [8, 6])."""
    counts, current = [], 1
    for dim in dims:
        if dim == WILDCARD:
            counts.append(current)
            current = 1
        else:
            current *= dim
    counts.append(current)
    return counts


def _io_shape_problem(io, max_batch_size: int, prefix: str) -> tuple[str, str] | None:
    """Triton's ValidateIOShape: (field suffix, message) of the first broken rule, or None."""
    if not io.name:
        return "name", f"{prefix}must specify 'name'"
    named = f"{prefix}'{io.name}' "
    if io.data_type == DataType.TYPE_INVALID:
        return "data_type", named + "must specify 'data_type'"
    if not io.dims:
        return "dims", named + "must specify 'dims'"
    has_reshape = io.HasField("reshape")
    if has_reshape and not io.reshape.shape and max_batch_size == 0:
        return "reshape", (
            named + "cannot have empty reshape for non-batching model as scalar tensors are not supported"
        )
    if any(dim < 1 and dim != WILDCARD for dim in io.dims):
        return "dims", named + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension"
    if not has_reshape:
        return None
    if any(dim < 1 and dim != WILDCARD for dim in io.reshape.shape):
        return "reshape", (
            named + "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension"
        )
    dims_size, reshape_size = element_count(io.dims), element_count(io.reshape.shape)
    # Same element count, or both variable; an empty reshape needs dims of exactly one element.
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        return "reshape", named + "has different size for dims and reshape"
    if dims_size == WILDCARD:
        dim_chunks, reshape_chunks = _chunk_counts(io.dims), _chunk_counts(io.reshape.shape)
        if len(dim_chunks) != len(reshape_chunks):
            return "reshape", named + "has different number of variable-size dimensions for dims and reshape"
        if dim_chunks != reshape_chunks:
            return "reshape", named + "has different size for dims and reshape"
    return None


def _io_problem(io, config: ModelConfig, *, is_input: bool) -> tuple[str, str] | None:
    """Triton's ValidateModelInput / ValidateModelOutput."""
    prefix = "model input " if is_input else "model output "
    found = _io_shape_problem(io, config.max_batch_size, prefix)
    if found:
        return found
    formats = (pb.ModelInput.FORMAT_NHWC, pb.ModelInput.FORMAT_NCHW)
    if is_input and io.format in formats and len(io.dims) != 3:
        return "format", "model input NHWC/NCHW require 3 dims"
    if config.platform != TENSORRT_PLATFORM and io.is_shape_tensor:
        return "is_shape_tensor", "shape tensors are only supported for TensorRT platform"
    if io.is_non_linear_format_io:
        if config.platform != TENSORRT_PLATFORM:
            return "is_non_linear_format_io", "Non-linear IO format is only supported for the TensorRT platform"
        if len(io.dims) != 3:
            kind = "input" if is_input else "output"
            return "is_non_linear_format_io", f"Non-linear IO format {kind} requires 3 dims"
    return None


def _batch_io_problems(config: ModelConfig) -> Iterator[tuple[str, str]]:
    """Triton's ValidateBatchIO, one problem per batch input / batch output."""
    input_names = {io.name for io in config.input}
    output_names = {io.name for io in config.output}
    for index, batch_input in enumerate(config.batch_input):
        where = f"batch_input[{index}]"
        kind = pb.BatchInput.Kind.Name(batch_input.kind)
        if len(batch_input.source_input) != 1:
            yield where, f"batch input kind '{kind}' expects 1 source input, got {len(batch_input.source_input)}"
        elif batch_input.data_type not in (DataType.TYPE_INT32, DataType.TYPE_FP32):
            yield where, "batch input data type must be TYPE_INT32 or TYPE_FP32"
        else:
            unknown = [name for name in batch_input.source_input if name not in input_names]
            if unknown:
                yield where, f"unknown source input name '{unknown[0]}'"
    for index, batch_output in enumerate(config.batch_output):
        where = f"batch_output[{index}]"
        kind = pb.BatchOutput.Kind.Name(batch_output.kind)
        if len(batch_output.source_input) != 1:
            yield where, f"batch output kind '{kind}' expects 1 source input, got {len(batch_output.source_input)}"
            continue
        unknown = [name for name in batch_output.source_input if name not in input_names]
        if unknown:
            yield where, f"unknown source input name '{unknown[0]}'"
            continue
        seen: set[str] = set()
        for target in batch_output.target_name:
            if target not in output_names:
                yield where, f"unknown target output name '{target}'"
                break
            if target in seen:
                yield where, f"target output name '{target}' can only be specified once"
                break
            seen.add(target)


def io_problems(config: ModelConfig) -> list[Problem]:
    """Triton's ValidateModelIOConfig: every message ends with " for <model>"."""
    found: list[Problem] = []
    for is_input, tensors in ((True, config.input), (False, config.output)):
        kind = "input" if is_input else "output"
        for index, io in enumerate(tensors):
            problem = _io_problem(io, config, is_input=is_input)
            if problem:
                suffix, message = problem
                found.append(Problem(config.name, f"{kind}[{index}].{suffix}", f"{message} for {config.name}", "io"))
    for where, message in _batch_io_problems(config):
        found.append(Problem(config.name, where, f"{message} for {config.name}", "batch-io"))
    return found
