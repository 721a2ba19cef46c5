"""ONNX external data (issue #11.1): copied, hashed into the key, packaged and checked with the model.

Models are written with onnx's own external-data writer (`onnx.save_model(..., save_as_external_data=True)`),
and onnxruntime loading the result is the proof: onnxruntime resolves `location` relative to the model
file's folder and refuses a path that leaves it ("External data path escapes model directory",
onnxruntime `tensorprotoutils.cc` ValidateExternalDataPathFromDir), as does onnx.checker.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml
from cli_runner import run_cli
from model_fixtures import save_with_external_data, set_location, weighted_model, weighted_repository
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import _get_all_tensors, convert_model_to_external_data, uses_external_data

from model_build import cli
from model_build.check import check_repository
from model_build.errors import InvalidModelError
from model_build.key import SourceError, file_fingerprint
from model_build.onnx_external import ExternalDataError, MalformedModelError, external_data, external_locations
from model_build.package import package_repository

X = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)
W = np.arange(64, dtype=np.float32).reshape(1, 64)


def run_onnx(path: Path) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": X})[0]


def onnx_locations(path: Path) -> set[str]:
    """onnx's own answer: every tensor (initializers, attributes, subgraphs) that uses external data."""
    model = onnx.load(str(path), load_external_data=False)
    return {
        entry.value
        for tensor in _get_all_tensors(model)
        if uses_external_data(tensor)
        for entry in tensor.external_data
        if entry.key == "location"
    }


# --- reading the references --------------------------------------------------------------------


