"""Deterministic, streaming packaging of a Triton model repository for SageMaker.

The same files give byte-identical archives (so a digest names the bytes), whatever their
mtimes, owners, umask or creation order: entries are sorted, metadata is fixed (mtime, uid/gid,
user/group names), modes are normalised to 0644/0755 keeping only the exec bit, and the gzip
header has mtime 0 and no file name.

Layouts (`package_repository(layout=...)`):
- "single": `<out>/model.tar.gz`, the selected model folders at the archive root (one folder for
  a single-model endpoint; several for an ensemble with its composing models).
- "multi": `<out>/<model>.tar.gz` per model, each holding its model folder at the root: what a
  multi-model endpoint loads as `TargetModel` from its S3 prefix.
- "uncompressed": `<out>/<model>/...`, a plain folder tree for SageMaker's uncompressed model data
  (`ModelDataSource.S3DataSource`, `CompressionType: None`), uploaded as an S3 prefix.

Speed: engines are GiBs of incompressible weights, and `tar -czf` spends nearly all its time
deflating them for nothing (deflate makes random bytes 0.03% larger, measured). The tar stream
is cut into fixed 1 MiB chunks; each chunk is compressed on its own in a thread pool (zlib and
hashlib release the GIL) and the results are written in order as ONE gzip member: every chunk is
a run of complete deflate blocks ending byte-aligned and not final (pigz's technique), a final
empty stored block closes the stream, and the member's CRC-32 is combined from the chunks' CRCs.
A single member keeps every gzip reader happy, including Python's `tarfile` in stream mode,
which stops after the first member of a multi-member gzip.

Each chunk's treatment is a pure function of its bytes, so the output never depends on thread
timing: a sample of the chunk is deflated, and chunks that would shrink by less than 10% (weights,
TensorRT plans) are written as stored deflate blocks (no CPU spent, and stored blocks are the
same bytes with any zlib); the rest get zlib level 6, gzip's default. Deflated chunks are only
reproducible with the same zlib build: rebuilding in another image may change the archive bytes
(never its contents), which the content-addressed upload then refuses to overwrite.

Memory stays flat: files are read in chunk-sized pieces and at most 2 chunks per worker are in
flight, so a multi-GiB engine costs a few MiB.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
import re
import shutil
import stat
import struct
import tarfile
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from model_build.errors import InvalidModelError, ModelBuildError
from model_build.key import tree_sha256
from model_build.settings import MODEL_NAME_PATTERN

Layout = Literal["single", "multi", "uncompressed"]
LAYOUTS: tuple[Layout, ...] = ("single", "multi", "uncompressed")
SINGLE_ARCHIVE_NAME = "model.tar.gz"

# 1980-01-01T00:00:00Z, the SOURCE_DATE_EPOCH convention for "no meaningful time" (zip's epoch):
# 0 would do for tar, but some extractors warn about 1970 timestamps.
FIXED_MTIME = 315532800
CHUNK_SIZE = 1024 * 1024
# Deflate this much of each chunk (4 slices spread over it) to decide how to treat the chunk.
_SAMPLE_SLICES = 4
_SAMPLE_SLICE_SIZE = 4 * 1024
# Store the chunk when its deflated sample keeps more than this fraction of its size.
_STORE_ABOVE_RATIO = 0.90
_SAMPLE_LEVEL = 1
_DEFLATE_LEVEL = 6
_MAX_WORKERS = 8
_STORED_BLOCK_MAX = 0xFFFF
# gzip header: magic, CM=deflate, FLG=0 (no name/comment/extra), MTIME=0, XFL=0, OS=3 (Unix).
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
# An empty stored block with BFINAL set: ends the deflate stream after the chunks.
_FINAL_EMPTY_BLOCK = b"\x01\x00\x00\xff\xff"

# File and folder names inside a model: characters that need no escaping in S3 keys (uncompressed
# layout: every file becomes a key) nor in a shell, and that Triton reads as-is. Leading dots are
# allowed (`.gitkeep`).
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._+=@,-]+$")
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
# Compiled bytecode embeds source mtimes and the Python version: never part of a reproducible archive.
_SKIPPED_DIRS = frozenset({"__pycache__"})


@dataclass(frozen=True)
class Entry:
    """One archive member: `arcname` relative to the archive root, `source` on disk."""

    arcname: str
    source: Path
    is_dir: bool
    mode: int
    size: int


@dataclass(frozen=True)
class PackagedArtifact:
    """What `package_repository` wrote: an archive (sha256 of its bytes) or a folder (tree digest)."""

    models: tuple[str, ...]
    path: Path
    sha256: str
    layout: Layout


# --- scanning and validation -------------------------------------------------------------------


def list_models(repository: Path) -> list[str]:
    """Model folders of a repository, sorted; refuses what SageMaker's Triton start-up would refuse."""
    repository = Path(repository)
    if not repository.is_dir():
        raise ModelBuildError(
            f"{repository}: not a folder; give the model repository (the folder holding model folders)"
        )
    # ../shared/README.md: SageMaker's Triton start-up fails if a config.pbtxt sits at the root.
    if (repository / "config.pbtxt").exists():
        raise InvalidModelError(
            f"{repository / 'config.pbtxt'}: config.pbtxt at the repository root; SageMaker's Triton start-up "
            "fails on it. Give the folder that holds the model folder (its parent), not the model folder itself"
        )
    models = sorted(entry.name for entry in os.scandir(repository) if entry.is_dir(follow_symlinks=True))
    if not models:
        raise InvalidModelError(f"{repository}: no model folders in this repository")
    return models


