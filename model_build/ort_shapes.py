"""The shapes ONNX Runtime reports for a model's session: what Triton's ONNX Runtime backend holds a config to.

triton-inference-server/onnxruntime_backend `src/onnxruntime.cc` (main, read 2026-11-27):
`ModelInstanceState::ValidateOutputs` reads each output's shape from the session (`OutputInfos` ->
`SessionGetOutputTypeInfo` in `src/onnxruntime_utils.cc`) and calls
`CompareDimsSupported(..., true /* compare_exact */)`; `ValidateInputs` calls it with `false` (a -1 in
the model matches any config dim). The session's output shapes are the graph's after ONNX Runtime's own
shape inference (Graph::Resolve merges inferred shapes into the graph outputs), which can be more specific
than the shapes the graph declares: an output declared `[batch, n]` that a Reshape makes `[batch, 10]`
is `[batch, 10]` to the backend, and an output declared `[batch, 3]` that is really a constant `[3]` is
`[3]`. `onnxruntime.InferenceSession(path).get_outputs()[i].shape` shows the same shapes (../shared/README.md,
"Checked this round").

The session's shapes depend on the graph optimisation level (ONNX Runtime 1.32: an output that is a constant
is `[3]` at ORT_ENABLE_BASIC and above, `[]` with every optimisation off), so the session is opened at the level
the backend uses: `ModelState` in `src/onnxruntime.cc` takes ORT_ENABLE_ALL unless the config's
`optimization { graph { level } }` says -1 (ORT_ENABLE_BASIC), 1 (ORT_ENABLE_EXTENDED) or 2 (ORT_DISABLE_ALL).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from model_build.errors import MissingToolError

DYNAMIC = -1


@dataclass(frozen=True)
class SessionShapes:
    """Each input's and output's dims as the ONNX Runtime session reports them (-1: symbolic or unknown),
    or `error`: why ONNX Runtime cannot load the model (its first message line)."""

    inputs: dict[str, tuple[int, ...]]
    outputs: dict[str, tuple[int, ...]]
    error: str | None = None


def _dims(shape) -> tuple[int, ...]:
    # onnxruntime reports an int for a fixed dim, a str for a dim_param, None for an unknown dim.
    return tuple(dim if isinstance(dim, int) and dim >= 0 else DYNAMIC for dim in shape)


def session_shapes(path: Path, graph_level: int = 0) -> SessionShapes:
    """The session's shapes for the ONNX file at `path` (cached per file version), opened at the optimisation
    level Triton's backend uses for a config's `optimization.graph.level` (0: the default)."""
    path = Path(path)
    stat = path.stat()
    return _session_shapes(str(path.resolve()), stat.st_mtime_ns, stat.st_size, graph_level)


def _import_onnxruntime():
    try:
        import onnxruntime  # deferred: heavy, and only ONNX models need it
    except ImportError as error:
        raise MissingToolError(
            "onnxruntime is not installed: it is needed to read the output shapes Triton's ONNX Runtime backend "
            "holds a config to; pip install onnxruntime (the version in requirements-dev.txt)"
        ) from error
    return onnxruntime


@functools.lru_cache(maxsize=64)
def _session_shapes(resolved: str, mtime_ns: int, size: int, graph_level: int) -> SessionShapes:
    session = _session(resolved, mtime_ns, size, graph_level)
    if isinstance(session, str):
        return SessionShapes({}, {}, error=session)
    return SessionShapes(
        inputs={arg.name: _dims(arg.shape) for arg in session.get_inputs()},
        outputs={arg.name: _dims(arg.shape) for arg in session.get_outputs()},
    )


@functools.lru_cache(maxsize=4)  # sessions hold the weights: keep few
def _session(resolved: str, _mtime_ns: int, _size: int, graph_level: int):
    """An ONNX Runtime session at the backend's optimisation level, or the first line of why it cannot load."""
    ort = _import_onnxruntime()
    levels = ort.GraphOptimizationLevel
    backend_levels = {-1: levels.ORT_ENABLE_BASIC, 1: levels.ORT_ENABLE_EXTENDED, 2: levels.ORT_DISABLE_ALL}
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: "falling back to lenient merge" warnings are expected here
    options.graph_optimization_level = backend_levels.get(graph_level, levels.ORT_ENABLE_ALL)
    options.intra_op_num_threads = 1
    try:
        return ort.InferenceSession(resolved, options, providers=["CPUExecutionProvider"])
    except Exception as error:  # any load failure is ONNX Runtime's own message, reported as the backend would
        return _first_line(error).replace(os.path.dirname(resolved) + os.sep, "")


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def run_zeros(path: Path, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """Run the model once on all-zero inputs of these shapes (every graph input named): None when ONNX Runtime
    runs it, else the first line of its error. Proves a shape the build or a warm-up would use."""
    import numpy as np
    from onnx import helper

    path = Path(path)
    stat = path.stat()
    session = _session(str(path.resolve()), stat.st_mtime_ns, stat.st_size, 0)
    if isinstance(session, str):
        return session
    feeds = {}
    for arg in session.get_inputs():
        if arg.name not in shapes:
            continue
        element = arg.type.removeprefix("tensor(").removesuffix(")")
        if element == "string":
            feeds[arg.name] = np.full(shapes[arg.name], "", dtype=object)
            continue
        onnx_type = _ORT_ELEMENT.get(element)
        if onnx_type is None:
            return f"input {arg.name!r} has type {arg.type}, which cannot be filled with zeros here"
        feeds[arg.name] = np.zeros(shapes[arg.name], dtype=helper.tensor_dtype_to_np_dtype(onnx_type))
    try:
        session.run(None, feeds)
    except Exception as error:  # ONNX Runtime's own message names the node that refused the shape
        return _first_line(error)
    return None


# ONNX Runtime's element type names (`tensor(float)`) -> onnx TensorProto element types.
_ORT_ELEMENT = {
    "float": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
    "float16": 10, "double": 11, "uint32": 12, "uint64": 13, "bfloat16": 16,
}  # fmt: skip
