"""Package a Triton model repository for SageMaker: which files go in, and where the archives go.

Layouts (`package_repository(layout=...)`):
- "single": `<out>/model.tar.gz`, the selected model folders at the archive root (one folder for
  a single-model endpoint; several for an ensemble with its composing models).
- "multi": `<out>/<model>.tar.gz` per model, each holding its model folder at the root: what a
  multi-model endpoint loads as `TargetModel` from its S3 prefix.
- "uncompressed": `<out>/<model>/...`, a plain folder tree for SageMaker's uncompressed model data
  (`ModelDataSource.S3DataSource`, `CompressionType: None`), uploaded as an S3 prefix.


The rules for what may be shipped are model_build.model_tree's, the same that `check` applies, and
everything is validated before anything is written; the bytes are written by model_build.archive
(deterministic: the same files give byte-identical archives). In single-model mode SageMaker's
Triton start-up loads one model folder: with several in one archive it exits unless
SAGEMAKER_TRITON_DEFAULT_MODEL_NAME names one (triton-inference-server/server
docker/sagemaker/serve: "More than 1 model directory found in model repository"), so a "single"
archive of several folders needs that name (`default_model`).

An ensemble brings its composing models: `--model <ensemble>` packages the ensemble folder and every
folder its steps name (recursively, model_build.ensemble_config.composing_closure); a "single" archive
of one ensemble loads it by default, and a "multi" archive `<ensemble>.tar.gz` holds them all.

Python execution environments (`environment_python`): a python model whose config.pbtxt sets
`EXECUTION_ENV_PATH` to `$$TRITON_MODEL_DIRECTORY/python_env.tar.gz`, whose folder has no such file but a
`requirements.txt`, gets that environment packed by model_build.python_env with the given interpreter
and stored in the package (never in the source folder), checked like a shipped one.

Every OSError (an unreadable file or folder, an unwritable output folder) becomes a ModelBuildError
naming the path; nothing is left half-written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from model_build.archive import CHUNK_SIZE, FIXED_MTIME, atomic_write_archive, crc32_combine, write_gzip
from model_build.atomic import atomic_directory
from model_build.errors import InvalidModelError, ModelBuildError
from model_build.key import tree_sha256
from model_build.model_tree import Entry, open_scanned, printable, refuse, scan_model_tree
from serving_facts.settings import PACKED_ENVIRONMENT_NAME, REQUIREMENTS_NAME

__all__ = [
    "CHUNK_SIZE",
    "FIXED_MTIME",
    "LAYOUTS",
    "SINGLE_ARCHIVE_NAME",
    "Entry",
    "PackagedArtifact",
    "crc32_combine",
    "list_models",
    "package_repository",
    "scan_model",
    "write_gzip",
    "write_model_archive",
    "write_repository_archive",
]

Layout = Literal["single", "multi", "uncompressed"]
LAYOUTS: tuple[Layout, ...] = ("single", "multi", "uncompressed")
SINGLE_ARCHIVE_NAME = "model.tar.gz"


@dataclass(frozen=True)
class PackagedArtifact:
    """What `package_repository` wrote: an archive (sha256 of its bytes) or a folder (tree digest)."""

    models: tuple[str, ...]
    path: Path
    sha256: str
    layout: Layout


def _os_error(error: OSError, doing: str) -> ModelBuildError:
    if error.filename is None:
        return ModelBuildError(f"cannot {doing} ({error})")
    path = printable(str(error.filename))
    return ModelBuildError(f"{path}: cannot {doing} ({error.strerror or error}); check its permissions")


# --- scanning and validation -------------------------------------------------------------------


def list_models(repository: Path) -> list[str]:
    """Model folders of a repository, sorted; refuses what SageMaker's Triton start-up would refuse."""
    repository = Path(repository)
    if not repository.is_dir():
        raise ModelBuildError(
            f"{printable(str(repository))}: not a folder; give the model repository (the folder holding model folders)"
        )
    # ../shared/README.md: SageMaker's Triton start-up fails if a config.pbtxt sits at the root.
    if (repository / "config.pbtxt").exists():
        raise InvalidModelError(
            f"{repository / 'config.pbtxt'}: config.pbtxt at the repository root; SageMaker's Triton start-up "
            "fails on it. Give the folder that holds the model folder (its parent), not the model folder itself"
        )
    try:
        with os.scandir(repository) as listing:
            models = sorted(entry.name for entry in listing if entry.is_dir(follow_symlinks=True))
    except OSError as error:
        raise _os_error(error, "list the model repository") from None
    if not models:
        raise InvalidModelError(f"{printable(str(repository))}: no model folders in this repository")
    return models


