"""The shapes and operators Triton's backends really judge a model by (issue #22 B1, B2, B3).

Sources:
- B1: triton-inference-server/onnxruntime_backend `src/onnxruntime.cc` (main): ValidateOutputs reads each
  output's shape from the ONNX Runtime session (`OutputInfos` -> `SessionGetOutputTypeInfo`) and calls
  `CompareDimsSupported(..., true /* compare_exact */)`; ValidateInputs calls it with `false`. The session's
  shapes are after ONNX Runtime's shape inference (`InferenceSession(path).get_outputs()[i].shape`, the oracle
  used here).
- B2: onnx/onnx-tensorrt `docs/operators.md` (8.6-GA, 10.0-GA): default-domain operators only, some marked "N";
  no ONNX-ML (`ai.onnx.ml`) operator.
- B3: onnxruntime_backend PR #213: a scalar model tensor is configured as dims [1] without batching.
"""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx_fixtures import OPSET, save, settings

from model_build import pbtxt
from model_build.check import check_repository
from model_build.errors import InvalidModelError
from model_build.onnx_inspect import inspect_model
from model_build.proposal import propose_model
from model_build.stage_repository import write_onnx_model


def reshaped_output(path: Path) -> Path:
    """Output declared [batch, n]; a Reshape to [0, 10] makes it [batch, 10] to ONNX Runtime."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n"])
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [0, 10])
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "r", [x], [y], [shape])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def constant_output(path: Path) -> Path:
    """Output declared [batch, 3] that is really the constant [3]: it cannot follow a batch axis."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3])
    const = helper.make_tensor("c", TensorProto.FLOAT, [3], [1, 2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Identity", ["c"], ["z"])]
    graph = helper.make_graph(nodes, "c", [x], [y, z], [const])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def onnx_ml_model(path: Path) -> Path:
    """A linear regressor: an ONNX-ML operator (ai.onnx.ml), which ONNX Runtime runs and TensorRT cannot import."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1])
    node = helper.make_node(
        "LinearRegressor", ["x"], ["y"], domain="ai.onnx.ml", coefficients=[0.5, 0.25], intercepts=[1.0]
    )
    graph = helper.make_graph([node], "ml", [x], [y])
    opsets = [*OPSET, helper.make_opsetid("ai.onnx.ml", 3)]
    return save(helper.make_model(graph, opset_imports=opsets), path)


def det_model(path: Path) -> Path:
    """Det: marked "N" in onnx-tensorrt's operator matrix for 8.6 and 10.0."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"])
    graph = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "det", [x], [y])
    return save(helper.make_model(graph, opset_imports=OPSET), path)


def ort_output_shape(path: Path, index: int = 0) -> list:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_outputs()[index].shape


def write_config(repo: Path, name: str, text: str, onnx_path: Path) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.onnx").write_bytes(onnx_path.read_bytes())
    (repo / name / "config.pbtxt").write_text(text)


ORT_SETTINGS = {"platform": "onnxruntime_onnx", "instance_groups": [{"kind": "KIND_CPU"}]}


def test_config_writes_the_output_shape_onnx_runtime_infers(tmp_path):
    """B1: the session says [batch, 10] (the oracle), so config writes dims [10], not the declared [-1]."""
    path = reshaped_output(tmp_path / "r.onnx")
    assert ort_output_shape(path) == ["batch", 10]

    config = pbtxt.parse(pbtxt.generate(inspect_model(path), settings("r", **ORT_SETTINGS)))

    assert list(config.output[0].dims) == [10]


def test_check_holds_outputs_to_onnx_runtime_exactly(tmp_path):
    """B1: an output configured with the declared [-1] fails the backend's exact comparison with [batch, 10]."""
    path = reshaped_output(tmp_path / "r.onnx")
    good = pbtxt.generate(inspect_model(path), settings("r", **ORT_SETTINGS))
    write_config(tmp_path / "good", "r", good, path)
    write_config(tmp_path / "bad", "r", good.replace("dims: 10", "dims: -1"), path)

    assert check_repository(tmp_path / "good") == []
    problems = [str(p) for p in check_repository(tmp_path / "bad")]
    assert any(
        "output[0]:" in p and "tensor 'y': the model expects 2 dimensions (shape [-1,10])" in p for p in problems
    )


def test_a_constant_output_cannot_follow_a_batch_axis(tmp_path):
    """B1: ONNX Runtime infers the declared [batch, 3] as [3]: config refuses batching, naming both shapes, and
    init proposes max_batch_size 0, which check accepts."""
    path = constant_output(tmp_path / "c.onnx")
    assert ort_output_shape(path, 1) == [3]

    with pytest.raises(InvalidModelError, match=r"output 'z' has a fixed leading dim 3 .*declares \[-1, 3\].*infers"):
        pbtxt.generate(inspect_model(path), settings("c", **ORT_SETTINGS))
    proposal = propose_model(path, "c", instance_type_name="ml.c5.xlarge")
    assert proposal.entry["max_batch_size"] == 0

    text = pbtxt.generate(inspect_model(path), settings("c", **{**ORT_SETTINGS, **_no_batching()}))
    write_config(tmp_path / "repo", "c", text, path)
    assert check_repository(tmp_path / "repo") == []


def _no_batching() -> dict:
    return {"max_batch_size": 0, "dynamic_batching": {"enabled": False}}


def test_scalar_model_passes_check_as_dims_1(tmp_path):
    """B3: `config` writes a scalar as dims [1] without batching, and `check` (the backend's scalar rule) agrees."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    path = save(helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "s", [x], [y]),
                                  opset_imports=OPSET), tmp_path / "s.onnx")  # fmt: skip
    model = settings("s", **{**ORT_SETTINGS, **_no_batching()})
    written = write_onnx_model(tmp_path / "repo", model, path, None, with_onnx=True)

    assert "dims: 1\n" in written.read_text()
    assert check_repository(tmp_path / "repo") == []
    bad = written.read_text().replace("dims: 1\n", "dims: 2\n")
    written.write_text(bad)
    assert any("scalar tensor 'x', should only provide 1" in str(p) for p in check_repository(tmp_path / "repo"))


def test_tensorrt_refuses_onnx_ml_operators_naming_them(tmp_path):
    """B2: config (and synth, which calls it) refuses tensorrt_plan for an ONNX-ML graph, proposing
    onnxruntime_onnx; init proposes onnxruntime_onnx even on a GPU instance."""
    path = onnx_ml_model(tmp_path / "ml.onnx")

    with pytest.raises(
        InvalidModelError, match=r"LinearRegressor \(ai\.onnx\.ml\).*serve it with platform: onnxruntime"
    ):
        pbtxt.generate(inspect_model(path), settings("ml"), "24.09")
    assert pbtxt.generate(inspect_model(path), settings("ml", **ORT_SETTINGS))
    proposal = propose_model(path, "ml", instance_type_name="ml.g5.xlarge", triton_release="24.09")
    assert proposal.entry["platform"] == "onnxruntime_onnx"
    assert any("LinearRegressor" in note for note in proposal.notes)


def test_check_refuses_onnx_ml_for_an_engine_to_be_built(tmp_path):
    """B2: `check` on a TensorRT model whose version folder holds the ONNX to build from."""
    path = onnx_ml_model(tmp_path / "ml.onnx")
    text = pbtxt.generate(inspect_model(path), settings("ml", **ORT_SETTINGS))
    text = text.replace('platform: "onnxruntime_onnx"', 'platform: "tensorrt_plan"').replace("KIND_CPU", "KIND_GPU")
    write_config(tmp_path / "repo", "ml", text, path)

    problems = check_repository(tmp_path / "repo", engines_from_onnx=["ml"])

    assert [p.rule for p in problems] == ["tensorrt-operators"]
    assert "LinearRegressor (ai.onnx.ml)" in problems[0].message


def test_operators_marked_unsupported_are_refused_for_their_tensorrt_release(tmp_path):
    """B2: Det is "N" in the 8.6 and 10.0 matrices (Triton 24.01, 24.05); later matrices are not public here."""
    path = det_model(tmp_path / "det.onnx")

    for release in ("24.01", "24.05"):
        with pytest.raises(InvalidModelError, match=r"Det \(ai\.onnx\): marked unsupported .* TensorRT"):
            pbtxt.generate(inspect_model(path), settings("det"), release)
    assert pbtxt.generate(inspect_model(path), settings("det"), "24.09")


def test_synth_refuses_tensorrt_for_an_onnx_ml_graph(tmp_path):
    """B2 at synth: model_build.preflight runs `config`'s generator, which names the operator."""
    from model_build.preflight import preflight_problems

    onnx_ml_model(tmp_path / "ml.onnx")
    model = settings("ml", source={"path": "ml.onnx"})
    problems = preflight_problems(model, instance_type_name="ml.g5.xlarge", triton_release="24.09", base_dir=tmp_path)

    assert [field for field, _ in problems] == ["source.path"]
    assert "LinearRegressor (ai.onnx.ml)" in problems[0][1] and "onnxruntime_onnx" in problems[0][1]


def test_warmup_never_guesses_a_dynamic_extent(tmp_path):
    """B6: Triton fails a model's load when its warm-up fails (model_configuration.md, "Model Warmup"); a dynamic
    axis without a tensorrt.shapes opt is refused instead of warmed up with 1, and with one it takes opt."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])
    path = save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "w", [x], [y]),
                                  opset_imports=OPSET), tmp_path / "w.onnx")  # fmt: skip

    with pytest.raises(InvalidModelError, match=r"warmup: true, but input 'x' .* dynamic axes \[1\] .*opt extent"):
        pbtxt.generate(inspect_model(path), settings("w", warmup=True, **ORT_SETTINGS))
    shapes = {"shapes": [{"input": "x", "min": [1], "opt": [32], "max": [64]}]}
    config = pbtxt.parse(pbtxt.generate(inspect_model(path), settings("w", warmup=True, tensorrt=shapes), "24.09"))
    assert list(config.model_warmup[0].inputs["x"].dims) == [32]