def subgraph_model() -> onnx.ModelProto:
    """An If whose branches hold Constant tensors (attributes inside subgraphs) plus an initializer."""
    then_const = helper.make_node("Constant", [], ["t"], value=numpy_helper.from_array(np.ones(64, np.float32), "c1"))
    else_const = helper.make_node("Constant", [], ["e"], value=numpy_helper.from_array(np.zeros(64, np.float32), "c2"))
    out_t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [64])
    out_e = helper.make_tensor_value_info("e", TensorProto.FLOAT, [64])
    then_graph = helper.make_graph([then_const], "then", [], [out_t])
    else_graph = helper.make_graph([else_const], "else", [], [out_e])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])
    nodes = [
        helper.make_node("If", ["cond"], ["branch"], then_branch=then_graph, else_branch=else_graph),
        helper.make_node("Add", ["branch", "bias"], ["y"]),
    ]
    bias = numpy_helper.from_array(np.full(64, 2, np.float32), "bias")
    graph = helper.make_graph(nodes, "branches", [cond], [y], initializer=[bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_references_are_the_ones_onnx_itself_finds(tmp_path: Path) -> None:
    one_file = save_with_external_data(weighted_model(), tmp_path / "a" / "model.onnx", "weights/all.bin")
    nested = tmp_path / "b" / "model.onnx"
    nested.parent.mkdir()
    branches = subgraph_model()
    convert_model_to_external_data(branches, all_tensors_to_one_file=False, size_threshold=0, convert_attribute=True)
    onnx.save_model(branches, str(nested))
    inline = tmp_path / "c" / "model.onnx"
    inline.parent.mkdir()
    onnx.save_model(weighted_model(), str(inline))
    for path in (one_file, nested, inline):
        assert set(external_locations(path)) == onnx_locations(path), path
    assert external_locations(one_file) == ["weights/all.bin"]
    assert len(external_locations(nested)) == 3  # bias and both branch constants, each its own file
    assert external_locations(inline) == []


def test_a_reference_may_not_leave_the_model_folder(tmp_path: Path) -> None:
    model = save_with_external_data(weighted_model(), tmp_path / "m" / "model.onnx")
    (tmp_path / "outside.data").write_bytes((tmp_path / "m" / "model.onnx.data").read_bytes())
    for location, message in [
        ("../outside.data", "leaves the model file's folder"),
        (str(tmp_path / "outside.data"), "is an absolute path"),
        ("missing.data", "does not exist beside the model"),
    ]:
        set_location(model, location)
        with pytest.raises(ExternalDataError, match=message):
            external_data(model)
        # onnxruntime refuses the same models.
        with pytest.raises(Exception, match="External data path"):
            run_onnx(model)
    os.symlink(tmp_path / "outside.data", tmp_path / "m" / "linked.data")
    set_location(model, "linked.data")
    with pytest.raises(ExternalDataError, match="goes through a symbolic link"):
        external_data(model)


# --- copy (config), package, check -----------------------------------------------------------


def test_config_copies_the_data_files_and_onnxruntime_loads_the_copy(tmp_path: Path) -> None:
    source = save_with_external_data(weighted_model(), tmp_path / "export" / "exported.onnx", "weights/w.bin")
    repo = tmp_path / "repo"
    args = ["config", "--onnx", str(source), "--name", "weighted", "--platform", "onnxruntime_onnx"]
    args += ["--instance-kind", "KIND_CPU", "--repository", str(repo)]
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        assert cli.main(args) == 0, stderr.getvalue()
    copied = repo / "weighted" / "1" / "model.onnx"
    assert (repo / "weighted" / "1" / "weights" / "w.bin").is_file()
    np.testing.assert_allclose(run_onnx(copied), X + W)
    assert check_repository(repo) == []


@pytest.mark.parametrize("layout", ["single", "uncompressed"])
def test_the_package_holds_the_data_and_onnxruntime_loads_it(tmp_path: Path, layout: str) -> None:
    repo = tmp_path / "repo"
    weighted_repository(repo, location="weights/model.onnx.data")
    assert check_repository(repo) == []
    [artifact] = package_repository(repo, tmp_path / "out", layout=layout)
    if layout == "single":
        unpacked = tmp_path / "unpacked"
        with tarfile.open(artifact.path) as archive:
            assert "weighted/1/weights/model.onnx.data" in archive.getnames()
            archive.extractall(unpacked, filter="data")
        served = unpacked / "weighted" / "1" / "model.onnx"
    else:
        served = artifact.path / "1" / "model.onnx"
    np.testing.assert_allclose(run_onnx(served), X + W)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("gone.data", "external data file 'gone.data' does not exist beside the model"),
        ("../../outside.data", "location '../../outside.data' leaves the model file's folder"),
        ("/etc/passwd", "location '/etc/passwd' is an absolute path"),
    ],
)
def test_check_and_package_refuse_data_that_does_not_ship(tmp_path: Path, location: str, message: str) -> None:
    repo = tmp_path / "repo"
    folder = weighted_repository(repo)
    (tmp_path / "outside.data").write_bytes(b"\0" * 256)
    set_location(folder / "1" / "model.onnx", location)
    problems = check_repository(repo)
    assert [(p.model, p.field, p.rule) for p in problems] == [("weighted", "weighted/1/model.onnx", "onnx-file")]
    assert message in problems[0].message
    with pytest.raises(InvalidModelError, match=message):
        package_repository(repo, tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- key ---------------------------------------------------------------------------------------


def key_of(config: Path, base: Path) -> tuple[int, str, str]:
    argv = ["key", "--config", str(config), "--model", "weighted", "--gpu-target", "portable", "--base-dir", str(base)]
    result = run_cli(*argv)
    return result.returncode, result.stdout.strip(), result.stderr


def test_the_key_changes_when_only_the_data_file_changes(tmp_path: Path) -> None:
    model = save_with_external_data(weighted_model(), tmp_path / "models" / "weighted.onnx", "weighted.data")
    config = tmp_path / "test.yaml"  # `key` loads it as the app does: a stage's file is named after it
    document = {
        "stage": "test",
        "triton_release": "24.09",
        "models": [
            {
                "name": "weighted",
                "source": {"path": "models/weighted.onnx"},
                "platform": "onnxruntime_onnx",
                "instance_groups": [{"count": 1, "kind": "KIND_CPU"}],
            }
        ],
    }
    config.write_text(yaml.safe_dump(document))
    code, before, err = key_of(config, tmp_path)
    assert code == 0, err
    # New weights in the data file (raw float32, as onnx wrote them); the .onnx file is untouched.
    data = tmp_path / "models" / "weighted.data"
    assert data.read_bytes() == W.tobytes()
    data.write_bytes((W * 2).tobytes())
    np.testing.assert_allclose(run_onnx(model), X + 2 * W)
    code, after, err = key_of(config, tmp_path)
    assert code == 0, err
    assert after != before
    assert file_fingerprint(model).startswith("file:") and "+data:" in file_fingerprint(model)
    # A data file that is not there: a clear error naming the file, not a key for half a model.
    (tmp_path / "models" / "weighted.data").unlink()
    code, out, err = key_of(config, tmp_path)
    assert code == 1 and out == ""
    assert err.startswith(f"ERROR: {config}: model 'weighted': {model}: external data file 'weighted.data' does not")
    with pytest.raises(SourceError):
        file_fingerprint(model)


def test_a_file_that_is_not_onnx_is_keyed_by_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(b"onnx bytes of the detector")
    assert file_fingerprint(path).startswith("file:") and "+data" not in file_fingerprint(path)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    tag, length = (number << 3) | 2, len(payload)
    out = bytearray([tag])
    while True:
        byte = length & 0x7F
        length >>= 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out) + payload


def test_hostile_protobuf_structure_is_refused_not_a_crash(tmp_path: Path) -> None:
    """Subgraphs nested thousands deep (a RecursionError for a naive walker) and lengths running past
    the end are MalformedModelError, which check reports as 'not an ONNX model'."""
    graph = b""
    for _ in range(2000):  # graph -> node(1) -> attribute(5) -> g(6) -> graph ...
        graph = _field(1, _field(5, _field(6, graph)))
    path = tmp_path / "deep.onnx"
    path.write_bytes(_field(7, graph))
    with pytest.raises(MalformedModelError, match="nested more than 64 deep"):
        external_locations(path)
    path.write_bytes(b"\x3a\xff\xff\xff\x0f")  # field 7, length 4 GiB, no payload
    with pytest.raises(MalformedModelError, match="runs past the end"):
        external_locations(path)
