"""The asynchronous flow on loopback: an input folder stands for the S3 input prefix, an output folder for the
output and failure prefixes, and a watcher plays SageMaker's queue in front of a local endpoint.

- `watch` (`python -m endpoint_client local-async`): every request file that appears in the input folder is
  POSTed to the local endpoint's `/invocations` (as SageMaker's async queue calls the container), and the answer
  is written as `<name>.out`, or the refusal as `<name>.error`, into the output folder.
- `LocalAsyncInvoker` (`invoke-async --local-input-dir D --local-output-dir O`): writes a request file and waits
  for its answer, as `invoke-async` waits for the S3 objects.

A request file's name says its Content-Type: `<id>.json` is KServe v2 JSON; `<id>.bin` is binary+json, whose
JSON header is the body's leading JSON object (its length is the `json-header-size`).
Files are published whole (written beside, then hard-linked to their name: never over an existing file), so a
reader never sees half a file and an answer is never replaced. Hidden names (`.x`) are temporaries: skipped.
The local endpoint's front still holds each request to SageMaker's real-time limits (6 MiB): larger requests
come back as `.error` here, while a real asynchronous endpoint takes up to 1 GB.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from endpoint_client.async_body import MAX_ASYNC_PAYLOAD_BYTES, StreamedBody
from endpoint_client.async_invoke import FIRST_POLL_SECONDS, MAX_POLL_SECONDS, POLL_GROWTH, reply_content_type
from endpoint_client.codec import BINARY_CONTENT_TYPE_PREFIX, JSON_CONTENT_TYPE, error_message, header_length
from endpoint_client.errors import EndpointClientError, EndpointError, EndpointUnreachableError, InvalidInputError
from endpoint_client.transport import LocalTransport, Reply, http_request

OUTPUT_SUFFIX = ".out"
ERROR_SUFFIX = ".error"
REQUEST_SUFFIXES = {".json": JSON_CONTENT_TYPE, ".bin": BINARY_CONTENT_TYPE_PREFIX}
LOCAL_TIMEOUT_SECONDS = 3600.0  # InvokeEndpointAsync's longest InvocationTimeoutSeconds (botocore model: max 3600)
COPY_CHUNK_BYTES = 8 * 1024 * 1024
MAX_HEADER_BYTES = 16 * 1024 * 1024  # the JSON header of a .bin request is read to learn its size
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def publish(directory: Path, name: str, write: Callable[[BinaryIO], None]) -> Path:
    """Write a new file `directory/name` whole: a hidden temp beside it, fsynced, then hard-linked to its name,
    which fails rather than replace a file already there (FileExistsError)."""
    handle, temp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, 0o644)
        os.link(temp, directory / name)
    finally:
        temp.unlink(missing_ok=True)
    return directory / name


def _folder(path: Path, flag: str, *, create: bool) -> Path:
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InvalidInputError(f"{flag} {path}: cannot create it ({error.strerror})") from None
    if not path.is_dir():
        raise InvalidInputError(f"{flag} {path}: not a folder")
    if not os.access(path, os.W_OK | os.X_OK if create else os.R_OK | os.X_OK):
        raise InvalidInputError(f"{flag} {path}: not {'writable' if create else 'readable'}")
    return path


def request_content_type(path: Path) -> str:
    """The Content-Type of a request file, from its name (and, for binary+json, its leading JSON header)."""
    with _open_request(path) as (stream, size):
        return _content_type(path.name, stream, size)


def _content_type(name: str, stream: BinaryIO, size: int) -> str:
    kind = REQUEST_SUFFIXES.get(Path(name).suffix)
    if kind is None:
        raise InvalidInputError(f"{name}: a request file is <id>.json (KServe v2 JSON) or <id>.bin (binary+json)")
    if kind == JSON_CONTENT_TYPE:
        return kind
    head = stream.read(MAX_HEADER_BYTES)
    stream.seek(0)
    computed = reply_content_type(head, None)
    if header_length(computed) is None and len(head) == size:
        return JSON_CONTENT_TYPE  # a .bin that is all header: plain JSON
    if header_length(computed) is None:
        raise InvalidInputError(f"{name}: a .bin request starts with its JSON header; this one does not")
    return computed


@contextlib.contextmanager
def _open_request(path: Path) -> Iterator[tuple[BinaryIO, int]]:
    """A request file opened as what it is now: never through a symbolic link, never a FIFO or device (which could
    block the watcher or never end), at most the asynchronous payload limit."""
    try:
        descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise InvalidInputError(f"{path.name}: cannot open it ({error.strerror}; a link is not followed)") from None
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInputError(f"{path.name}: not a regular file")
        if info.st_size > MAX_ASYNC_PAYLOAD_BYTES:
            raise InvalidInputError(
                f"{path.name}: {info.st_size} bytes, over the {MAX_ASYNC_PAYLOAD_BYTES} an async request takes"
            )
        yield stream, info.st_size


def _answered(name: str, output_dir: Path) -> bool:
    return (output_dir / f"{name}{OUTPUT_SUFFIX}").exists() or (output_dir / f"{name}{ERROR_SUFFIX}").exists()


def process(path: Path, output_dir: Path, url: str, *, timeout: float = LOCAL_TIMEOUT_SECONDS) -> Path:
    """POST one request file to `url`/invocations; publish `<name>.out` (the answer) or `<name>.error`."""
    base = url.rstrip("/")
    try:
        with _open_request(path) as (body, size):  # streamed: urllib sends a file object with its Content-Length
            headers = {"Content-Type": _content_type(path.name, body, size), "Content-Length": str(size)}
            status, reply, _ = http_request(
                "POST", f"{base}/invocations", body, headers, timeout, max_reply_bytes=MAX_ASYNC_PAYLOAD_BYTES
            )
        failure = None if status == 200 else f"HTTP {status}: {error_message(reply)}"
    except (EndpointClientError, OSError) as error:
        reply, failure = b"", str(error)
    if failure is None:
        return publish(output_dir, f"{path.name}{OUTPUT_SUFFIX}", lambda stream: stream.write(reply))
    return publish(output_dir, f"{path.name}{ERROR_SUFFIX}", lambda stream: stream.write(failure.encode() + b"\n"))


def pending(input_dir: Path, output_dir: Path) -> list[Path]:
    """Entries not answered yet, oldest first; temporaries (hidden names) skipped."""
    found = []
    for entry in os.scandir(input_dir):
        if entry.name.startswith("."):
            continue  # a temporary being written; anything else (a link, a folder) is answered with an .error
        if not _answered(entry.name, output_dir):
            found.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name))
    return [input_dir / name for _, name in sorted(found)]


def watch(
    input_dir: Path,
    output_dir: Path,
    url: str,
    *,
    once: bool = False,
    poll_seconds: float = 0.5,
    echo: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Answer every request file; with `once`, those present now and return. Returns how many were answered."""
    LocalTransport(url)  # the URL's form checked as `invoke --url` checks it
    _folder(input_dir, "--input-dir", create=False)
    _folder(output_dir, "--output-dir", create=True)
    answered = 0
    while True:
        for path in pending(input_dir, output_dir):
            try:
                written = process(path, output_dir, url)
            except FileExistsError:  # another watcher answered it first: its answer stands
                continue
            echo(f"{path.name} -> {written.name}")
            answered += 1
        if once:
            return answered
        sleep(poll_seconds)


