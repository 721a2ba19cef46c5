"""Hostile and careless model repositories (issues #12.5, #11.10, #11.7): `check` reports, `package`
refuses, the CLI exits 1 with `ERROR: ...` naming the path, and nothing from outside the repository
ever reaches an archive, even when files change between the scan and the read.

Tests run as root, which bypasses file permissions: unreadable files and folders are simulated by
making `os.open` / `os.scandir` fail with EACCES for one path, as the kernel would for a normal user.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shutil
import stat
import tarfile
from pathlib import Path

import pytest
from cli_runner import run_cli
from model_fixtures import onnx_matching

from model_build import atomic, cli, model_tree, package
from model_build.check import check_repository
from model_build.errors import InvalidModelError, ModelBuildError
from model_build.package import package_repository

CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ kind: KIND_CPU }} ]
"""
SECRET = b"root:x:0:0:secret-from-outside-the-repository\n"


def make_repo(base: Path, *names: str) -> Path:
    repo = base / "repo"
    for name in names or ("m",):
        folder = repo / name
        (folder / "1").mkdir(parents=True)
        config = CONFIG.format(name=name)
        (folder / "config.pbtxt").write_text(config)
        (folder / "1" / "model.onnx").write_bytes(onnx_matching(config))
        (folder / "labels.txt").write_text("cat\ndog\n")
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repository = make_repo(tmp_path)
    assert check_repository(repository) == []
    return repository


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "passwd"
    path.write_bytes(SECRET)
    return path


def assert_refused_by_both(repo: Path, tmp_path: Path, rule: str, text: str) -> None:
    """check reports `rule` with `text`; package refuses with the same text and writes nothing; both
    commands exit 1 without a traceback."""
    problems = check_repository(repo)
    assert any(p.rule == rule and text in p.message for p in problems), [str(p) for p in problems]
    out = tmp_path / "out"
    with pytest.raises(ModelBuildError, match=re.escape(text)):
        package_repository(repo, out)
    assert not out.exists() or not any(out.iterdir())
    for argv in (["check", str(repo)], ["package", str(repo), "--out", str(out)]):
        result = run_cli(*argv)
        assert result.returncode == 1, result
        assert "Traceback" not in result.stderr, result.stderr
    assert run_cli("package", str(repo), "--out", str(out)).stderr.startswith("ERROR: ")


# --- what sits in the repository ----------------------------------------------------------------


def test_a_symlink_out_of_the_repository(repo: Path, tmp_path: Path, secret: Path) -> None:
    os.symlink(secret, repo / "m" / "1" / "passwd")
    assert_refused_by_both(repo, tmp_path, "no-symlinks", f"is a symbolic link (to {secret})")


def test_a_symlink_inside_the_model(repo: Path, tmp_path: Path) -> None:
    os.symlink("labels.txt", repo / "m" / "labels-link.txt")
    assert_refused_by_both(repo, tmp_path, "no-symlinks", "is a symbolic link (to labels.txt)")


def test_a_symlinked_folder(repo: Path, tmp_path: Path) -> None:
    os.symlink("/etc", repo / "m" / "etc")
    assert_refused_by_both(repo, tmp_path, "no-symlinks", "is a symbolic link (to /etc)")


def test_a_fifo(repo: Path, tmp_path: Path) -> None:
    os.mkfifo(repo / "m" / "1" / "pipe")
    assert_refused_by_both(repo, tmp_path, "file-type", "is not a regular file or folder")