def scan_model(repository: Path, model: str) -> list[Entry]:
    """Entries of one model folder in archive order; raises on anything that cannot be shipped."""
    if not _MODEL_NAME.match(model):
        raise InvalidModelError(
            f"{repository / model}: model name {model!r} is not allowed; use letters, digits, '_' and '-' "
            f"(pattern {MODEL_NAME_PATTERN}): Triton, S3 keys and multi-model TargetModel all use it"
        )
    model_dir = repository / model
    if model_dir.is_symlink():
        raise InvalidModelError(f"{model_dir}: model folder is a symlink; copy the model into the repository")
    if not model_dir.is_dir():
        raise InvalidModelError(f"{model_dir}: no such model folder in {repository}")
    config = model_dir / "config.pbtxt"
    if config.is_symlink() or not config.is_file():
        raise InvalidModelError(f"{model_dir}: model folder has no config.pbtxt (a regular file); add one")
    entries = [Entry(model, model_dir, True, 0o755, 0)]
    entries.extend(_scan_folder(model_dir, model, first="config.pbtxt"))
    return entries


def _scan_folder(folder: Path, arcname: str, first: str | None = None) -> Iterator[Entry]:
    """Every file's bytes come from inside the repository: symlinks (the only way out of it for a
    path found by walking) are refused, as are devices, FIFOs and sockets.

    Sorted by name, except that `first` (a model's config.pbtxt) leads: a reader that only needs
    the config (the pipeline's smoke test) stops before a multi-GiB engine."""
    with os.scandir(folder) as listing:
        children = sorted(listing, key=lambda child: (child.name != first, child.name))
    for child in children:
        path = Path(child.path)
        name = child.name
        if not _SAFE_NAME.match(name):
            raise InvalidModelError(
                f"{path}: file name {name!r} is not allowed; use letters, digits and . _ + = @ , - "
                "(names become S3 keys and Triton paths)"
            )
        if child.is_symlink():
            raise InvalidModelError(f"{path}: symlinks are not packaged; replace it with the file it points to")
        child_arcname = f"{arcname}/{name}"
        info = child.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            if name in _SKIPPED_DIRS:
                continue
            yield Entry(child_arcname, path, True, 0o755, 0)
            yield from _scan_folder(path, child_arcname)
        elif stat.S_ISREG(info.st_mode):
            mode = 0o755 if info.st_mode & 0o111 else 0o644
            yield Entry(child_arcname, path, False, mode, info.st_size)
        else:
            raise InvalidModelError(f"{path}: not a regular file or folder (device, FIFO or socket); remove it")