class LocalAsyncInvoker:
    """`invoke-async` against folders that a `local-async` watcher serves."""

    def __init__(
        self,
        input_dir: Path,
        output_dir: Path,
        *,
        progress: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.input_dir = _folder(input_dir, "--local-input-dir", create=True)
        self.output_dir = _folder(output_dir, "--local-output-dir", create=True)
        self.progress = progress
        self.clock = clock
        self.sleep = sleep

    def submit(self, body: StreamedBody) -> str:
        suffix = ".bin" if header_length(body.content_type) is not None else ".json"
        if suffix == ".json" and body.content_type != JSON_CONTENT_TYPE:
            raise InvalidInputError(
                f"a local async request is KServe v2 JSON or binary+json, not {body.content_type[:100]!r}"
            )
        name = f"{uuid.uuid4().hex}{suffix}"

        def copy(stream: BinaryIO) -> None:
            with body.open() as source:
                while chunk := source.read(COPY_CHUNK_BYTES):
                    stream.write(chunk)

        publish(self.input_dir, name, copy)
        self.progress(f"queued {self.input_dir / name} ({body.size} bytes)")
        return name

    def wait(self, name: str, *, timeout: float) -> Reply:
        start = self.clock()
        delay = FIRST_POLL_SECONDS / 4
        answer, failure = self.output_dir / f"{name}{OUTPUT_SUFFIX}", self.output_dir / f"{name}{ERROR_SUFFIX}"
        while True:
            if answer.exists():
                body = _read_bounded(answer)
                return Reply(body, reply_content_type(body, None))
            if failure.exists():
                text = _read_bounded(failure)[:4000].decode(errors="replace").strip()
                raise EndpointError(f"local async request {name}", f"the request failed ({failure}): {text}")
            elapsed = self.clock() - start
            if elapsed >= timeout:
                raise EndpointUnreachableError(
                    f"no answer in {self.output_dir} after {timeout:.0f} s (--wait-timeout); is `python -m "
                    f"endpoint_client local-async --input-dir {self.input_dir} --output-dir {self.output_dir} --url "
                    "...` running? The answer will be " + str(answer)
                )
            self.sleep(min(delay, timeout - elapsed))
            delay = min(delay * POLL_GROWTH, MAX_POLL_SECONDS)


def _read_bounded(path: Path) -> bytes:
    with path.open("rb") as stream:
        data = stream.read(MAX_ASYNC_PAYLOAD_BYTES + 1)
    if len(data) > MAX_ASYNC_PAYLOAD_BYTES:
        raise EndpointClientError(f"{path}: over {MAX_ASYNC_PAYLOAD_BYTES} bytes; not read")
    return data
