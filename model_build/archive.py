"""Deterministic, streaming tar.gz writer: the same entries give byte-identical archives.

Whatever the files' mtimes, owners, umask or creation order: entries are written in the caller's
order, metadata is fixed (mtime, uid/gid, user/group names), modes are the entries' own (0644 or
0755), and the gzip header has mtime 0 and no file name. Which files go in, in which order and under
which rules is model_build.package's business (model_build.model_tree scans them); this module only
writes, reading each file through `open_scanned`, which refuses a file swapped after the scan.

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
import struct
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from model_build.atomic import atomic_file
from model_build.errors import ModelBuildError
from model_build.model_tree import Entry, open_scanned, printable

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
        with os.fdopen(open_scanned(entry), "rb", buffering=0) as stream:
            while remaining:
                # Read up to the next chunk boundary of the stream, so that most pieces are whole
                # chunks that _chunks passes on without copying.
                piece = stream.read(min(remaining, CHUNK_SIZE - written % CHUNK_SIZE))
                if not piece:
                    raise ModelBuildError(
                        f"{printable(str(entry.source))}: file shrank while it was being packaged; try again"
                    )
                remaining -= len(piece)
                written += len(piece)
                yield piece
            if stream.read(1):
                raise ModelBuildError(
                    f"{printable(str(entry.source))}: file grew while it was being packaged; try again"
                )
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
    # compressobj, not zlib.compress(wbits=) (3.11): `package` runs in the CodeBuild build on the Triton image's
    # Python 3.10 (model_build/buildspec.yml; tests/model_build/test_build_image_python.py). Same raw deflate bytes.
    compressor = zlib.compressobj(_SAMPLE_LEVEL, zlib.DEFLATED, -15)
    return len(compressor.compress(sample) + compressor.flush()) > _STORE_ABOVE_RATIO * len(sample)


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


def atomic_write_archive(entries: Sequence[Entry], archive: Path, workers: int | None) -> str:
    """Write the archive (mode 0644) to a temp file beside `archive`, then rename it into place.

    model_build.atomic fsyncs it before the rename: after a crash the final name holds the whole
    archive or nothing, never a truncated file that an upload would take for the artifact."""
    if archive.is_dir():
        raise ModelBuildError(f"{archive}: is a folder; give the archive's file name")
    with atomic_file(archive, mode=0o644) as stream:
        return write_gzip(_chunks(_tar_stream(entries)), stream, workers=workers)
