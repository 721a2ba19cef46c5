"""model_build.package: deterministic, streaming archives of a Triton model repository."""

from __future__ import annotations

import gzip
import io
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from cli_runner import run_cli
from synth_helpers import PROJECT_ROOT

from model_build import archive, cli, package
from model_build.errors import InvalidModelError, ModelBuildError
from model_build.key import tree_sha256
from model_build.package import (
    CHUNK_SIZE,
    FIXED_MTIME,
    crc32_combine,
    package_repository,
    write_model_archive,
    write_repository_archive,
)

# The two models of the test repository: relative path -> (bytes, executable?).
PLAN = random.Random(7).randbytes(3 * CHUNK_SIZE + 12345)  # incompressible, spans several chunks
TEXT = b"".join(b"%d\n" % i for i in range(300_000))  # compressible
# Valid configs: package runs check first (issue #11.5).
DETECTOR_CONFIG = b"""name: "detector"
platform: "tensorrt_plan"
max_batch_size: 8
input [ { name: "images" data_type: TYPE_FP32 dims: [ 3, 64, 64 ] } ]
output [ { name: "boxes" data_type: TYPE_FP32 dims: [ 100, 4 ] } ]
"""
POST_PROCESS_CONFIG = b"""name: "post_process"
backend: "python"
max_batch_size: 8
input [ { name: "boxes" data_type: TYPE_FP32 dims: [ 100, 4 ] } ]
output [ { name: "labels" data_type: TYPE_STRING dims: [ 100 ] } ]
instance_group [ { kind: KIND_CPU } ]
"""
MODELS = {
    "detector": {
        "config.pbtxt": (DETECTOR_CONFIG, False),
        "1/model.plan": (PLAN, False),
        "labels.txt": (TEXT, False),
    },
    "post_process": {
        "config.pbtxt": (POST_PROCESS_CONFIG, False),
        "1/model.py": (b"class TritonPythonModel:\n    pass\n", False),
        "1/run.sh": (b"#!/bin/sh\necho hi\n", True),
        "1/.gitkeep": (b"", False),
    },
}


def make_repository(root: Path, *, reverse: bool = False, umask: int = 0o022, mtime: float | None = None) -> Path:
    """Write MODELS under root; `reverse` creates files in the opposite order."""
    old_umask = os.umask(umask)
    try:
        files = [(model, name, *spec) for model, files in MODELS.items() for name, spec in files.items()]
        for model, name, data, executable in reversed(files) if reverse else files:
            path = root / model / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            if executable:
                path.chmod(0o777 & ~umask)
            if mtime is not None:
                os.utime(path, (mtime, mtime))
    finally:
        os.umask(old_umask)
    (root / "README.md").write_text("files at the root are not models and are not packaged\n")
    return root


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return make_repository(tmp_path / "repo")


