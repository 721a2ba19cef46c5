"""Write the ONNX stand-ins of tests/configs/reference.yaml: the reference pipeline's detector and segmenter.

The reference deployment ensembles a detection model and a segmentation model, both fed the same image, and
joins their outputs in a Python post-processing step. These graphs have the reference models' tensors (the
detector's are YOLOv5s's: ../shared/seed-configs/yolov5s/config.pbtxt beside the project), a few kB of random
weights and real operators, so config generation, `check`, the ensemble rules, ONNX Runtime and TensorRT all
work on them; their outputs mean nothing.

    detector   images FP32 [1, 3, 640, 640] -> output FP32 [1, 25200, 85]
               three heads at strides 8, 16 and 32 (80x80, 40x40, 20x20 cells, 3 anchors, 85 values each),
               as YOLOv5s lays out its boxes
    segmenter  images FP32 [1, 3, 640, 640] -> masks FP32 [1, 21, 160, 160]
               21 class scores (PASCAL VOC's 20 classes and background) at a quarter of the resolution

Deterministic (fixed seed, IR version and opset): tests/model_build/test_reference_pipelines.py checks that
this script rewrites the committed files byte for byte.

    .venv/bin/python tests/configs/reference/make_models.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 15
OPSET = 13
IR_VERSION = 7  # the IR of opset 13
IMAGE = [1, 3, 640, 640]
ANCHORS = 3
VALUES = 85  # x, y, w, h, objectness, 80 COCO classes
STRIDES = (8, 16, 32)
CLASSES = 21
HERE = Path(__file__).resolve().parent


def _weights(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return ((rng.random(shape) * 2.0 - 1.0) * 0.5).astype(np.float32)


def detector() -> onnx.ModelProto:
    rng = np.random.Generator(np.random.PCG64(SEED))
    nodes, initializers, heads = [], [], []
    previous, previous_stride = "images", 1
    for stride in STRIDES:
        cells = (IMAGE[2] // stride) * (IMAGE[3] // stride)
        pooled, head = f"pool_s{stride}", f"head_s{stride}"
        factor = stride // previous_stride
        nodes.append(
            helper.make_node("AveragePool", [previous], [pooled], kernel_shape=[factor] * 2, strides=[factor] * 2)
        )
        initializers += [
            numpy_helper.from_array(_weights(rng, (ANCHORS * VALUES, 3, 1, 1)), f"w_s{stride}"),
            numpy_helper.from_array(_weights(rng, (ANCHORS * VALUES,)), f"b_s{stride}"),
            numpy_helper.from_array(np.array([1, ANCHORS, VALUES, cells], dtype=np.int64), f"grid_s{stride}"),
            numpy_helper.from_array(np.array([1, ANCHORS * cells, VALUES], dtype=np.int64), f"boxes_s{stride}"),
        ]
        nodes += [
            helper.make_node("Conv", [pooled, f"w_s{stride}", f"b_s{stride}"], [f"conv_s{stride}"]),
            helper.make_node("Reshape", [f"conv_s{stride}", f"grid_s{stride}"], [f"grid_out_s{stride}"]),
            helper.make_node("Transpose", [f"grid_out_s{stride}"], [f"cells_s{stride}"], perm=[0, 1, 3, 2]),
            helper.make_node("Reshape", [f"cells_s{stride}", f"boxes_s{stride}"], [head]),
        ]
        heads.append(head)
        previous, previous_stride = pooled, stride
    boxes = ANCHORS * sum((IMAGE[2] // s) * (IMAGE[3] // s) for s in STRIDES)  # 25200
    nodes += [
        helper.make_node("Concat", heads, ["raw"], axis=1),
        helper.make_node("Sigmoid", ["raw"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, IMAGE)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, boxes, VALUES])],
        initializers,
    )
    return _model(graph)


def segmenter() -> onnx.ModelProto:
    rng = np.random.Generator(np.random.PCG64(SEED + 1))
    size = [IMAGE[2] // 4, IMAGE[3] // 4]
    graph = helper.make_graph(
        [
            helper.make_node("AveragePool", ["images"], ["pooled"], kernel_shape=[4, 4], strides=[4, 4]),
            helper.make_node("Conv", ["pooled", "w", "b"], ["masks"]),
        ],
        "segmenter",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, IMAGE)],
        [helper.make_tensor_value_info("masks", TensorProto.FLOAT, [1, CLASSES, *size])],
        [
            numpy_helper.from_array(_weights(rng, (CLASSES, 3, 1, 1)), "w"),
            numpy_helper.from_array(_weights(rng, (CLASSES,)), "b"),
        ],
    )
    return _model(graph)


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="make_models.py")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


MODELS = {"detector.onnx": detector, "segmenter.onnx": segmenter}


def main() -> int:
    for name, build in MODELS.items():
        (HERE / name).write_bytes(build().SerializeToString())
        print(HERE / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
