"""Local model sources stay inside the project: `source.path` and a local `tensorrt.calibration_cache`.

A source path becomes a CDK asset that is uploaded and built into an artifact, and a source folder
is hashed file by file at synth. So `path: /etc/passwd` would ship that file, `path: /root` walked a
home folder for minutes, and a missing path ended in a FileNotFoundError traceback. Paths are
relative to the project root (README, "Configuration"); after following every symlink they must
still lie inside it, and a folder may hold only a bounded number of entries, none linking outside.

One rule for both readers of a config: the CDK app's config loader (stage_config.source_paths)
and `python -m model_build key`, which hashes the same sources in the build.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from model_build.config_yaml import clip

if TYPE_CHECKING:
    from serving_facts.settings import ModelSettings

# A Python-backend model folder holds a handful of files; an ONNX model is one file.
MAX_SOURCE_ENTRIES = 5_000
# Problems listed per folder: enough to act on, not a wall of text.
MAX_TREE_PROBLEMS = 5


def source_path_problems(models: list[ModelSettings], root: Path) -> list[tuple[str, str]]:
    """(field path, message) for every local source that is missing, outside `root` or unbounded."""
    return [
        (f"models[{index}].{field}", message)
        for index, model in enumerate(models)
        for field, message in model_source_problems(model, root)
    ]


def model_source_problems(model: ModelSettings, root: Path) -> list[tuple[str, str]]:
    """(field within the model, message) for one model's local source and calibration cache."""
    root = root.resolve()
    problems: list[tuple[str, str]] = []
    if model.source is None:  # an ensemble: its steps name other models (stage_config.app)
        return problems
    if model.source.path is not None:
        want = "folder" if model.platform == "python" else "file"
        problem = _path_problem(model.source.path, root, want)
        if problem:
            problems.append(("source.path", problem))
        elif want == "folder":
            problems += _tree_problems(model, root)
    if model.environment is not None and not problems:
        problems += _environment_problems(model, root)
    cache = model.tensorrt.calibration_cache
    if cache is not None and not cache.startswith("s3://"):
        problem = _path_problem(cache, root, "file")
        if problem:
            problems.append(("tensorrt.calibration_cache", problem))
    return problems


def _environment_problems(model: ModelSettings, root: Path) -> list[tuple[str, str]]:
    """The environment file exists inside the project (the settings keep it inside the source folder; whether
    a requirements file is locked is the build's rule, checked by model_build.preflight)."""
    environment = model.environment
    field = "environment.requirements" if environment.requirements is not None else "environment.archive"
    problem = _path_problem(environment.path, root, "file")
    return [(field, problem)] if problem else []


def _path_problem(value: str, root: Path, want: str) -> str | None:
    shown = repr(clip(value, 200))
    try:
        resolved = (root / value).resolve()  # an absolute `value` replaces root; symlinks are followed
        inside = resolved.is_relative_to(root)
        exists = resolved.exists()
    except (OSError, RuntimeError, ValueError) as error:  # symlink loop, name too long, NUL byte
        return f"{shown} cannot be resolved ({clip(str(error), 120)}); give a path inside the project"
    if not inside:
        return (
            f"{shown} resolves to {clip(str(resolved), 200)}, outside the project root {root}; model sources "
            "must live inside the project (paths are relative to its root, symlinks are followed)"
        )
    if not exists:
        return f"{shown} does not exist (paths are relative to the project root {root})"
    if resolved == root:
        return f"{shown} is the project root itself; name the model's {want}"
    if want == "file":
        return None if resolved.is_file() else f"{shown} is not a file; this platform needs one model file"
    if not resolved.is_dir():
        return f"{shown} is not a folder; platform 'python' needs the model's folder (holding model.py)"
    return _folder_problem(shown, resolved, root)


def _tree_problems(model: ModelSettings, root: Path) -> list[tuple[str, str]]:
    """A python model's folder ships as its model folder: `model_build check`'s and `package`'s rules for what a
    model folder may hold (model_build.model_tree: file names, no symbolic links, no FIFOs, devices or sockets,
    readable files, valid ONNX files) apply at config load, before the folder becomes a CDK asset (which would
    drop a FIFO and copy what a link points to). One message for the field, listing the first problems."""
    from model_build.model_tree import printable, scan_source_folder

    path = model.source.path.rstrip("/")
    found = scan_source_folder((root / path).resolve(), model.name)
    if not found:
        return []
    listed = []
    for problem in found[:MAX_TREE_PROBLEMS]:
        inside = problem.relative.partition("/")[2]
        where = repr(clip(printable(f"{path}/{inside}" if inside else path), 300))
        listed.append(f"{where}: {problem.message} [{problem.rule}]")
    more = f"; and {len(found) - MAX_TREE_PROBLEMS} more" if len(found) > MAX_TREE_PROBLEMS else ""
    return [
        (
            "source.path",
            f"{clip(path, 200)!r} holds what a model folder may not (the rules of model_build check and package): "
            + "; ".join(listed)
            + more,
        )
    ]


def _folder_problem(shown: str, folder: Path, root: Path) -> str | None:
    """Walk without following links, at most MAX_SOURCE_ENTRIES entries; no link may leave the root, and no entry
    is a FIFO, device or socket (hashing the folder at synth would block on a FIFO)."""
    seen = 0
    for current, folders, files in os.walk(folder, followlinks=False):
        for name in (*folders, *files):
            seen += 1
            if seen > MAX_SOURCE_ENTRIES:
                return f"{shown} holds more than {MAX_SOURCE_ENTRIES} files and folders; name the model's own folder"
            entry = Path(current, name)
            try:
                mode = entry.lstat().st_mode
            except OSError as error:
                return f"{shown} holds {clip(str(entry), 200)}, which cannot be read ({error.strerror or error})"
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                return (
                    f"{shown} holds {clip(str(entry), 200)}, which is not a regular file or folder (a FIFO, device or "
                    "socket); remove it"
                )
            if stat.S_ISLNK(mode):
                try:
                    target = entry.resolve()
                except (OSError, RuntimeError):
                    return f"{shown} holds a symlink that cannot be resolved: {clip(str(entry), 200)}"
                if not target.is_relative_to(root):
                    return (
                        f"{shown} holds a symlink to {clip(str(target), 200)}, outside the project root {root}; "
                        "model sources must live inside the project"
                    )
    return None