def sha256_of(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- determinism -------------------------------------------------------------------------------


def test_same_files_give_identical_archives_whatever_their_metadata(tmp_path: Path) -> None:
    first = make_repository(tmp_path / "first")
    second = make_repository(tmp_path / "second", reverse=True, umask=0o077, mtime=time.time() - 86_400 * 400)
    for layout in ("single", "multi"):
        named = {"default_model": "detector"} if layout == "single" else {}
        a = package_repository(first, tmp_path / f"out-a-{layout}", layout=layout, **named)
        b = package_repository(second, tmp_path / f"out-b-{layout}", layout=layout, workers=1, **named)
        c = package_repository(first, tmp_path / f"out-c-{layout}", layout=layout, workers=5, **named)
        assert [x.sha256 for x in a] == [x.sha256 for x in b] == [x.sha256 for x in c]
        assert [sha256_of(x.path) for x in a] == [x.sha256 for x in a]
        assert [x.path.read_bytes() for x in a] == [x.path.read_bytes() for x in b]


def test_changing_one_byte_or_the_exec_bit_changes_the_digest(tmp_path: Path, repository: Path) -> None:
    before = write_model_archive(repository / "post_process", tmp_path / "a.tar.gz")
    (repository / "post_process" / "1" / "model.py").write_bytes(b"class TritonPythonModel:\n    pass\n\n")
    edited = write_model_archive(repository / "post_process", tmp_path / "b.tar.gz")
    (repository / "post_process" / "1" / "model.py").chmod(0o755)
    executable = write_model_archive(repository / "post_process", tmp_path / "c.tar.gz")
    assert len({before, edited, executable}) == 3


def test_pycache_is_left_out(tmp_path: Path, repository: Path) -> None:
    before = write_model_archive(repository / "post_process", tmp_path / "a.tar.gz")
    (repository / "post_process" / "1" / "__pycache__").mkdir()
    (repository / "post_process" / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(os.urandom(64))
    assert write_model_archive(repository / "post_process", tmp_path / "b.tar.gz") == before


# --- layout and compatibility with gzip/tar readers --------------------------------------------


def expected_members(models: list[str]) -> dict[str, tuple[int, bytes | None]]:
    """arcname -> (mode, bytes or None for a folder)."""
    members: dict[str, tuple[int, bytes | None]] = {}
    for model in models:
        members[model] = (0o755, None)
        for name, (data, executable) in MODELS[model].items():
            parts = name.split("/")
            for depth in range(1, len(parts)):
                members["/".join([model, *parts[:depth]])] = (0o755, None)
            members[f"{model}/{name}"] = (0o755 if executable else 0o644, data)
    return members


def check_with_tarfile(archive: Path, models: list[str], mode: str) -> None:
    expected = expected_members(models)
    with tarfile.open(archive, mode) as tar:
        names = []
        for member in tar:
            names.append(member.name)
            mode_bits, data = expected[member.name]
            assert member.mode == mode_bits, member.name
            assert (member.mtime, member.uid, member.gid, member.uname, member.gname) == (
                FIXED_MTIME,
                0,
                0,
                "root",
                "root",
            )
            if data is None:
                assert member.isdir()
            else:
                assert member.isreg()
                assert tar.extractfile(member).read() == data
    # Sorted, folders before their contents, except each model's config.pbtxt right after its folder.
    assert names == sorted(
        names, key=lambda name: [(part != "config.pbtxt" or i != 1, part) for i, part in enumerate(name.split("/"))]
    )
    for model in {name.split("/")[0] for name in names}:
        assert names[names.index(model) + 1] == f"{model}/config.pbtxt"
    assert set(names) == set(expected)


def check_with_gnu_tar(archive: Path, models: list[str], destination: Path) -> None:
    subprocess.run(["gzip", "-t", str(archive)], check=True)
    destination.mkdir()
    extract = subprocess.run(["tar", "-xzf", str(archive), "-C", str(destination)], check=True, capture_output=True)
    assert extract.stderr == b""  # no warnings (e.g. about timestamps or trailing garbage)
    listing = subprocess.run(["tar", "-tzf", str(archive)], check=True, capture_output=True, text=True).stdout
    for arcname, (mode_bits, data) in expected_members(models).items():
        path = destination / arcname
        assert (path.stat().st_mode & 0o777) == mode_bits, arcname
        assert path.read_bytes() == data if data is not None else path.is_dir()
    assert sorted(p.relative_to(destination).as_posix() for p in destination.rglob("*")) == sorted(
        expected_members(models)
    )
    assert "README.md" not in listing


def test_single_layout_holds_the_model_folders_at_the_root(tmp_path: Path, repository: Path) -> None:
    [artifact] = package_repository(repository, tmp_path / "out", layout="single", default_model="detector")
    assert artifact.path == tmp_path / "out" / "model.tar.gz"
    assert artifact.models == ("detector", "post_process")
    for mode in ("r:gz", "r|gz"):  # random access and stream reading
        check_with_tarfile(artifact.path, ["detector", "post_process"], mode)
    check_with_gnu_tar(artifact.path, ["detector", "post_process"], tmp_path / "gnu")
    assert (artifact.path.stat().st_mode & 0o777) == 0o644


def test_multi_layout_writes_one_archive_per_model(tmp_path: Path, repository: Path) -> None:
    artifacts = package_repository(repository, tmp_path / "out", layout="multi")
    assert [a.path.name for a in artifacts] == ["detector.tar.gz", "post_process.tar.gz"]
    for artifact in artifacts:
        check_with_tarfile(artifact.path, list(artifact.models), "r:gz")
        check_with_gnu_tar(artifact.path, list(artifact.models), tmp_path / f"gnu-{artifact.models[0]}")
    # A multi-model endpoint's <model>.tar.gz is exactly the single-model archive of that model.
    single = write_model_archive(repository / "detector", tmp_path / "single" / "model.tar.gz")
    assert artifacts[0].sha256 == single


def test_model_selection(tmp_path: Path, repository: Path) -> None:
    artifacts = package_repository(repository, tmp_path / "out", layout="multi", models=["post_process"])
    assert [a.path.name for a in artifacts] == ["post_process.tar.gz"]
    assert not (tmp_path / "out" / "detector.tar.gz").exists()
    with pytest.raises(ModelBuildError, match=r"no model folder named 'nope'; found: detector, post_process"):
        package_repository(repository, tmp_path / "out", models=["nope"])


def test_uncompressed_layout_is_a_folder_tree_with_normalised_modes(tmp_path: Path) -> None:
    repository = make_repository(tmp_path / "repo", umask=0o077)
    out = tmp_path / "out"
    artifacts = package_repository(repository, out, layout="uncompressed")
    assert [a.path for a in artifacts] == [out / "detector", out / "post_process"]
    for artifact in artifacts:
        assert artifact.sha256 == tree_sha256(artifact.path) == tree_sha256(repository / artifact.models[0])
    for arcname, (mode_bits, data) in expected_members(["detector", "post_process"]).items():
        path = out / arcname
        assert (path.stat().st_mode & 0o777) == mode_bits, arcname
        if data is not None:
            assert path.read_bytes() == data
    # Re-running replaces the folders and leaves no staging folders behind.
    (out / "detector" / "stale.bin").write_bytes(b"old")
    package_repository(repository, out, layout="uncompressed")
    assert not (out / "detector" / "stale.bin").exists()
    assert sorted(p.name for p in out.iterdir()) == ["detector", "post_process"]


def test_bytecode_changes_neither_the_key_nor_the_archive(tmp_path: Path, repository: Path) -> None:
    """Running a Python model's model.py once writes __pycache__/ beside it (Python's default): neither the folder's
    digest (its artifact key, model_build.key.tree_sha256) nor its archive may change, or a developer's local run
    would give another key than the pipeline's and rebuild the model."""
    model = repository / "post_process"
    digest, archive = tree_sha256(model), write_model_archive(model, tmp_path / "before.tar.gz")
    cache = model / "1" / "__pycache__"
    cache.mkdir(parents=True)
    (cache / "model.cpython-311.pyc").write_bytes(b"bytecode")
    assert tree_sha256(model) == digest
    assert write_model_archive(model, tmp_path / "after.tar.gz") == archive


def test_gzip_header_has_no_mtime_and_no_name(tmp_path: Path, repository: Path) -> None:
    digest = write_model_archive(repository / "detector", tmp_path / "detector.tar.gz")
    data = (tmp_path / "detector.tar.gz").read_bytes()
    assert data[:4] == b"\x1f\x8b\x08\x00"  # deflate, no FNAME/FCOMMENT/FEXTRA flags
    assert data[4:8] == b"\x00\x00\x00\x00"  # MTIME 0
    assert digest == sha256_of(tmp_path / "detector.tar.gz")
    # One member: Python's gzip agrees on the whole content and its CRC.
    assert len(gzip.decompress(data)) % tarfile.RECORDSIZE == 0


def test_incompressible_chunks_are_stored_and_text_is_deflated(tmp_path: Path, repository: Path) -> None:
    size = (
        write_model_archive(repository / "detector", tmp_path / "d.tar.gz") and (tmp_path / "d.tar.gz").stat().st_size
    )
    # Random plan stored (a few bytes of framing per 64 KiB), the text deflated to a fraction.
    assert len(PLAN) < size < len(PLAN) + len(TEXT) // 3
    assert archive._should_store(PLAN[:CHUNK_SIZE])
    assert not archive._should_store(TEXT[:CHUNK_SIZE])
    assert not archive._should_store(bytes(CHUNK_SIZE))


def test_crc32_combine_matches_zlib() -> None:
    data = random.Random(3).randbytes(3 * CHUNK_SIZE + 999)
    for cut in (0, 1, 4096, CHUNK_SIZE, 2 * CHUNK_SIZE + 7):
        first, second = data[:cut], data[cut:]
        assert crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second)) == zlib.crc32(data)