def _check_outside(target: Path, folders: Sequence[Path]) -> None:
    resolved = target.resolve()
    for folder in folders:
        if resolved.is_relative_to(folder.resolve()):
            raise ModelBuildError(f"{target}: output inside {folder}, which is being packaged; write it elsewhere")


# --- the tar stream ----------------------------------------------------------------------------


def _tar_header(entry: Entry) -> bytes:
    info = tarfile.TarInfo(entry.arcname)
    info.type = tarfile.DIRTYPE if entry.is_dir else tarfile.REGTYPE
    info.mode = entry.mode
    info.size = entry.size
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    # PAX: names longer than 100 bytes and files over 8 GiB get standard extended headers.
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")


def _tar_stream(entries: Sequence[Entry]) -> Iterator[bytes]:
    """The tar archive as a sequence of byte pieces, reading each file in CHUNK_SIZE pieces."""
    written = 0
    for entry in entries:
        header = _tar_header(entry)
        written += len(header)
        yield header
        if entry.is_dir:
            continue
        remaining = entry.size
        with entry.source.open("rb") as stream:
            while remaining:
                # Read up to the next chunk boundary of the stream, so that most pieces are whole
                # chunks that _chunks passes on without copying.
                piece = stream.read(min(remaining, CHUNK_SIZE - written % CHUNK_SIZE))
                if not piece:
                    raise ModelBuildError(f"{entry.source}: file shrank while it was being packaged; try again")
                remaining -= len(piece)
                written += len(piece)
                yield piece
            if stream.read(1):
                raise ModelBuildError(f"{entry.source}: file grew while it was being packaged; try again")
        padding = -entry.size % tarfile.BLOCKSIZE
        written += padding
        yield bytes(padding)
    # Two zero blocks end the archive; GNU tar and tarfile then pad to a 10 KiB record.
    end = 2 * tarfile.BLOCKSIZE
    end += -(written + end) % tarfile.RECORDSIZE
    yield bytes(end)


