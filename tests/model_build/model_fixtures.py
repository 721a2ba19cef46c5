"""Models built for the package / check / key tests: ONNX graphs matching a config, ONNX files with
external data, Python execution environments. Real files (onnx.helper, tarfile), never placeholder bytes."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import onnx
from google.protobuf import text_format
from onnx import TensorProto, helper, numpy_helper
from tritonclient.grpc import model_config_pb2 as mc

OPSET = [helper.make_opsetid("", 17)]
CONFIG_TO_ONNX = {
    "TYPE_BOOL": TensorProto.BOOL,
    "TYPE_UINT8": TensorProto.UINT8,
    "TYPE_INT8": TensorProto.INT8,
    "TYPE_INT32": TensorProto.INT32,
    "TYPE_INT64": TensorProto.INT64,
    "TYPE_FP16": TensorProto.FLOAT16,
    "TYPE_FP32": TensorProto.FLOAT,
    "TYPE_FP64": TensorProto.DOUBLE,
    "TYPE_STRING": TensorProto.STRING,
    "TYPE_BF16": TensorProto.BFLOAT16,
}


def _shape(dims, batching: bool) -> list:
    return (["batch"] if batching else []) + [d if d > 0 else None for d in dims]


def onnx_matching(config_text: str) -> bytes:
    """An ONNX model whose inputs and outputs are the config's (names, types, dims, batch axis): each
    output is its input of the same position (or the first) through Identity, Cast where types differ."""
    config = text_format.Parse(config_text, mc.ModelConfig())
    batching = config.max_batch_size > 0
    inputs, outputs, nodes = [], [], []
    for io_ in config.input:
        kind = CONFIG_TO_ONNX[mc.DataType.Name(io_.data_type)]
        inputs.append(helper.make_tensor_value_info(io_.name, kind, _shape(io_.dims, batching)))
    for index, io_ in enumerate(config.output):
        kind = CONFIG_TO_ONNX[mc.DataType.Name(io_.data_type)]
        source = config.input[min(index, len(config.input) - 1)]
        if CONFIG_TO_ONNX[mc.DataType.Name(source.data_type)] == kind:
            nodes.append(helper.make_node("Identity", [source.name], [io_.name]))
        else:
            nodes.append(helper.make_node("Cast", [source.name], [io_.name], to=kind))
        outputs.append(helper.make_tensor_value_info(io_.name, kind, _shape(io_.dims, batching)))
    graph = helper.make_graph(nodes, config.name or "m", inputs, outputs)
    model = helper.make_model(graph, opset_imports=OPSET)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def weighted_model(weights: np.ndarray | None = None) -> onnx.ModelProto:
    """x: FLOAT [batch, 64] -> y = x + w, w a [1, 64] initializer (the weights that go external)."""
    w = weights if weights is not None else np.arange(64, dtype=np.float32).reshape(1, 64)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "weighted",
        [x],
        [y],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=OPSET)


def save_with_external_data(model: onnx.ModelProto, path: Path, location: str = "model.onnx.data") -> Path:
    """onnx's own external-data writer: every tensor (size_threshold=0) into `location` beside `path`."""
    (path.parent / location).parent.mkdir(parents=True, exist_ok=True)  # onnx does not create folders
    onnx.save_model(model, str(path), save_as_external_data=True, location=location, size_threshold=0)
    return path


def set_location(path: Path, location: str) -> None:
    """Rewrite every external tensor's `location` (to aim it somewhere a real exporter would not)."""
    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    path.write_bytes(model.SerializeToString())


WEIGHTED_CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 64 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 64 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


def weighted_repository(repo: Path, name: str = "weighted", location: str = "model.onnx.data") -> Path:
    """REPO/<name>/{config.pbtxt, 1/model.onnx, 1/<location>}: an ONNX Runtime model with external data."""
    folder = repo / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(WEIGHTED_CONFIG.format(name=name))
    save_with_external_data(weighted_model(), folder / "1" / "model.onnx", location)
    return folder


def tar_gz(members: dict[str, bytes | tuple[str, str]]) -> bytes:
    """A .tar.gz: name -> bytes (a file) or ("symlink", target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type = tarfile.SYMTYPE
                info.linkname = content[1]
                archive.addfile(info)
            else:
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def conda_pack_like(extra: dict[str, bytes | tuple[str, str]] | None = None) -> bytes:
    """What conda-pack writes: bin/activate, a python, relative links inside the environment."""
    members: dict[str, bytes | tuple[str, str]] = {
        "bin/activate": b"# activate\n",
        "bin/python3.11": b"\x7fELF",
        "bin/python": ("symlink", "python3.11"),
        "lib/libpython3.11.so.1.0": b"\x7fELF",
        "lib/libpython3.11.so": ("symlink", "libpython3.11.so.1.0"),
    }
    members.update(extra or {})
    return tar_gz(members)
