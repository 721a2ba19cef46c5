"""Write examples/models/image_cnn/1/model.onnx: a small ResNet-18-style image classifier, random weights.

The example pipeline (examples/models/image_classifier) needs a real CNN, a few MB at most, that ONNX
Runtime runs on a laptop and TensorRT builds on the endpoint's GPU, with nothing downloaded and no torch
(issue 15). This is ResNet-18's architecture (He et al. 2015, torchvision's resnet18: a 7x7/2 stem, max
pool, four stages of two basic blocks with 1x1/2 projection shortcuts, global average pool, a 1000-way
fully connected layer) at one eighth of its width (8, 16, 32, 64 channels): about 1 MB.

    input  FP32 [3, 224, 224]   one normalised RGB image, no batch axis (max_batch_size 0 in Triton)
    logits FP32 [1000]          ImageNet-1k class scores

Weights are random and deterministic: uniform in He's range from numpy's PCG64 `random()` stream (raw
bits to doubles, stable across numpy releases) with a fixed seed, so the predictions mean nothing but
the bytes are reproducible. The ONNX IR version and opset are fixed, so `onnx` upgrades do not change
the file: tests/client/test_image_example.py checks that this script rewrites the committed bytes.

    .venv/bin/python examples/tools/make_image_cnn.py [--out PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 15  # issue 15
WIDTHS = (8, 16, 32, 64)  # ResNet-18's (64, 128, 256, 512) / 8
BLOCKS_PER_STAGE = 2
CLASSES = 1000
IMAGE_SHAPE = (3, 224, 224)
OPSET = 13  # Unsqueeze/Squeeze take axes as an input from 13; TensorRT 8.6+ and ONNX Runtime run it
IR_VERSION = 7  # the IR of opset 13 (onnx/helper.py VERSION_TABLE: 1.8 -> IR 7, opset 13)
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "models" / "image_cnn" / "1" / "model.onnx"


class GraphBuilder:
    """Nodes and initializers of one graph, with weights drawn in a fixed order from one stream."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def constant(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def uniform(self, shape: tuple[int, ...], bound: float) -> np.ndarray:
        return ((self.rng.random(shape) * 2.0 - 1.0) * bound).astype(np.float32)

    def conv_bn(self, x: str, c_in: int, c_out: int, kernel: int, stride: int, relu: bool) -> str:
        """Conv (no bias) -> BatchNormalization (-> Relu), as in torchvision's ResNet."""
        name = self._name("conv")
        fan_in = c_in * kernel * kernel
        weight = self.constant(f"{name}.weight", self.uniform((c_out, c_in, kernel, kernel), np.sqrt(6.0 / fan_in)))
        pad = kernel // 2
        conv_out = f"{name}.out"
        self.nodes.append(
            helper.make_node(
                "Conv",
                [x, weight],
                [conv_out],
                name=name,
                kernel_shape=[kernel, kernel],
                strides=[stride, stride],
                pads=[pad, pad, pad, pad],
            )
        )
        bn = f"{name}.bn"
        scale = self.constant(f"{bn}.scale", (0.5 + 0.5 * self.rng.random(c_out)).astype(np.float32))
        bias = self.constant(f"{bn}.bias", self.uniform((c_out,), 0.1))
        mean = self.constant(f"{bn}.mean", self.uniform((c_out,), 0.1))
        var = self.constant(f"{bn}.var", (1.0 + self.rng.random(c_out)).astype(np.float32))
        out = f"{bn}.out"
        self.nodes.append(helper.make_node("BatchNormalization", [conv_out, scale, bias, mean, var], [out], name=bn))
        return self.relu(out) if relu else out

    def relu(self, x: str) -> str:
        name = self._name("relu")
        self.nodes.append(helper.make_node("Relu", [x], [f"{name}.out"], name=name))
        return f"{name}.out"

    def add(self, a: str, b: str) -> str:
        name = self._name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [f"{name}.out"], name=name))
        return f"{name}.out"

    def basic_block(self, x: str, c_in: int, c_out: int, stride: int) -> str:
        y = self.conv_bn(x, c_in, c_out, 3, stride, relu=True)
        y = self.conv_bn(y, c_out, c_out, 3, 1, relu=False)
        shortcut = x if stride == 1 and c_in == c_out else self.conv_bn(x, c_in, c_out, 1, stride, relu=False)
        return self.relu(self.add(y, shortcut))


def build_model(seed: int = SEED) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    batch_axis = g.constant("batch_axis", np.array([0], dtype=np.int64))
    g.nodes.append(helper.make_node("Unsqueeze", ["input", batch_axis], ["batched"], name="add_batch_axis"))
    x = g.conv_bn("batched", IMAGE_SHAPE[0], WIDTHS[0], 7, 2, relu=True)  # 112x112
    g.nodes.append(
        helper.make_node("MaxPool", [x], ["pooled"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    )
    x, channels = "pooled", WIDTHS[0]  # 56x56
    for stage, width in enumerate(WIDTHS):
        for block in range(BLOCKS_PER_STAGE):
            stride = 2 if stage > 0 and block == 0 else 1
            x = g.basic_block(x, channels, width, stride)
            channels = width
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="global_average_pool"))
    g.nodes.append(helper.make_node("Flatten", ["gap"], ["features"], name="flatten", axis=1))
    bound = 1.0 / np.sqrt(channels)  # torch.nn.Linear's default init range
    fc_weight = g.constant("fc.weight", g.uniform((CLASSES, channels), bound))
    fc_bias = g.constant("fc.bias", g.uniform((CLASSES,), bound))
    g.nodes.append(helper.make_node("Gemm", ["features", fc_weight, fc_bias], ["scores"], name="fc", transB=1))
    g.nodes.append(helper.make_node("Squeeze", ["scores", batch_axis], ["logits"], name="drop_batch_axis"))
    graph = helper.make_graph(
        g.nodes,
        "image_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(IMAGE_SHAPE))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [CLASSES])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="examples/tools/make_image_cnn.py",
        producer_version="1",
        ir_version=IR_VERSION,
        doc_string="ResNet-18-style classifier at 1/8 width, random weights (seed 15): an example, not a model",
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def model_bytes(seed: int = SEED) -> bytes:
    return build_model(seed).SerializeToString(deterministic=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    data = model_bytes()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    temporary = args.out.with_name(args.out.name + ".tmp")
    temporary.write_bytes(data)
    temporary.replace(args.out)
    print(f"{args.out}: {len(data)} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
