"""Read the entries of a user's tar archive (a packed Python environment) in bounded memory.

Python's tarfile, left alone, reads a GNU long-name/long-link or pax header whole into memory,
follows a chain of such headers by recursion, keeps every member it has read, and lets old-GNU and
pax-1.0 sparse maps grow without end: a 485 KB .tar.gz declaring a 500 MB long name took 1 GB
(hostile review, finding 5). Here every header is checked before tarfile materialises it, and
members are handed over one at a time.

The python backend unpacks these archives with libarchive (triton-inference-server/python_backend,
src/pb_env.cc ExtractTarFile: archive_read_support_filter_gzip + archive_read_support_format_tar).
libarchive's tar reader has the same kind of sanity limits (libarchive/libarchive,
libarchive/archive_read_support_format_tar.c: `pathname_limit = 1048576 /* Longest path name: 1MiB */`,
"Special header too large"), so a name over 1 MiB fails there too. The member count and the pax
bound are ours: conda-pack writes pax headers of a few hundred bytes, and an environment of a few
tens of thousands of files.
"""

from __future__ import annotations

import gzip
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from model_build.errors import InvalidModelError

# libarchive's pathname_limit (see above); also our bound for one pax header and all global ones.
MAX_SPECIAL_HEADER = 1 << 20
# A member is preceded by a handful of headers (long name, long link, pax); a longer chain is crafted.
MAX_CHAINED_HEADERS = 8
# A large conda environment (PyTorch with CUDA) holds some 50,000 entries.
MAX_MEMBERS = 500_000

_SPECIAL_HEADERS = {
    tarfile.GNUTYPE_LONGNAME: "GNU long-name header",
    tarfile.GNUTYPE_LONGLINK: "GNU long-link header",
    tarfile.XHDTYPE: "pax extended header",
    tarfile.XGLTYPE: "pax global header",
    tarfile.SOLARIS_XHDTYPE: "Solaris extended header",
}
_CHAIN = "_model_build_chain"
_GLOBAL_BYTES = "_model_build_global_bytes"


class ArchiveLimitError(InvalidModelError):
    """The archive exceeds a bound above; the message says which and where."""


class _BoundedTarInfo(tarfile.TarInfo):
    """tarfile's extension point (`tarinfo=`; tarfile.py: "subclass to add custom _proc_*() methods"):
    these run once a 512-byte header is parsed, before any body is read."""

    def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        kind = _SPECIAL_HEADERS.get(self.type)
        if kind is None:
            return super()._proc_member(archive)
        if self.size > MAX_SPECIAL_HEADER:
            raise ArchiveLimitError(
                f"{kind} of {self.size} bytes at offset {self.offset}, over the {MAX_SPECIAL_HEADER}-byte limit "
                '(libarchive refuses names over 1 MiB: "Special header too large")'
            )
        if self.type == tarfile.XGLTYPE:
            total = getattr(archive, _GLOBAL_BYTES, 0) + self.size
            if total > MAX_SPECIAL_HEADER:
                raise ArchiveLimitError(f"pax global headers add up to more than {MAX_SPECIAL_HEADER} bytes")
            setattr(archive, _GLOBAL_BYTES, total)
        depth = getattr(archive, _CHAIN, 0)
        if depth >= MAX_CHAINED_HEADERS:
            raise ArchiveLimitError(f"over {MAX_CHAINED_HEADERS} extension headers in a row at offset {self.offset}")
        setattr(archive, _CHAIN, depth + 1)
        try:
            return super()._proc_member(archive)
        finally:
            setattr(archive, _CHAIN, depth)

    def _proc_sparse(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        if self._sparse_structs[1]:  # (structs, isextended, origsize), parsed from this header
            raise ArchiveLimitError(f"old GNU sparse entry at offset {self.offset} has extension headers (repack it)")
        return super()._proc_sparse(archive)

    def _proc_gnusparse_10(self, next_member: tarfile.TarInfo, pax_headers: dict, archive: tarfile.TarFile) -> None:
        raise ArchiveLimitError(
            f"GNU sparse 1.0 entry {next_member.name!r}: its map is unbounded (repack without --sparse)"
        )


def archive_members(path: Path) -> Iterator[tarfile.TarInfo]:
    """Every entry of a .tar.gz or plain .tar, one at a time, read in one streaming pass to the end, so
    a truncated download fails here (gzip's length and CRC trailer, tar's member sizes) as it would
    when the backend unpacks it. Raises ArchiveLimitError, tarfile.TarError, OSError, EOFError,
    zlib.error."""
    # Never blocks on a FIFO nor reads a device: opened non-blocking, judged on the descriptor.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise tarfile.ReadError("not a regular file (a folder, FIFO, device or socket)")
    os.set_blocking(descriptor, True)
    with os.fdopen(descriptor, "rb") as raw:
        if not raw.read(1):
            raise tarfile.ReadError("empty file")
        raw.seek(0)
        is_gzip = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        # Counted first, cheaply: tarfile spends some 80 microseconds per member, so an archive of millions of
        # empty members would take minutes to reach MAX_MEMBERS below (issue #22 B7: refused in seconds).
        _count_headers(raw, is_gzip)
        raw.seek(0)
        stream = gzip.GzipFile(fileobj=raw) if is_gzip else raw
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=_BoundedTarInfo) as archive:
            count = 0
            while (member := archive.next()) is not None:
                archive.members.clear()  # tarfile keeps every member it read; we need one at a time
                count += 1
                if count > MAX_MEMBERS:
                    raise ArchiveLimitError(f"more than {MAX_MEMBERS} entries")
                yield member
        while stream.read(1 << 20):
            pass


