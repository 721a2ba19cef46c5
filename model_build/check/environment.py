"""Python-backend execution environments (`parameters: EXECUTION_ENV_PATH`), judged as the backend loads them.

triton-inference-server/python_backend:
- `src/python_be.cc` (ModelState): the first `$$TRITON_MODEL_DIRECTORY` in the value is replaced by
  the model's folder;
- `src/pb_env.cc` (EnvironmentManager::ExtractIfNotExtracted): `realpath` of the result ("Failed to
  get the canonical path for <path>."); a folder is used as it is; anything else is unpacked as a
  tar archive with libarchive's gzip filter (so .tar.gz or plain .tar) and the flags
  ARCHIVE_EXTRACT_SECURE_NODOTDOT, _SECURE_NOABSOLUTEPATHS and _SECURE_SYMLINKS: entries with `..`,
  absolute paths, or paths through a symlink in the archive fail the load;
- `src/stub_launcher.cc` (GetPythonEnvironment): the environment must hold `bin/activate` ("Path
  <env>/bin/activate does not exist. The Python environment should contain an 'activate' script.").

A `$$TRITON_MODEL_DIRECTORY/python_env.tar.gz` that is absent from a folder holding `requirements.txt` is
the one `model_build package --environment-python PY` packs into the package (the source folder never holds
it): until then the requirements file is judged instead, by the packer's rule (locked, numpy listed).

Our own rules on top, because the model folder is what ships: the path stays inside the model folder
(`package` ships nothing else), and a symlink in a packed environment must stay inside it (an
absolute target names a file of the machine that packed it, which the serving container lacks).
Archives are read in bounded memory (model_build.check.bounded_tar): one that exceeds a bound is
reported, not read.
"""

from __future__ import annotations

import os
import posixpath
import stat
import tarfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from model_build.check.bounded_tar import ArchiveLimitError, archive_members
from model_build.check.problems import Problem
from model_build.check.schema import PYTHON_BACKEND, ModelConfig
from model_build.config_yaml import clip
from model_build.errors import ModelBuildError
from model_build.requirements_lock import read_locked_requirements
from serving_facts.settings import PACKED_ENVIRONMENT_NAME, REQUIREMENTS_NAME

RULE = "execution-env"
FIELD = "parameters.EXECUTION_ENV_PATH"
MODEL_DIRECTORY_VARIABLE = "$$TRITON_MODEL_DIRECTORY"
ACTIVATE = "bin/activate"
# One report per archive is enough to act on; a broken 2 GB environment could otherwise print thousands.
_MAX_MEMBER_PROBLEMS = 5
# conda-pack environments hold a few thousand symbolic links of short names.
_MAX_LINK_NAME_BYTES = 16 << 20
# How much an environment may unpack to. The python backend unpacks it on the serving instance's disk
# (src/pb_env.cc ExtractTarFile) at every model load; the largest real environments (PyTorch with its CUDA
# libraries) unpack to 6-10 GiB. 16 GiB leaves room for those and refuses an archive that would fill the disk.
MAX_UNPACKED_BYTES = 16 << 30
# ...and how much more than its own size: environments are mostly compiled code and compress 2-5x; a ratio
# over 50 is a bomb (a 9 MB archive of zeros unpacking to 2 GiB is 230). Archives unpacking to less than
# RATIO_FLOOR_BYTES are not judged by ratio (a small environment of text files compresses well and harms nobody).
MAX_UNPACK_RATIO = 50
RATIO_FLOOR_BYTES = 256 << 20
# setuid / setgid files in an environment would run with another user's rights wherever they are unpacked.
_PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID


def environment_folder(config: ModelConfig) -> str | None:
    """The top folder of the model that holds an unpacked environment (not a version folder), if any."""
    if config.backend != PYTHON_BACKEND or "EXECUTION_ENV_PATH" not in config.parameters:
        return None
    value = config.parameters["EXECUTION_ENV_PATH"].string_value
    if not value.startswith(MODEL_DIRECTORY_VARIABLE):
        return None
    parts = PurePosixPath(posixpath.normpath(value[len(MODEL_DIRECTORY_VARIABLE) :].lstrip("/") or ".")).parts
    return parts[0] if parts and parts[0] not in (".", "..") else None