def scan_model(repository: Path, model: str, *, check_models: bool = True) -> list[Entry]:
    """Entries of one model folder in archive order; raises (listing every problem) on anything that
    cannot be shipped. `check_models=False` skips validating ONNX files (already done by `check`)."""
    repository = Path(repository)
    model_dir = repository / model
    shown = printable(str(model_dir))
    if model_dir.is_symlink():
        raise InvalidModelError(f"{shown}: model folder is a symlink; copy the model into the repository")
    if not model_dir.is_dir():
        raise InvalidModelError(f"{shown}: no such model folder in {printable(str(repository))}")
    config = model_dir / "config.pbtxt"
    if config.is_symlink() or not config.is_file():
        raise InvalidModelError(f"{shown}: model folder has no config.pbtxt (a regular file); add one")
    entries, problems = scan_model_tree(repository, model, check_models=check_models)
    refuse(problems, repository)
    return entries


def check_before_packaging(
    repository: Path,
    models: Sequence[str],
    packed: dict[str, Path] | None = None,
    engines_from_onnx: Collection[str] = (),
) -> None:
    """`python -m model_build check` on the repository; any problem of a packaged model (or of the
    repository) refuses the package, listing every problem as check prints them.

    `packed`: environments packed for this package (model -> archive); check judges each as if it lay in
    its model folder. `engines_from_onnx`: TensorRT models packaged with the ONNX their engine is built
    from instead of the engine (model_build.stage_repository, for the local endpoint)."""
    from model_build.check import check_repository  # deferred: the check rules import Triton's schema

    # By folder, not by the model name a problem carries: a config whose `name` differs from its folder (or is
    # empty) is reported under that name, and must still refuse the folder's package.
    problems = check_repository(
        repository, packed_environments=packed, engines_from_onnx=engines_from_onnx, only_folders=models
    )
    if problems:
        count = len(problems)
        lines = "\n".join(f"  {problem}" for problem in problems)
        raise InvalidModelError(
            f"{printable(str(repository))}: check found {count} problem{'s' if count != 1 else ''} in the models "
            f"to package; nothing was packaged:\n{lines}"
        )


def _check_outside(target: Path, folders: Sequence[Path]) -> None:
    resolved = target.resolve()
    for folder in folders:
        if resolved.is_relative_to(folder.resolve()):
            raise ModelBuildError(f"{target}: output inside {folder}, which is being packaged; write it elsewhere")


def _check_single(models: Sequence[str], default_model: str | None) -> None:
    """A single-model archive holds one model folder, or names the one SageMaker loads."""
    if default_model is not None and default_model not in models:
        raise ModelBuildError(
            f"--default-model {default_model!r} is not among the packaged model folders ({', '.join(models)})"
        )
    if len(models) > 1 and default_model is None:
        raise ModelBuildError(
            f"a single-model archive of {len(models)} model folders ({', '.join(models)}): SageMaker's Triton "
            "start-up exits with 'More than 1 model directory found in model repository' unless "
            "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME names one. Name the model it loads (an ensemble) with "
            "--default-model NAME and set the same name on the endpoint, or package one model"
        )


# --- writing -----------------------------------------------------------------------------------


def write_repository_archive(
    repository: Path,
    models: Sequence[str],
    archive: Path,
    *,
    workers: int | None = None,
    default_model: str | None = None,
) -> str:
    """Deterministic `archive` (.tar.gz) holding the given model folders at its root; returns its sha256.

    Several folders need `default_model` (the one SageMaker's single-model start-up loads)."""
    repository = Path(repository)
    archive = Path(archive)
    selected = sorted(set(models))
    try:
        entries = [entry for model in selected for entry in scan_model(repository, model)]
    except OSError as error:
        raise _os_error(error, "read it") from None
    _check_single(selected, default_model)
    _check_outside(archive, [repository / model for model in selected])
    try:
        return atomic_write_archive(entries, archive, workers)
    except OSError as error:
        raise _os_error(error, f"write the archive {printable(str(archive))}") from None


def write_model_archive(model_dir: Path, archive: Path) -> str:
    """Deterministic <archive> (.tar.gz) holding model_dir's folder (named model_dir.name) at the root.
    Returns the archive's sha256 hex."""
    model_dir = Path(model_dir)
    return write_repository_archive(model_dir.parent, [model_dir.name], Path(archive))


