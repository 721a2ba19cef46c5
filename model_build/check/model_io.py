"""The config against the model it serves: what Triton's backends check when they load the model.

`check` passes a config only if the backend will accept it with the model file beside it:

- onnxruntime_onnx: triton-inference-server/onnxruntime_backend `src/onnxruntime.cc`
  (ModelInstanceState::ValidateInputs / ValidateOutputs, ModelState::AutoCompleteMaxBatch) and
  `src/onnxruntime_utils.cc` (CompareDimsSupported: a batching model's first dimension must be -1);
  messages are that source's wording.
- tensorrt_plan: the engine is not readable here (no TensorRT), but it is built from an ONNX file
  whose inputs and outputs become the engine's: `model_build build` records that file in
  `build-info.json`, and the config is checked against it the way triton-inference-server/
  tensorrt_backend `src/instance_state.cc` (ValidateIO, InitializeExecuteInputBinding) and
  `src/tensorrt_utils.cc` (CompareDimsSupported, wildcards on either side match) check it against
  the engine. onnx-tensorrt before TensorRT 10 casts INT64 tensors to INT32, so on those releases an
  INT64 ONNX input is an INT32 engine input; when the TensorRT version is not recorded, either passes.

Files that are not valid ONNX are reported by the layout rules (model_build.model_tree), not here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from model_build.check.problems import Problem
from model_build.check.schema import ModelConfig
from model_build.ort_shapes import session_shapes

RULE = "model-io"
BUILD_INFO = "build-info.json"
DYNAMIC = -1
_ORT_BACKEND = "onnxruntime"
_TRT_BACKEND = "tensorrt"

# ONNX TensorProto element types (onnx.proto) -> Triton's type names (TRITONSERVER_DataTypeString),
# which both backends print after "TYPE_". ONNX STRING is Triton BYTES (config TYPE_STRING).
_ONNX_TO_TRITON = {
    1: "FP32",
    2: "UINT8",
    3: "INT8",
    4: "UINT16",
    5: "INT16",
    6: "INT32",
    7: "INT64",
    8: "BYTES",
    9: "BOOL",
    10: "FP16",
    11: "FP64",
    12: "UINT32",
    13: "UINT64",
    16: "BF16",
}
# What a TensorRT engine built from the ONNX tensor carries (TensorRT's DataType; FP8/INT4 only inside).
_TRT_FROM_ONNX = {1: "FP32", 10: "FP16", 16: "BF16", 3: "INT8", 2: "UINT8", 6: "INT32", 7: "INT64", 9: "BOOL"}


@dataclass(frozen=True)
class Tensor:
    name: str
    elem_type: int
    dims: tuple[int, ...]  # as onnxruntime reports them: dim_value, or -1 for a symbolic or unknown dim


@dataclass(frozen=True)
class GraphIO:
    inputs: dict[str, Tensor]
    overridable: dict[str, Tensor]  # initializers that are also graph inputs (IR >= 4): optional inputs
    outputs: dict[str, Tensor]  # dims as ONNX Runtime's session reports them (model_build.ort_shapes)
    operators: frozenset[tuple[str, str]] = frozenset()
    ort_error: str | None = None  # why ONNX Runtime cannot load the file (outputs' dims are then the declared ones)


def read_graph_io(path: Path, graph_level: int = 0) -> GraphIO | None:
    """Inputs and outputs of the ONNX file as onnxruntime reports them; None when it cannot be read.
    `graph_level`: the config's optimization.graph.level (model_build.ort_shapes)."""
    import onnx  # deferred: heavy

    from model_build.onnx_inspect import model_operators

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # any unreadable file is the layout rules' to report (onnx-file)
        return None
    if model.ir_version == 0 or not model.HasField("graph"):
        return None  # empty or not ONNX (protobuf parses many short byte strings): reported as onnx-file
    initializers = {init.name for init in model.graph.initializer}

    def tensor(value_info) -> Tensor:
        tensor_type = value_info.type.tensor_type
        dims = tuple(dim.dim_value if dim.HasField("dim_value") else DYNAMIC for dim in tensor_type.shape.dim)
        return Tensor(value_info.name, tensor_type.elem_type, dims)

    inputs, overridable = {}, {}
    for value_info in model.graph.input:
        if value_info.name in initializers:
            if model.ir_version >= 4:
                overridable[value_info.name] = tensor(value_info)
        else:
            inputs[value_info.name] = tensor(value_info)
    outputs = {value_info.name: tensor(value_info) for value_info in model.graph.output}
    # Triton's onnxruntime backend compares outputs exactly with the session's shapes, which ONNX Runtime's
    # shape inference can make more specific than the declared ones (model_build.ort_shapes).
    shapes = session_shapes(path, graph_level)
    if shapes.error is None:
        outputs = {
            name: Tensor(name, output.elem_type, shapes.outputs.get(name, output.dims))
            for name, output in outputs.items()
        }
    return GraphIO(inputs, overridable, outputs, model_operators(model), shapes.error)


