"""Hostile environment archives: read in bounded memory, and nothing the python backend would refuse to unpack.

The python backend unpacks EXECUTION_ENV_PATH archives with libarchive (triton-inference-server/python_backend,
src/pb_env.cc ExtractTarFile: archive_read_support_filter_gzip + archive_read_support_format_tar, with
ARCHIVE_EXTRACT_SECURE_NODOTDOT, _NOABSOLUTEPATHS, _SYMLINKS), whose tar reader refuses names over 1 MiB
(libarchive/libarchive, libarchive/archive_read_support_format_tar.c: `pathname_limit = 1048576`, "Special
header too large"). A 485 KB environment declaring a 500 MB GNU long name once took check and package to 1 GB.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from cli_runner import run_cli
from model_fixtures import conda_pack_like

from model_build.check import bounded_tar, check_repository
from model_build.check.environment import (
    MAX_UNPACK_RATIO,
    MAX_UNPACKED_BYTES,
    RATIO_FLOOR_BYTES,
    archive_problems,
)
from model_build.errors import ModelBuildError
from model_build.package import package_repository

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


# --- read in bounded memory ------------------------------------------------------------------------------------


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


def test_a_long_name_bomb_is_refused_before_its_body_is_read(tmp_path: Path) -> None:
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
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert run_cli("package", str(repo), "--out", str(out)).stderr.startswith("ERROR: ")


def peak_and_messages(repo: Path) -> tuple[int, list[str]]:
    """The traced peak of one steady-state check of `repo`'s environment, and its messages, measured in a fresh
    interpreter: tracemalloc counts every thread's allocations, and a pytest worker has others (pytest-xdist's
    execnet channel, servers earlier tests left running) that once inflated a 3 MB bound to 8 MB. A first call
    warms up interpreter-wide tables (sys.intern's, for pathlib's parts: ~2 MB in one allocation)."""
    code = (
        "import json, sys, tracemalloc\n"
        "from pathlib import Path\n"
        "from model_build.check import check_repository\n"
        "repo = Path(sys.argv[1])\n"
        "check_repository(repo)\n"
        "tracemalloc.start()\n"
        f"messages = [p.message for p in check_repository(repo) if p.field == {FIELD!r}]\n"
        "print(json.dumps([tracemalloc.get_traced_memory()[1], messages]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(repo)], capture_output=True, text=True, check=True, timeout=120
    )
    peak, messages = json.loads(result.stdout)
    return peak, messages


def test_memory_stays_bounded_with_a_real_over_limit_name(tmp_path: Path) -> None:
    """A 4 MiB long name, present in full: tarfile alone would hold all of it in memory."""
    size = 4 << 20
    archive = gz(header("././@LongLink", tarfile.GNUTYPE_LONGNAME, size), padded(b"a" * size), header("bin/activate"))
    peak, [message] = peak_and_messages(repo_with_env(tmp_path, archive))
    assert f"GNU long-name header of {size} bytes" in message
    assert peak < size // 2, peak


def test_members_are_not_kept_in_memory(tmp_path: Path) -> None:
    """tarfile keeps every member it has read; 20 000 empty entries (10 MB of headers) must not stay."""
    archive = gz(*(header(f"lib/f{i}") for i in range(20_000)), header("bin/activate"))
    peak, messages = peak_and_messages(repo_with_env(tmp_path, archive))
    assert messages == []
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


# --- links, devices, privileged files and archive bombs ---------------------------------------------------------


def environment_archive(*members: tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        activate = tarfile.TarInfo("bin/activate")
        activate.size = 2
        archive.addfile(activate, io.BytesIO(b"#\n"))
        for member in members:
            info, data = member if isinstance(member, tuple) else (member, None)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, *, link: str = "", mode: int = 0o644, data: bytes = b""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info


def judged(tmp_path: Path, archive: bytes) -> list[str]:
    path = tmp_path / "env.tar.gz"
    path.write_bytes(archive)
    return archive_problems(path, "env.tar.gz")


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        ([member("lib/passwd", tarfile.LNKTYPE, link="/etc/passwd")], "is absolute"),
        ([member("lib/shadow", tarfile.LNKTYPE, link="../../etc/shadow")], "contains '..'"),
        (
            [member("lib/etc", tarfile.SYMTYPE, link="../.."), member("lib/x", tarfile.LNKTYPE, link="lib/etc/passwd")],
            "goes through a symbolic link of the archive",
        ),
        ([member("lib/x", tarfile.LNKTYPE, link="lib/later"), member("lib/later", data=b"x")], "stored before it"),
        ([member("lib", tarfile.DIRTYPE, mode=0o755), member("lib/x", tarfile.LNKTYPE, link="lib")], "stored before"),
        ([member("dev/sda", tarfile.BLKTYPE)], "is a block device"),
        ([member("dev/mem", tarfile.CHRTYPE)], "is a character device"),
        ([member("run/pipe", tarfile.FIFOTYPE)], "is a FIFO"),
        ([member("bin/su", mode=0o4755, data=b"x")], "is setuid (mode 4755)"),
        ([member("bin/sg", mode=0o2755, data=b"x")], "is setgid (mode 2755)"),
    ],
    ids=["hardlink-absolute", "hardlink-dotdot", "hardlink-through-symlink", "hardlink-forward", "hardlink-to-dir",
         "block-device", "char-device", "fifo", "setuid", "setgid"],
)  # fmt: skip
def test_links_devices_and_privileged_files_are_refused(tmp_path, members, expected):
    """python_backend src/pb_env.cc extracts with libarchive (ARCHIVE_EXTRACT_SECURE_NODOTDOT,
    _NOABSOLUTEPATHS, _SYMLINKS); a hard link must name a regular file stored earlier in the archive (tar's own
    rule), and devices, FIFOs and setuid/setgid files have no place in an environment (our rule)."""
    messages = judged(tmp_path, environment_archive(*members))
    assert any(expected in message for message in messages), messages


def test_a_hard_link_to_an_earlier_file_passes(tmp_path):
    archive = environment_archive(member("lib/a.so", data=b"x"), member("lib/b.so", tarfile.LNKTYPE, link="lib/a.so"))
    assert judged(tmp_path, archive) == []
    assert judged(tmp_path, conda_pack_like()) == []


def test_declared_sizes_over_the_bound_are_refused_without_reading_them(tmp_path):
    """A header declaring more than MAX_UNPACKED_BYTES is refused as soon as it is read (the bytes are not there)."""
    huge = tarfile.TarInfo("lib/huge.bin")
    huge.size = MAX_UNPACKED_BYTES + 1
    path = tmp_path / "env.tar.gz"
    path.write_bytes(gzip.compress(huge.tobuf(tarfile.GNU_FORMAT)))
    [message] = archive_problems(path, "env.tar.gz")
    assert f"more than {MAX_UNPACKED_BYTES} bytes ({MAX_UNPACKED_BYTES >> 30} GiB) unpacked" in message


def test_an_archive_bomb_is_refused_by_ratio(tmp_path):
    """The review's 9 MB archive unpacking to 2 GiB passed; zeros compress ~1000x, an environment 2-5x."""
    size = RATIO_FLOOR_BYTES + (16 << 20)
    path = tmp_path / "env.tar.gz"
    info = tarfile.TarInfo("lib/zeros.bin")
    info.size = size
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as out:
        activate = tarfile.TarInfo("bin/activate")
        out.write(activate.tobuf(tarfile.GNU_FORMAT))
        out.write(info.tobuf(tarfile.GNU_FORMAT))
        block = b"\0" * (1 << 20)
        for _ in range(size >> 20):
            out.write(block)
        out.write(b"\0" * 1024)
    assert path.stat().st_size * MAX_UNPACK_RATIO < size
    [message] = archive_problems(path, "env.tar.gz")
    assert f"unpacks to {size} bytes" in message and f"at most {MAX_UNPACK_RATIO}x" in message