def _select(repository: Path, models: Sequence[str] | None) -> list[str]:
    available = list_models(repository)
    if not models:
        return available
    unknown = [model for model in models if model not in available]
    if unknown:
        raise ModelBuildError(
            f"{repository}: no model folder named {', '.join(map(repr, unknown))}; found: {', '.join(available)}"
        )
    return sorted(set(models))


def _groups(repository: Path, requested: list[str]) -> dict[str, list[str]]:
    """Each requested model with the models it needs in the same package (an ensemble's steps)."""
    from model_build.ensemble_config import composing_closure  # deferred: imports Triton's schema

    return {model: composing_closure(repository, [model]) for model in requested}


def pending_environments(repository: Path, models: Sequence[str]) -> dict[str, Path]:
    """Python models whose config asks for `$$TRITON_MODEL_DIRECTORY/python_env.tar.gz`, which is absent,
    and whose folder has the requirements.txt to pack it from: model -> requirements file."""
    from model_build.check.environment import MODEL_DIRECTORY_VARIABLE
    from model_build.check.schema import PYTHON_BACKEND, parse_config

    wanted = f"{MODEL_DIRECTORY_VARIABLE}/{PACKED_ENVIRONMENT_NAME}"
    pending: dict[str, Path] = {}
    for model in models:
        folder = Path(repository) / model
        try:
            text = (folder / "config.pbtxt").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # reported by the scan and check
        config, _ = parse_config(text, model=model)
        if config is None or config.backend != PYTHON_BACKEND or "EXECUTION_ENV_PATH" not in config.parameters:
            continue
        if config.parameters["EXECUTION_ENV_PATH"].string_value != wanted:
            continue
        requirements = folder / REQUIREMENTS_NAME
        if not (folder / PACKED_ENVIRONMENT_NAME).exists() and requirements.is_file():
            pending[model] = requirements
    return pending


@dataclass(frozen=True)
class EnvironmentOptions:
    """How `package` packs python environments (model_build.python_env): the interpreter (None: do not
    pack), the cache folder and pip's wheel sources; `shown` names a model's requirements file in messages
    where the repository is a copy (model -> the path the user wrote, e.g. in a stage config)."""

    python: str | None = None
    cache_dir: Path | None = None
    find_links: tuple[Path, ...] = ()
    no_index: bool = False
    shown: tuple[tuple[str, str], ...] = ()


def _pack_environments(repository: Path, models: Sequence[str], options: EnvironmentOptions) -> dict[str, Path]:
    pending = pending_environments(repository, models)
    if not pending:
        return {}
    if options.python is None:
        listed = ", ".join(f"{model} ({path})" for model, path in sorted(pending.items()))
        raise ModelBuildError(
            f"python models {listed} need {PACKED_ENVIRONMENT_NAME} packed from their {REQUIREMENTS_NAME} "
            "(EXECUTION_ENV_PATH names it): pass --environment-python PY, the serving image's python3"
        )
    from model_build.python_env import DEFAULT_CACHE, packed_environment, refuse_cache_inside

    refuse_cache_inside(options.cache_dir or DEFAULT_CACHE, repository)  # its archives would be shipped
    shown = dict(options.shown)
    return {
        model: packed_environment(
            requirements,
            options.python,
            cache_dir=options.cache_dir or DEFAULT_CACHE,
            find_links=options.find_links,
            no_index=options.no_index,
            shown=shown.get(model),
        )
        for model, requirements in sorted(pending.items())
    }


def _environment_entry(model: str, archive: Path) -> Entry:
    info = os.stat(archive)
    return Entry(f"{model}/{PACKED_ENVIRONMENT_NAME}", archive, False, 0o644, info.st_size, info.st_dev, info.st_ino)


def _copy_model_tree(entries: Sequence[Entry], into: Path) -> None:
    """The model folder `entries` describe (arcnames `<model>/...`) as the folder `into`."""
    for entry in entries:
        rest = entry.arcname.partition("/")[2]
        target = into / rest if rest else into
        if entry.is_dir:
            target.mkdir(mode=0o755)
        else:
            # The same checked open as the archive writer; copyfileobj streams in chunks, so memory
            # stays flat for multi-GiB engines.
            with os.fdopen(open_scanned(entry), "rb") as source, target.open("xb") as copy:
                shutil.copyfileobj(source, copy, CHUNK_SIZE)
            if target.stat().st_size != entry.size:
                raise ModelBuildError(
                    f"{printable(str(entry.source))}: file changed while it was being packaged; try again"
                )
        os.chmod(target, entry.mode)


