"""Repository layout: what SageMaker's Triton expects on disk before any config is read.

```
REPO/                      no config.pbtxt here: SageMaker's Triton start-up fails on one
  <model>/                 folder name == `name` in its config.pbtxt
    config.pbtxt
    1/                     numeric version folders only (Triton ignores others, and "01")
      model.plan           the file the platform expects (or default_model_filename)
```

No symbolic links anywhere: the repository is packed into a tar.gz for S3, and a link either breaks
there or points outside what is uploaded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from model_build.check.checked import CheckedModel, versions_to_load
from model_build.check.environment import environment_folder, environment_problems
from model_build.check.model_io import model_io_problems
from model_build.check.paths import warmup_file_problems
from model_build.check.problems import REPOSITORY, Problem
from model_build.check.rules import validate_model_config
from model_build.check.schema import (
    ONNX_BACKEND,
    ONNX_FILE,
    TENSORRT_BACKEND,
    autocomplete,
    expected_model_file,
    normalize,
    parse_config,
)
from model_build.check.target import Target
from model_build.errors import InvalidModelError
from model_build.model_tree import printable, read_config_text, scan_model_tree

CONFIG_FILE = "config.pbtxt"
MODEL_DIRECTORY_VARIABLE = "$$TRITON_MODEL_DIRECTORY"


def symlink_problems(repo: Path) -> list[Problem]:
    """Symbolic links at the top of `repo` (a linked model folder); inside model folders the shared
    model-tree rules report them (tree_problems)."""
    found = []
    for path in _listing(repo):
        if path.is_symlink():
            found.append(
                Problem(
                    REPOSITORY,
                    printable(path.name),
                    f"is a symbolic link (to {printable(os.readlink(path))}); the repository is packed into a tar.gz "
                    "for S3: replace the link with the file or folder itself",
                    "no-symlinks",
                )
            )
    return found


def tree_problems(folder: Path, *, check_models: bool) -> list[Problem]:
    """What `package` would refuse in this model folder: the same function decides both
    (model_build.model_tree: names, links, special and unreadable files, ONNX files and their data)."""
    _, found = scan_model_tree(folder.parent, folder.name, check_models=check_models)
    return [Problem(printable(folder.name), problem.relative, problem.message, problem.rule) for problem in found]


def root_problems(repo: Path) -> list[Problem]:
    found = []
    if (repo / CONFIG_FILE).exists():
        # ../shared/README.md: SageMaker's Triton start-up fails if a config.pbtxt sits at the root.
        found.append(
            Problem(
                REPOSITORY,
                CONFIG_FILE,
                f"{CONFIG_FILE} at the repository root: SageMaker's Triton refuses to start; move it into "
                "its model folder (REPO/<model>/config.pbtxt)",
                "root-config",
            )
        )
    return found


def _listing(repo: Path) -> list[Path]:
    try:
        return sorted(repo.iterdir())
    except OSError as error:
        raise InvalidModelError(
            f"{printable(str(repo))}: cannot list the model repository ({error.strerror or error}); check its "
            "permissions"
        ) from None


def model_folders(repo: Path) -> list[Path]:
    """Every folder at the top of the repository is a model to Triton (hidden ones too)."""
    return [path for path in _listing(repo) if path.is_dir() and not path.is_symlink()]


# Triton's version folder parse: core src/model_repository_manager/model_lifecycle.cc VersionsToLoad skips these
# folders, skips names with a leading '0', and reads every other name with std::stoll, catching only
# std::invalid_argument: stoll reads leading blanks, a sign and the leading digits of any name ("12abc" is version
# 12, "+3" is 3) and throws std::out_of_range, uncaught, past INT64_MAX.
_SKIPPED_BY_TRITON = (
    "warmup",
    "initial_state",
    "configs",
)  # kWarmupDataFolder, kInitialStateFolder, kModelConfigFolder
_INT64_MAX = (1 << 63) - 1
_STOLL_PREFIX = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")


def _version_folders(folder: Path, model: str, environment: str | None) -> tuple[dict[int, Path], list[Problem]]:
    """Numeric version folders; other folders are reported, except an unpacked Python environment."""
    versions: dict[int, Path] = {}
    found: list[Problem] = []
    for path in sorted(folder.iterdir()):
        if not path.is_dir() or path.is_symlink() or path.name == environment:
            continue
        name = path.name
        field = f"{printable(name)}/"
        if re.fullmatch(r"[0-9]+", name, flags=re.ASCII) is None:
            if name in _SKIPPED_BY_TRITON:
                continue
            prefix = _STOLL_PREFIX.match(name)
            if prefix is not None and not name.startswith("0"):
                message = (
                    f"folder '{printable(name)}' is read by Triton as version {int(prefix.group())} (std::stoll reads "
                    f"its leading digits); name version folders 1, 2, ... and nothing else"
                )
            else:
                message = (
                    f"folder '{printable(name)}' is not a numeric version folder: Triton ignores it "
                    '("fails to convert to integral number"); name version folders 1, 2, ... and keep other files '
                    "beside config.pbtxt"
                )
            found.append(Problem(model, field, message, "version-folder"))
        elif len(name) > 1 and name.startswith("0"):
            found.append(
                Problem(
                    model,
                    field,
                    f"version folder '{name}' has leading zeros: Triton ignores it; rename it {int(name)}",
                    "version-folder",
                )
            )
        elif int(name) > _INT64_MAX:
            found.append(
                Problem(
                    model,
                    field,
                    f"version folder '{name}' is over {_INT64_MAX}: Triton's std::stoll throws out_of_range on it and "
                    "the model never loads; name version folders 1, 2, ...",
                    "version-folder",
                )
            )
        else:
            versions[int(name)] = path
    return versions, found


def _first_subfolder(folder: Path) -> Path | None:
    """The folder Triton's backend auto-completion looks into: the first subfolder name in sorted order."""
    subfolders = sorted(path.name for path in folder.iterdir() if path.is_dir())
    return folder / subfolders[0] if subfolders else None