def environment_problems(folder: Path, config: ModelConfig, packed: Path | None = None) -> list[Problem]:
    """Every reason the python backend would fail to use this model's EXECUTION_ENV_PATH.

    `packed`: an environment `package` packed for this model (model_build.python_env) that will lie at
    `$$TRITON_MODEL_DIRECTORY/python_env.tar.gz` in the package; it is judged in place of the folder's file."""
    if config.backend != PYTHON_BACKEND or "EXECUTION_ENV_PATH" not in config.parameters:
        return []
    value = config.parameters["EXECUTION_ENV_PATH"].string_value
    if packed is not None and value == f"{MODEL_DIRECTORY_VARIABLE}/{PACKED_ENVIRONMENT_NAME}":
        messages = _archive_messages(packed, PACKED_ENVIRONMENT_NAME)
    else:
        messages = _messages(folder, value)
    return [Problem(config.name, FIELD, message, RULE) for message in messages]


def _requirements_messages(folder: Path) -> list[str]:
    """A python_env.tar.gz still to be packed from the folder's requirements.txt: that file must be locked
    (model_build.requirements_lock, the packer's own rule)."""
    try:
        read_locked_requirements(folder / REQUIREMENTS_NAME, shown=f"{folder.name}/{REQUIREMENTS_NAME}")
    except ModelBuildError as error:
        return [f"{PACKED_ENVIRONMENT_NAME} is packed from {REQUIREMENTS_NAME}, which is not locked: {error}"]
    return []


def _messages(folder: Path, value: str) -> list[str]:
    if MODEL_DIRECTORY_VARIABLE not in value:
        if value.startswith("/"):
            # Only the model folder is packaged: an absolute path names a file of whatever host serves the model
            # (the local endpoint ran an activate script from outside the archive; SageMaker's image has none there).
            return [
                f"{value!r} is an absolute path, outside the packaged model folder: the python backend would run "
                f"whatever environment that host has there; write {MODEL_DIRECTORY_VARIABLE}/<path in the model "
                "folder>"
            ]
        return [
            f"{value!r} is relative without {MODEL_DIRECTORY_VARIABLE}: the python backend resolves it against "
            f"tritonserver's working directory; write {MODEL_DIRECTORY_VARIABLE}/<path in the model folder>"
        ]
    if not value.startswith(MODEL_DIRECTORY_VARIABLE):
        return [f"{value!r}: put {MODEL_DIRECTORY_VARIABLE} at the start; the model folder is the only place shipped"]
    relative = value[len(MODEL_DIRECTORY_VARIABLE) :].lstrip("/")
    normal = posixpath.normpath(relative) if relative else "."
    if normal == ".." or normal.startswith("../") or MODEL_DIRECTORY_VARIABLE in relative:
        return [
            f"{value!r} leaves the model folder {folder.name}/: only the model folder is packaged, so the "
            "environment would be missing on the server; move it into the model folder"
        ]
    path = folder / normal
    current = folder
    for part in PurePosixPath(normal).parts:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            if normal == PACKED_ENVIRONMENT_NAME and (folder / REQUIREMENTS_NAME).is_file():
                # Not packed yet: `model_build package --environment-python PY` packs it from this file into the
                # package (never into the source folder) and then judges the archive; here the file is judged.
                return _requirements_messages(folder)
            return [
                f"execution environment {normal} is not in the model folder {folder.name}/ ({value}): the python "
                f'backend fails with "Failed to get the canonical path for {path}."'
            ]
        except OSError as error:
            return [f"execution environment {normal} cannot be read ({error.strerror or error})"]
        if stat.S_ISLNK(info.st_mode):
            return [f"execution environment path {normal} goes through a symbolic link ({current.name}); not packaged"]
    if stat.S_ISDIR(info.st_mode):
        if not (path / ACTIVATE).is_file():
            return [
                f"Path {path}/{ACTIVATE} does not exist. The Python environment should contain an 'activate' "
                "script. (an unpacked environment folder needs bin/activate)"
            ]
        return []
    return _archive_messages(path, normal)


