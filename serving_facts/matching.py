"""Build/serve matching: which CodeBuild GPU builds an engine that runs on the serving GPU.

A TensorRT engine runs only on the GPU architecture it was built for (unless built with a
hardware-compatibility level) and only on the TensorRT that built it (../shared/README.md,
from NVIDIA's TensorRT support matrix). CodeBuild's on-demand GPU builds offer exactly two GPUs
(`BUILD_GENERAL1_SMALL` = 1 x A10G, `BUILD_GENERAL1_LARGE` = 4 x V100); `ampere+` makes an
A10G-built engine run on any Ampere-or-newer GPU (never on T4 or V100); reserved-capacity fleets
can offer other GPUs. Everything else is refused here, at synth, with the options listed.

Standard library and the other facts only: the CDK app (artifact keys, build projects) and
`model_build key --instance-type` decide the same way, so both name an artifact identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from serving_facts import releases
from serving_facts.catalogue import A10G, GPUS, V100, Gpu, InstanceType
from serving_facts.errors import ServingFactError


class ReservedFleet(Protocol):
    """A CodeBuild reserved-capacity fleet (stage_config.build.ReservedFleet in the app config)."""

    arn: str
    gpu: str  # GPU model of its hosts, as in the instance catalogue: T4, A10G, ...


@dataclass(frozen=True)
class BuildPlan:
    """How to build TensorRT engines for one serving instance type."""

    compute: Literal["BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_LARGE", "fleet"]
    build_gpu: Gpu
    hardware_compatibility: Literal["none", "ampere+"]
    fleet_arn: str | None = None

    @property
    def gpu_target(self) -> str:
        """The GPU part of the artifact's content address."""
        return "ampere+" if self.hardware_compatibility == "ampere+" else self.build_gpu.sm

    @property
    def expected_compute_capability(self) -> str:
        return self.build_gpu.compute_capability


class BuildMatchError(ServingFactError):
    pass


def _options(instance: InstanceType) -> str:
    return (
        f"{instance.name} ({instance.gpu.model if instance.gpu else 'no GPU'}) cannot be matched. Options: "
        "serve on ml.g5 (built on CodeBuild's A10G, exact match); serve on ml.g6/g6e/p4d/p5 (A10G build with "
        "hardware compatibility ampere+, or build.fleet with hosts of the same GPU); serve on ml.p3 (CodeBuild's "
        "V100, Triton releases up to 24.09); serve on ml.g4dn only with build.fleet of T4 hosts; or use "
        "platform onnxruntime_onnx, which needs no GPU build"
    )


def match_build(instance: InstanceType, triton_release: str, fleet: ReservedFleet | None = None) -> BuildPlan:
    """The build that produces engines runnable on `instance` with `triton_release`."""
    gpu = instance.gpu
    if gpu is None:
        raise BuildMatchError(_options(instance))
    if fleet is not None:
        fleet_gpu = GPUS.get(fleet.gpu)
        if fleet_gpu is None:
            raise BuildMatchError(f"build.fleet.gpu {fleet.gpu!r} is not a known GPU; use one of {', '.join(GPUS)}")
        if fleet_gpu.compute_capability == gpu.compute_capability:
            return BuildPlan("fleet", fleet_gpu, "none", fleet.arn)
        if fleet_gpu.is_ampere_or_newer and gpu.is_ampere_or_newer:
            return BuildPlan("fleet", fleet_gpu, "ampere+", fleet.arn)
        raise BuildMatchError(
            f"build.fleet has {fleet.gpu} hosts (compute capability {fleet_gpu.compute_capability}), which cannot "
            f"build engines for {instance.name} ({gpu.model}, {gpu.compute_capability}). " + _options(instance)
        )
    if gpu == A10G:
        return BuildPlan("BUILD_GENERAL1_SMALL", A10G, "none")
    if gpu.is_ampere_or_newer:
        return BuildPlan("BUILD_GENERAL1_SMALL", A10G, "ampere+")
    if gpu == V100:
        if not releases.supports_compute_capability(triton_release, V100.compute_capability):
            raise BuildMatchError(
                f"Triton {triton_release} ships TensorRT {releases.tensorrt_version(triton_release)}, which no longer "
                "supports Volta (V100); use triton_release 24.09 or older for ml.p3. " + _options(instance)
            )
        return BuildPlan("BUILD_GENERAL1_LARGE", V100, "none")
    raise BuildMatchError(_options(instance))
