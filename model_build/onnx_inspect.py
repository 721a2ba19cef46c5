"""Read an ONNX model's real graph inputs and outputs in Triton's terms.

Everything generated from a model (config.pbtxt, the TensorRT build command, warm-up samples)
starts here, so a bad file is refused once, with its name, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto

from model_build.errors import InvalidModelError
from model_build.onnx_external import ExternalDataError, MalformedModelError, external_data
from model_build.ort_shapes import session_shapes

# ONNX element type -> Triton data type (model_config.proto DataType). Types Triton cannot carry
# (complex, float8, int4, ...) are refused rather than mapped to something close.
ONNX_TO_TRITON: dict[int, str] = {
    TensorProto.BOOL: "TYPE_BOOL",
    TensorProto.UINT8: "TYPE_UINT8",
    TensorProto.UINT16: "TYPE_UINT16",
    TensorProto.UINT32: "TYPE_UINT32",
    TensorProto.UINT64: "TYPE_UINT64",
    TensorProto.INT8: "TYPE_INT8",
    TensorProto.INT16: "TYPE_INT16",
    TensorProto.INT32: "TYPE_INT32",
    TensorProto.INT64: "TYPE_INT64",
    TensorProto.FLOAT16: "TYPE_FP16",
    TensorProto.FLOAT: "TYPE_FP32",
    TensorProto.DOUBLE: "TYPE_FP64",
    TensorProto.STRING: "TYPE_STRING",
    TensorProto.BFLOAT16: "TYPE_BF16",
}

DYNAMIC = -1
DEFAULT_DOMAIN = "ai.onnx"  # ONNX's default operator set ("" in a node's domain field)
ML_DOMAIN = "ai.onnx.ml"  # ONNX-ML: classical machine-learning operators (trees, linear models, ...)


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output: `dims` is the full ONNX shape, dynamic axes as -1."""

    name: str
    onnx_type: str  # "FLOAT", "INT64", ...: for messages
    triton_type: str  # "TYPE_FP32", ...
    dims: tuple[int, ...]
    # An output's shape as the graph declares it, where ONNX Runtime's session reports another (`dims`).
    declared: tuple[int, ...] | None = None

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class ModelSignature:
    path: Path
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # (domain, op_type) of every node, subgraphs included; the default domain is "ai.onnx".
    operators: frozenset[tuple[str, str]] = frozenset()
    # Why ONNX Runtime cannot load the model (None: it can; output dims are then the session's).
    ort_error: str | None = None

    def input(self, name: str) -> TensorSpec:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise KeyError(name)


def _dims(value_info: onnx.ValueInfoProto) -> tuple[int, ...]:
    shape = value_info.type.tensor_type.shape
    # A dim with dim_param ("batch") or neither field set is dynamic; dim_value 0 is "not set" in proto3.
    return tuple(dim.dim_value if dim.HasField("dim_value") and dim.dim_value > 0 else DYNAMIC for dim in shape.dim)


def _spec(path: Path, value_info: onnx.ValueInfoProto, role: str) -> TensorSpec:
    if not value_info.type.HasField("tensor_type"):
        kind = value_info.type.WhichOneof("value") or "unknown"
        raise InvalidModelError(
            f"{path}: {role} {value_info.name!r} is a {kind} value, not a tensor; Triton model inputs and outputs "
            "must be tensors"
        )
    elem_type = value_info.type.tensor_type.elem_type
    onnx_type = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else str(elem_type)
    if elem_type not in ONNX_TO_TRITON:
        supported = ", ".join(sorted(TensorProto.DataType.Name(t) for t in ONNX_TO_TRITON))
        raise InvalidModelError(
            f"{path}: {role} {value_info.name!r} has ONNX type {onnx_type}, which Triton cannot carry; "
            f"supported: {supported}. Cast it in the model before export."
        )
    if not value_info.type.tensor_type.HasField("shape"):
        raise InvalidModelError(
            f"{path}: {role} {value_info.name!r} has no shape; export the model with shapes (dynamic axes are fine)"
        )
    return TensorSpec(value_info.name, onnx_type, ONNX_TO_TRITON[elem_type], _dims(value_info))