def shape(dims) -> str:
    """backend_common ShapeToString: [1,-1,3]."""
    return "[" + ",".join(str(dim) for dim in dims) + "]"


def data_type_name(config_type: int) -> str:
    return mc.DataType.Name(config_type) if config_type in mc.DataType.values() else str(config_type)


def _triton_type(config_type: int) -> str:
    # model_config.proto TYPE_STRING is Triton's BYTES (TRITONSERVER_DataTypeString).
    name = data_type_name(config_type).removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def _config_dims(io) -> list[int]:
    return list(io.reshape.shape) if io.HasField("reshape") else list(io.dims)


# --- onnxruntime -------------------------------------------------------------------------------


def _ort_compare_dims(model: str, name: str, model_shape, dims, max_batch_size: int, exact: bool) -> str | None:
    """onnxruntime_utils.cc CompareDimsSupported, its wording."""
    if max_batch_size > 0:
        if not model_shape or model_shape[0] != DYNAMIC:
            return (
                f"model '{model}', tensor '{name}': for the model to support batching the shape should have at least "
                f"1 dimension and the first dimension must be -1; but shape expected by the model is "
                f"{shape(model_shape)}"
            )
        full = [DYNAMIC, *dims]
        same = len(model_shape) == len(full) and all(
            m == f for m, f in zip(model_shape, full, strict=False) if exact or m != DYNAMIC
        )
        if not same:
            return _dims_mismatch(model, name, model_shape, full, batched=True)
        return None
    same = len(model_shape) == len(dims) and all(
        m == d for m, d in zip(model_shape, dims, strict=False) if exact or m != DYNAMIC
    )
    if not same:
        return _dims_mismatch(model, name, model_shape, dims, batched=False)
    return None


def _dims_mismatch(model: str, name: str, model_shape, config_shape, *, batched: bool) -> str:
    """The backends' text for a model shape the config does not match (onnxruntime and tensorrt backends
    word it alike); `config_shape` includes the batch dimension when `batched`."""
    expected = (
        f"model '{model}', tensor '{name}': the model expects {len(model_shape)} dimensions "
        f"(shape {shape(model_shape)})"
    )
    if batched:
        return (
            f"{expected} but the model configuration specifies {len(config_shape)} dimensions (an initial batch "
            f"dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape "
            f"{shape(config_shape)})"
        )
    return (
        f"{expected} but the model configuration specifies {len(config_shape)} dimensions (shape {shape(config_shape)})"
    )


def _scalar(model: str, name: str, dims) -> str | None:
    if all(dim == 1 for dim in dims):
        return None
    return (
        f"unable to load model '{model}', scalar tensor '{name}', should only provide 1 in the model configuration "
        f"when the model doesn't support batching. Model configuration provided: {shape(dims)}."
    )


def _sequence_control_count(config: ModelConfig) -> int:
    if not config.HasField("sequence_batching"):
        return 0
    kinds = {
        control.kind for control_input in config.sequence_batching.control_input for control in control_input.control
    }
    # START, END, READY, CORRID (model_config.proto ControlKind 0, 1, 2, 3) each add one model input.
    return len(kinds & {0, 1, 2, 3}) + len(config.sequence_batching.state)


