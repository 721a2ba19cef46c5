"""Validate a Triton model repository before anything is built or uploaded.

Three layers, in the order Triton meets them:

1. schema: `config.pbtxt` against Triton's `ModelConfig` protobuf (`schema.py`);
2. Triton's semantic rules, per model (`rules.py`) and across an ensemble's models (`ensemble.py`);
3. layout: folder names, version folders, model files, symlinks, root config (`layout.py`).

`check_repository` returns every problem found (an empty list means valid); nothing is raised for a
broken repository except when the path is not a folder at all.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from model_build.check.ensemble import ensemble_problems
from model_build.check.layout import check_model_folder, model_folders, root_problems, symlink_problems
from model_build.check.problems import REPOSITORY, Problem
from model_build.check.rules import validate_model_config
from model_build.check.schema import autocomplete, normalize, parse_config
from model_build.check.target import Target, target_for
from model_build.errors import InvalidModelError

__all__ = ["Problem", "Target", "check_model_config", "check_repository", "target_for"]


def check_repository(
    repo: Path,
    *,
    configs_only: bool = False,
    instance_type: str | None = None,
    triton_release: str | None = None,
    packed_environments: Mapping[str, Path] | None = None,
    engines_from_onnx: Collection[str] = (),
    only_folders: Collection[str] | None = None,
) -> list[Problem]:
    """Every problem in the model repository `repo`, ordered by model.

    `configs_only` skips what needs the model files (version folders, model files, label files,
    execution environments); `instance_type` (e.g. "ml.g5.xlarge") enables the rules that depend on
    its GPUs (gpu ids, KIND_GPU on a CPU type, TensorRT without a GPU); `triton_release` (e.g. "24.09")
    the rules that differ between releases (TensorRT data types, minimum GPU compute capability);
    `packed_environments` (model -> archive) the environments `package` packed to ship as
    `<model>/python_env.tar.gz`, judged as if they lay there; `engines_from_onnx` the TensorRT models whose
    version folders hold the ONNX their engine is still to be built from (layout.check_model_folder);
    `only_folders` keeps the problems of those model folders (whatever model name their config gives, which
    is what a problem names) and of the repository itself: what `package` must refuse for them.
    """
    repo = Path(repo)
    if not repo.is_dir():
        raise InvalidModelError(
            f"model repository {repo} is not a folder; pass the folder that holds the model folders"
        )
    target = target_for(instance_type, triton_release)
    problems = root_problems(repo) + symlink_problems(repo)
    folders = model_folders(repo)
    if not folders:
        message = f"no model folders in {repo}: expected {repo}/<model>/config.pbtxt"
        problems.append(Problem(REPOSITORY, "", message, "layout-config"))
    packed = packed_environments or {}
    models = {
        folder.name: check_model_folder(
            folder,
            configs_only=configs_only,
            target=target,
            packed_environment=packed.get(folder.name),
            engine_from_onnx=folder.name in engines_from_onnx,
        )
        for folder in folders
    }
    if only_folders is not None:
        problems += [p for name in only_folders if name in models for p in models[name].problems]
        names = set(only_folders) | {
            models[name].config.name for name in only_folders if name in models and models[name].config is not None
        }
        problems += [p for p in ensemble_problems(models) if p.model in names]
        return sorted(problems, key=lambda problem: (problem.model != REPOSITORY, problem.model))
    for model in models.values():
        problems += model.problems
    problems += ensemble_problems(models)
    # Stable sort: repository problems first, then each model's in the order they were found.
    return sorted(problems, key=lambda problem: (problem.model != REPOSITORY, problem.model))


def check_model_config(
    config_text: str,
    *,
    model_name: str | None = None,
    instance_type: str | None = None,
    triton_release: str | None = None,
) -> list[Problem]:
    """Schema and Triton's single-model rules for one `config.pbtxt` text (no files, no other models).

    `model_name` is the folder the config will live in: it fills an empty `name` as Triton does, and a
    different `name` is a problem. Ensemble steps are checked for structure only here.
    """
    label = model_name or "(config)"
    config, problems = parse_config(config_text, model=label, source=f"{label}/config.pbtxt")
    if config is None:
        return problems
    problems = autocomplete(config, folder_name=model_name or config.name)
    if problems:
        return problems
    normalize(config)
    if model_name and config.name != model_name:
        problems.append(
            Problem(
                config.name,
                "name",
                f"unexpected directory name '{model_name}' for model '{config.name}', directory name must equal "
                "model name",
                "name-matches-folder",
            )
        )
    return problems + validate_model_config(config, target_for(instance_type, triton_release))
