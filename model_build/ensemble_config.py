"""An ensemble's config.pbtxt from its steps (stage config) and its composing models' configs.

Triton's ensemble (model_config.proto `ModelEnsembling`; server docs/user_guide/architecture.md
"Ensemble Models"): `platform: "ensemble"`, `ensemble_scheduling { step [...] }` where each step names a
model and maps its inputs and outputs to ensemble tensors; the ensemble's own `input`s are the tensors
no step writes, its `output`s tensors it returns. An ensemble has no model file, but Triton loads a
model only from a numeric version folder, so the folder gets an empty `1/`.

Derived here (the team's design, serving_facts.settings.EnsembleSettings): inputs = tensors read by a
step and written by none; outputs = tensors written and read by none. Each tensor's type and dims are
those of the composing model's input or output it is mapped to, adjusted for batching the way Triton
compares them (core `src/ensemble_scheduler/ensemble_utils.cc` ValidateTensorConsistency: a batching
and a non-batching model agree when their full shapes agree). Every step uses the latest version
(`model_version: -1`). Composing ensembles (nested) are refused by the stage config for now.

`ensemble_problems_with` runs `model_build check`'s own rules (schema, model_config_utils.cc's
ValidateEnsembleSchedulingConfig, ensemble_utils.cc's ValidateEnsembleConfig) on the generated config
and the composing configs, assembled in a temporary repository, configs only.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from model_build.atomic import write_atomically
from model_build.check.ensemble import MAX_ENSEMBLE_DEPTH, nesting_message
from model_build.check.problems import Problem
from model_build.check.schema import ENSEMBLE_PLATFORM, parse_config
from model_build.errors import InvalidModelError, ModelBuildError
from model_build.model_tree import model_name_problem, printable, read_config_text, writable_model_folder
from serving_facts.settings import ModelSettings

CONFIG_FILE = "config.pbtxt"
VERSION_FOLDER = "1"
LATEST_VERSION = -1


class EnsembleStepError(InvalidModelError):
    """A step that cannot be mapped onto its model's config: `step` is its index, `field` the map."""

    def __init__(self, message: str, step: int, field: str) -> None:
        super().__init__(message)
        self.step = step
        self.field = field


def _tensor_dims(dims: Iterable[int], composing_batches: bool, ensemble_batches: bool) -> list[int] | None:
    """The ensemble tensor's dims for a composing model's dims, so that the full shapes agree; None when an
    unbatched model's dims leave nothing once the batching ensemble takes the first as its batch axis."""
    dims = list(dims)
    if composing_batches == ensemble_batches:
        return dims
    if composing_batches:  # the composing model's batch axis is a real axis of the unbatched ensemble
        return [-1, *dims]
    return dims[1:] if len(dims) > 1 else None


def _find_io(config: mc.ModelConfig, name: str, role: str, step: int, ensemble: str):
    tensors = config.input if role == "input" else config.output
    for tensor in tensors:
        if tensor.name == name:
            return tensor
    known = ", ".join(t.name for t in tensors[:20]) or "none"
    raise EnsembleStepError(
        f"ensemble {ensemble!r}: steps[{step}].{role}_map names {role} {name!r} of model {config.name!r}, "
        f"which has no such {role} (its {role}s: {known}{', ...' if len(tensors) > 20 else ''})",
        step,
        f"{role}_map",
    )