def archive_problems(path: Path, shown: str) -> list[str]:
    """Every reason the python backend would fail on (or should never be given) the environment archive at `path`:
    what `model_build check` says about an EXECUTION_ENV_PATH archive, also run at synth on a stage config's
    `environment.archive` (model_build.preflight). `shown` names it in the messages."""
    return _archive_messages(path, shown)


def _archive_messages(path: Path, shown: str) -> list[str]:
    """A packed environment: a tar, gzip-compressed or not (the gzip filter the backend enables)."""
    try:
        compressed = os.stat(path).st_size
        messages, hard_links = _member_messages(archive_members(path), shown, compressed)
        if hard_links:  # a second pass, only for archives with hard links: is each one's target stored before it?
            messages += _hard_link_target_messages(archive_members(path), hard_links, shown)
        return messages
    except ArchiveLimitError as error:
        return [
            f"execution environment {shown} ({path}) was not read: {error}; a conda-pack archive never comes "
            "near these limits, so repack the environment with conda-pack"
        ]
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        return [
            f"execution environment {shown} is not a tar.gz archive ({error}): the python backend unpacks "
            "anything that is not a folder with libarchive and fails; pack it with conda-pack (or give a folder)"
        ]


def _member_messages(
    members: Iterable[tarfile.TarInfo], shown: str, compressed: int
) -> tuple[list[str], dict[str, list[tuple[int, str]]]]:
    """(messages, hard links to look up: target -> [(entry index, link name)]). Reads to the end even after the
    first problems: a truncated archive is the one thing to report. Regular files are not remembered (an
    environment holds tens of thousands); the hard links are, bounded, for the second pass."""
    found = []
    links: set[PurePosixPath] = set()
    hard_links: dict[str, list[tuple[int, str]]] = {}
    link_bytes = unpacked = 0
    has_activate = False
    for index, member in enumerate(members):
        name = member.name
        problem = None
        pure = PurePosixPath(name)
        normal = _normal(name)
        if name.startswith("/"):
            problem = f"entry {_shown(name)} has an absolute path (refused by ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS)"
        elif ".." in pure.parts:
            problem = f"entry {_shown(name)} contains '..' (refused by ARCHIVE_EXTRACT_SECURE_NODOTDOT)"
        elif any(parent in links for parent in normal.parents):
            problem = f"entry {_shown(name)} lies under a symbolic link of the archive"
            problem += " (ARCHIVE_EXTRACT_SECURE_SYMLINKS)"
        elif member.issym():
            target = member.linkname
            resolved = posixpath.normpath(posixpath.join(str(normal.parent), target))
            if target.startswith("/"):
                problem = (
                    f"symbolic link {_shown(name)} -> {_shown(target)} is absolute: it names a file of the machine "
                    "that packed the environment, not of the serving container; repack it with relative links "
                    "(conda-pack does)"
                )
            elif resolved == ".." or resolved.startswith("../"):
                problem = f"symbolic link {_shown(name)} -> {_shown(target)} points outside the environment"
            # Links are remembered to judge later entries: bound what that keeps in memory.
            link_bytes += len(name) + len(member.linkname)
            if link_bytes > _MAX_LINK_NAME_BYTES:
                raise ArchiveLimitError(f"symbolic link names add up to more than {_MAX_LINK_NAME_BYTES} bytes")
            links.add(normal)
        elif member.islnk():
            problem = _hard_link_problem(member, normal, links)
            if problem is None:
                link_bytes += len(name) + len(member.linkname)
                if link_bytes > _MAX_LINK_NAME_BYTES:
                    raise ArchiveLimitError(f"link names add up to more than {_MAX_LINK_NAME_BYTES} bytes")
                hard_links.setdefault(str(_normal(member.linkname)), []).append((index, name))
        elif member.ischr() or member.isblk() or member.isfifo():
            kind = "character device" if member.ischr() else "block device" if member.isblk() else "FIFO"
            problem = (
                f"entry {_shown(name)} is a {kind}: an environment holds files, folders and links only; unpacked on "
                "the serving instance a device node gives access to its hardware. Repack without it"
            )
        elif not (member.isfile() or member.isdir()):
            problem = f"entry {_shown(name)} has tar type {member.type!r}, which is not a file, folder or link"
        if problem is None and member.mode & _PRIVILEGE_BITS and not member.isdir():
            bits = " and ".join(
                b for b, flag in (("setuid", stat.S_ISUID), ("setgid", stat.S_ISGID)) if member.mode & flag
            )
            problem = (
                f"entry {_shown(name)} is {bits} (mode {member.mode:o}): it would run with its owner's rights "
                "wherever it is unpacked; repack without those bits"
            )
        if member.isfile() and problem is None and normal == PurePosixPath(ACTIVATE):
            has_activate = True
        if member.isfile():
            unpacked += member.size
            if unpacked > MAX_UNPACKED_BYTES:
                raise ArchiveLimitError(_size_message(compressed))
        if problem and len(found) <= _MAX_MEMBER_PROBLEMS:
            found.append(problem if len(found) < _MAX_MEMBER_PROBLEMS else "(further entries not shown)")
    if unpacked > RATIO_FLOOR_BYTES and unpacked > MAX_UNPACK_RATIO * max(compressed, 1):
        found.append(
            f"unpacks to {unpacked} bytes, {unpacked // max(compressed, 1)} times its own {compressed} bytes; an "
            f"environment compresses at most {MAX_UNPACK_RATIO}x (a higher ratio is an archive bomb). Repack it"
        )
    messages = [f"execution environment {shown}: {problem}" for problem in found]
    if not found and not has_activate:
        messages.append(
            f'execution environment {shown} has no {ACTIVATE}: the python backend fails with "Path <env>/{ACTIVATE} '
            "does not exist. The Python environment should contain an 'activate' script.\""
        )
    return messages, hard_links


