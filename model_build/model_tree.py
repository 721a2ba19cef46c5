"""What may be shipped in a model folder: one walk, used by `check` (as problems) and `package` (as a refusal).

Both commands judge a model folder by these same rules, so a repository that `check` passes is one
`package` packs:

- names: letters, digits and `. _ + = @ , -` (names become S3 keys in the uncompressed layout and
  paths in a shell and in Triton; non-UTF-8 and control characters are refused with the rest);
- no symbolic links (a link breaks in the archive or points at bytes outside the repository), no
  devices, FIFOs or sockets; every file and folder readable; at most MAX_DEPTH folders deep;
- every `*.onnx` file is a model onnx.checker accepts, and every external data file it names lies
  inside its folder (model_build.onnx_external);
- no hard link to a file outside the model folder: a file with more links (st_nlink) than the folder holds
  shares its bytes with a path outside what is checked and packed, which can change them between `check` and
  the archive (or expose a file the user never meant to ship); `cp` it instead.

`__pycache__` folders are skipped: bytecode embeds source mtimes and is never part of a
reproducible artifact.

Reading what was scanned (`open_scanned`) re-checks that the file opened is the one scanned: a file
swapped for a symlink (or a folder on its path swapped for one) between the scan and the read would
otherwise put whatever the link names (say /etc/passwd) into the archive.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from model_build.errors import InvalidModelError
from serving_facts.settings import MODEL_NAME_PATTERN

SAFE_NAME = re.compile(r"^[A-Za-z0-9._+=@,-]+$")
MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
SKIPPED_DIRS = frozenset({"__pycache__"})
# Deeper trees are refused rather than walked: a real model folder is a few levels deep.
MAX_DEPTH = 32
# S3 object keys are at most 1024 bytes (S3 "Naming objects"); in the uncompressed layout each file is
# a key under `models/<name>/<sha256>/uncompressed/` (at most 158 bytes), so its path may use the rest.
MAX_PATH_BYTES = 1024 - len("models/") - 63 - len("/") - 64 - len("/uncompressed/")
# Open without following a final symlink, and without blocking on a FIFO swapped in after the scan.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Entry:
    """One archive member: `arcname` relative to the archive root, `source` on disk, and the
    identity (device, inode) it had when scanned."""

    arcname: str
    source: Path
    is_dir: bool
    mode: int
    size: int
    device: int = 0
    inode: int = 0


@dataclass(frozen=True)
class TreeProblem:
    """`relative`: the path below the repository (posix, printable); `rule`: check's rule id."""

    relative: str
    message: str
    rule: str


def printable(text: str) -> str:
    """`text` safe to print: undecodable bytes (surrogate escapes) and control characters escaped."""
    encoded = os.fsencode(text).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in encoded)


def model_name_problem(model: str) -> str | None:
    if MODEL_NAME.match(model):
        return None
    return (
        f"model name '{printable(model)}' is not allowed; use letters, digits, '_' and '-' "
        f"(pattern {MODEL_NAME_PATTERN}): Triton, S3 keys and multi-model TargetModel all use it"
    )


def _os_problem(relative: str, error: OSError) -> TreeProblem:
    reason = error.strerror or type(error).__name__
    return TreeProblem(relative, f"cannot be read ({reason}); make it readable or remove it", "unreadable")


def scan_model_tree(
    repository: Path, model: str, *, check_models: bool = True
) -> tuple[list[Entry], list[TreeProblem]]:
    """Entries of `repository/model` in archive order (config.pbtxt first, then sorted by name) and
    every problem found; `check_models` also validates each `*.onnx` file (slower: onnx.checker)."""
    problem = model_name_problem(model)
    problems = [TreeProblem(printable(model), problem, "file-name")] if problem else []
    entries, found = _scan(Path(repository) / model, model, check_models=check_models)
    return entries, problems + found


def scan_source_folder(folder: Path, model: str, *, check_models: bool = True) -> list[TreeProblem]:
    """The same rules for a folder that ships as model `model`'s folder whatever its own name (a python model's
    `source.path`): every problem, each `relative` as `<model>/<path in the folder>`."""
    return _scan(Path(folder), model, check_models=check_models)[1]


def _scan(folder: Path, model: str, *, check_models: bool) -> tuple[list[Entry], list[TreeProblem]]:
    entries = [Entry(model, folder, True, 0o755, 0)]
    problems: list[TreeProblem] = []
    onnx_files: list[tuple[str, Path]] = []
    links: dict[tuple[int, int], int] = {}
    _walk(folder, model, 1, entries, problems, onnx_files, first="config.pbtxt", links=links)
    problems += _hard_link_problems(entries, links)
    if check_models:
        from model_build.onnx_inspect import onnx_file_problem  # deferred: onnx is a heavy import

        for relative, path in onnx_files:
            try:
                message = onnx_file_problem(path)
            except OSError as error:
                problems.append(_os_problem(relative, error))
                continue
            if message:
                problems.append(TreeProblem(relative, message, "onnx-file"))
    return entries, problems