def build_ensemble_config(settings: ModelSettings, composing: Mapping[str, mc.ModelConfig]) -> mc.ModelConfig:
    """The ensemble's ModelConfig from its settings and the parsed configs of the models its steps name."""
    if settings.ensemble is None:
        raise ModelBuildError(f"model {settings.name!r} is not an ensemble (platform {settings.platform!r})")
    missing = [name for name in settings.composing_models if name not in composing]
    if missing:
        raise InvalidModelError(f"ensemble {settings.name!r}: no config for composing models {', '.join(missing)}")
    ensemble_batches = settings.max_batch_size > 0
    config = mc.ModelConfig(name=settings.name, platform=ENSEMBLE_PLATFORM, max_batch_size=settings.max_batch_size)
    steps = settings.ensemble.steps
    for step in steps:
        scheduled = config.ensemble_scheduling.step.add(model_name=step.model, model_version=LATEST_VERSION)
        for key, value in sorted(step.input_map.items()):
            scheduled.input_map[key] = value
        for key, value in sorted(step.output_map.items()):
            scheduled.output_map[key] = value
    # The ensemble's own tensors take type and dims from the step that reads (input) or writes (output) them
    # first: one pass over the maps builds the lookup (a scan per tensor was quadratic in the tensor count).
    for role, tensor_names, tensors in (
        ("input", settings.ensemble.inputs, config.input),
        ("output", settings.ensemble.outputs, config.output),
    ):
        first_use: dict[str, tuple[int, str]] = {}
        for index, step in enumerate(steps):
            for key, value in getattr(step, f"{role}_map").items():
                first_use.setdefault(value, (index, key))
        ios: dict[int, dict[str, object]] = {}
        for tensor_name in tensor_names:
            index, model_tensor = first_use[tensor_name]
            step = steps[index]
            source = composing[step.model]
            if index not in ios:
                ios[index] = {io.name: io for io in (source.input if role == "input" else source.output)}
            io = ios[index].get(model_tensor) or _find_io(source, model_tensor, role, index, settings.name)
            dims = _tensor_dims(io.dims, source.max_batch_size > 0, ensemble_batches)
            if dims is None:
                raise EnsembleStepError(
                    f"ensemble {settings.name!r} batches (max_batch_size {settings.max_batch_size}) but "
                    f"steps[{index}]'s model {step.model!r} does not (max_batch_size 0): Triton takes the first of "
                    f"its {role} {model_tensor!r}'s dims {list(io.dims)} as the batch axis, which leaves the "
                    f"ensemble {role} {tensor_name!r} no dims. Set the ensemble's max_batch_size: 0, or give "
                    f"{step.model!r} a batch axis (max_batch_size > 0)",
                    index,
                    f"{role}_map",
                )
            tensors.add(name=tensor_name, data_type=io.data_type, dims=dims)
    if settings.response_cache:
        config.response_cache.enable = True
    return config


def render_ensemble(config: mc.ModelConfig) -> str:
    from google.protobuf import text_format

    header = (
        "# Generated by `python -m model_build config` from the ensemble's steps and its composing models' "
        "configs. Do not edit by hand.\n"
    )
    return header + text_format.MessageToString(config)


def parse_composing(text: str, name: str, source: str) -> mc.ModelConfig:
    """A composing model's config as Triton completes it (name from the folder, backend from platform)."""
    from model_build.check.schema import autocomplete, normalize

    config, problems = parse_config(text, model=name, source=source)
    if config is None:
        raise InvalidModelError("\n".join(str(problem) for problem in problems))
    problems = autocomplete(config, folder_name=name)
    if problems:
        raise InvalidModelError("\n".join(str(problem) for problem in problems))
    normalize(config)
    return config


def ensemble_problems_with(ensemble_text: str, name: str, composing_texts: Mapping[str, str]) -> list[Problem]:
    """`model_build check --configs-only` on a repository of just these configs (every problem)."""
    from model_build.check import check_repository

    with tempfile.TemporaryDirectory(prefix="ensemble-check-") as folder:
        root = Path(folder)
        for model, text in {**composing_texts, name: ensemble_text}.items():
            (root / model).mkdir()
            (root / model / CONFIG_FILE).write_text(text, encoding="utf-8")
        return check_repository(root, configs_only=True)


def generate_ensemble(settings: ModelSettings, composing_texts: Mapping[str, str]) -> str:
    """The ensemble's config.pbtxt text, refused (nothing returned) unless `check` passes it with its models."""
    composing = {
        model: parse_composing(text, model, f"{model}/{CONFIG_FILE}") for model, text in composing_texts.items()
    }
    text = render_ensemble(build_ensemble_config(settings, composing))
    problems = ensemble_problems_with(text, settings.name, composing_texts)
    if problems:
        listed = "\n".join(f"  {problem}" for problem in problems)
        raise InvalidModelError(
            f"the config.pbtxt of ensemble {settings.name!r} would be refused by Triton; nothing written:\n{listed}"
        )
    return text


