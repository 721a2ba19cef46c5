"""What the GPU build would refuse, found at synth: a model that cannot build fails `make synth`, not the deploy.

For one model served on one instance type this runs the build's own steps that need no GPU: the
build/serve matcher, the ONNX inspection of a local `source.path`, config.pbtxt generation, `check` on it,
and the trtexec command (which refuses dynamic axes without `tensorrt.shapes`). Models from `s3_uri` or
`export` are only available inside the build; for them the matcher and the settings are checked.

An ensemble (`ensemble_preflight_problems`) is checked when every composing config can be derived here:
a local ONNX source gives its generated config (as the build would generate it for this instance type),
a python folder its own config.pbtxt (with EXECUTION_ENV_PATH added as `model_build config` adds it). The
ensemble's config is then generated from its steps (model_build.ensemble_config) and the whole set is
judged by `model_build check`'s rules (configs only), so a step that maps a missing tensor or joins
mismatched types fails `make synth`, naming the step. With any composing model from S3 or an export,
the ensemble is checked in the build only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from model_build.errors import ModelBuildError
from model_build.execution_env import execution_env_value, with_execution_env
from model_build.requirements_lock import read_locked_requirements
from serving_facts.catalogue import UnknownInstanceTypeError, instance_type
from serving_facts.errors import ServingFactError
from serving_facts.matching import BuildMatchError, ReservedFleet, match_build
from serving_facts.settings import ModelSettings

if TYPE_CHECKING:
    from model_build.check.problems import Problem

# pbtxt, check, ensemble_config, onnx_inspect and trt are imported in the functions that use them: they load
# tritonclient.grpc (numpy, ml_dtypes, grpc) and onnx, about 0.3 s, and every synth imports this module but
# only a config with a local ONNX source or an ensemble needs them (bench/README.md, "Synth time").

ONNX_PLATFORMS = ("tensorrt_plan", "onnxruntime_onnx")


def build_settings(settings: ModelSettings, instance_type_name: str, triton_release: str, fleet) -> ModelSettings:
    """The settings the build applies on this instance type: the matcher may add hardware compatibility."""
    if settings.platform != "tensorrt_plan":
        return settings
    plan = match_build(instance_type(instance_type_name), triton_release, fleet)
    if plan.hardware_compatibility != "ampere+":
        return settings
    tensorrt = settings.tensorrt.model_copy(update={"hardware_compatibility": "ampere+"})
    return settings.model_copy(update={"tensorrt": tensorrt})


def preflight_problems(
    settings: ModelSettings,
    *,
    instance_type_name: str,
    triton_release: str,
    base_dir: Path,
    fleet: ReservedFleet | None = None,
) -> list[tuple[str, str]]:
    """(field, message) for each way the build or Triton would refuse `settings` served on `instance_type_name`."""
    try:
        instance = instance_type(instance_type_name)
        effective = build_settings(settings, instance_type_name, triton_release, fleet)
    except (BuildMatchError, UnknownInstanceTypeError) as error:
        return [("platform", str(error))]
    problems: list[tuple[str, str]] = []
    gpu = instance.gpu
    ampere_plus = settings.platform == "tensorrt_plan" and settings.tensorrt.hardware_compatibility == "ampere+"
    if ampere_plus and (gpu is None or not gpu.is_ampere_or_newer):
        model = gpu.model if gpu else "no GPU"
        problems.append(
            (
                "tensorrt.hardware_compatibility",
                f"ampere+ engines run on Ampere or newer GPUs only; {instance_type_name} has {model} "
                "(TensorRT hardware compatibility, ../shared/README.md): remove the setting",
            )
        )
    problems += _calibration_problems(settings)
    environment = settings.environment
    if environment is not None and environment.requirements is not None:
        try:  # the build packs from it: every line must be locked (model_build.requirements_lock)
            read_locked_requirements(base_dir / environment.requirements, shown=environment.requirements)
        except (ModelBuildError, ServingFactError) as error:
            problems.append(("environment.requirements", " ".join(str(error).splitlines())))
    if environment is not None and environment.archive is not None:
        problems += [("environment.archive", message) for message in _archive_problems(base_dir, environment.archive)]
    if settings.platform == "python" and settings.source is not None and settings.source.kind == "path":
        problems += python_config_problems(
            settings, instance_type_name=instance_type_name, triton_release=triton_release, base_dir=base_dir
        )
    if settings.source is None or settings.source.kind != "path" or settings.platform not in ONNX_PLATFORMS:
        return problems
    from model_build import pbtxt
    from model_build.check import check_model_config
    from model_build.onnx_inspect import inspect_model
    from model_build.trt import trtexec_argv

    onnx_path = base_dir / settings.source.path
    try:
        signature = inspect_model(onnx_path)
        text = pbtxt.generate(signature, effective, triton_release)
        if effective.platform == "tensorrt_plan":
            # The build fetches the calibration cache itself (model_build.calibration; _calibration_problems above).
            calibration = Path("calibration.cache") if effective.tensorrt.precision == "int8" else None
            trtexec_argv(
                signature,
                effective,
                engine_path=Path("model.plan"),
                timing_cache=Path("timing.cache"),
                calibration_cache=calibration,
            )
    except (ModelBuildError, ServingFactError) as error:
        return [*problems, ("source.path", str(error))]
    # generate() ran the release's rules; the instance type adds the GPU rules (count, kind, compute capability).
    target_rules = check_model_config(
        text, model_name=settings.name, instance_type=instance_type_name, triton_release=triton_release
    )
    for problem in target_rules:
        problems.append(("source.path", f"the generated config.pbtxt fails check: {problem.message}"))
    return problems


# Whether the CDK app ships a local `tensorrt.calibration_cache` with the GPU build: it does, as an asset of the
# build stack whose s3:// address is the build's CALIBRATION_URI, which `model_build build` fetches
# (stacks/build_stack.py `_calibration`, model_build.calibration). Kept as a switch so an app that stops shipping
# it refuses INT8 models here rather than building them uncalibrated.
LOCAL_CALIBRATION_SHIPPED = True
# Whether the build project's role may read an s3:// `tensorrt.calibration_cache`: the build stack grants it
# s3:GetObject on exactly that object and passes it as CALIBRATION_URI (stacks/build_stack.py `_calibration`).
S3_CALIBRATION_READABLE = True
# What the grant can name: an object ARN needs a bucket and a key (the form `source.s3_uri` must have).
_S3_OBJECT_URI = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^?]+(\?versionId=[^&]+)?")


def _calibration_problems(settings: ModelSettings) -> list[tuple[str, str]]:
    """An INT8 build reads its calibration cache (trtexec --calib=<file>): it must be able to reach the build."""
    trt = settings.tensorrt
    if settings.platform != "tensorrt_plan" or trt.precision != "int8" or trt.calibration_cache is None:
        return []
    if trt.calibration_cache.startswith("s3://"):
        if not _S3_OBJECT_URI.fullmatch(trt.calibration_cache):
            return [
                (
                    "tensorrt.calibration_cache",
                    f"{trt.calibration_cache!r} is not an S3 object: give s3://bucket/key (optionally "
                    "?versionId=...), the object the build project's role is granted s3:GetObject on",
                )
            ]
        if S3_CALIBRATION_READABLE:
            return []
        return [
            (
                "tensorrt.calibration_cache",
                f"{trt.calibration_cache}: the GPU build fetches an s3:// calibration cache with the build project's "
                "role, which is granted only the model sources and the artifact bucket; until the stage grants it "
                "that object, the build would fail: use precision fp16 (or best)",
            )
        ]
    if LOCAL_CALIBRATION_SHIPPED:
        return []
    return [
        (
            "tensorrt.calibration_cache",
            f"{trt.calibration_cache}: the GPU build does not receive a local calibration cache yet (only the ONNX "
            "source is shipped to it), so the INT8 engine could not be calibrated: use precision fp16 (or best)",
        )
    ]


# A prebuilt environment is read whole to judge it (gzip to the end): once per file and process, however many
# endpoints serve the model.
_ARCHIVE_VERDICTS: dict[tuple, list[str]] = {}


def _archive_problems(base_dir: Path, archive: str) -> list[str]:
    """`model_build check`'s verdict on a prebuilt environment archive (model_build.check.environment), at synth.
    A missing file is the source check's to report (model_build.source_paths)."""
    from model_build.check.environment import archive_problems

    path = base_dir / archive
    try:
        info = path.stat()
    except OSError:
        return []
    key = (str(path.resolve()), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _ARCHIVE_VERDICTS:
        _ARCHIVE_VERDICTS[key] = [" ".join(m.split()) for m in archive_problems(path, archive)]
    return _ARCHIVE_VERDICTS[key]


def python_config_problems(
    settings: ModelSettings, *, instance_type_name: str, triton_release: str, base_dir: Path
) -> list[tuple[str, str]]:
    """A python model's own config.pbtxt (its source folder's, as `model_build config` completes it) judged at
    synth: `model_build check`'s single-model rules for the endpoint's instance type (a KIND_GPU group on a CPU
    instance, GPU ids), its `name` against the stage's model name, EXECUTION_ENV_PATH against `environment:`,
    and every one of max_batch_size, dynamic_batching and instance_groups the stage config states against the
    file: Triton loads the file, so a stage value that differs would be silently ignored while the instance-type
    checks trusted it."""
    from model_build.check import check_model_config
    from model_build.model_tree import read_config_text

    shown = f"{settings.source.path.rstrip('/')}/config.pbtxt"
    try:
        text = read_config_text(base_dir / settings.source.path / "config.pbtxt", shown)
    except FileNotFoundError:
        return [("source.path", f"{shown} does not exist: a python model's folder holds its own config.pbtxt")]
    except (ModelBuildError, ServingFactError) as error:
        return [("source.path", str(error))]
    value = execution_env_value(settings)
    if value is not None:
        try:  # what `model_build config` will add must agree with what the folder's config says
            text = with_execution_env(text, value, shown)[0]
        except (ModelBuildError, ServingFactError) as error:
            return [("environment", " ".join(str(error).splitlines()))]
    found = check_model_config(
        text, model_name=settings.name, instance_type=instance_type_name, triton_release=triton_release
    )
    problems = [("source.path", f"{shown} fails check: {problem}") for problem in found]
    if not any(problem.rule == "schema" for problem in found):
        problems += _stage_disagreements(settings, text, shown)
    return problems


def _stage_disagreements(settings: ModelSettings, text: str, shown: str) -> list[tuple[str, str]]:
    """(stage field, message) for each value the stage config writes that the folder's config.pbtxt contradicts.
    Keys the stage config leaves out are not compared: the file alone says them."""
    from model_build.check.schema import parse_config

    config, _ = parse_config(text, model=settings.name, source=shown)
    if config is None:
        return []
    written = settings.model_fields_set
    found: list[tuple[str, str, object, object]] = []  # (stage field, file field, stage value, file value)
    if "max_batch_size" in written:
        found.append(("max_batch_size", "max_batch_size", settings.max_batch_size, config.max_batch_size))
    if "dynamic_batching" in written:
        batching = settings.dynamic_batching
        has = config.HasField("dynamic_batching")
        stated = batching.model_fields_set
        if "enabled" in stated or not has:
            found.append(
                (
                    "dynamic_batching.enabled",
                    "dynamic_batching",
                    str(batching.enabled).lower(),
                    "{...}" if has else "absent",
                )
            )
        if has and "preferred_batch_sizes" in stated:
            preferred = list(config.dynamic_batching.preferred_batch_size)
            found.append(
                (
                    "dynamic_batching.preferred_batch_sizes",
                    "dynamic_batching.preferred_batch_size",
                    batching.preferred_batch_sizes,
                    preferred,
                )
            )
        if has and "max_queue_delay_microseconds" in stated:
            delay = config.dynamic_batching.max_queue_delay_microseconds
            found.append(
                (
                    "dynamic_batching.max_queue_delay_microseconds",
                    "dynamic_batching.max_queue_delay_microseconds",
                    batching.max_queue_delay_microseconds,
                    delay,
                )
            )
    if "instance_groups" in written:
        groups = config.instance_group
        if len(groups) != len(settings.instance_groups):
            counts = (f"{len(settings.instance_groups)} groups", f"{len(groups)} groups")
            found.append(("instance_groups", "instance_group", *counts))
        else:
            from tritonclient.grpc import model_config_pb2 as mc

            for index, (group, stated) in enumerate(zip(settings.instance_groups, groups, strict=True)):
                if "kind" in group.model_fields_set:
                    kind = mc.ModelInstanceGroup.Kind.Name(stated.kind)  # unset: KIND_AUTO
                    found.append((f"instance_groups[{index}].kind", f"instance_group[{index}].kind", group.kind, kind))
                if "count" in group.model_fields_set:
                    count = stated.count or 1  # Triton's default count
                    found.append(
                        (f"instance_groups[{index}].count", f"instance_group[{index}].count", group.count, count)
                    )
    # dynamic_batching.enabled compares "true"/"false" with "{...}"/"absent": they agree when enabled <=> present.
    agree = {("true", "{...}"), ("false", "absent")}
    return [
        (
            field,
            f"is {stage} but {shown} has {file_field} {actual}: Triton loads the folder's config.pbtxt, so the stage "
            "value would be ignored while the instance-type checks trust it; make them agree, or leave the key out of "
            "the stage config (the file then says it alone)",
        )
        for field, file_field, stage, actual in found
        if stage != actual and (stage, actual) not in agree
    ]


def composing_config_text(
    settings: ModelSettings, *, instance_type_name: str, triton_release: str, base_dir: Path, fleet
) -> str | None:
    """The config.pbtxt the build would ship for a composing model, or None when only the build can know it."""
    source = settings.source
    if source is None or source.kind != "path":
        return None
    if settings.platform == "python":
        from model_build.model_tree import read_config_text

        text = read_config_text(base_dir / source.path / "config.pbtxt", f"{source.path.rstrip('/')}/config.pbtxt")
        value = execution_env_value(settings)
        return with_execution_env(text, value, f"{source.path}/config.pbtxt")[0] if value else text
    if settings.platform in ONNX_PLATFORMS:
        from model_build import pbtxt
        from model_build.onnx_inspect import inspect_model

        effective = build_settings(settings, instance_type_name, triton_release, fleet)
        return pbtxt.generate(inspect_model(base_dir / source.path), effective, triton_release)
    return None


def ensemble_preflight_problems(
    settings: ModelSettings,
    composing: Mapping[str, ModelSettings],
    *,
    instance_type_name: str,
    triton_release: str,
    base_dir: Path,
    fleet: ReservedFleet | None = None,
) -> list[tuple[str, str]]:
    """(field within the ensemble, message) for what Triton would refuse in the ensemble and its steps.

    Empty when a composing model's config cannot be derived here (it is then checked in the build) or
    fails on its own (its own preflight reports that).
    """
    if settings.ensemble is None or any(name not in composing for name in settings.composing_models):
        return []  # unknown step models are reported by the config's cross-model rules
    from model_build.ensemble_config import (
        EnsembleStepError,
        build_ensemble_config,
        ensemble_problems_with,
        parse_composing,
        render_ensemble,
    )

    texts: dict[str, str] = {}
    for name in settings.composing_models:
        try:
            text = composing_config_text(
                composing[name],
                instance_type_name=instance_type_name,
                triton_release=triton_release,
                base_dir=base_dir,
                fleet=fleet,
            )
        except (ModelBuildError, ServingFactError, OSError, UnicodeDecodeError):
            return []  # the composing model's own preflight (or its source check) names the problem
        if text is None:
            return []
        texts[name] = text
    steps = settings.ensemble.steps
    try:
        composing_configs = {name: parse_composing(text, name, f"{name}/config.pbtxt") for name, text in texts.items()}
        ensemble_text = render_ensemble(build_ensemble_config(settings, composing_configs))
    except EnsembleStepError as error:
        return [(f"ensemble.steps[{error.step}].{error.field}", str(error))]
    except (ModelBuildError, ServingFactError) as error:
        return [("ensemble", str(error))]
    problems = ensemble_problems_with(ensemble_text, settings.name, texts)
    return [(_step_field(problem, steps, settings.name), _shown(problem)) for problem in problems]


_STEP_FIELDS = {"model_name": "model", "model_version": "model", "input_map": "input_map", "output_map": "output_map"}


def _step_field(problem: Problem, steps, ensemble: str) -> str:
    """The stage-config field a check problem is about: the step it names, else the ensemble."""
    match = re.search(r"step\[(\d+)\](?:\.(\w+))?", problem.field)
    if problem.model == ensemble and match:
        sub = _STEP_FIELDS.get(match.group(2) or "", "")
        return f"ensemble.steps[{match.group(1)}]" + (f".{sub}" if sub else "")
    names = [problem.model] if problem.model != ensemble else re.findall(r"model '?([A-Za-z0-9_-]+)'?", problem.message)
    for name in names:
        for index, step in enumerate(steps):
            if step.model == name:
                return f"ensemble.steps[{index}]"
    return "ensemble"


def _shown(problem: Problem) -> str:
    return f"the generated ensemble fails check: {problem} (Triton's core ensemble_utils.cc / model_config_utils.cc)"
