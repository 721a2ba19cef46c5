"""Owner-only modes for the Python backend's shared-memory regions (review M1).

The Python backend passes every request's inputs and outputs between tritonserver and its stub processes
through regions in /dev/shm named `<shm-region-prefix-name><uuid>` (the local endpoint sets the prefix:
local_endpoint.py). Boost.Interprocess creates them and then fchmod()s them to its default permissions,
0644 (boost/interprocess/shared_memory_object.hpp, `priv_open_or_create`: "We need a create/open loop to
change permissions correctly using fchmod"), so the server's umask does not reach them: measured with
the CPU Triton of .venv-triton, a umask of 0o077 still gave -rw-r--r--. The regions are this user's, so
the endpoint chmods them to 0600 itself: once before the front serves its first request, then every
POLL_SECONDS while the server runs (a model loaded later gets its own regions).

What remains: between a region's creation and its chmod (at most POLL_SECONDS, and before any request
data for the regions made at start) another local user could open it and keep the descriptor. /dev/shm
is world-writable and shared, so only a private mount namespace would close that window.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path

SHARED_MEMORY = Path("/dev/shm")
POLL_SECONDS = 0.05


def restrict_regions(prefix: str, folder: Path = SHARED_MEMORY) -> list[Path]:
    """chmod 0600 every file of this user's in `folder` whose name starts with `prefix`; returns them."""
    found: list[Path] = []
    with contextlib.suppress(OSError), os.scandir(folder) as listing:
        for entry in listing:
            if not entry.name.startswith(prefix):
                continue
            with contextlib.suppress(OSError):  # gone meanwhile (a stub ended)
                status = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(status.st_mode) and status.st_uid == os.getuid():
                    if stat.S_IMODE(status.st_mode) != 0o600:
                        os.chmod(entry.path, 0o600, follow_symlinks=False)
                    found.append(Path(entry.path))
    return found


class SharedMemoryGuard:
    """A daemon thread that keeps the regions named `prefix...` at 0600 until `stop()`."""

    def __init__(self, prefix: str, folder: Path = SHARED_MEMORY) -> None:
        self.prefix = prefix
        self.folder = folder
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shm-guard", daemon=True)

    def start(self) -> SharedMemoryGuard:
        restrict_regions(self.prefix, self.folder)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            restrict_regions(self.prefix, self.folder)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
