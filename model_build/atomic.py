"""Nothing half-written: every output goes to a temp file (or folder) beside it, then os.replace().

One mechanism, four shapes for the four kinds of writer:
- `write_atomically(path, data)`: bytes already in memory.
- `atomic_file(path)`: an open binary stream, for writers that stream (archives, numpy arrays).
- `atomic_path(path)`: a temp path, for a tool that writes the file itself (trtexec, an exporter,
  a copy).
- `atomic_directory(path)`: a staging path for a whole folder tree that replaces a folder.

A file is flushed to disk (fsync) before it is renamed over its target, so after a crash the final
name holds the whole new file or the previous one, never a truncated file that an upload would take
for the artifact. On any error (an exception, Ctrl-C) the temp is removed and the target is left as
it was. Temps are hidden names in the target's own folder (`.<name>.<random>.tmp`): the rename
never crosses file systems. Without an explicit `mode`, a file keeps the permissions of the file it
replaces, and a new one gets those a plain `open()` would give it (0666 less the umask), not mkstemp's 0600.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _temp_beside(target: Path) -> tuple[int, Path]:
    """A new empty file (mode 0600, opened O_EXCL: never an existing file or link) beside `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    return handle, Path(name)


def _current_umask() -> int:
    mask = os.umask(0o022)  # the only portable way to read it: set, then restore at once
    os.umask(mask)
    return mask


def _default_mode(target: Path) -> int:
    """The permissions a plain write of `target` would leave: those of the regular file it replaces, else
    0666 less the umask."""
    try:
        info = os.lstat(target)
    except OSError:
        return 0o666 & ~_current_umask()
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else 0o666 & ~_current_umask()


def _finish(path: Path, mode: int) -> None:
    """Set `mode` on and fsync a file a tool wrote by name; a symbolic link there is an error, never
    renamed into place."""
    descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW)
    try:
        os.fchmod(descriptor, mode)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextmanager
def atomic_file(target: Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """An open binary file beside `target`: on success it is flushed, fsynced and replaces `target`;
    on any error it is removed.

    The stream is the descriptor mkstemp created (the temp is never reopened by name). `mode`: the
    permission bits the file gets (default: those of the file it replaces, else 0666 less the umask).
    """
    mode = _default_mode(target) if mode is None else mode
    handle, temp = _temp_beside(target)
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_path(target: Path, *, mode: int | None = None) -> Iterator[Path]:
    """A temp path beside `target`: on success it is fsynced and replaces `target`; on any error it is removed.

    The caller (or a tool it runs) writes the temp path, which exists (empty) when the block starts;
    readers of `target` never see half a file. `mode`: as for `atomic_file`.
    """
    mode = _default_mode(target) if mode is None else mode
    handle, temp = _temp_beside(target)
    os.close(handle)
    try:
        yield temp
        _finish(temp, mode)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole (flushed to disk before it replaces `path`)."""
    with atomic_file(path) as stream:
        stream.write(data)


@contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """A path beside `target` where the caller creates a new folder tree: on success that tree
    replaces `target` (whatever is there is moved aside, then removed); on any error the new tree is
    removed and `target` is left as it was.

    The yielded path does not exist yet: the caller creates it (mkdir, with the mode it wants). A
    folder cannot be renamed over a non-empty folder, so a previous `target` is moved aside first;
    if the second rename fails the previous one is put back. The files in the tree are not fsynced.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    staged, previous = work / "new", work / "previous"
    try:
        yield staged
        if not os.path.lexists(target):
            os.replace(staged, target)
        else:
            os.replace(target, previous)
            try:
                os.replace(staged, target)
            except BaseException:
                os.replace(previous, target)
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