# --- refusals ----------------------------------------------------------------------------------


def test_refuses_a_config_pbtxt_at_the_repository_root(tmp_path: Path, repository: Path) -> None:
    (repository / "config.pbtxt").write_text('name: "x"\n')
    with pytest.raises(InvalidModelError, match=r"repo/config.pbtxt: config.pbtxt at the repository root"):
        package_repository(repository, tmp_path / "out")
    # The usual mistake: giving the model folder as the repository.
    with pytest.raises(InvalidModelError, match=r"detector/config.pbtxt: config.pbtxt at the repository root.*parent"):
        package_repository(repository / "detector", tmp_path / "out")


def test_refuses_a_model_folder_without_config_pbtxt(tmp_path: Path, repository: Path) -> None:
    (repository / "detector" / "config.pbtxt").unlink()
    with pytest.raises(InvalidModelError, match=r"detector: config.pbtxt: no config.pbtxt in model folder detector/"):
        package_repository(repository, tmp_path / "out")
    # Without the check, the packaging rules refuse it themselves.
    with pytest.raises(InvalidModelError, match=r"repo/detector: model folder has no config.pbtxt"):
        package_repository(repository, tmp_path / "out", check=False)
    assert not (tmp_path / "out").exists()  # validated before anything is written


def test_refuses_symlinks(tmp_path: Path, repository: Path) -> None:
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"not part of the model")
    link = repository / "detector" / "1" / "extra.bin"
    link.symlink_to(outside)
    with pytest.raises(InvalidModelError, match=r"detector/1/extra.bin: is a symbolic link \(to .*secret.bin\)"):
        package_repository(repository, tmp_path / "out")
    link.unlink()
    (repository / "linked").symlink_to(repository / "detector", target_is_directory=True)
    with pytest.raises(InvalidModelError, match=r"\(repository\): linked: is a symbolic link"):
        package_repository(repository, tmp_path / "out")
    with pytest.raises(InvalidModelError, match=r"repo/linked: model folder is a symlink"):
        package_repository(repository, tmp_path / "out", check=False)