def _walk(
    folder: Path,
    arcname: str,
    depth: int,
    entries: list[Entry],
    problems: list[TreeProblem],
    onnx_files: list[tuple[str, Path]],
    first: str | None = None,
    links: dict[tuple[int, int], int] | None = None,
) -> None:
    """`links`: (device, inode) -> st_nlink of each regular file with more than one link."""
    links = {} if links is None else links
    relative_folder = printable(arcname)
    if depth > MAX_DEPTH:
        problems.append(
            TreeProblem(
                relative_folder, f"folders nest more than {MAX_DEPTH} deep; flatten the model folder", "too-deep"
            )
        )
        return
    try:
        with os.scandir(folder) as listing:
            children = sorted(listing, key=lambda child: (child.name != first, child.name))
    except OSError as error:
        problems.append(_os_problem(relative_folder + "/", error))
        return
    for child in children:
        path = Path(child.path)
        name = child.name
        child_arcname = f"{arcname}/{name}"
        relative = printable(child_arcname)
        try:
            info = child.stat(follow_symlinks=False)
        except OSError as error:
            problems.append(_os_problem(relative, error))
            continue
        if not SAFE_NAME.match(name):
            problems.append(
                TreeProblem(
                    relative,
                    f"file name '{printable(name)}' is not allowed; use letters, digits and . _ + = @ , - "
                    "(names become S3 keys and Triton paths)",
                    "file-name",
                )
            )
            continue
        if len(os.fsencode(child_arcname)) > MAX_PATH_BYTES:
            problems.append(
                TreeProblem(
                    relative,
                    f"path is {len(os.fsencode(child_arcname))} bytes long; at most {MAX_PATH_BYTES} fit in an S3 key "
                    "(1024 bytes) under the artifact prefix. Use shorter names",
                    "file-name",
                )
            )
            continue
        if stat.S_ISLNK(info.st_mode):
            try:
                target = printable(os.readlink(path))
            except OSError:
                target = "?"
            problems.append(
                TreeProblem(
                    relative,
                    f"is a symbolic link (to {target}); the repository is packed into a tar.gz for S3: replace "
                    "the link with the file or folder itself",
                    "no-symlinks",
                )
            )
        elif stat.S_ISDIR(info.st_mode):
            if name in SKIPPED_DIRS:
                continue
            entries.append(Entry(child_arcname, path, True, 0o755, 0, info.st_dev, info.st_ino))
            _walk(path, child_arcname, depth + 1, entries, problems, onnx_files, links=links)
        elif stat.S_ISREG(info.st_mode):
            try:
                os.close(os.open(path, _OPEN_FLAGS))
            except OSError as error:
                problems.append(_os_problem(relative, error))
                continue
            mode = 0o755 if info.st_mode & 0o111 else 0o644
            entries.append(Entry(child_arcname, path, False, mode, info.st_size, info.st_dev, info.st_ino))
            if info.st_nlink > 1:
                links[(info.st_dev, info.st_ino)] = info.st_nlink
            if name.lower().endswith(".onnx") and relative == child_arcname:
                # (A path that needed escaping is refused by its name already; onnx cannot open it.)
                onnx_files.append((relative, path))
        else:
            problems.append(
                TreeProblem(
                    relative, "is not a regular file or folder (device, FIFO or socket); remove it", "file-type"
                )
            )


def _hard_link_problems(entries: list[Entry], links: dict[tuple[int, int], int]) -> list[TreeProblem]:
    """Files whose hard links are not all inside the scanned folder (see the module doc)."""
    if not links:
        return []
    inside: dict[tuple[int, int], int] = {}
    for entry in entries:
        key = (entry.device, entry.inode)
        if key in links:
            inside[key] = inside.get(key, 0) + 1
    return [
        TreeProblem(
            printable(entry.arcname),
            f"is a hard link shared with {links[key] - inside[key]} path(s) outside the model folder (it has "
            f"{links[key]} links, {inside[key]} here); what is checked could change before it is packed: replace it "
            "with a copy (cp, not ln)",
            "hard-link",
        )
        for entry in entries
        if (key := (entry.device, entry.inode)) in links and inside[key] < links[key]
    ]


