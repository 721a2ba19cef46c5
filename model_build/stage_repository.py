"""A model repository assembled from a stage config, as the build assembles it, to try a model locally.

`model_build package --config C --model M` packages what the stage config describes for model M (an
ensemble brings the models its steps name), from the local sources, with the build's own steps
(model_build/buildspec.yml):

- `onnxruntime_onnx` / `tensorrt_plan` from `source.path`: config.pbtxt generated from the ONNX graph and the
  settings (`write_onnx_model`, the code of `model_build config`), the ONNX file as `1/model.onnx`. For a
  TensorRT model that is the file its engine is built from: an engine is built on the serving GPU with
  TensorRT (../shared/README.md, "GPU build vs serve"; no TensorRT here), so the folder holds the ONNX
  instead of `model.plan`, which the local endpoint runs on ONNX Runtime with the config's tensors
  (endpoint_client.onnx_standin). `check` requires the ONNX in place of the engine for these models and
  checks the config against it as against the engine (`StageRepository.engines_from_onnx`).
- `python`: the source folder, with `EXECUTION_ENV_PATH` added for `environment:` as `config` adds it
  (model_build.execution_env); `package --environment-python` packs its requirements.
- `ensemble`: its config generated from the steps and the composing configs (model_build.ensemble_config).

Sources from `s3_uri` or `export` exist only inside the build; they are refused, naming the stage file and
the model. Paths are relative to the project root (`base_dir`) and must stay inside it, the CDK app's rule.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from model_build import pbtxt
from model_build.app_config import load_model_settings
from model_build.atomic import write_atomically
from model_build.ensemble_config import write_ensemble
from model_build.errors import ModelBuildError
from model_build.execution_env import ensure_execution_env
from model_build.onnx_external import ExternalDataError, MalformedModelError, copy_with_external_data
from model_build.onnx_inspect import inspect_model
from model_build.source_paths import model_source_problems
from serving_facts.releases import UnknownReleaseError, release
from serving_facts.settings import ModelSettings

ONNX_FILE = "model.onnx"  # what endpoint_client.onnx_standin runs for an onnxruntime_onnx or tensorrt_plan model


@dataclass(frozen=True)
class StageRepository:
    """What `assemble_repository` wrote: every model folder, the TensorRT models holding their ONNX, and
    (model, `environment.requirements` as the stage config names it) for each environment to pack."""

    models: tuple[str, ...]
    engines_from_onnx: tuple[str, ...]
    requirements: tuple[tuple[str, str], ...] = ()


def write_onnx_model(
    repository: Path, settings: ModelSettings, onnx: Path, triton_release: str | None, *, with_onnx: bool
) -> Path:
    """REPO/<name>/config.pbtxt generated from `onnx` and the settings; with `with_onnx`, the ONNX file (and
    its external data) as REPO/<name>/1/model.onnx first. Returns the config's path."""
    # generate() refuses a config that `check` would refuse: nothing is written then.
    text = pbtxt.generate(inspect_model(onnx), settings, triton_release)
    model_dir = Path(repository) / settings.name
    try:
        if with_onnx:
            # Model first, config last: a folder with a config.pbtxt is a complete model to Triton.
            copy_with_external_data(onnx, model_dir / "1" / ONNX_FILE)
        write_atomically(model_dir / "config.pbtxt", text.encode())
    except (ExternalDataError, MalformedModelError) as error:
        raise ModelBuildError(f"{onnx}: {error}") from None
    except OSError as error:
        where = error.filename or model_dir
        raise ModelBuildError(
            f"--repository {repository}: cannot write {where} ({error.strerror or error}); "
            "give a model repository folder you can write to"
        ) from None
    return model_dir / "config.pbtxt"


def assemble_repository(config: Path, model: str, repository: Path, *, base_dir: Path) -> StageRepository:
    """Write `model` of the stage config `config` (and, for an ensemble, every model its steps name) into the
    empty or new folder `repository`, as the build would ship them, engines excepted (see the module)."""
    settings, triton_release = load_model_settings(config, model)
    try:
        release(triton_release)
    except UnknownReleaseError as error:
        raise ModelBuildError(f"{config}: triton_release: {error}") from None
    members = [settings]
    for name in settings.composing_models:
        composing, _ = load_model_settings(config, name)
        if composing.is_ensemble:
            raise ModelBuildError(f"{config}: model {name!r}: nested ensembles are not supported yet")
        members.append(composing)
    repository.mkdir(parents=True, exist_ok=True)
    engines = []
    # Composing models first: the ensemble's config is generated from theirs.
    for member in sorted(members, key=lambda m: m.is_ensemble):
        if member.is_ensemble:
            write_ensemble(repository, member)
            continue
        source = _local_source(config, member, base_dir)
        if member.platform == "python":
            _copy_python_folder(source, repository / member.name)
            ensure_execution_env(repository / member.name, member)
        else:
            write_onnx_model(repository, member, source, triton_release, with_onnx=True)
            if member.platform == "tensorrt_plan":
                engines.append(member.name)
    requirements = tuple(
        sorted((m.name, m.environment.requirements) for m in members if m.environment and m.environment.requirements)
    )
    return StageRepository(tuple(sorted(m.name for m in members)), tuple(sorted(engines)), requirements)


def _local_source(config: Path, settings: ModelSettings, base_dir: Path) -> Path:
    """The model's `source.path` under the project root; refuses what the CDK app refuses, and remote sources."""
    source = settings.source
    if source is None or source.path is None:
        kind = source.kind if source is not None else "source"
        raise ModelBuildError(
            f"{config}: model {settings.name!r}: source.{kind}: only the build fetches or exports this model, so "
            "it cannot be packaged here; give it a local source.path (the ONNX file or the python folder) to try it"
        )
    problems = model_source_problems(settings, base_dir)
    if problems:
        lines = [f"{config}: model {settings.name!r}: {field}: {message}" for field, message in problems]
        raise ModelBuildError("\n".join([*lines, f"(--base-dir {base_dir} is the project root)"]))
    return base_dir / source.path


def _copy_python_folder(source: Path, target: Path) -> None:
    """The folder as the build unpacks it (without bytecode); links are kept for `package` to refuse by name."""
    try:
        shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    except (OSError, shutil.Error) as error:
        raise ModelBuildError(f"{source}: cannot copy the python model folder ({error})") from None
