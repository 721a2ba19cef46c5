"""A small pipeline for ensemble and environment tests: python pre-processing, an ONNX model, python post-processing.

`write_pipeline(root)` writes the source folders (as a project would hold them) and a stage file naming
them; `pipeline_repository(root)` a model repository with the composing models' configs in place.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from serving_facts.settings import ModelSettings

PRE_CONFIG = """\
name: "pre"
backend: "python"
max_batch_size: 0
input [ { name: "image" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "pixels" data_type: TYPE_FP32 dims: [ 1, 3 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

POST_CONFIG = """\
name: "post"
backend: "python"
max_batch_size: 0
input [ { name: "logits" data_type: TYPE_FP32 dims: [ 1, 3 ] } ]
output [ { name: "labels" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

# pre: the length of the marker string of a package only the packed environment provides.
PRE_MODEL = """\
import numpy as np
import triton_python_backend_utils as pb_utils

import onlyenv  # installed only in this model's packed environment


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()[0]
            pixels = np.array([[len(raw), len(onlyenv.MARK), 1.0]], dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("pixels", pixels)]))
        return responses
"""

POST_MODEL = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            logits = pb_utils.get_input_tensor_by_name(request, "logits").as_numpy()
            label = ",".join(str(int(v)) for v in logits.reshape(-1)).encode()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("labels", np.array([label], dtype=object))]))
        return responses
"""

STAGE = """\
stage: pipe
triton_release: "24.09"
models:
  - name: pre
    platform: python
    source: {path: models/pre}
    environment: {requirements: models/pre/requirements.txt}
    max_batch_size: 0
    dynamic_batching: {enabled: false}
    instance_groups: [{count: 1, kind: KIND_CPU}]
  - name: cnn
    platform: onnxruntime_onnx
    source: {path: models/cnn.onnx}
    max_batch_size: 0
    dynamic_batching: {enabled: false}
    instance_groups: [{count: 1, kind: KIND_CPU}]
  - name: post
    platform: python
    source: {path: models/post}
    max_batch_size: 0
    dynamic_batching: {enabled: false}
    instance_groups: [{count: 1, kind: KIND_CPU}]
  - name: pipe
    platform: ensemble
    max_batch_size: 0
    ensemble:
      steps:
        - {model: pre, input_map: {image: image}, output_map: {pixels: pixels}}
        - {model: cnn, input_map: {input: pixels}, output_map: {output: logits}}
        - {model: post, input_map: {logits: logits}, output_map: {labels: labels}}
"""


def identity_onnx(path: Path, shape=(1, 3)) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["input"], ["output"])],
        "cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, list(shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # ONNX Runtime versions of older Tritons read IR 8
    onnx.save(model, str(path))


def write_pipeline(root: Path, requirements: str = "numpy==1.26.4\nonlyenv==1.0\n") -> Path:
    """Source folders under root/models and root/stage.yaml (stage `pipe`); returns the stage file."""
    models = root / "models"
    for name, config, code in (("pre", PRE_CONFIG, PRE_MODEL), ("post", POST_CONFIG, POST_MODEL)):
        (models / name / "1").mkdir(parents=True)
        (models / name / "config.pbtxt").write_text(config)
        (models / name / "1" / "model.py").write_text(code)
    (models / "pre" / "requirements.txt").write_text(requirements)
    identity_onnx(models / "cnn.onnx")
    stage = root / "stage.yaml"
    stage.write_text(STAGE)
    return stage


def pipeline_repository(root: Path) -> Path:
    """root/repo with pre, post (copied folders) and cnn (config + model.onnx), as the build assembles it."""
    from model_build import cli

    stage = root / "stage.yaml"
    repo = root / "repo"
    repo.mkdir()
    for name in ("pre", "post"):
        shutil.copytree(root / "models" / name, repo / name)
    assert (
        cli.main(
            [
                "config",
                "--config",
                str(stage),
                "--model",
                "cnn",
                "--onnx",
                str(root / "models" / "cnn.onnx"),
                "--repository",
                str(repo),
            ]
        )
        == 0
    )
    return repo


def tiny_wheel(folder: Path, name: str = "onlyenv", version: str = "1.0", mark: str = "from-packed-env") -> Path:
    """A pure-Python wheel built by hand (PEP 427 layout), so packing needs no index for it."""
    import base64
    import hashlib
    import zipfile

    files = {
        f"{name}/__init__.py": f"MARK = {mark!r}\n".encode(),
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    files[f"{name}-{version}.dist-info/RECORD"] = (record + f"{name}-{version}.dist-info/RECORD,,\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0)), data)
    return wheel


def python_folder(root: Path, config: str, name: str = "pre") -> Path:
    folder = root / "models" / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (folder / "config.pbtxt").write_text(config)
    return folder


def python_settings(**fields) -> ModelSettings:
    return ModelSettings.model_validate(
        {"name": "pre", "platform": "python", "source": {"path": "models/pre"}, **fields}
    )


def pipe_settings(**ensemble) -> dict:
    steps = [
        {"model": "pre", "input_map": {"image": "image"}, "output_map": {"pixels": "pixels"}},
        {"model": "cnn", "input_map": {"input": "pixels"}, "output_map": {"output": "logits"}},
        {"model": "post", "input_map": {"logits": "logits"}, "output_map": {"labels": "labels"}},
    ]
    return {"name": "pipe", "platform": "ensemble", "max_batch_size": 0, "ensemble": {"steps": steps, **ensemble}}