def test_refuses_special_files(tmp_path: Path, repository: Path) -> None:
    os.mkfifo(repository / "detector" / "1" / "pipe")
    with pytest.raises(InvalidModelError, match=r"detector/1/pipe: is not a regular file or folder"):
        package_repository(repository, tmp_path / "out")


@pytest.mark.parametrize(
    ("model", "message"),
    [("bad.name", r"model name 'bad.name' is not allowed"), ("-x", r"model name '-x' is not allowed")],
)
def test_refuses_model_names_triton_or_s3_would_choke_on(tmp_path: Path, repository: Path, model, message) -> None:
    shutil.copytree(repository / "detector", repository / model)
    with pytest.raises(InvalidModelError, match=message):
        package_repository(repository, tmp_path / "out")


@pytest.mark.parametrize("name", ["weights file.bin", "naïve.txt", "a#b", "x\\y"])
def test_refuses_file_names_that_s3_or_shells_would_mangle(tmp_path: Path, repository: Path, name: str) -> None:
    (repository / "detector" / "1" / name).write_bytes(b"x")
    with pytest.raises(InvalidModelError, match=re.escape(f"file name '{name}' is not allowed")):
        package_repository(repository, tmp_path / "out")


def test_refuses_output_inside_what_is_packaged(repository: Path) -> None:
    with pytest.raises(ModelBuildError, match=r"repo/dist: output inside .*repo, which is being packaged"):
        package_repository(repository, repository / "dist")
    with pytest.raises(ModelBuildError, match=r"detector/model.tar.gz: output inside .*detector"):
        write_model_archive(repository / "detector", repository / "detector" / "model.tar.gz")


