"""Real ONNX models for the config and TensorRT tests (built with onnx.helper, checked by onnx.checker).

Imported by test_onnx_config.py and test_trt.py (not a conftest.py: other areas own that name).
"""

from __future__ import annotations

import os
import stat
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from synth_helpers import PROJECT_ROOT
from tritonclient.grpc import model_config_pb2 as mc

from serving_facts.settings import ModelSettings

SHARED = PROJECT_ROOT.parent / "shared"
SHARED_VALID = SHARED / "triton-configs" / "valid"
needs_shared = pytest.mark.skipif(
    not SHARED_VALID.is_dir(), reason=f"Triton's example models are not checked out at {SHARED_VALID}"
)

OPSET = [helper.make_opsetid("", 17)]


def save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def dynamic_batch_model(path: Path, input_name: str = "x") -> Path:
    """x: FLOAT [batch, 4] -> y = Relu(x) [batch, 4], total = ReduceSum(x, axis 1) [batch, 1]."""
    x = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    total = helper.make_tensor_value_info("total", TensorProto.FLOAT, ["batch", 1])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    nodes = [
        helper.make_node("Relu", [input_name], ["y"]),
        helper.make_node("ReduceSum", [input_name, "axes"], ["total"]),
    ]
    graph = helper.make_graph(nodes, "dyn_batch", [x], [y, total], initializer=[axes])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def mixed_types_model(path: Path) -> Path:
    """fp16, int64, int32, bool and uint8 inputs, one output each, all with a dynamic batch axis."""
    specs = [
        ("half", TensorProto.FLOAT16, "Add"),
        ("ids", TensorProto.INT64, "Mul"),
        ("counts", TensorProto.INT32, "Add"),
        ("flags", TensorProto.BOOL, "Not"),
        ("pixels", TensorProto.UINT8, "Identity"),
    ]
    inputs, outputs, nodes = [], [], []
    for name, elem, op in specs:
        inputs.append(helper.make_tensor_value_info(name, elem, [None, 3]))  # None: dim with no value
        outputs.append(helper.make_tensor_value_info(f"{name}_out", elem, [None, 3]))
        args = [name] if op in {"Not", "Identity"} else [name, name]
        nodes.append(helper.make_node(op, args, [f"{name}_out"]))
    graph = helper.make_graph(nodes, "mixed", inputs, outputs)
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def sequence_model(path: Path) -> Path:
    """tokens, mask: INT64 [batch, seq] -> score = Cast(tokens * mask) FLOAT [batch, seq]."""
    tokens = helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])
    score = helper.make_tensor_value_info("score", TensorProto.FLOAT, ["batch", "seq"])
    nodes = [
        helper.make_node("Mul", ["tokens", "mask"], ["masked"]),
        helper.make_node("Cast", ["masked"], ["score"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(nodes, "seq", [tokens, mask], [score])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def fixed_model(path: Path, leading: int, name: str = "x") -> Path:
    """x: FLOAT [leading, 8] -> y = Relu(x): a model exported without a dynamic batch axis."""
    x = helper.make_tensor_value_info(name, TensorProto.FLOAT, [leading, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [leading, 8])
    graph = helper.make_graph([helper.make_node("Relu", [name], ["y"])], "fixed", [x], [y])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def complex_model(path: Path) -> Path:
    x = helper.make_tensor_value_info("z", TensorProto.COMPLEX64, ["batch", 2])
    y = helper.make_tensor_value_info("w", TensorProto.COMPLEX64, ["batch", 2])
    graph = helper.make_graph([helper.make_node("Identity", ["z"], ["w"])], "complex", [x], [y])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def weights_as_inputs_model(path: Path) -> Path:
    """Old-style (IR 3) graph that also lists its weight as a graph input: only `x` is a real input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])
    w_info = helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "w_in", [x, w_info], [y], [w])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def settings(name: str = "model", **fields) -> ModelSettings:
    fields.setdefault("source", {"path": "model.onnx"})
    return ModelSettings.model_validate({"name": name, **fields})


NUMPY_OF = {
    "TYPE_BOOL": np.bool_,
    "TYPE_UINT8": np.uint8,
    "TYPE_INT8": np.int8,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_UINT64": np.uint64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


def sample(data_type: str, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    kind = NUMPY_OF[data_type]
    if kind is np.object_:
        return rng.integers(0, 100, shape).astype(str).astype(np.object_)  # numeric strings
    if kind is np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(kind, np.integer):
        return rng.integers(0, 100, shape).astype(kind)
    return rng.standard_normal(shape).astype(kind)


def run_as_configured(onnx_path: Path, config: mc.ModelConfig, batch: int, dynamic: int = 5) -> dict:
    """Feed the model inputs shaped and typed from `config` (batch prepended when batching) on the CPU;
    check every output the config declares comes back with the declared type and shape."""
    rng = np.random.default_rng(batch)
    batched = config.max_batch_size > 0
    feeds = {}
    for tensor in config.input:
        dims = [dynamic if d == -1 else d for d in tensor.dims]
        if tensor.HasField("reshape"):
            dims = list(tensor.reshape.shape)
        shape = [batch, *dims] if batched else dims
        feeds[tensor.name] = sample(mc.DataType.Name(tensor.data_type), shape, rng)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = [tensor.name for tensor in config.output]
    results = dict(zip(names, session.run(names, feeds), strict=True))
    for tensor in config.output:
        got = results[tensor.name]
        expected_type = NUMPY_OF[mc.DataType.Name(tensor.data_type)]
        if expected_type is np.object_:
            assert got.dtype == np.object_, tensor.name
        else:
            assert got.dtype == expected_type, (tensor.name, got.dtype, expected_type)
        dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
        want = [batch, *dims] if batched else dims
        assert len(got.shape) == len(want), (tensor.name, got.shape, want)
        for axis, (have, need) in enumerate(zip(got.shape, want, strict=True)):
            assert need == -1 or have == need, (tensor.name, axis, got.shape, want)
    return results


def write_executable(path: Path, body: str) -> Path:
    """A small Python script run as a program (fake nvidia-smi / trtexec in tests)."""
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def path_with(folder: Path) -> str:
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
