"""ONNX and TensorRT models on the local endpoint: each is served by a Python-backend stand-in on ONNX Runtime.

The local Triton (nvidia-pytriton's CPU build, ../shared/README.md "Tooling facts") carries the Python
backend only, so an `onnxruntime_onnx` or `tensorrt_plan` model would be refused ("unable to find backend
library"). After an archive is extracted, each such model's config.pbtxt is rewritten to `backend: "python"`
with the same name, inputs, outputs, batching and (CPU) instance groups, and the version folders get a
model.py that runs the model's ONNX file with ONNX Runtime on the CPU (standins/onnx_runtime_model.py):

- `onnxruntime_onnx`: the model's own file (`default_model_filename`, model.onnx by default);
- `tensorrt_plan`: a TensorRT engine only runs on the GPU architecture and TensorRT version that built it
  (../shared/README.md, "GPU build vs serve"), never here; a version folder that holds the ONNX file the
  engine is built from (`model.onnx`, as `model_build package --config` packages a stage config's TensorRT
  model: model_build.stage_repository) runs that instead, with the config's tensors. A folder with only an
  engine is refused with a message saying what to put there.

TensorRT shape ranges (issue 22 B5): an engine accepts only the shapes of its optimisation profile, and
Triton's TensorRT backend refuses any other with INVALID_ARG (HTTP 400) "model expected the shape of
dimension <i> to be between <min> and <max> but received <v>" (triton-inference-server/tensorrt_backend
`src/tensorrt_utils.h` ValidateDimension; the dimension index counts the batch axis). ONNX Runtime would run
them. The profile is not in config.pbtxt but in the engine, which the build makes from the stage config's
`tensorrt` settings (model_build.trt.shape_profiles, the exact --minShapes/--maxShapes of the build): given
those ranges (`shape_ranges`, from the stage config: LocalEndpoint's `stage_config`), the stand-in refuses
what the engine would, with the backend's message. Without them only Triton's own checks apply (fixed dims
and max_batch_size).

Ensembles need nothing: Triton loads their composing models, each substituted as above. Which models run
substituted, and in place of what, is reported (`Substitution`, `substitution_notice`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.errors import LocalEndpointError

RUNNER = Path(__file__).with_name("standins") / "onnx_runtime_model.py"
ONNX_FILE_PARAMETER = "LOCAL_ENDPOINT_ONNX_FILE"  # read by the runner
SHAPE_RANGES_PARAMETER = "LOCAL_ENDPOINT_SHAPE_RANGES"  # read by the runner: {input: {"min": [...], "max": [...]}}
# input name -> (min, max) of the full shape (batch axis included when batching), as the engine's profile has it
ShapeRanges = Mapping[str, tuple[Sequence[int], Sequence[int]]]
ONNX_RUNTIME = "onnxruntime_onnx"
TENSORRT = "tensorrt_plan"
ONNX_FOR_ENGINE = "model.onnx"  # what `model_build package --config` puts in place of model.plan


@dataclass(frozen=True)
class Substitution:
    """`model` runs on ONNX Runtime in a Python-backend stand-in in place of its `platform`."""

    model: str
    platform: str  # onnxruntime_onnx or tensorrt_plan, as its config.pbtxt asked


def _platform(config: mc.ModelConfig) -> str | None:
    if config.platform == ONNX_RUNTIME or config.backend == "onnxruntime":
        return ONNX_RUNTIME
    if config.platform == TENSORRT or config.backend == "tensorrt":
        return TENSORRT
    return None


def _onnx_file(folder: Path, config: mc.ModelConfig, platform: str) -> tuple[str, list[Path]]:
    """The ONNX file name the stand-in runs and the version folders holding it; refuses a model with none."""
    versions = sorted(v for v in folder.iterdir() if v.is_dir() and not v.is_symlink() and v.name.isdigit())
    if platform == ONNX_RUNTIME:
        model_file = config.default_model_filename or "model.onnx"
        found = [v for v in versions if (v / model_file).is_file()]
        if not found:
            raise LocalEndpointError(f"model {folder.name!r}: no version folder holds {model_file}")
        return model_file, found
    found = [v for v in versions if (v / ONNX_FOR_ENGINE).is_file()]
    if not found:
        engine = config.default_model_filename or "model.plan"
        raise LocalEndpointError(
            f"model {folder.name!r} is a TensorRT engine ({engine}), which runs only on the GPU and TensorRT "
            f"version that built it, not on this CPU. To try it locally, package it from its stage config "
            "(`python -m model_build package --config STAGE.yaml --model NAME`, or make local LOCAL_CONFIG=...), "
            f"which ships the ONNX file it is built from, or put that file in its version folder as "
            f"{ONNX_FOR_ENGINE} (e.g. {folder.name}/1/{ONNX_FOR_ENGINE}): it then runs on ONNX Runtime with the "
            "same inputs and outputs"
        )
    return ONNX_FOR_ENGINE, found


def substitute_models(repository: Path, shape_ranges: Mapping[str, ShapeRanges] | None = None) -> list[Substitution]:
    """Rewrite every ONNX Runtime and TensorRT model folder of `repository` in place; what was rewritten.
    `shape_ranges`: per TensorRT model, its engine profile's ranges, enforced by the stand-in."""
    substituted = []
    for folder in sorted(p for p in repository.iterdir() if p.is_dir() and not p.is_symlink()):
        config_path = folder / "config.pbtxt"
        if not config_path.is_file():
            continue
        try:
            config = text_format.Parse(config_path.read_text(encoding="utf-8"), mc.ModelConfig())
        except (text_format.ParseError, DecodeError, UnicodeDecodeError):
            continue  # Triton itself reports a config it cannot read, with its own message
        platform = _platform(config)
        if platform is None:
            continue
        model_file, versions = _onnx_file(folder, config, platform)
        for version in versions:
            _write_runner(repository, folder, version / "model.py")
        config.platform = ""
        config.backend = "python"
        config.default_model_filename = ""
        config.ClearField("optimization")  # ONNX Runtime / TensorRT accelerators mean nothing to the stand-in
        config.parameters[ONNX_FILE_PARAMETER].string_value = model_file
        ranges = (shape_ranges or {}).get(folder.name) if platform == TENSORRT else None
        if ranges:
            config.parameters[SHAPE_RANGES_PARAMETER].string_value = json.dumps(
                {name: {"min": list(low), "max": list(high)} for name, (low, high) in sorted(ranges.items())}
            )
        for group in config.instance_group:
            group.kind = mc.ModelInstanceGroup.Kind.KIND_CPU
            del group.gpus[:]
        try:
            config_path.write_text(text_format.MessageToString(config), encoding="utf-8")
        except OSError as error:
            raise LocalEndpointError(
                f"model {folder.name!r}: cannot rewrite {config_path.relative_to(repository)} ({error.strerror})"
            ) from None
        substituted.append(Substitution(folder.name, platform))
    return substituted