def _version_problems(model: CheckedModel, versions: dict[int, Path], *, configs_only: bool) -> list[Problem]:
    config = model.config
    name = config.name
    if not versions:
        model.versions = None if configs_only else set()
        if configs_only:
            return []
        return [
            Problem(
                name,
                "1/",
                f"at least one version must be available under the version policy of model '{name}': create the "
                f"version folder {model.name}/1/",
                "version-policy",
            )
        ]
    model.versions = versions_to_load(config, versions)
    found = []
    for version in config.version_policy.specific.versions:
        if version not in versions:
            found.append(
                Problem(
                    name,
                    "version_policy.specific.versions",
                    f"version {version} is specified for model '{name}', but the version directory is not present",
                    "version-policy",
                )
            )
    if not model.versions:
        found.append(
            Problem(
                name,
                "version_policy",
                f"at least one version must be available under the version policy of model '{name}'",
                "version-policy",
            )
        )
    return found


def _model_file_problems(
    folder: Path,
    config,
    versions: dict[int, Path],
    target: Target,
    packed_environment: Path | None = None,
    engine_from_onnx: bool = False,
) -> list[Problem]:
    found = []
    expected = expected_model_file(config, compute_capability=target.compute_capability)
    what = config.platform or config.backend
    hint = "set default_model_filename in config.pbtxt to use another file name"
    if engine_from_onnx and config.backend == TENSORRT_BACKEND:
        expected, what = ONNX_FILE, f"{what} (engine not built yet)"
        hint = "the ONNX file the engine is built from"
    for version, path in sorted(versions.items()):
        if expected and not (path / expected).exists():
            found.append(
                Problem(
                    config.name,
                    f"{version}/{expected}",
                    f"version folder {version}/ has no {expected}: {what} expects it ({hint})",
                    "model-file",
                )
            )
        elif expected:
            found += _folder_for_a_file(config, version, path / expected, expected)
    for index, io in enumerate(config.output):
        if io.label_filename and not (folder / io.label_filename).is_file():
            found.append(
                Problem(
                    config.name,
                    f"output[{index}].label_filename",
                    f"label file {io.label_filename} is not in the model folder {folder.name}/",
                    "model-file",
                )
            )
    return found + environment_problems(folder, config, packed_environment)


def _folder_for_a_file(config, version: int, path: Path, expected: str) -> list[Problem]:
    """A folder where the backend reads a file (review L3: an empty folder `1/model.onnx` passed check and was
    packaged). ONNX Runtime's backend (onnxruntime_backend src/onnxruntime.cc, LoadModel: "If the model path is
    a directory then the actual model is <dir>/model.onnx") takes a folder holding model.onnx; TensorRT's
    (tensorrt_backend src/loader.cc, LoadPlan: ReadTextFile(plan_path)) and an ONNX file an engine is built
    from need the file itself."""
    if not path.is_dir() or path.is_symlink():
        return []
    shown = f"{version}/{printable(expected)}"
    if config.backend == ONNX_BACKEND:
        if (path / ONNX_FILE).is_file():
            return []
        message = (
            f"{shown} is a folder without a model.onnx file: onnxruntime reads a folder model as "
            f"{shown}/model.onnx (put the ONNX file there, or make {shown} the file itself)"
        )
    elif config.backend == TENSORRT_BACKEND:
        message = f"{shown} is a folder: tensorrt reads the model from a file (the serialized engine or ONNX file)"
    else:
        return []
    return [Problem(config.name, shown, message, "model-file")]


