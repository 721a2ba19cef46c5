"""The local endpoint unpacks a model archive safely: only files and folders (a link, device or FIFO member is
refused before anything is written, which also stops CVE-2025-4517's symlink chain past PATH_MAX that gets through
Python 3.11.7's `tarfile.extractall(filter="data")`; the construction is CPython's own
test_realpath_limit_attack), into a fresh private folder, bounded in size and members (tar bombs), and a model name
stays inside the archive.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from endpoint_client import local_endpoint as local_module
from endpoint_client.errors import LocalEndpointError
from endpoint_client.local_endpoint import extract_archive
from endpoint_client.sagemaker_serve import serve_plan

REPO_ROOT = Path(__file__).resolve().parents[2]
ESCAPED = "PWNED-by-archive.txt"

# --- links and special files in an archive ----------------------------------------------------------------------------


def _add(tar: tarfile.TarFile, name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", content: bytes = b""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755
    info.linkname = linkname
    info.size = len(content) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(content) if kind == tarfile.REGTYPE else None)


def escape_archive(path: Path, destination_length: int, target: str) -> Path:
    """CPython's test_realpath_limit_attack: symlinks a..p each to a folder of a
    long name, so that `escape` -> a/b/.../p/lll.../<target> expands past PATH_MAX (4096) for an extraction
    folder of `destination_length` characters and os.path.realpath stops resolving; `escape/PWNED...` then
    lands in `target`, relative to the extraction folder."""
    steps = "abcdefghijklmnop"
    component = "d" * ((4096 - destination_length - 1) // (len(steps) + 1))
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        folder = ""
        for step in steps:
            _add(tar, os.path.join(folder, component), tarfile.DIRTYPE)
            _add(tar, os.path.join(folder, step), tarfile.SYMTYPE, linkname=component)
            folder = os.path.join(folder, component)
        link = os.path.join(*steps, "l" * 254)
        _add(tar, link, tarfile.SYMTYPE, linkname=os.path.join(*[".."] * len(steps)))
        _add(tar, "escape", tarfile.SYMTYPE, linkname=os.path.join(link, target))
        _add(tar, f"escape/{ESCAPED}", content=b"written outside the extraction folder\n")
    return path


def everything_under(folder: Path) -> set[str]:
    return {str(Path(root, name).relative_to(folder)) for root, dirs, files in os.walk(folder) for name in dirs + files}


@pytest.mark.skipif(sys.platform != "linux", reason="PATH_MAX 4096 is Linux's")
def test_the_symlink_chain_archive_really_escapes_a_plain_data_filter_extraction_on_this_python(tmp_path: Path) -> None:
    """Proof that the construction below is an attack here: on a CPython without the CVE-2025-4517 fix,
    extractall(filter="data") writes outside the folder; a fixed one refuses (tarfile.FilterError)."""
    folder = tmp_path / "plain" / "into"
    folder.mkdir(parents=True)
    archive = escape_archive(tmp_path / "escape.tar.gz", len(str(folder)), "../..")
    with tarfile.open(archive) as tar:
        try:
            tar.extractall(folder, filter="data")
        except tarfile.FilterError:
            return  # a fixed CPython
    assert (tmp_path / ESCAPED).is_file()


def test_an_archive_escaping_through_a_symlink_chain_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """CVE-2025-4517: every link member is refused before anything is extracted; the extraction
    folder would be tmp_path/work/.model-extracting-XXXXXXXX, so the archive is built for that length."""
    destination = tmp_path / "work" / "model"
    length = len(str(destination.parent / ".model-extracting-")) + 8
    archive = escape_archive(tmp_path / "escape.tar.gz", length, "../..")

    with pytest.raises(LocalEndpointError, match=r"member 'a' is a symbolic link .*refused, nothing extracted"):
        extract_archive(archive, destination)
    assert everything_under(tmp_path) == {"escape.tar.gz"}


def test_the_cli_refuses_a_symlink_chain_archive_without_a_traceback_or_a_file_outside(tmp_path: Path) -> None:
    """`endpoint_client local ARCHIVE --port 0` (the single-model path; --load uses the
    same extract_archive). The archive is refused before Triton is looked for."""
    archive = escape_archive(tmp_path / "esc.tar.gz", 41, "../../" + tmp_path.name)
    result = subprocess.run(
        [sys.executable, "-m", "endpoint_client", "local", str(archive), "--port", "0"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "is a symbolic link" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / ESCAPED).exists() and everything_under(tmp_path) == {"esc.tar.gz"}


@pytest.mark.parametrize(
    ("kind", "linkname", "described"),
    [
        (tarfile.SYMTYPE, "config.pbtxt", "symbolic link (to 'config.pbtxt')"),  # even one pointing inside
        (tarfile.LNKTYPE, "/etc/passwd", "hard link (to '/etc/passwd')"),
        (tarfile.CHRTYPE, "", "device"),
        (tarfile.BLKTYPE, "", "device"),
        (tarfile.FIFOTYPE, "", "FIFO"),
    ],
)
def test_any_member_but_a_file_or_folder_is_refused_before_anything_is_written(
    tmp_path: Path, kind: bytes, linkname: str, described: str
) -> None:
    """model_build/archive.py `_tar_header` writes only DIRTYPE and REGTYPE members (and `model_build check`
    refuses links in a repository), so a packaged model never holds anything else."""
    archive = tmp_path / "m.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        _add(tar, "m", tarfile.DIRTYPE)
        _add(tar, "m/config.pbtxt", content=b'backend: "python"\n')
        _add(tar, "m/odd", kind, linkname=linkname)
    with pytest.raises(LocalEndpointError, match=re.escape(f"member 'm/odd' is a {described}")):
        extract_archive(archive, tmp_path / "out" / "model")
    assert everything_under(tmp_path) == {"m.tar.gz"}


def test_an_archive_is_extracted_into_a_fresh_private_folder_and_replaces_an_earlier_one(tmp_path: Path) -> None:
    """A fresh folder (mode 0700) renamed into place; what an earlier extraction left is gone."""

    def archive(name: str) -> Path:
        path = tmp_path / f"{name}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            _add(tar, name, tarfile.DIRTYPE)
            _add(tar, f"{name}/config.pbtxt", content=b"x")
        return path

    destination = tmp_path / "staging" / "model"
    extract_archive(archive("first"), destination)
    assert stat.S_IMODE(destination.stat().st_mode) == 0o700
    extract_archive(archive("second"), destination)
    assert everything_under(destination) == {"second", "second/config.pbtxt"}
    assert everything_under(destination.parent) == {"model", "model/second", "model/second/config.pbtxt"}


# --- --model-name stays inside the archive ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../../tmp/x/trav", "/tmp/x/trav", "..", "a/b"])
def test_a_model_name_outside_the_archive_is_refused(tmp_path: Path, name: str) -> None:
    repository = tmp_path / "opt-ml-model"
    (repository / "add_sub").mkdir(parents=True)
    (tmp_path / "x" / "trav").mkdir(parents=True)  # a real folder the name would reach

    with pytest.raises(LocalEndpointError, match="must name a model folder at the top of the archive"):
        serve_plan(
            {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": name},
            model_repository=repository,
            multi_model_repository=tmp_path / "mme",
        )


# --- archives are bounded ---------------------------------------------------------------------------------------------


def _tar_gz(path: Path, files: dict[str, int]) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as compressed, tarfile.open(fileobj=compressed, mode="w|") as tar:
        for name, size in files.items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(bytes(size)))
    return path


def test_a_tar_bomb_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1 MB archive unpacked to 1.1 GB. Scaled down: 100x the archive, at least the floor."""
    monkeypatch.setattr(local_module, "MIN_ARCHIVE_ALLOWANCE_BYTES", 1024 * 1024)
    bomb = _tar_gz(tmp_path / "bomb.tar.gz", {"m/config.pbtxt": 10, "m/1/zeros.bin": 8 * 1024 * 1024})
    destination = tmp_path / "out"

    with pytest.raises(LocalEndpointError, match="refused as a likely tar bomb"):
        extract_archive(bomb, destination)
    assert not destination.exists()

    monkeypatch.setattr(local_module, "MAX_ARCHIVE_MEMBERS", 3)
    many = _tar_gz(tmp_path / "many.tar.gz", {f"m/{i}": 1 for i in range(4)})
    with pytest.raises(LocalEndpointError, match="holds more than 3 files"):
        extract_archive(many, tmp_path / "out2")

    extract_archive(_tar_gz(tmp_path / "ok.tar.gz", {"m/config.pbtxt": 10}), tmp_path / "ok")
    assert (tmp_path / "ok" / "m" / "config.pbtxt").is_file()
