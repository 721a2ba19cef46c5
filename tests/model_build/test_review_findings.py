"""Regression tests for the hostile review of `python -m model_build` (findings 5, 13 and 14).

5: a 485 KB execution environment declaring a 500 MB GNU long name took check and package to 1 GB.
   The python backend unpacks environments with libarchive (triton-inference-server/python_backend,
   src/pb_env.cc ExtractTarFile: archive_read_support_filter_gzip + archive_read_support_format_tar),
   whose tar reader refuses names over 1 MiB (libarchive/libarchive,
   libarchive/archive_read_support_format_tar.c: `pathname_limit = 1048576`, "Special header too large").
13: `package --workers -1` and `config --repository <file or /proc/1>` ended in tracebacks.
14: `key` hashed sources outside the project (absolute paths, ../, a folder symlinked to /etc).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import subprocess
import sys
import tarfile
import tracemalloc
from pathlib import Path

import pytest
import yaml
from model_fixtures import conda_pack_like

from model_build import cli
from model_build.check import bounded_tar, check_repository
from model_build.errors import ModelBuildError
from model_build.package import package_repository

ROOT = Path(__file__).resolve().parents[2]
FIELD = "parameters.EXECUTION_ENV_PATH"
CONFIG = """
name: "t5"
backend: "python"
max_batch_size: 0
input [ { name: "text" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "summary" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU } ]
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }
"""


def run_cli(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The real command line: its stderr is what a user sees (and any traceback)."""
    return subprocess.run([sys.executable, "-m", "model_build", *argv], cwd=cwd, capture_output=True, timeout=120)


def repo_with_env(tmp_path: Path, archive: bytes) -> Path:
    folder = tmp_path / "repo" / "t5"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (folder / "config.pbtxt").write_text(CONFIG)
    (folder / "env.tar.gz").write_bytes(archive)
    return tmp_path / "repo"


def header(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(tarfile.GNU_FORMAT)


def padded(body: bytes) -> bytes:
    return body + b"\0" * (-len(body) % tarfile.BLOCKSIZE)


def pax_record(key: str, value: str) -> bytes:
    """One pax record, "<length> <key>=<value>\\n", the length counting itself."""
    body = f" {key}={value}\n".encode()
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def global_header(body: bytes) -> bytes:
    return header("pax_global_header", tarfile.XGLTYPE, len(body)) + padded(body)


def gz(*parts: bytes) -> bytes:
    return gzip.compress(b"".join(parts) + b"\0" * 1024, compresslevel=9)


def env_messages(repo: Path) -> list[str]:
    return [p.message for p in check_repository(repo) if p.field == FIELD]


# --- finding 5: the environment archive is read in bounded memory -----------------------------------


def test_the_reviewers_long_name_bomb_is_refused_before_its_body_is_read(tmp_path: Path) -> None:
    """The header alone declares 500 MB: the refusal comes before reading it (the archive is cut right
    after the header, so reading on would have reported a truncated archive instead)."""
    repo = repo_with_env(tmp_path, gzip.compress(header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 500_000_000)))
    [message] = env_messages(repo)
    assert "GNU long-name header of 500000000 bytes" in message
    assert str(repo / "t5" / "env.tar.gz") in message and "Special header too large" in message
    out = tmp_path / "out"
    with pytest.raises(ModelBuildError, match="GNU long-name header of 500000000 bytes"):
        package_repository(repo, out)
    for argv in (["check", str(repo)], ["package", str(repo), "--out", str(out)]):
        result = run_cli(*argv)
        assert result.returncode == 1 and b"Traceback" not in result.stderr, result.stderr.decode()
    assert run_cli("package", str(repo), "--out", str(out)).stderr.startswith(b"ERROR: ")


def test_memory_stays_bounded_with_a_real_over_limit_name(tmp_path: Path) -> None:
    """A 4 MiB long name, present in full: tarfile alone would hold all of it in memory."""
    size = 4 << 20
    archive = gz(header("././@LongLink", tarfile.GNUTYPE_LONGNAME, size), padded(b"a" * size), header("bin/activate"))
    repo = repo_with_env(tmp_path, archive)
    tracemalloc.start()
    try:
        [message] = env_messages(repo)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"GNU long-name header of {size} bytes" in message
    assert peak < size // 2, peak


def test_members_are_not_kept_in_memory(tmp_path: Path) -> None:
    """tarfile keeps every member it has read; 20 000 empty entries (10 MB of headers) must not stay."""
    archive = gz(*(header(f"lib/f{i}") for i in range(20_000)), header("bin/activate"))
    repo = repo_with_env(tmp_path, archive)
    # Warm up first: the first call may grow interpreter-wide tables (sys.intern's, for pathlib's parts) by
    # ~2 MB in one allocation, depending on what earlier tests interned; the steady state is what is bounded.
    env_messages(repo)
    tracemalloc.start()
    try:
        assert env_messages(repo) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 << 20, peak


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        # A pax header whose body is over the bound.
        ((header("././@PaxHeader", tarfile.XHDTYPE, 2 << 20),), "pax extended header of 2097152 bytes"),
        # Two global headers under the bound each, over it together (tarfile accumulates them).
        (
            (
                *(global_header(pax_record(f"k{i}", "v" * 600_000)) for i in range(2)),
                header("bin/activate"),
            ),
            "pax global headers add up to more than 1048576 bytes",
        ),
        # A chain of long-name headers: tarfile follows it by recursion (RecursionError otherwise).
        (
            (
                *(header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 1) + padded(b"a") for _ in range(5_000)),
                header("bin/activate"),
            ),
            "over 8 extension headers in a row",
        ),
        # GNU sparse 1.0 reads its map from the data, without bound.
        (
            (
                header("././@PaxHeader", tarfile.XHDTYPE, 44)
                + padded(pax_record("GNU.sparse.major", "1") + pax_record("GNU.sparse.minor", "0")),
                header("bin/activate", size=512),
                padded(b"99999999999999\n"),
            ),
            "GNU sparse 1.0 entry",
        ),
    ],
    ids=["pax-header", "pax-global-headers", "header-chain", "gnu-sparse-1.0"],
)
def test_other_unbounded_headers_are_refused(tmp_path: Path, parts: tuple[bytes, ...], expected: str) -> None:
    [message] = env_messages(repo_with_env(tmp_path, gz(*parts)))
    assert expected in message and "was not read" in message