def _write_runner(repository: Path, folder: Path, target: Path) -> None:
    """Put the stand-in's model.py at `target`, refusing what an archive may hold there instead of a file: a
    folder was an IsADirectoryError traceback (review LOW2), and a link would be written through."""
    shown = target.relative_to(repository)
    if target.is_symlink() or (target.exists() and not target.is_file()):
        kind = "a link" if target.is_symlink() else "a folder" if target.is_dir() else "not a regular file"
        raise LocalEndpointError(
            f"model {folder.name!r}: {shown} in the archive is {kind}, where the local endpoint writes the "
            f"model.py of the ONNX Runtime stand-in that runs {folder.name!r}; remove it from the model folder "
            "(the model's ONNX file is all the stand-in needs)"
        )
    try:
        shutil.copyfile(RUNNER, target)
    except OSError as error:
        raise LocalEndpointError(f"model {folder.name!r}: cannot write {shown} ({error.strerror})") from None


def substitute_onnx_models(repository: Path) -> list[str]:
    """`substitute_models`, the names only."""
    return [substitution.model for substitution in substitute_models(repository)]


def substitution_notice(substitutions: Sequence[Substitution | str]) -> str | None:
    """What the user is told: these models run substituted, locally only (a plain name: an ONNX Runtime model)."""
    if not substitutions:
        return None
    described = []
    for item in substitutions:
        substitution = item if isinstance(item, Substitution) else Substitution(item, ONNX_RUNTIME)
        if substitution.platform == TENSORRT:
            described.append(f"{substitution.model} (tensorrt_plan: its {ONNX_FOR_ENGINE} instead of the engine)")
        else:
            described.append(f"{substitution.model} (onnxruntime_onnx)")
    return (
        f"note: substituted locally: {', '.join(described)} run(s) on ONNX Runtime (CPU) in a Python-backend "
        "stand-in, as the local Triton has the Python backend only. Same names, inputs and outputs; on SageMaker "
        "Triton's onnxruntime / tensorrt backend serves them."
    )