def check_model_folder(
    folder: Path,
    *,
    configs_only: bool,
    target: Target,
    packed_environment: Path | None = None,
    engine_from_onnx: bool = False,
) -> CheckedModel:
    """Schema, Triton's rules and layout for one model folder (`packed_environment`: see environment.py).

    `engine_from_onnx`: a TensorRT model whose engine is not built yet (a stage config packaged for the local
    endpoint, `model_build package --config`): each version folder holds the ONNX file the engine is built
    from, `model.onnx`, instead of `model.plan`, and the config is checked against it as against the engine."""
    model = CheckedModel(folder.name, None)
    shown = printable(folder.name)
    # What package would refuse, whatever the config says (every file, its name and type).
    files = tree_problems(folder, check_models=not configs_only)
    try:
        os.listdir(folder)
    except OSError:
        model.problems += files  # the folder is reported unreadable; nothing else can be looked at
        return model
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        model.problems.append(
            Problem(
                shown,
                CONFIG_FILE,
                f"no {CONFIG_FILE} in model folder {shown}/: every folder at the top of the repository is "
                "loaded as a model; add its config or move the folder out",
                "layout-config",
            )
        )
        # The folder's own name is part of the layout-config problem: say it once.
        model.problems += [problem for problem in files if problem.field != shown]
        return model
    try:
        # Bounded (model_tree.MAX_CONFIG_BYTES) and a regular file only: never a multi-GB parse or a FIFO's wait.
        text = read_config_text(config_path, CONFIG_FILE)
    except (OSError, InvalidModelError) as error:
        message = str(error).removeprefix(f"{CONFIG_FILE}: ")
        if isinstance(error, OSError):
            message = f"cannot be read ({error.strerror or error})"
        rule = "schema" if "UTF-8" in message or "at most" in message else "unreadable"
        # The tree rules name an unreadable file; nothing more can be checked without the config.
        if rule == "schema" or not files:
            model.problems.append(Problem(shown, CONFIG_FILE, message, rule))
        model.problems += files
        return model
    config, problems = parse_config(text, model=folder.name, source=f"{folder.name}/{CONFIG_FILE}")
    if config is None:
        model.problems += problems + files
        return model
    if config.ByteSize() == 0:
        # Triton would auto-complete every field from the files it finds (backend, tensors, batching): nothing
        # that was checked here would be what it serves, and a stray empty file would load as a model.
        model.problems.append(
            Problem(
                shown,
                CONFIG_FILE,
                "is empty (no field set): Triton would guess the backend, tensors and batching from the model "
                "files; write the config (`python -m model_build config` generates one for an ONNX model) with at "
                "least name and platform or backend",
                "empty-config",
            )
        )
        model.problems += files
        return model
    versions, version_folder_problems = _version_folders(folder, config.name or folder.name, environment_folder(config))
    backend_problems = autocomplete(config, folder_name=folder.name, first_version=_first_subfolder(folder))
    model.problems += backend_problems
    normalize(config)
    model.config = config
    if config.name != folder.name:
        model.problems.append(
            Problem(
                config.name,
                "name",
                f"unexpected directory name '{shown}' for model '{config.name}', directory name must equal model name",
                "name-matches-folder",
            )
        )
    if not backend_problems:
        model.problems += validate_model_config(config, target)
    model.problems += version_folder_problems
    model.problems += _version_problems(model, versions, configs_only=configs_only)
    model.problems += files
    if not configs_only:
        model.problems += list(warmup_file_problems(folder, config))
        model.problems += _model_file_problems(folder, config, versions, target, packed_environment, engine_from_onnx)
        # A model file that is not valid ONNX is already reported (files); its I/O cannot be read.
        if not backend_problems:
            loaded = model.versions or set()
            model.problems += model_io_problems(folder, config, versions, loaded, engine_from_onnx=engine_from_onnx)
    return model