def _chunks(pieces: Iterator[bytes], size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Re-cut a byte stream into fixed-size chunks (the last may be shorter): boundaries depend
    only on the stream's bytes, never on how it was read."""
    buffer = bytearray()
    for piece in pieces:
        if not buffer and len(piece) == size:
            yield piece
            continue
        buffer += piece
        while len(buffer) >= size:
            yield bytes(buffer[:size])
            del buffer[:size]
    if buffer:
        yield bytes(buffer)


# --- parallel, deterministic gzip --------------------------------------------------------------


def _should_store(chunk: bytes) -> bool:
    """True when deflate would barely shrink the chunk (decided from a sample of its own bytes)."""
    if len(chunk) <= _SAMPLE_SLICES * _SAMPLE_SLICE_SIZE:
        sample = chunk
    else:
        step = len(chunk) // _SAMPLE_SLICES
        sample = b"".join(chunk[i * step : i * step + _SAMPLE_SLICE_SIZE] for i in range(_SAMPLE_SLICES))
    return len(zlib.compress(sample, _SAMPLE_LEVEL, wbits=-15)) > _STORE_ABOVE_RATIO * len(sample)


def _stored_blocks(chunk: bytes) -> bytes:
    """Deflate stored blocks (RFC 1951 3.2.4), not final: header byte 0, LEN, NLEN, raw bytes."""
    view = memoryview(chunk)
    parts: list[bytes | memoryview] = []
    for start in range(0, len(view), _STORED_BLOCK_MAX):
        block = view[start : start + _STORED_BLOCK_MAX]
        parts.append(struct.pack("<BHH", 0, len(block), len(block) ^ 0xFFFF))
        parts.append(block)
    return b"".join(parts)


def _compress_chunk(chunk: bytes) -> tuple[bytes, int]:
    """(deflate blocks ending byte-aligned and not final, CRC-32 of the chunk). Runs in a worker."""
    crc = zlib.crc32(chunk)
    if _should_store(chunk):
        return _stored_blocks(chunk), crc
    compressor = zlib.compressobj(_DEFLATE_LEVEL, zlib.DEFLATED, -15)
    # A sync flush ends on a byte boundary without a final block, so the next chunk's independent
    # deflate stream can follow it directly.
    return compressor.compress(chunk) + compressor.flush(zlib.Z_SYNC_FLUSH), crc


@functools.lru_cache(maxsize=4)
def _crc_shift_columns(length: int) -> tuple[int, ...]:
    """The linear map crc -> crc32(`length` zero bytes, start=crc) minus its constant part, as 32
    columns: crc32(A+B) = shift_len(B)(crc32(A)) ^ crc32(B) (zlib's crc32_combine, which Python
    does not expose)."""
    zeros = bytes(length)
    constant = zlib.crc32(zeros, 0)
    return tuple(zlib.crc32(zeros, 1 << bit) ^ constant for bit in range(32))


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """CRC-32 of A+B from crc32(A), crc32(B) and len(B)."""
    columns = _crc_shift_columns(length2)
    shifted = 0
    bit = 0
    while crc1:
        if crc1 & 1:
            shifted ^= columns[bit]
        crc1 >>= 1
        bit += 1
    return shifted ^ crc2


def _default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, _MAX_WORKERS))


def write_gzip(chunks: Iterator[bytes], stream: BinaryIO, *, workers: int | None = None) -> str:
    """Write `chunks` to `stream` as one deterministic gzip member; return the sha256 of the output."""
    digest = hashlib.sha256()

    def emit(data: bytes) -> None:
        digest.update(data)
        stream.write(data)

    workers = workers or _default_workers()
    crc = 0
    size = 0
    pending: collections.deque[tuple[Future[tuple[bytes, int]], int]] = collections.deque()

    def drain_one() -> None:
        nonlocal crc
        future, length = pending.popleft()
        payload, chunk_crc = future.result()
        crc = crc32_combine(crc, chunk_crc, length)
        emit(payload)

    emit(_GZIP_HEADER)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gzip") as pool:
        try:
            for chunk in chunks:
                pending.append((pool.submit(_compress_chunk, chunk), len(chunk)))
                size += len(chunk)
                # Bounded: at most 2 chunks per worker in flight keeps memory flat.
                while len(pending) > 2 * workers:
                    drain_one()
            while pending:
                drain_one()
        except BaseException:
            for future, _ in pending:
                future.cancel()
            raise
    emit(_FINAL_EMPTY_BLOCK)
    emit(struct.pack("<II", crc, size & 0xFFFFFFFF))
    return digest.hexdigest()


# --- archives ----------------------------------------------------------------------------------


def _atomic_write_archive(entries: Sequence[Entry], archive: Path, workers: int | None) -> str:
    """Write the archive to a temp file beside `archive`, then rename it into place."""
    if archive.is_dir():
        raise ModelBuildError(f"{archive}: is a folder; give the archive's file name")
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        dir=archive.parent, prefix=f".{archive.name}.", suffix=".tmp", delete=False
    ) as handle:
        temp = Path(handle.name)
        try:
            sha256 = write_gzip(_chunks(_tar_stream(entries)), handle, workers=workers)
            handle.flush()
            # Durable before the rename: after a crash the final name holds the whole archive or
            # nothing, never a truncated file that an upload would take for the artifact.
            os.fsync(handle.fileno())
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
    try:
        os.chmod(temp, 0o644)
        os.replace(temp, archive)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return sha256