def _hard_link_target_messages(
    members: Iterable[tarfile.TarInfo], hard_links: dict[str, list[tuple[int, str]]], shown: str
) -> list[str]:
    """The second pass: each hard link's target must be a regular file (not a folder, link or device) stored
    before the link; memory is the hard links' own, however many files the archive holds."""
    first_file: dict[str, int] = {}
    for index, member in enumerate(members):
        if member.isfile() and not member.mode & _PRIVILEGE_BITS:
            normal = str(_normal(member.name))
            if normal in hard_links and normal not in first_file:
                first_file[normal] = index
    found = [
        f"execution environment {shown}: hard link {_shown(name)} -> {_shown(target)} does not name a regular file "
        "stored before it in the archive; store the file itself"
        for target, uses in hard_links.items()
        for index, name in uses
        if first_file.get(target, index) >= index
    ]
    return found[:_MAX_MEMBER_PROBLEMS]


def _normal(name: str) -> PurePosixPath:
    return PurePosixPath(posixpath.normpath(name)) if name not in ("", ".") else PurePosixPath(".")


def _hard_link_problem(member: tarfile.TarInfo, normal: PurePosixPath, links: set[PurePosixPath]) -> str | None:
    """A tar hard link names an earlier member; libarchive creates it with link(2) on the extracted path. It may
    only name a regular file stored earlier in this archive (checked in the second pass), reached without a
    symbolic link of the archive: anything else links a file of the serving instance (`/etc/passwd`,
    `../../etc/shadow`, or through a link) into the environment, or fails the extraction."""
    target = member.linkname
    shown = f"hard link {_shown(member.name)} -> {_shown(target)}"
    if target.startswith("/"):
        return f"{shown} is absolute: it names a file of the serving instance (ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS)"
    if ".." in PurePosixPath(target).parts:
        return f"{shown} contains '..' (ARCHIVE_EXTRACT_SECURE_NODOTDOT)"
    resolved = _normal(target)
    if resolved in links or any(parent in links for parent in resolved.parents):
        return f"{shown} goes through a symbolic link of the archive (ARCHIVE_EXTRACT_SECURE_SYMLINKS)"
    if normal == resolved:
        return f"{shown} names itself"
    return None


def _size_message(compressed: int) -> str:
    return (
        f"its files add up to more than {MAX_UNPACKED_BYTES} bytes ({MAX_UNPACKED_BYTES >> 30} GiB) unpacked (the "
        f"archive is {compressed} bytes); the python backend unpacks it on the serving instance's disk at every load"
    )


def _shown(name: str) -> str:
    return repr(clip(name, 200))
