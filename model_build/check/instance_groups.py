"""Instance groups: the only rules that depend on the GPUs of the serving target.

From triton-inference-server/core `src/model_config_utils.cc` (`NormalizeInstanceGroup`,
`ValidateInstanceGroup`), judged against the GPU count of the target instance type instead of the GPUs
of the machine running the check.
"""

from __future__ import annotations

from collections.abc import Iterator

from tritonclient.grpc import model_config_pb2 as pb

from model_build.check.problems import Problem
from model_build.check.schema import TENSORRT_PLATFORM, ModelConfig
from model_build.check.target import Target

InstanceKind = pb.ModelInstanceGroup.Kind


def normalize_instance_groups(config: ModelConfig, target: Target) -> None:
    """Triton's NormalizeInstanceGroup, in place, for a server that sees `target.supported_gpus`.

    A missing instance group becomes one named after the model; nameless groups are named
    `<model>_<index>`; KIND_AUTO becomes KIND_GPU when every listed GPU exists, else KIND_CPU;
    KIND_GPU without `gpus` gets every GPU. With an unknown GPU count the kind and GPUs are left as
    they are, and the GPU-dependent rules are skipped.
    """
    if config.HasField("ensemble_scheduling"):
        return
    if not config.instance_group:
        config.instance_group.add(name=config.name)
    known = target.supported_gpus
    supported = set(known) if known is not None else None
    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == InstanceKind.KIND_AUTO and supported is not None:
            gpu_present = bool(supported) and all(gpu in supported for gpu in group.gpus)
            group.kind = InstanceKind.KIND_GPU if gpu_present else InstanceKind.KIND_CPU
        if group.count < 1:
            group.count = 1
        if group.kind == InstanceKind.KIND_GPU and not group.gpus and supported:
            group.gpus.extend(sorted(supported))


def _no_gpu_reason(target: Target) -> str:
    """Why the target leaves Triton no GPU: none at all, or one below the release's minimum."""
    if not target.gpu_count:
        return f"instance type {target.name} has no GPU"
    return (
        f"the GPU of instance type {target.name} has compute capability {target.compute_capability}, below "
        f"Triton {target.triton_release}'s minimum {target.min_compute_capability}"
    )


def _unsupported_gpu(prefix: str, gpu: int, target: Target, supported: list[int]) -> str:
    """Triton's text; the minimum compute capability (std::to_string of a double) is the release's."""
    minimum = target.min_compute_capability
    of = f" of {float(minimum):f}" if minimum else ""
    ids = ", ".join(str(i) for i in supported)
    return (
        f"{prefix} specifies invalid or unsupported gpu id {gpu}. GPUs with at least the minimum required CUDA "
        f"compute compatibility{of} are: {ids} (instance type {target.name})"
    )


def instance_group_problems(config: ModelConfig, target: Target) -> Iterator[Problem]:
    """Triton's ValidateInstanceGroup on the normalized groups."""
    if config.HasField("ensemble_scheduling"):
        return
    name = config.name
    for index, group in enumerate(config.instance_group):
        where = f"instance_group[{index}]"
        prefix = f"instance group {group.name} of model {name}"
        if group.kind == InstanceKind.KIND_MODEL and group.gpus:
            yield Problem(name, where, f"{prefix} has kind KIND_MODEL but specifies one or more GPUs", "instance-group")
        elif group.kind == InstanceKind.KIND_CPU and group.gpus:
            yield Problem(name, where, f"{prefix} has kind KIND_CPU but specifies one or more GPUs", "instance-group")
        elif group.kind == InstanceKind.KIND_GPU and target.supported_gpus is not None:
            supported = target.supported_gpus
            if not group.gpus:
                yield Problem(
                    name,
                    where,
                    f"{prefix} has kind KIND_GPU but no GPUs are available ({_no_gpu_reason(target)})",
                    "gpu-count",
                )
            else:
                wrong = next((gpu for gpu in group.gpus if gpu not in supported), None)
                if wrong is not None:
                    message = _unsupported_gpu(prefix, wrong, target, supported)
                    yield Problem(name, f"{where}.gpus", message, "gpu-count")
        if config.platform != TENSORRT_PLATFORM and group.profile:
            yield Problem(
                name,
                f"{where}.profile",
                # Triton's text has no space before "specifies" (core ValidateInstanceGroup).
                f"{prefix} and platform {config.platform}specifies profile field which is only supported for "
                "TensorRT models",
                "instance-group",
            )
        else:
            for profile in group.profile:
                if not profile.strip().lstrip("-").isdigit() or int(profile) < 0:
                    yield Problem(
                        name,
                        f"{where}.profile",
                        f"{prefix} and platform {config.platform} specifies invalid profile {profile}. The field "
                        "should contain the string representation of a non-negative integer.",
                        "instance-group",
                    )


def target_problems(config: ModelConfig, target: Target) -> Iterator[Problem]:
    """Our own rule, not Triton's: a TensorRT engine cannot be served without a GPU."""
    if target.gpu_count == 0 and config.platform == TENSORRT_PLATFORM:
        yield Problem(
            config.name,
            "platform",
            f"platform {TENSORRT_PLATFORM} needs a GPU but instance type {target.name} has none; pick a GPU "
            "instance type or export the model to ONNX for a CPU endpoint",
            "gpu-platform",
        )