def write_repository_archive(
    repository: Path, models: Sequence[str], archive: Path, *, workers: int | None = None
) -> str:
    """Deterministic `archive` (.tar.gz) holding the given model folders at its root; returns its sha256."""
    repository = Path(repository)
    archive = Path(archive)
    entries = [entry for model in sorted(set(models)) for entry in scan_model(repository, model)]
    _check_outside(archive, [repository / model for model in models])
    return _atomic_write_archive(entries, archive, workers)


def write_model_archive(model_dir: Path, archive: Path) -> str:
    """Deterministic <archive> (.tar.gz) holding model_dir's folder (named model_dir.name) at the root.
    Returns the archive's sha256 hex."""
    model_dir = Path(model_dir)
    return write_repository_archive(model_dir.parent, [model_dir.name], Path(archive))


def _select(repository: Path, models: Sequence[str] | None) -> list[str]:
    available = list_models(repository)
    if not models:
        return available
    unknown = [model for model in models if model not in available]
    if unknown:
        raise ModelBuildError(
            f"{repository}: no model folder named {', '.join(map(repr, unknown))}; found: {', '.join(available)}"
        )
    return sorted(set(models))


def _copy_model_tree(entries: Sequence[Entry], destination_root: Path) -> None:
    for entry in entries:
        target = destination_root / entry.arcname
        if entry.is_dir:
            target.mkdir(mode=0o755)
        else:
            # copyfile streams (sendfile on Linux): memory stays flat for multi-GiB engines.
            shutil.copyfile(entry.source, target)
            if target.stat().st_size != entry.size:
                raise ModelBuildError(f"{entry.source}: file changed while it was being packaged; try again")
        os.chmod(target, entry.mode)


def _write_uncompressed(repository: Path, scanned: dict[str, list[Entry]], out_dir: Path) -> list[PackagedArtifact]:
    """`<out>/<model>/...` for each model, built in a temp folder and renamed into place."""
    for model in scanned:
        # `<out>/<model>` is replaced wholesale: it must not be (or hold) the repository itself.
        if repository.resolve().is_relative_to((out_dir / model).resolve()):
            raise ModelBuildError(f"{out_dir / model}: would replace the repository {repository}; choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=".package-"))
    artifacts = []
    try:
        for entries in scanned.values():
            _copy_model_tree(entries, staging)
        for model in scanned:
            target = out_dir / model
            if target.exists():
                # Replace a previous run's folder: move it aside first so the swap is two renames.
                os.replace(target, staging / f".previous-{model}")
            os.replace(staging / model, target)
            artifacts.append(PackagedArtifact((model,), target, tree_sha256(target), "uncompressed"))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return artifacts


def package_repository(
    repository: Path,
    out_dir: Path,
    *,
    models: Sequence[str] | None = None,
    layout: Layout = "single",
    workers: int | None = None,
) -> list[PackagedArtifact]:
    """Package `models` (default: every model folder) of `repository` into `out_dir` in `layout`.

    Everything is validated before anything is written.
    """
    repository = Path(repository)
    out_dir = Path(out_dir)
    if layout not in LAYOUTS:
        raise ModelBuildError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    selected = _select(repository, models)
    _check_outside(out_dir, [repository])
    scanned = {model: scan_model(repository, model) for model in selected}
    if layout == "uncompressed":
        return _write_uncompressed(repository, scanned, out_dir)
    if layout == "single":
        entries = [entry for model in selected for entry in scanned[model]]
        archive = out_dir / SINGLE_ARCHIVE_NAME
        return [PackagedArtifact(tuple(selected), archive, _atomic_write_archive(entries, archive, workers), layout)]
    artifacts = []
    for model in selected:
        archive = out_dir / f"{model}.tar.gz"
        artifacts.append(
            PackagedArtifact((model,), archive, _atomic_write_archive(scanned[model], archive, workers), layout)
        )
    return artifacts
