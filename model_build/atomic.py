"""Nothing half-written: every output goes to a temp file in its folder, then os.replace()."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A temp path beside `target`: on success it replaces `target`; on any error it is removed.

    The caller (or a tool it runs) writes the temp path; readers of `target` never see half a file.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    temp = Path(name)
    try:
        yield temp
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole (flushed to disk before it replaces `path`)."""
    with atomic_path(path) as temp, temp.open("wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