def test_an_old_gnu_sparse_entry_with_extension_blocks_is_refused(tmp_path: Path) -> None:
    """Old GNU sparse headers chain 512-byte extension blocks without end (tarfile keeps every entry)."""
    block = bytearray(header("lib/sparse", tarfile.GNUTYPE_SPARSE))
    block[482] = 1  # isextended
    block[148:156] = b"        "
    block[148:155] = b"%06o\0" % sum(block)
    extension = bytearray(512)
    extension[504] = 1  # and the next block is one too, and so on
    [message] = env_messages(repo_with_env(tmp_path, gz(bytes(block), bytes(extension) * 1000)))
    assert "old GNU sparse entry at offset 0 has extension headers" in message


def test_too_many_members_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_tar, "MAX_MEMBERS", 4)
    [message] = env_messages(repo_with_env(tmp_path, conda_pack_like({"lib/a": b"", "lib/b": b""})))
    assert "more than 4 entries" in message


def test_link_names_kept_to_judge_later_entries_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from model_build.check import environment

    monkeypatch.setattr(environment, "_MAX_LINK_NAME_BYTES", 40)
    links = {f"lib/link{i}.so": ("symlink", "libpython3.11.so.1.0") for i in range(4)}
    [message] = env_messages(repo_with_env(tmp_path, conda_pack_like(links)))
    assert "symbolic link names add up to more than 40 bytes" in message


def test_a_conda_pack_archive_still_passes(tmp_path: Path) -> None:
    assert check_repository(repo_with_env(tmp_path, conda_pack_like())) == []


# --- finding 13: clear errors instead of tracebacks -------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"), [("-1", b"-1 is not between 1 and 64"), ("0", b"0 is not between"), ("x", b"'x' is not")]
)
def test_package_workers_must_be_a_positive_count(tmp_path: Path, value: str, expected: bytes) -> None:
    result = run_cli("package", "examples/models", "--out", str(tmp_path / "out"), f"--workers={value}")
    assert result.returncode == 2 and b"Traceback" not in result.stderr and expected in result.stderr, result.stderr


@pytest.mark.parametrize("target", ["file", "/proc/1", "/dev/null"])
def test_config_repository_that_is_not_a_writable_folder(tmp_path: Path, target: str) -> None:
    repository = tmp_path / "a-file" if target == "file" else Path(target)
    if target == "file":
        repository.write_text("not a folder")
    onnx = ROOT.parent / "shared" / "triton-configs" / "valid" / "simple" / "1" / "model.onnx"
    result = run_cli(
        "config",
        *("--onnx", str(onnx), "--name", "m", "--platform", "onnxruntime_onnx", "--instance-kind", "KIND_CPU"),
        *("--repository", str(repository)),
    )
    assert result.returncode == 1 and b"Traceback" not in result.stderr, result.stderr.decode()
    assert result.stderr.startswith(f"ERROR: --repository {repository}: ".encode()), result.stderr


# --- finding 14: key refuses sources outside the project --------------------------------------------


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "models" / "ok.onnx").write_bytes(b"onnx bytes")
    (tmp_path / "outside.onnx").write_bytes(b"not the project's")
    (root / "models" / "etc").symlink_to("/etc")
    (root / "models" / "link.onnx").symlink_to(tmp_path / "outside.onnx")
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("key",))
    return root


def run_key(project: Path, path: str, *extra: str, platform: str = "onnxruntime_onnx") -> tuple[int, str]:
    model = {"name": "m", "source": {"path": path}, "platform": platform, "instance_groups": [{"kind": "KIND_CPU"}]}
    config = project / "config.yaml"
    config.write_text(yaml.safe_dump({"stage": "test", "triton_release": "24.09", "models": [model]}))
    argv = ["key", "--config", str(config), "--model", "m", "--gpu-target", "portable", *extra]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as stderr:
        code = cli.main(argv)
    return code, stderr.getvalue()


@pytest.mark.parametrize(
    ("path", "platform", "expected"),
    [
        ("/etc/hostname", "onnxruntime_onnx", "resolves to /etc/hostname, outside the project root"),
        ("../outside.onnx", "onnxruntime_onnx", "outside.onnx, outside the project root"),
        ("models/link.onnx", "onnxruntime_onnx", "outside.onnx, outside the project root"),
        ("models/etc", "python", "resolves to /etc, outside the project root"),
    ],
)
def test_key_refuses_sources_outside_the_base_dir(project: Path, path: str, platform: str, expected: str) -> None:
    """The CDK config loader's rule (model_build.source_paths, shared with triton_cdk.config)."""
    code, err = run_key(project, path, "--base-dir", str(project), platform=platform)
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"ERROR: {project / 'config.yaml'}: model 'm': source.path: ") and expected in err, err


def test_key_base_dir_defaults_to_the_current_folder(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    assert run_key(project, "models/ok.onnx") == (0, "")
    code, err = run_key(project, "../outside.onnx")
    assert code == 1 and f"outside the project root {project}" in err