def test_a_device_file(repo: Path, tmp_path: Path) -> None:
    try:
        os.mknod(repo / "m" / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    assert_refused_by_both(repo, tmp_path, "file-type", "is not a regular file or folder")


def test_a_non_utf8_file_name(repo: Path, tmp_path: Path) -> None:
    os.close(os.open(os.fsencode(repo / "m") + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    assert_refused_by_both(repo, tmp_path, "file-name", "file name 'caf\\xe9.txt' is not allowed")


def test_a_non_utf8_model_folder_name(repo: Path, tmp_path: Path) -> None:
    shutil.copytree(repo / "m", os.fsdecode(os.fsencode(repo) + b"/m\xff"))
    result = run_cli("check", str(repo))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "m\\xff" in result.stdout
    result = run_cli("package", str(repo), "--out", str(tmp_path / "out"), "--layout", "multi")
    assert result.returncode == 1 and result.stderr.startswith("ERROR: "), result.stderr


def test_control_characters_in_a_name_cannot_forge_output_lines(repo: Path, tmp_path: Path) -> None:
    (repo / "m" / "evil\nm: all good [ok]").write_text("x")
    assert_refused_by_both(repo, tmp_path, "file-name", "is not allowed")
    assert all("\n" not in str(p) for p in check_repository(repo))


def test_the_longest_name_a_file_system_allows_is_packaged(repo: Path, tmp_path: Path) -> None:
    name = "w" * 251 + ".bin"  # 255 bytes: NAME_MAX
    (repo / "m" / "1" / name).write_bytes(b"weights")
    assert check_repository(repo) == []
    [artifact] = package_repository(repo, tmp_path / "out")
    with tarfile.open(artifact.path) as packed:
        assert f"m/1/{name}" in packed.getnames()  # a PAX header carries the long path


def test_a_path_too_long_for_an_s3_key(repo: Path, tmp_path: Path) -> None:
    """S3 keys are at most 1024 bytes; the uncompressed layout makes every file a key."""
    deep = repo / "m" / Path(*["p" * 200] * 5)
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("x")
    assert_refused_by_both(repo, tmp_path, "file-name", f"at most {model_tree.MAX_PATH_BYTES} fit in an S3 key")


def test_folders_nested_deeper_than_anyone_needs(repo: Path, tmp_path: Path) -> None:
    deep = repo / "m" / Path(*["d"] * (model_tree.MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("x")
    assert_refused_by_both(repo, tmp_path, "too-deep", f"folders nest more than {model_tree.MAX_DEPTH} deep")


# --- model files that are not models (issue #11.10) -------------------------------------------


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (b"", "is empty (0 bytes), not an ONNX model"),
        (b"\x9b\xff" + os.urandom(4094), "is not an ONNX model"),
        ("truncated", "is not an ONNX model"),
        (b"\x08\x07", "ONNX checker refused the model"),  # parses as protobuf (ir_version 7) but has no graph
    ],
)
def test_files_named_onnx_that_are_not_models(repo: Path, tmp_path: Path, content, text: str) -> None:
    model = repo / "m" / "1" / "model.onnx"
    content = model.read_bytes()[:-20] if content == "truncated" else content
    model.write_bytes(content)
    assert_refused_by_both(repo, tmp_path, "onnx-file", text)


# --- unreadable input, unwritable output (issue #12.5) -----------------------------------------


def deny(monkeypatch, module, name: str, path: Path) -> None:
    """`module.name(path, ...)` fails with EACCES for `path` (simulates a file root could read)."""
    original = getattr(module, name)

    def denied(target, *args, **kwargs):
        if os.fspath(target) == os.fspath(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(target))
        return original(target, *args, **kwargs)

    monkeypatch.setattr(module, name, denied)


def test_an_unreadable_file(repo: Path, tmp_path: Path, monkeypatch) -> None:
    deny(monkeypatch, model_tree.os, "open", repo / "m" / "labels.txt")
    problems = check_repository(repo)
    assert [(p.field, p.rule) for p in problems] == [("m/labels.txt", "unreadable")]
    assert "cannot be read (Permission denied)" in problems[0].message
    with pytest.raises(InvalidModelError, match=r"m/labels.txt: cannot be read \(Permission denied\)"):
        package_repository(repo, tmp_path / "out")


def test_an_unreadable_folder(repo: Path, tmp_path: Path, monkeypatch) -> None:
    deny(monkeypatch, model_tree.os, "scandir", repo / "m" / "1")
    assert ("m/1/", "unreadable") in [(p.field, p.rule) for p in check_repository(repo)]
    with pytest.raises(InvalidModelError, match=r"m/1/: cannot be read \(Permission denied\)"):
        package_repository(repo, tmp_path / "out")


def test_an_unreadable_model_folder_and_repository(repo: Path, tmp_path: Path, monkeypatch) -> None:
    for name in ("scandir", "listdir"):
        deny(monkeypatch, model_tree.os, name, repo / "m")
    assert [(p.field, p.rule) for p in check_repository(repo)] == [("m/", "unreadable")]
    for name in ("scandir", "listdir"):
        deny(monkeypatch, model_tree.os, name, repo)
    for argv in (["check", str(repo)], ["package", str(repo), "--out", str(tmp_path / "out")]):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            assert cli.main(argv) == 1
        assert stderr.getvalue().startswith(f"ERROR: {repo}: cannot list the model repository (Permission denied)")


def test_an_unwritable_output_folder(repo: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    original = atomic.tempfile.mkstemp

    def denied(*args, **kwargs):
        if kwargs.get("dir") == out:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(out))
        return original(*args, **kwargs)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", denied)
    assert cli.main(["package", str(repo), "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"ERROR: {out}: cannot write the package into {out} (Permission denied); check its permissions\n"
    )


def test_an_output_path_under_a_file(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = run_cli("package", str(repo), "--out", str(tmp_path / "file" / "out"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"ERROR: {tmp_path / 'file' / 'out'}: cannot write the package")


# --- races between the scan and the read -------------------------------------------------------


def swap_before_writing(monkeypatch, swap) -> None:
    """Run `swap()` after package scanned the repository and before it reads any file."""
    for name in ("atomic_write_archive", "_write_uncompressed"):
        original = getattr(package, name)

        def hooked(*args, _original=original, **kwargs):
            swap()
            return _original(*args, **kwargs)

        monkeypatch.setattr(package, name, hooked)


def no_secret_anywhere(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_bytes(), path
            if path.name.endswith(".tar.gz"):
                with tarfile.open(path) as packed:
                    for member in packed.getmembers():
                        data = packed.extractfile(member)
                        assert data is None or SECRET not in data.read(), member.name


@pytest.mark.parametrize("layout", ["single", "multi", "uncompressed"])
def test_a_file_swapped_for_a_symlink_after_the_scan(repo: Path, tmp_path: Path, secret: Path, monkeypatch, layout):
    labels = repo / "m" / "labels.txt"
    labels.write_bytes(b"x" * len(SECRET))  # same size: only the link check can tell

    def swap() -> None:
        labels.unlink()
        os.symlink(secret, labels)

    swap_before_writing(monkeypatch, swap)
    with pytest.raises(InvalidModelError, match=r"labels.txt: became a symbolic link after it was scanned"):
        package_repository(repo, tmp_path / "out", layout=layout)
    no_secret_anywhere(tmp_path / "out")


def test_a_folder_on_the_path_swapped_for_a_symlink(repo: Path, tmp_path: Path, monkeypatch) -> None:
    """O_NOFOLLOW guards the last component only; the inode check catches a swapped parent folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "model.onnx").write_bytes(SECRET.ljust((repo / "m" / "1" / "model.onnx").stat().st_size, b"#"))

    def swap() -> None:
        os.rename(repo / "m" / "1", tmp_path / "moved")
        os.symlink(outside, repo / "m" / "1")

    swap_before_writing(monkeypatch, swap)
    with pytest.raises(InvalidModelError, match=r"model.onnx: is no longer the file that was scanned"):
        package_repository(repo, tmp_path / "out")
    no_secret_anywhere(tmp_path / "out")


def test_a_file_swapped_for_a_fifo_does_not_hang(repo: Path, tmp_path: Path, monkeypatch) -> None:
    labels = repo / "m" / "labels.txt"

    def swap() -> None:
        labels.unlink()
        os.mkfifo(labels)

    swap_before_writing(monkeypatch, swap)
    with pytest.raises(InvalidModelError, match=r"labels.txt: is no longer the file that was scanned"):
        package_repository(repo, tmp_path / "out")


def test_a_file_rewritten_after_the_scan(repo: Path, tmp_path: Path, monkeypatch) -> None:
    labels = repo / "m" / "labels.txt"
    swap_before_writing(monkeypatch, lambda: labels.write_text("a different size\n"))
    with pytest.raises(InvalidModelError, match=r"labels.txt: changed size while it was being packaged"):
        package_repository(repo, tmp_path / "out")


# --- one model per single-model archive (issue #11.7) -----------------------------------------


def test_a_single_archive_of_several_models_needs_the_default_model(tmp_path: Path, capsys) -> None:
    """triton-inference-server/server docker/sagemaker/serve: in single-model mode, several model folders
    without SAGEMAKER_TRITON_DEFAULT_MODEL_NAME end in 'ERROR: More than 1 model directory found in model
    repository.' and exit 1."""
    repo = make_repo(tmp_path, "first", "second")
    with pytest.raises(ModelBuildError, match=r"a single-model archive of 2 model folders \(first, second\)"):
        package_repository(repo, tmp_path / "out")
    with pytest.raises(ModelBuildError, match=r"--default-model 'third' is not among the packaged model folders"):
        package_repository(repo, tmp_path / "out", default_model="third")
    with pytest.raises(ModelBuildError, match=r"--default-model applies to the single layout only"):
        package_repository(repo, tmp_path / "out", layout="multi", default_model="first")
    [artifact] = package_repository(repo, tmp_path / "out", default_model="first")
    assert artifact.models == ("first", "second")
    # One model needs no name: the serve script starts the only folder it finds.
    [one] = package_repository(repo, tmp_path / "one", models=["second"])
    assert one.models == ("second",)
    assert cli.main(["package", str(repo), "--out", str(tmp_path / "cli")]) == 1
    assert "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" in capsys.readouterr().err
    assert cli.main(["package", str(repo), "--out", str(tmp_path / "cli"), "--default-model", "first"]) == 0


@pytest.mark.parametrize(
    ("value", "expected"), [("-1", "-1 is not between 1 and 64"), ("0", "0 is not between"), ("x", "'x' is not")]
)
def test_package_workers_must_be_a_positive_count(tmp_path: Path, value: str, expected: str) -> None:
    result = run_cli("package", "examples/models", "--out", str(tmp_path / "out"), f"--workers={value}")
    assert result.returncode == 2 and "Traceback" not in result.stderr and expected in result.stderr, result.stderr