def open_scanned(entry: Entry) -> int:
    """A read-only descriptor of `entry.source`, refused unless it is still the regular file that was
    scanned (same device and inode, no symlink as the last component). The caller closes it."""
    try:
        descriptor = os.open(entry.source, _OPEN_FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise InvalidModelError(
                f"{printable(str(entry.source))}: became a symbolic link after it was scanned; nothing was "
                "packaged from it. Package a repository nobody is changing"
            ) from None
        raise InvalidModelError(
            f"{printable(str(entry.source))}: cannot be read ({error.strerror or error}); make it readable"
        ) from None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode) or (entry.device, entry.inode) != (info.st_dev, info.st_ino):
        os.close(descriptor)
        raise InvalidModelError(
            f"{printable(str(entry.source))}: is no longer the file that was scanned (replaced, or a folder on its "
            "path became a link); nothing was packaged from it. Package a repository nobody is changing"
        )
    if info.st_size != entry.size:
        os.close(descriptor)
        raise InvalidModelError(f"{printable(str(entry.source))}: changed size while it was being packaged; try again")
    # Back to blocking reads now that it is known to be a regular file.
    os.set_blocking(descriptor, True)
    return descriptor


# Triton config.pbtxt files are a few KB (every config of Triton's own examples and model-config test suite,
# ../shared/triton-configs, is under 4 KB); an ensemble at the stage settings' own limits (64 steps mapping 2 x 256
# tensors, 8-character names) generates 2.3 MB, which `check` reads in about 2 s. Triton reads the file whole
# with no limit of its own; 4 MiB keeps a hostile or runaway file from costing minutes and gigabytes in the
# protobuf text parser. (A generated config over it, possible only with long names at every limit, is refused
# at synth by the same check that reads it.)
MAX_CONFIG_BYTES = 4 << 20


def read_regular_file(path: Path, *, max_bytes: int, shown: str | None = None) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `max_bytes` bytes.

    Opened with O_NONBLOCK and O_NOFOLLOW, then judged by fstat on the descriptor: a FIFO never blocks the
    reader, a device is never read, a symbolic link as the last component is refused (it would read bytes
    from outside the folder being judged), and a file growing while it is read is caught by the bounded read.
    FileNotFoundError passes through (callers tell a missing file apart); every other problem is an
    InvalidModelError naming the file (`shown`, default: the path)."""
    shown = shown or printable(str(path))
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise InvalidModelError(
                f"{shown}: is a symbolic link; give the file itself (a link can name bytes outside the model folder)"
            ) from None
        raise InvalidModelError(f"{shown}: cannot be read ({error.strerror or error})") from None
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):
            raise InvalidModelError(f"{shown}: is a folder; a file is expected here")
        if not stat.S_ISREG(info.st_mode):
            raise InvalidModelError(
                f"{shown}: is not a regular file (a FIFO, device or socket); replace it with the file itself"
            )
        if info.st_size > max_bytes:
            raise InvalidModelError(f"{shown}: is {info.st_size} bytes; at most {max_bytes} are read")
        os.set_blocking(descriptor, True)
        # The file's own size first (a read of max_bytes would allocate max_bytes), then small blocks should it grow.
        chunks, total, want = [], 0, info.st_size + 1
        try:
            while total <= max_bytes:
                block = file.read(min(want, max_bytes + 1 - total))
                if not block:
                    break
                chunks.append(block)
                total += len(block)
                want = 1 << 16
        except OSError as error:
            raise InvalidModelError(f"{shown}: cannot be read ({error.strerror or error})") from None
        data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InvalidModelError(f"{shown}: grew past {max_bytes} bytes while it was read; at most {max_bytes} are read")
    return data


def read_config_text(path: Path, shown: str | None = None) -> str:
    """A config.pbtxt as text: read_regular_file with MAX_CONFIG_BYTES, decoded as UTF-8 (as Triton reads it)."""
    shown = shown or printable(str(path))
    data = read_regular_file(path, max_bytes=MAX_CONFIG_BYTES, shown=shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidModelError(f"{shown}: is not UTF-8 text ({error.reason} at byte {error.start})") from None


def writable_model_folder(folder: Path) -> None:
    """`model_build config` writes into REPO/<model>/ only when that is a real folder of the repository (or absent):
    a symbolic link would carry the write outside the repository, as `package` refuses it too."""
    if folder.is_symlink():
        raise InvalidModelError(
            f"{printable(str(folder))}: is a symbolic link (to {printable(os.readlink(folder))}); nothing was written. "
            "A model folder must be a real folder of the repository: replace the link with the folder"
        )
    if folder.exists() and not folder.is_dir():
        raise InvalidModelError(f"{printable(str(folder))}: is not a folder; nothing was written. Remove it")


def refuse(problems: list[TreeProblem], repository: Path) -> None:
    """Raise one InvalidModelError listing every problem (package's form of check's report)."""
    if not problems:
        return
    lines = "\n".join(f"  {printable(str(repository))}/{p.relative}: {p.message} [{p.rule}]" for p in problems)
    count = len(problems)
    raise InvalidModelError(
        f"{printable(str(repository))}: {count} problem{'s' if count != 1 else ''} in the model folders; "
        f"nothing was packaged (python -m model_build check shows the same):\n{lines}"
    )
