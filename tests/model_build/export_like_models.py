"""ONNX graphs shaped like the real exports issue #11 is about (built with onnx.helper, checked by onnx.checker).

- `bert_like`: transformers BERT as torch.onnx.export writes it: INT64 `input_ids`, `attention_mask` and
  `token_type_ids` of shape [batch, sequence] (dim_params shared by all three), FLOAT logits [batch, 2].
- `tf_style`: tf2onnx names with ':' (`input_1:0`), a dynamic batch axis.
- `named_inputs`: one dynamic-batch FLOAT input per given name (names trtexec cannot parse).
- `typed`: one input/output of a given ONNX element type and shape (DOUBLE, STRING, BF16, scalars).
"""

from __future__ import annotations

from pathlib import Path

from onnx import TensorProto, helper
from onnx_fixtures import OPSET, save

BERT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def bert_like(path: Path, mask_axis: str = "sequence") -> Path:
    """`mask_axis` names attention_mask's second axis (a different name makes it an independent axis)."""
    inputs = [
        helper.make_tensor_value_info(
            name, TensorProto.INT64, ["batch", mask_axis if name == "attention_mask" else "sequence"]
        )
        for name in BERT_INPUTS
    ]
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])
    nodes = [
        helper.make_node("Add", ["input_ids", "token_type_ids"], ["ids"]),
        helper.make_node("Mul", ["ids", "attention_mask"], ["masked"]),
        helper.make_node("Cast", ["masked"], ["as_float"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMean", ["as_float"], ["pooled"], keepdims=1, axes=[1]),
        helper.make_node("Concat", ["pooled", "pooled"], ["logits"], axis=1),
    ]
    graph = helper.make_graph(nodes, "bert_like", inputs, [logits])
    return save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def tf_style(path: Path) -> Path:
    x = helper.make_tensor_value_info("input_1:0", TensorProto.FLOAT, ["unk__0", 224, 224, 3])
    y = helper.make_tensor_value_info("Identity:0", TensorProto.FLOAT, ["unk__0", 224, 224, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["input_1:0"], ["Identity:0"])], "tf", [x], [y])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def named_inputs(path: Path, names: list[str], shape: list | None = None) -> Path:
    shape = shape or ["batch", 4]
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in names]
    outputs = [helper.make_tensor_value_info(f"out{i}", TensorProto.FLOAT, shape) for i in range(len(names))]
    nodes = [helper.make_node("Relu", [name], [f"out{i}"]) for i, name in enumerate(names)]
    graph = helper.make_graph(nodes, "named", inputs, outputs)
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def typed(path: Path, elem_type: int, shape: list) -> Path:
    x = helper.make_tensor_value_info("x", elem_type, shape)
    y = helper.make_tensor_value_info("y", elem_type, shape)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "typed", [x], [y])
    return save(helper.make_model(graph, opset_imports=OPSET), path)
