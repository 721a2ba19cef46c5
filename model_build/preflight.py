"""What the GPU build would refuse, found at synth: a model that cannot build fails `make synth`, not the deploy.

For one model served on one instance type this runs the build's own steps that need no GPU: the
build/serve matcher, the ONNX inspection of a local `source.path`, config.pbtxt generation, `check` on it,
and the trtexec command (which refuses dynamic axes without `tensorrt.shapes`). Models from `s3_uri` or
`export` are only available inside the build; for them the matcher and the settings are checked.
"""

from __future__ import annotations

from pathlib import Path

from model_build import pbtxt
from model_build.catalogue import UnknownInstanceTypeError, instance_type
from model_build.check import check_model_config
from model_build.errors import ModelBuildError
from model_build.matching import BuildMatchError, ReservedFleet, match_build
from model_build.onnx_inspect import inspect_model
from model_build.settings import ModelSettings
from model_build.trt import trtexec_argv

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
    if settings.source.kind != "path" or settings.platform not in ONNX_PLATFORMS:
        return problems
    onnx_path = base_dir / settings.source.path
    try:
        signature = inspect_model(onnx_path)
        text = pbtxt.generate(signature, effective, triton_release)
        if effective.platform == "tensorrt_plan":
            trtexec_argv(signature, effective, engine_path=Path("model.plan"), timing_cache=Path("timing.cache"))
    except ModelBuildError as error:
        return [*problems, ("source.path", str(error))]
    # generate() ran the release's rules; the instance type adds the GPU rules (count, kind, compute capability).
    target_rules = check_model_config(
        text, model_name=settings.name, instance_type=instance_type_name, triton_release=triton_release
    )
    for problem in target_rules:
        problems.append(("source.path", f"the generated config.pbtxt fails check: {problem.message}"))
    return problems
