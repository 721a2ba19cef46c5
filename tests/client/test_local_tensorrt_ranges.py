"""The local endpoint holds a TensorRT model to its engine's shape range (issue 22 B5).

A TensorRT engine accepts only the shapes of its optimisation profile; Triton's TensorRT backend refuses any
other with INVALID_ARG (HTTP 400) and the message "model expected the shape of dimension <i> to be between
<min> and <max> but received <v>" (triton-inference-server/tensorrt_backend `src/tensorrt_utils.h`,
ValidateDimension; <i> counts the batch axis). Locally the model runs from its ONNX file on ONNX Runtime,
which would take any shape: given the stage config (`local --stage-config`, what `make local LOCAL_CONFIG=...`
passes), the stand-in refuses what the engine would, with the same message. The ranges are the build's own
(model_build.trt.shape_profiles: batch 1..max_batch_size, then `tensorrt.shapes` min..max).
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.onnx_standin import SHAPE_RANGES_PARAMETER, substitute_models
from endpoint_client.shape_ranges import tensorrt_shape_ranges
from endpoint_client.transport import http_request
from model_build.stage_repository import assemble_repository

STAGE = """triton_release: '24.09'
models:
  - name: dyn
    platform: tensorrt_plan
    source: {path: dyn.onnx}
    max_batch_size: 4
    dynamic_batching: {enabled: false}
    instance_groups: [{count: 1, kind: KIND_GPU}]
    tensorrt:
      shapes: [{input: x, min: [2], opt: [4], max: [8]}]
"""


def write_stage(folder: Path) -> Path:
    """dyn.onnx: y = x * 2, x of shape [batch, n]; the stage config that builds its engine for n in 2..8."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"])],
        "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n"])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, folder / "dyn.onnx")
    (folder / "stage.yaml").write_text(STAGE)
    return folder / "stage.yaml"


def test_the_ranges_are_the_builds_and_reach_the_stand_in(tmp_path: Path) -> None:
    stage = write_stage(tmp_path)
    repository = tmp_path / "repo"
    assemble_repository(stage, "dyn", repository, base_dir=tmp_path)

    ranges = tensorrt_shape_ranges(stage, repository)
    substitute_models(repository, ranges)

    assert ranges == {"dyn": {"x": ((1, 2), (4, 8))}}
    config = (repository / "dyn" / "config.pbtxt").read_text()
    assert SHAPE_RANGES_PARAMETER in config and '\\"max\\": [4, 8]' in config


def test_a_stage_config_without_the_model_is_refused(tmp_path: Path) -> None:
    stage = write_stage(tmp_path)
    repository = tmp_path / "repo"
    assemble_repository(stage, "dyn", repository, base_dir=tmp_path)
    (tmp_path / "other.yaml").write_text(STAGE.replace("name: dyn", "name: other"))

    with pytest.raises(Exception, match=r"--stage-config: model 'dyn': .*no model named 'dyn'"):
        tensorrt_shape_ranges(tmp_path / "other.yaml", repository)


def infer(endpoint: LocalEndpoint, shape: list[int]) -> tuple[int, dict]:
    data = np.ones(shape, dtype=np.float32)
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": shape, "data": data.ravel().tolist()}]})
    status, reply, _ = http_request(
        "POST", endpoint.url + "/invocations", body.encode(), {"Content-Type": "application/json"}, 60
    )
    return status, json.loads(reply)


@pytest.mark.triton
def test_the_local_endpoint_refuses_shapes_outside_the_engines_profile(triton_env: Path, tmp_path: Path) -> None:
    stage = write_stage(tmp_path)
    repository = tmp_path / "repo"
    assemble_repository(stage, "dyn", repository, base_dir=tmp_path)
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(repository / "dyn", arcname="dyn")
    quiet = {"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}

    with LocalEndpoint(
        archive, environment=quiet, triton_env=triton_env, workdir=tmp_path / "w", stage_config=stage
    ) as endpoint:
        inside = infer(endpoint, [3, 8])
        above = infer(endpoint, [1, 9])
        below = infer(endpoint, [1, 1])
    with LocalEndpoint(archive, environment=quiet, triton_env=triton_env, workdir=tmp_path / "plain") as endpoint:
        unchecked = infer(endpoint, [1, 9])

    assert inside[0] == 200 and inside[1]["outputs"][0]["data"] == [2.0] * 24
    assert above == (400, {"error": "model expected the shape of dimension 1 to be between 2 and 8 but received 9"})
    assert below == (400, {"error": "model expected the shape of dimension 1 to be between 2 and 8 but received 1"})
    assert unchecked[0] == 200  # without the stage config only Triton's own checks apply