def load_model(path: Path) -> onnx.ModelProto:
    """onnx.load + onnx.checker; every failure is an InvalidModelError that names the file."""
    path = Path(path)
    if not path.is_file():
        raise InvalidModelError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, OSError, RuntimeError) as error:
        raise InvalidModelError(f"{path}: not a readable ONNX model ({error}); re-export it") from error
    try:
        # A path lets the checker handle models over 2 GiB and external-data tensors.
        onnx.checker.check_model(str(path))
    except (onnx.checker.ValidationError, ValueError, OSError, RuntimeError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InvalidModelError(f"{path}: ONNX checker refused the model: {first_line}") from error
    return model


def inspect_model(path: Path) -> ModelSignature:
    """Return the model's real inputs (initializers excluded) and outputs."""
    path = Path(path)
    model = load_model(path)
    initializers = {init.name for init in model.graph.initializer}
    # IR < 4 lists every initializer as a graph input too; they are weights, not request tensors.
    inputs = tuple(_spec(path, vi, "input") for vi in model.graph.input if vi.name not in initializers)
    outputs = tuple(_spec(path, vi, "output") for vi in model.graph.output)
    if not inputs:
        raise InvalidModelError(f"{path}: the graph has no inputs besides its weights; nothing to serve")
    if not outputs:
        raise InvalidModelError(f"{path}: the graph has no outputs")
    # Outputs as ONNX Runtime's session reports them (model_build.ort_shapes: what the onnxruntime backend
    # compares a config's outputs with, exactly); the graph's declared shape is kept for messages.
    shapes = session_shapes(path)
    if shapes.error is None:
        outputs = tuple(_session_output(spec, shapes.outputs.get(spec.name)) for spec in outputs)
    return ModelSignature(
        path=path, inputs=inputs, outputs=outputs, operators=model_operators(model), ort_error=shapes.error
    )


def _session_output(spec: TensorSpec, session_dims: tuple[int, ...] | None) -> TensorSpec:
    if session_dims is None or session_dims == spec.dims:
        return spec
    return replace(spec, dims=session_dims, declared=spec.dims)


def model_operators(model: onnx.ModelProto) -> frozenset[tuple[str, str]]:
    """(domain, op_type) of every node of the graph, its subgraphs (If/Loop/Scan bodies) and its functions."""
    found: set[tuple[str, str]] = set()
    graphs = [model.graph]
    nodes = [node for function in model.functions for node in function.node]
    while graphs or nodes:
        if graphs:
            nodes.extend(graphs.pop().node)
            continue
        node = nodes.pop()
        found.add((node.domain or DEFAULT_DOMAIN, node.op_type))
        for attribute in node.attribute:
            if attribute.HasField("g"):
                graphs.append(attribute.g)
            graphs.extend(attribute.graphs)
    return frozenset(found)


def onnx_file_problem(path: Path) -> str | None:
    """Why the file at `path` cannot be served as an ONNX model (None when onnx.checker accepts it):
    empty, not a protobuf (truncated, random bytes), external data that is missing or outside the
    model's folder, or refused by onnx.checker. The message does not repeat the path."""
    path = Path(path)
    if path.stat().st_size == 0:
        return "is empty (0 bytes), not an ONNX model; re-export or re-copy it"
    try:
        external_data(path)
    except MalformedModelError as error:
        return f"is not an ONNX model ({error}): truncated or not ONNX at all; re-export or re-copy it"
    except ExternalDataError as error:
        return f"{error}; onnxruntime refuses to load it (keep every data file the model names in its folder)"
    try:
        load_model(path)
    except InvalidModelError as error:
        return str(error).removeprefix(f"{path}: ")
    return None