# onnxruntime_utils.cc OnnxDataTypeName (COMPLEX128 prints COMPLEX64 there too; not a Triton type anyway).
_ONNX_NAME = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 8: "STRING"}
_ONNX_NAME |= {9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64", 16: "BFLOAT16"}


def _control_type(kind: int, control) -> str:
    """backend_common.cc GetBoolean/TypedSequenceControlProperties: the config type of a control tensor."""
    if kind == mc.ModelSequenceBatching.Control.CONTROL_SEQUENCE_CORRID:
        return data_type_name(control.data_type)
    if control.int32_false_true:
        return "TYPE_INT32"
    if control.fp32_false_true:
        return "TYPE_FP32"
    return "TYPE_BOOL"


def _sequence_control_messages(config: ModelConfig, graph: GraphIO) -> list[tuple[str, str]]:
    """onnxruntime.cc ValidateBooleanSequenceControl / ValidateTypedSequenceControl, their wording."""
    model, found = config.name, []
    for index, control_input in enumerate(config.sequence_batching.control_input):
        field = f"sequence_batching.control_input[{index}]"
        for control in control_input.control:
            name = control_input.name
            tensor = graph.inputs.get(name)
            if tensor is None:
                found.append(
                    (field, f"configuration specified sequence control '{name}', but model does not provide that input")
                )
                continue
            debatched = list(tensor.dims[1:] if config.max_batch_size > 0 else tensor.dims)
            if debatched != [1]:
                found.append(
                    (
                        field,
                        f"unable to load model '{model}', sequence control '{name}' in model has dims "
                        f"{shape(debatched)} but dims [1] is expected",
                    )
                )
                continue
            wanted = _control_type(control.kind, control)
            if _triton_type(mc.DataType.Value(wanted)) != _ONNX_TO_TRITON.get(tensor.elem_type):
                found.append(
                    (
                        field,
                        f"unable to load model '{model}', sequence control '{name}', the model expects data-type "
                        f"{_ONNX_NAME.get(tensor.elem_type, 'UNDEFINED')} but the model configuration specifies "
                        f"data-type {wanted}",
                    )
                )
    return found


def ort_messages(config: ModelConfig, graph: GraphIO) -> list[tuple[str, str]]:
    """(field, message) for each way onnxruntime_backend would refuse `config` with this model."""
    model, mbs = config.name, config.max_batch_size
    found: list[tuple[str, str]] = []
    if not config.input or not config.output:
        # Auto-complete fills the missing side from the model; AutoCompleteMaxBatch still judges batching.
        tensors = [*graph.inputs.values(), *graph.outputs.values()]
        if mbs != 0 and not all(t.dims and t.dims[0] == DYNAMIC for t in tensors):
            found.append(
                (
                    "max_batch_size",
                    f"autofill failed for model '{model}': model does not support batching while non-zero "
                    "max_batch_size is specified",
                )
            )
        return found
    found += _sequence_control_messages(config, graph)
    expected = sum(1 for io in config.input if not io.optional) + len(config.batch_input)
    expected += _sequence_control_count(config)
    if len(graph.inputs) != expected:
        found.append(
            (
                "input",
                f"unable to load model '{model}', configuration expects {expected} inputs, model provides "
                f"{len(graph.inputs)}",
            )
        )
    inputs = {**graph.inputs, **graph.overridable}
    for index, io in enumerate(config.input):
        field = f"input[{index}]"
        if io.optional and mbs != 0:
            found.append(
                (
                    field,
                    f"unable to load model '{model}', optional input '{io.name}' is not supported for models that "
                    "support batching",
                )
            )
            continue
        tensor = inputs.get(io.name)
        if tensor is None:
            found.append(
                (field, f"unexpected inference input '{io.name}', allowed inputs are: {', '.join(sorted(inputs))}")
            )
            continue
        message = _ort_tensor(model, "input", io, tensor, mbs, exact=False)
        if message:
            found.append((field, message))
    batch_outputs = {target for batch_output in config.batch_output for target in batch_output.target_name}
    for index, io in enumerate(config.output):
        field = f"output[{index}]"
        tensor = graph.outputs.get(io.name)
        if tensor is None:
            allowed = ", ".join(sorted(graph.outputs))
            found.append((field, f"unexpected inference output '{io.name}', allowed outputs are: {allowed}"))
            continue
        message = _ort_tensor(model, "output", io, tensor, mbs, exact=True, check_dims=io.name not in batch_outputs)
        if message:
            found.append((field, message))
    return found


def _ort_tensor(model, role, io, tensor: Tensor, mbs, *, exact: bool, check_dims: bool = True) -> str | None:
    config_type = data_type_name(io.data_type)
    provided = _ONNX_TO_TRITON.get(tensor.elem_type, "<invalid>")
    if provided != _triton_type(io.data_type) or config_type in ("TYPE_INVALID",):
        return (
            f"unable to load model '{model}', configuration expects datatype {config_type} for {role} '{io.name}', "
            f"model provides TYPE_{provided}"
        )
    dims = _config_dims(io)
    if role == "input" and io.allow_ragged_batch:
        if tensor.dims != (DYNAMIC,):
            return (
                f"unable to load model '{model}', configuration expects model provides input with shape [-1]  for "
                f"ragged input '{io.name}', model provides {shape(tensor.dims)}"
            )
        return None
    if not check_dims:
        return None
    if tensor.dims:
        return _ort_compare_dims(model, io.name, tensor.dims, dims, mbs, exact)
    return _scalar(model, io.name, dims)


# --- TensorRT, against the ONNX the engine is built from ------------------------------------


def _trt_compare_dims(model: str, name: str, model_shape, dims, batching: bool) -> str | None:
    """tensorrt_utils.cc CompareDimsSupported (compare_exact false: -1 on either side matches)."""
    if batching:
        if not model_shape:
            return (
                f"model '{model}', tensor '{name}': for the model to support batching the shape should have at least "
                f"1 dimension; but shape expected by the model is {shape(model_shape)}"
            )
        full = [DYNAMIC, *dims]
        same = len(model_shape) == len(full) and all(
            m == f for m, f in zip(model_shape, full, strict=False) if m != DYNAMIC and f != DYNAMIC
        )
        if not same:
            return _dims_mismatch(model, name, model_shape, full, batched=True)
        return None
    same = len(model_shape) == len(dims) and all(
        m == d for m, d in zip(model_shape, dims, strict=False) if m != DYNAMIC and d != DYNAMIC
    )
    if not same:
        return _dims_mismatch(model, name, model_shape, dims, batched=False)
    return None


def _engine_types(elem_type: int, tensorrt_version: str | None) -> set[str]:
    """The types a TensorRT engine built from this ONNX tensor can carry."""
    engine_type = _TRT_FROM_ONNX.get(elem_type)
    if engine_type is None:
        return set()
    if engine_type == "INT64":
        major = int(tensorrt_version.split(".")[0]) if tensorrt_version else None
        if major is None:
            return {"INT64", "INT32"}
        return {"INT64"} if major >= 10 else {"INT32"}
    return {engine_type}


def trt_messages(config: ModelConfig, graph: GraphIO, tensorrt_version: str | None) -> list[tuple[str, str]]:
    """(field, message) for each way tensorrt_backend would refuse `config` with an engine built from `graph`."""
    model = config.name
    batching = config.max_batch_size > 0
    found: list[tuple[str, str]] = []
    if len(config.input) > len(graph.inputs):
        found.append(
            (
                "input",
                f"unable to load model '{model}', configuration expects {len(config.input)} inputs, model provides at "
                f"most {len(graph.inputs)}",
            )
        )
    for role, ios, tensors in (("input", config.input, graph.inputs), ("output", config.output, graph.outputs)):
        for index, io in enumerate(ios):
            field = f"{role}[{index}]"
            tensor = tensors.get(io.name)
            if tensor is None:
                allowed = ", ".join(sorted(tensors))
                found.append((field, f"unexpected inference {role} '{io.name}', allowed {role}s are: {allowed}"))
                continue
            engine = _engine_types(tensor.elem_type, tensorrt_version)
            wanted = _triton_type(io.data_type)
            if not engine:
                onnx_type = _ONNX_TO_TRITON.get(tensor.elem_type, str(tensor.elem_type))
                found.append(
                    (
                        field,
                        f"{role} '{io.name}' of the ONNX model is {onnx_type}, which a TensorRT engine cannot carry "
                        "(FP32, FP16, BF16, INT8, UINT8, INT32, INT64, BOOL); cast it in the model before export",
                    )
                )
                continue
            if wanted not in engine:
                found.append(
                    (
                        field,
                        f"unexpected datatype TYPE_{sorted(engine)[0]} for inference {role} '{io.name}', expecting "
                        f"TYPE_{wanted} for {model}",
                    )
                )
                continue
            if role == "input" and io.allow_ragged_batch:
                continue
            message = _trt_compare_dims(model, io.name, tensor.dims, _config_dims(io), batching)
            if message:
                found.append((field, message))
    return found


# --- per model ---------------------------------------------------------------------------------


def _is(config: ModelConfig, platform: str, backend: str) -> bool:
    return config.platform == platform or config.backend == backend


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def model_io_problems(
    folder: Path, config: ModelConfig, versions: dict[int, Path], loaded: set[int], *, engine_from_onnx: bool = False
) -> list[Problem]:
    """Problems of `config` against the model of each version Triton loads (ONNX Runtime), or against
    the ONNX a TensorRT engine was built from (recorded in build-info.json; with `engine_from_onnx`, the
    version folder's model.onnx the engine is still to be built from)."""
    found: list[Problem] = []
    if engine_from_onnx and _is(config, "tensorrt_plan", _TRT_BACKEND):
        for version in sorted(loaded):
            graph = read_graph_io(versions[version] / "model.onnx")
            if graph is None:
                continue  # missing or unreadable: the layout rules say so
            where = f"engine to be built from {version}/model.onnx"
            found += _operator_problems(config, graph, None, where)
            for field, message in trt_messages(config, graph, None):
                found.append(Problem(config.name, field, f"{message} ({where})", RULE))
        return found
    if _is(config, "onnxruntime_onnx", _ORT_BACKEND):
        filename = config.default_model_filename or "model.onnx"
        for version in sorted(loaded):
            path = versions[version] / filename
            if path.is_dir():
                path = path / "model.onnx"
            graph = read_graph_io(path, config.optimization.graph.level) if path.is_file() else None
            if graph is None:
                continue  # missing or unreadable: the layout rules say so
            if graph.ort_error is not None:
                from model_build.onnx_inspect import onnx_file_problem  # deferred: imports onnx

                try:
                    broken = onnx_file_problem(path) is not None
                except Exception:  # a path onnx cannot take (not UTF-8): the layout rules name the folder
                    broken = True
                if broken:
                    continue  # a broken file (missing external data, refused by onnx.checker): the layout rules say so
                message = "ONNX Runtime cannot load the model, so Triton's onnxruntime backend cannot either: "
                found.append(
                    Problem(
                        config.name,
                        f"{version}/{path.name}",
                        f"{message}{graph.ort_error} (version {version}: {path.name})",
                        RULE,
                    )
                )
                continue
            for field, message in ort_messages(config, graph):
                found.append(Problem(config.name, field, f"{message} (version {version}: {path.name})", RULE))
    elif _is(config, "tensorrt_plan", _TRT_BACKEND):
        found += _trt_problems(folder, config)
    return found


def _trt_problems(folder: Path, config: ModelConfig) -> list[Problem]:
    record = folder / BUILD_INFO
    if not record.is_file():
        return []
    try:
        info = json.loads(record.read_text(encoding="utf-8"))
        source = Path(info["source"]["path"])
        recorded = info["source"].get("sha256")
        tensorrt_version = info.get("tensorrt_version")
    except (OSError, ValueError, KeyError, TypeError) as error:
        return [Problem(config.name, BUILD_INFO, f"cannot be read ({error}); rebuild the engine", RULE)]
    if not source.is_file():
        # Checked away from the build (the ONNX is not here): nothing to compare with.
        return []
    if recorded and _file_sha256(source) != recorded:
        return [
            Problem(
                config.name,
                BUILD_INFO,
                f"the engine was built from {source} with sha256 {recorded}, but that file has changed since: "
                "rebuild the engine from the current ONNX",
                RULE,
            )
        ]
    graph = read_graph_io(source)
    if graph is None:
        return []
    return _operator_problems(config, graph, tensorrt_version, f"engine built from {source.name}") + [
        Problem(config.name, field, f"{message} (engine built from {source.name})", RULE)
        for field, message in trt_messages(config, graph, tensorrt_version)
    ]


def _operator_problems(config: ModelConfig, graph: GraphIO, tensorrt_version: str | None, where: str) -> list[Problem]:
    """Operators TensorRT's ONNX parser cannot import (model_build.tensorrt_ops: onnx-tensorrt docs/operators.md)."""
    from model_build.tensorrt_ops import unsupported_message, unsupported_operators  # deferred: imports onnx

    found = unsupported_operators(graph.operators, tensorrt_version)
    if not found:
        return []
    return [Problem(config.name, "platform", f"{unsupported_message(found)} ({where})", "tensorrt-operators")]