def test_refuses_to_replace_the_repository_with_an_uncompressed_tree(tmp_path: Path) -> None:
    repository = make_repository(tmp_path / "post_process")
    shutil.rmtree(repository / "detector")
    with pytest.raises(ModelBuildError, match=r"post_process: would replace the repository"):
        package_repository(repository, tmp_path, layout="uncompressed")
    assert (repository / "post_process" / "config.pbtxt").is_file()


def test_refuses_an_archive_path_that_is_a_folder(tmp_path: Path, repository: Path) -> None:
    (tmp_path / "out" / "model.tar.gz").mkdir(parents=True)
    with pytest.raises(ModelBuildError, match=r"model.tar.gz: is a folder; give the archive's file name"):
        package_repository(repository, tmp_path / "out", default_model="detector")


def test_refuses_unknown_layout_and_missing_repository(tmp_path: Path, repository: Path) -> None:
    with pytest.raises(ModelBuildError, match=r"unknown layout 'zip'; choose one of single, multi, uncompressed"):
        package_repository(repository, tmp_path / "out", layout="zip")  # type: ignore[arg-type]
    with pytest.raises(ModelBuildError, match=r"nowhere: not a folder"):
        package_repository(tmp_path / "nowhere", tmp_path / "out")


def test_a_failure_leaves_nothing_half_written(tmp_path: Path, repository: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    [previous] = package_repository(repository, out, layout="single", default_model="detector")
    previous_bytes = previous.path.read_bytes()
    calls = 0

    def failing(chunk: bytes):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise OSError("disk on fire")
        return original(chunk)

    original = archive._compress_chunk
    monkeypatch.setattr(archive, "_compress_chunk", failing)
    (repository / "detector" / "labels.txt").write_bytes(TEXT + b"changed\n")
    with pytest.raises(ModelBuildError, match=r"cannot write the package into .*out \(disk on fire\)"):
        package_repository(repository, out, layout="single", default_model="detector")
    assert previous.path.read_bytes() == previous_bytes  # the old archive is untouched
    assert sorted(p.name for p in out.iterdir()) == ["model.tar.gz"]  # no temp file left


def test_a_file_changing_size_during_packaging_is_an_error(tmp_path: Path, repository: Path, monkeypatch) -> None:
    entries = package.scan_model(repository, "detector")
    (repository / "detector" / "labels.txt").write_bytes(b"short")
    monkeypatch.setattr(package, "scan_model", lambda *_: entries)
    with pytest.raises(ModelBuildError, match=r"labels.txt: changed size while it was being packaged"):
        write_repository_archive(repository, ["detector"], tmp_path / "x.tar.gz")
    assert not list(tmp_path.glob("*.tmp")) and not (tmp_path / "x.tar.gz").exists()


# --- streaming ---------------------------------------------------------------------------------


def test_memory_stays_flat_for_a_large_file(tmp_path: Path) -> None:
    model = tmp_path / "repo" / "big"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('name: "big"\n')
    size = 320 * 1024 * 1024
    with (model / "1" / "model.plan").open("wb") as stream:  # sparse: costs no disk
        stream.truncate(size)
    archive = tmp_path / "big.tar.gz"
    tracemalloc.start()
    try:
        write_model_archive(model, archive)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Bounded by chunks in flight (2 per worker, 1 MiB each, plus outputs), not by the 320 MiB file.
    assert peak < 32 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"
    with tarfile.open(archive, "r|gz") as tar:
        member = tar.next()
        while member is not None and member.name != "big/1/model.plan":
            member = tar.next()
        assert member is not None and member.size == size


# --- command line ------------------------------------------------------------------------------


def test_cli_prints_each_archive_and_its_digest(tmp_path: Path, repository: Path, capsys) -> None:
    code = cli.main(["package", str(repository), "--out", str(tmp_path / "out"), "--layout", "multi"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines == [
        f"{tmp_path / 'out' / name}.tar.gz  sha256:{sha256_of(tmp_path / 'out' / f'{name}.tar.gz')}"
        for name in ("detector", "post_process")
    ]
    code = cli.main(["package", str(repository), "--out", str(tmp_path / "one"), "--model", "detector"])
    assert code == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'one' / 'model.tar.gz'}  sha256:")


def test_cli_reports_refusals_as_errors(tmp_path: Path, repository: Path, capsys) -> None:
    (repository / "config.pbtxt").write_text("")
    assert cli.main(["package", str(repository), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.startswith(f"ERROR: {repository / 'config.pbtxt'}: config.pbtxt at the repository")
    with pytest.raises(SystemExit) as usage:
        cli.main(["package", str(repository), "--out", str(tmp_path / "out"), "--layout", "zip"])
    assert usage.value.code == 2


def test_python_tarfile_reads_a_multi_chunk_archive_in_stream_mode(tmp_path: Path, repository: Path) -> None:
    # Regression guard for the single-member design: tarfile's stream mode stops after the first
    # member of a multi-member gzip, so every chunk must continue the same member.
    write_model_archive(repository / "detector", tmp_path / "d.tar.gz")
    with tarfile.open(fileobj=io.BytesIO((tmp_path / "d.tar.gz").read_bytes()), mode="r|gz") as tar:
        sizes = {member.name: member.size for member in tar}
    assert sizes["detector/1/model.plan"] == len(PLAN)


PACKAGE = (sys.executable, "-m", "model_build", "package")


def test_python_dash_m_model_build_package(tmp_path: Path, repository: Path) -> None:
    # A process of its own on purpose: this is the test of the `python -m model_build` entry point
    # (model_build/__main__.py); other CLI tests call cli.main in-process (tests/model_build/cli_runner.py).
    result = subprocess.run(
        [*PACKAGE, str(repository), "--out", str(tmp_path / "out"), "--default-model", "detector"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    archive = tmp_path / "out" / "model.tar.gz"
    assert result.stdout == f"{archive}  sha256:{sha256_of(archive)}\n"
    result = run_cli("package", str(repository / "detector"), "--out", str(tmp_path / "x"))
    assert result.returncode == 1
    assert result.stderr.startswith("ERROR: ") and "config.pbtxt at the repository root" in result.stderr


def test_package_runs_check_first(tmp_path: Path, repository: Path) -> None:
    """Issue #11.5: what is packaged is what `check` passes; a broken model is never packed."""
    broken = DETECTOR_CONFIG.replace(b"dims: [ 100, 4 ]", b"dims: [ 0, 4 ]")
    (repository / "detector" / "config.pbtxt").write_bytes(broken)
    with pytest.raises(InvalidModelError, match=r"check found 1 problem in the models to package.*\n  detector: "):
        package_repository(repository, tmp_path / "out", default_model="detector")
    assert not (tmp_path / "out").exists()
    # A problem in a model that is not packaged does not stop the others.
    [artifact] = package_repository(repository, tmp_path / "out", models=["post_process"])
    assert artifact.models == ("post_process",)