def read_composing_configs(repository: Path, settings: ModelSettings) -> dict[str, str]:
    """REPO/<model>/config.pbtxt of each composing model, as text (regular files only: model_tree.read_config_text)."""
    texts: dict[str, str] = {}
    missing = []
    for model in settings.composing_models:
        path = Path(repository) / model / CONFIG_FILE
        try:
            texts[model] = read_config_text(path)
        except FileNotFoundError:
            missing.append(str(path))
    if missing:
        raise InvalidModelError(
            f"ensemble {settings.name!r} needs its composing models' configs first; missing: {', '.join(missing)} "
            "(write them with `model_build config` or fetch their archives)"
        )
    return texts


def write_ensemble(repository: Path, settings: ModelSettings) -> Path:
    """Generate REPO/<ensemble>/config.pbtxt (and the empty version folder 1/) from REPO's composing configs."""
    folder = Path(repository) / settings.name
    writable_model_folder(folder)
    version, config = folder / VERSION_FOLDER, folder / CONFIG_FILE
    if version.is_symlink() or (version.exists() and not version.is_dir()):
        raise InvalidModelError(
            f"{printable(str(version))}: is not a folder; the ensemble's version folder {VERSION_FOLDER}/ must be an "
            "(empty) folder. Remove it; nothing was written"
        )
    if config.is_symlink() or (config.exists() and not config.is_file()):
        raise InvalidModelError(
            f"{printable(str(config))}: is not a regular file (a folder, link or special file); remove it so the "
            "generated config can be written; nothing was written"
        )
    text = generate_ensemble(settings, read_composing_configs(repository, settings))
    version.mkdir(parents=True, exist_ok=True)
    write_atomically(config, text.encode())
    return config


def composing_closure(repository: Path, models: Iterable[str]) -> list[str]:
    """`models` and, for each ensemble among them, every model its steps name (recursively), sorted.

    Read from REPO/<model>/config.pbtxt; a step naming a folder that is missing is refused here, so a
    packaged ensemble never lacks a composing model. Ensembles nesting deeper than MAX_ENSEMBLE_DEPTH below a
    requested model are refused with `check`'s own message (model_build.check.ensemble, the same levels).
    """
    repository = Path(repository)
    models = list(models)
    steps: dict[str, list[str]] = {}  # ensemble -> the models its steps name
    found: set[str] = set()
    pending = list(models)
    while pending:
        model = pending.pop()
        if model in found:
            continue
        found.add(model)
        path = repository / model / CONFIG_FILE
        try:
            text = read_config_text(path)
        except FileNotFoundError:
            continue  # the folder's own problems are reported by the scan and check
        except InvalidModelError as error:
            # A FIFO, device, link or oversized file: refused here, before anything reads it whole or waits on it.
            raise InvalidModelError(f"{error}; nothing was packaged") from None
        config, _ = parse_config(text, model=model)
        if config is None or config.platform != ENSEMBLE_PLATFORM:
            continue
        steps[model] = []
        for step in config.ensemble_scheduling.step:
            problem = model_name_problem(step.model_name)
            if problem:
                raise InvalidModelError(f"{path}: ensemble {model!r} step model: {problem}")
            if not (repository / step.model_name).is_dir():
                raise InvalidModelError(
                    f"{path}: ensemble {model!r} step model {step.model_name!r} has no folder in {repository}; "
                    "put every composing model in the repository"
                )
            steps[model].append(step.model_name)
            pending.append(step.model_name)
    for model in models:
        level = {model} if model in steps else set()
        for _ in range(MAX_ENSEMBLE_DEPTH):
            level = {upstream for name in level for upstream in steps[name] if upstream in steps}
        if level:
            raise InvalidModelError(f"{repository / model / CONFIG_FILE}: {nesting_message(model)}")
    return sorted(found)