_EXTENSION_TYPES = frozenset(_SPECIAL_HEADERS)
_COUNT_CHUNK = 1 << 16  # small: the read stays within the bounded memory the full read keeps
BLOCK = tarfile.BLOCKSIZE


def _chunks(raw, is_gzip: bool) -> Iterator[bytes]:
    """The archive's tar bytes in pieces of at most _COUNT_CHUNK (a gzip bomb is never held whole)."""
    decompressor = zlib.decompressobj(wbits=31) if is_gzip else None
    while chunk := raw.read(_COUNT_CHUNK):
        if decompressor is None:
            yield chunk
            continue
        data = decompressor.decompress(chunk, _COUNT_CHUNK)
        while True:
            if data:
                yield data
            if not decompressor.unconsumed_tail:
                break
            data = decompressor.decompress(decompressor.unconsumed_tail, _COUNT_CHUNK)
        if decompressor.eof:
            return  # a second gzip member (never written by conda-pack): the full read handles it


def _count_headers(raw, is_gzip: bool) -> None:
    """Raise ArchiveLimitError as soon as more than MAX_MEMBERS member headers are seen (extension headers not
    counted): a pass over the decompressed bytes that parses nothing but each header's type and size. Anything
    malformed ends the count; the full read (tarfile) then reports it."""
    pending = b""  # the start of a header split across pieces
    skip = 0  # data bytes still to pass before the next header
    count = 0
    try:
        for chunk in _chunks(raw, is_gzip):
            offset = min(skip, len(chunk))
            skip -= offset
            data = pending + chunk[offset:] if pending else chunk[offset:] if offset else chunk
            pending = b""
            position = 0
            while skip == 0 and len(data) - position >= BLOCK:
                header = data[position : position + BLOCK]
                if header.count(0) == BLOCK:
                    return  # end-of-archive marker
                size = _header_size(header)
                if size is None:
                    return
                if header[156:157] not in _EXTENSION_TYPES:
                    count += 1
                    if count > MAX_MEMBERS:
                        raise ArchiveLimitError(f"more than {MAX_MEMBERS} entries")
                step = BLOCK + (size + BLOCK - 1) // BLOCK * BLOCK
                if step <= len(data) - position:
                    position += step
                else:
                    skip = step - (len(data) - position)
                    position = len(data)
            if skip == 0:
                pending = data[position:]
    except zlib.error:
        return


def _header_size(header: bytes) -> int | None:
    """The member size field (octal, or base-256 when its first byte has the high bit), None if malformed."""
    field = header[124:136]
    if field[0] & 0x80:
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        return None
