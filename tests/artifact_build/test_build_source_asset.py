"""A local ONNX source with external data ships as one asset holding the model file and its data files only."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import numpy as np
import onnx
from aws_cdk import aws_s3_assets as s3_assets
from onnx import TensorProto, helper, numpy_helper
from synth_helpers import new_app

from model_build.onnx_external import external_data
from stacks.build_stack import SOURCE_FOLDER_EXCLUDE, only_these


def model_with_external_data(folder: Path) -> Path:
    weight = numpy_helper.from_array(np.ones((3, 3), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[weight],
    )
    (folder / "weights").mkdir()
    path = folder / "model.onnx"
    onnx.save_model(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
        str(path),
        save_as_external_data=True,
        location="weights/model.bin",
        size_threshold=0,
    )
    return path


def test_the_asset_holds_exactly_the_model_and_its_data(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    path = model_with_external_data(source)
    (source / "unrelated.txt").write_text("not part of the model")
    (source / "weights" / "other.bin").write_bytes(b"not referenced")
    data = [d.location for d in external_data(path)]
    assert _staged_files(tmp_path, source, only_these(path.name, data)) == ["model.onnx", "weights/model.bin"]


def _staged_files(tmp_path: Path, source: Path, exclude: list[str]) -> list[str]:
    """The files CDK stages for a folder asset of `source` with these exclude patterns."""
    outdir = tmp_path / "out"
    app = new_app(outdir)  # cdk.json's context, as `make synth` runs app.py
    stack = cdk.Stack(app, "S")
    asset = s3_assets.Asset(stack, "Source", path=str(source), exclude=exclude)
    cdk.CfnOutput(stack, "Url", value=asset.s3_object_url)
    cdk.CfnWaitConditionHandle(stack, "Anchor")  # CloudFormation validation: a template needs a resource
    app.synth()
    manifest = json.loads((outdir / "S.assets.json").read_text())
    (entry,) = [e for e in manifest["files"].values() if e["source"].get("packaging") == "zip"]
    staged = outdir / entry["source"]["path"]
    return sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file())


def test_a_model_folders_bytecode_is_not_shipped(tmp_path):
    """A Python model's folder after its model.py ran once (Python writes 1/__pycache__/): the folder source's asset
    (stacks/build_stack.py SOURCE_FOLDER_EXCLUDE) leaves the bytecode out, as its key and the packager do."""
    source = tmp_path / "add_sub"
    (source / "1" / "__pycache__").mkdir(parents=True)
    (source / "config.pbtxt").write_text('backend: "python"\n')
    (source / "1" / "model.py").write_text("class TritonPythonModel: ...\n")
    (source / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"bytecode")
    assert _staged_files(tmp_path, source, SOURCE_FOLDER_EXCLUDE) == ["1/model.py", "config.pbtxt"]
