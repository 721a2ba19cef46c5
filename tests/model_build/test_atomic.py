"""model_build.atomic, the one atomic-write helper, and the writers built on it (archives, the
uncompressed package layout, the yolov5s export): the whole new output or the previous one, never
half a file, and no temp left behind."""

from __future__ import annotations

import os
import types
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from model_build import atomic, package
from model_build import export as export_module
from model_build.atomic import atomic_directory, atomic_file, atomic_path, write_atomically
from model_build.errors import ModelBuildError
from model_build.package import package_repository, write_model_archive


class Boom(Exception):
    pass


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def fsyncs(monkeypatch) -> list[int]:
    """The descriptors os.fsync was called on (still calling it)."""
    seen: list[int] = []
    real = os.fsync

    def spy(descriptor: int) -> None:
        seen.append(descriptor)
        real(descriptor)

    monkeypatch.setattr(atomic.os, "fsync", spy)
    return seen


# --- files -------------------------------------------------------------------------------------


def test_write_atomically_replaces_the_file_whole(tmp_path: Path, fsyncs) -> None:
    target = tmp_path / "deep" / "config.pbtxt"
    write_atomically(target, b"first")
    write_atomically(target, b"second")
    assert target.read_bytes() == b"second"
    assert names(target.parent) == ["config.pbtxt"]
    assert len(fsyncs) == 2


@pytest.mark.parametrize("previous", [None, b"old bytes"])
def test_a_failure_mid_write_leaves_the_previous_file_and_no_temp(tmp_path: Path, previous) -> None:
    target = tmp_path / "model.tar.gz"
    if previous is not None:
        target.write_bytes(previous)
    with pytest.raises(Boom), atomic_file(target) as stream:
        stream.write(b"half of it")
        assert names(tmp_path)[0].startswith(".model.tar.gz.")  # the temp, hidden, beside the target
        raise Boom
    assert names(tmp_path) == ([] if previous is None else ["model.tar.gz"])
    if previous is not None:
        assert target.read_bytes() == previous


def test_atomic_file_sets_the_mode_it_is_given(tmp_path: Path) -> None:
    with atomic_file(tmp_path / "shared", mode=0o640) as stream:
        stream.write(b"x")
    assert (tmp_path / "shared").stat().st_mode & 0o777 == 0o640


def test_without_a_mode_a_write_keeps_the_files_permissions_or_gets_a_plain_opens(tmp_path: Path) -> None:
    """A hostile-input review found config.pbtxt turned from 0644 into mkstemp's 0600 when `config` added
    EXECUTION_ENV_PATH: a file read by a container running as another user would become unreadable."""
    existing = tmp_path / "config.pbtxt"
    existing.write_text("name: 'm'")
    existing.chmod(0o604)
    write_atomically(existing, b"name: 'm'\n")
    assert existing.stat().st_mode & 0o777 == 0o604
    old_mask = os.umask(0o027)
    try:
        write_atomically(tmp_path / "new", b"x")
        with atomic_path(tmp_path / "tool-written") as temp:
            temp.write_bytes(b"x")
    finally:
        os.umask(old_mask)
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "tool-written").stat().st_mode & 0o777 == 0o640


def test_atomic_path_is_for_tools_that_write_by_name(tmp_path: Path, fsyncs) -> None:
    target = tmp_path / "model.plan"
    with atomic_path(target, mode=0o644) as temp:
        assert temp.parent == tmp_path and temp.exists() and temp != target
        temp.write_bytes(b"engine")
    assert target.read_bytes() == b"engine" and target.stat().st_mode & 0o777 == 0o644
    assert names(tmp_path) == ["model.plan"] and len(fsyncs) == 1


def test_atomic_path_removes_its_temp_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    target.write_bytes(b"previous")
    with pytest.raises(Boom), atomic_path(target) as temp:
        temp.write_bytes(b"half")
        raise Boom
    assert names(tmp_path) == ["model.onnx"] and target.read_bytes() == b"previous"


def test_a_symlink_left_at_the_temp_path_is_never_renamed_into_place(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"not the output")
    target = tmp_path / "out" / "model.onnx"
    with pytest.raises(OSError), atomic_path(target) as temp:
        temp.unlink()
        temp.symlink_to(secret)
    assert names(target.parent) == []


# --- folders -----------------------------------------------------------------------------------


def make_tree(root: Path, files: dict[str, bytes]) -> None:
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)


def test_atomic_directory_replaces_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "detector"
    make_tree(target, {"stale.bin": b"old"})
    with atomic_directory(target) as staged:
        assert not staged.exists()
        make_tree(staged, {"config.pbtxt": b"new"})
        assert (target / "stale.bin").exists()  # nothing moves before the block ends
    assert names(target) == ["config.pbtxt"] and names(tmp_path) == ["detector"]