def _write_uncompressed(repository: Path, scanned: dict[str, list[Entry]], out_dir: Path) -> list[PackagedArtifact]:
    """`<out>/<model>/...` for each model: every tree is copied to a staging folder first, then each
    replaces its folder (model_build.atomic.atomic_directory), in order."""
    for model in scanned:
        # `<out>/<model>` is replaced wholesale: it must not be (or hold) the repository itself.
        if repository.resolve().is_relative_to((out_dir / model).resolve()):
            raise ModelBuildError(f"{out_dir / model}: would replace the repository {repository}; choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as swaps:
        # Entered in reverse so that the swaps (on leaving, last entered first) run in model order;
        # a failure while copying any tree leaves every previous folder as it was.
        staged = {model: swaps.enter_context(atomic_directory(out_dir / model)) for model in reversed(scanned)}
        for model, entries in scanned.items():
            _copy_model_tree(entries, staged[model])
    return [
        PackagedArtifact((model,), out_dir / model, tree_sha256(out_dir / model), "uncompressed") for model in scanned
    ]


def package_repository(
    repository: Path,
    out_dir: Path,
    *,
    models: Sequence[str] | None = None,
    layout: Layout = "single",
    workers: int | None = None,
    default_model: str | None = None,
    check: bool = True,
    environments: EnvironmentOptions = EnvironmentOptions(),
    engines_from_onnx: Collection[str] = (),
) -> list[PackagedArtifact]:
    """Package `models` (default: every model folder) of `repository` into `out_dir` in `layout`.

    Everything is validated before anything is written: `check` (default on) runs the repository
    check first, so what is packaged is what Triton loads. A requested ensemble brings every model
    its steps name. A "single" archive of several model folders needs `default_model`: the folder
    SageMaker loads (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME); it defaults to the one requested ensemble.
    `engines_from_onnx`: TensorRT models whose folders hold `1/model.onnx`, the ONNX their engine is built
    from, and no engine (a stage config packaged for the local endpoint: model_build.stage_repository).
    """
    repository = Path(repository)
    out_dir = Path(out_dir)
    if layout not in LAYOUTS:
        raise ModelBuildError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    if default_model is not None and layout != "single":
        raise ModelBuildError(f"--default-model applies to the single layout only, not {layout}")
    requested = _select(repository, models)
    _check_outside(out_dir, [repository])
    groups = _groups(repository, requested)
    selected = sorted({model for group in groups.values() for model in group})
    if layout == "single" and default_model is None and models and len(requested) == 1 and len(selected) > 1:
        default_model = requested[0]  # one ensemble with its composing models: SageMaker loads the ensemble
    try:
        packed = _pack_environments(repository, selected, environments)
        if check:
            check_before_packaging(repository, selected, packed, engines_from_onnx)
        scanned = {model: scan_model(repository, model, check_models=not check) for model in selected}
    except OSError as error:
        raise _os_error(error, "read it") from None
    for model, archive in packed.items():
        scanned[model] = [*scanned[model], _environment_entry(model, archive)]
    if layout == "single":
        _check_single(selected, default_model)
    try:
        return _write(repository, out_dir, selected, scanned, layout, workers, groups)
    except OSError as error:
        raise _os_error(error, f"write the package into {printable(str(out_dir))}") from None


def _write(
    repository: Path,
    out_dir: Path,
    selected: list[str],
    scanned: dict[str, list[Entry]],
    layout: Layout,
    workers: int | None,
    groups: dict[str, list[str]],
) -> list[PackagedArtifact]:
    if layout == "uncompressed":
        return _write_uncompressed(repository, scanned, out_dir)
    if layout == "single":
        entries = [entry for model in selected for entry in scanned[model]]
        archive = out_dir / SINGLE_ARCHIVE_NAME
        return [PackagedArtifact(tuple(selected), archive, atomic_write_archive(entries, archive, workers), layout)]
    artifacts = []
    for model, group in sorted(groups.items()):
        # An ensemble's TargetModel archive holds it and every composing model folder.
        archive = out_dir / f"{model}.tar.gz"
        entries = [entry for member in group for entry in scanned[member]]
        artifacts.append(
            PackagedArtifact(tuple(group), archive, atomic_write_archive(entries, archive, workers), layout)
        )
    return artifacts