def test_atomic_directory_failure_keeps_the_previous_folder(tmp_path: Path) -> None:
    target = tmp_path / "detector"
    make_tree(target, {"config.pbtxt": b"old"})
    with pytest.raises(Boom), atomic_directory(target) as staged:
        make_tree(staged, {"config.pbtxt": b"half"})
        raise Boom
    assert names(tmp_path) == ["detector"] and (target / "config.pbtxt").read_bytes() == b"old"


def test_atomic_directory_puts_the_previous_folder_back_if_the_swap_fails(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "detector"
    make_tree(target, {"config.pbtxt": b"old"})
    real = os.replace

    def replace(source, destination):
        if Path(source).name == "new":
            raise OSError("disk on fire")
        real(source, destination)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(OSError, match="disk on fire"), atomic_directory(target) as staged:
        make_tree(staged, {"config.pbtxt": b"new"})
    assert names(tmp_path) == ["detector"] and (target / "config.pbtxt").read_bytes() == b"old"


# --- the writers built on it -------------------------------------------------------------------


def small_repository(root: Path, text: bytes) -> Path:
    for model in ("a", "b"):
        (root / model / "1").mkdir(parents=True)
        (root / model / "config.pbtxt").write_bytes(
            b'name: "%s"\nbackend: "python"\nmax_batch_size: 0\n'
            b'input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
            b'output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
            b"instance_group [ { kind: KIND_CPU } ]\n" % model.encode()
        )
        (root / model / "1" / "model.py").write_bytes(text)
    return root


def test_archives_are_0644_and_fsynced(tmp_path: Path, fsyncs) -> None:
    repository = small_repository(tmp_path / "repo", b"class TritonPythonModel:\n    pass\n")
    archive = tmp_path / "out" / "a.tar.gz"
    write_model_archive(repository / "a", archive)
    assert archive.stat().st_mode & 0o777 == 0o644
    assert names(archive.parent) == ["a.tar.gz"] and fsyncs


def test_the_uncompressed_layout_swaps_no_folder_when_a_copy_fails(tmp_path: Path, monkeypatch) -> None:
    repository = small_repository(tmp_path / "repo", b"# old\n")
    out = tmp_path / "out"
    package_repository(repository, out, layout="uncompressed")
    for model in ("a", "b"):
        (repository / model / "1" / "model.py").write_bytes(b"# new\n")
    real = package._copy_model_tree

    def fails_on_b(entries, into):
        if entries[0].arcname == "b":
            raise OSError("disk on fire")
        real(entries, into)

    monkeypatch.setattr(package, "_copy_model_tree", fails_on_b)
    with pytest.raises(ModelBuildError, match="disk on fire"):
        package_repository(repository, out, layout="uncompressed")
    assert names(out) == ["a", "b"]  # no staging folder left
    assert {(out / m / "1" / "model.py").read_bytes() for m in ("a", "b")} == {b"# old\n"}
    monkeypatch.undo()
    package_repository(repository, out, layout="uncompressed")
    assert {(out / m / "1" / "model.py").read_bytes() for m in ("a", "b")} == {b"# new\n"}
    assert names(out) == ["a", "b"]


def test_the_yolov5s_export_lands_through_the_atomic_temp(tmp_path: Path, monkeypatch) -> None:
    """ultralytics writes the ONNX into its own work folder and returns a relative name; it is
    copied into export_model's temp (which may be on another file system), checked, then renamed."""

    def write_onnx(path: str) -> None:
        batch = [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, 640, 640])]
        out = [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["batch", 3, 640, 640])]
        graph = helper.make_graph([helper.make_node("Identity", ["images"], ["output0"])], "g", batch, out)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

    class YOLO:
        def __init__(self, weights: str) -> None:
            assert weights == "yolov5su.pt"

        def export(self, **options) -> str:
            write_onnx("yolov5su.onnx")  # in the current (work) folder
            return "yolov5su.onnx"

    ultralytics = types.SimpleNamespace(YOLO=YOLO)
    monkeypatch.setattr(export_module, "import_module", lambda name: ultralytics if name == "ultralytics" else object())
    out = tmp_path / "models" / "yolov5s.onnx"
    cwd = Path.cwd()
    assert export_module.export_model("yolov5s", out) == out
    assert Path.cwd() == cwd
    assert names(out.parent) == ["yolov5s.onnx"]
    assert [i.name for i in onnx.load(str(out)).graph.input] == ["images"]
