"""GPU drivers of SageMaker real-time hosts, and which one runs each Triton release.

A Triton release's CUDA runtime needs a host driver of at least its CUDA version. SageMaker picks the
host driver through `ProductionVariant.InferenceAmiVersion`; left out, the host keeps its default
driver, which is too old for every Triton release the SageMaker SDK knows (CUDA 12.3 and newer) on
g4dn/g5/p4d (driver 470, CUDA 11.4): aws/deep-learning-containers#4990 shows Triton 25.04 failing on
such hosts ("compatibility mode is UNAVAILABLE"). So every GPU variant pins an AMI.

Sources, checked with the project's search tool on 2026-11-24:
- AMI names, drivers and CUDA versions: the SageMaker API model, ProductionVariant.InferenceAmiVersion
  (botocore 1.44.5 `sagemaker/2017-07-24/service-2.json`, read from this project's .venv): gpu-2 and
  gpu-2-1 = driver 535 / CUDA 12.2, gpu-3-1 = 550 / CUDA 12.4, al2023 gpu-4-1 = 580 / CUDA 13.0;
  "-2-1", "-3-1" and "-4-1" ship the NVIDIA Container Toolkit "with disabled CUDA-compat mounting".
  CloudFormation accepts exactly these names (cfn-lint's AWS::SageMaker::EndpointConfig schema enum).
- Instance families of gpu-2: "ml.g4dn.*, ml.g5.*, ml.g6.*, ml.p3.*, ml.p4d.*, ml.p4de.*, ml.p5.*"
  (the same API documentation as of botocore 1.36.20, aws/sagemaker-core#245). The later AMIs'
  documentation names no families: `families=None` (not restricted here; NOT verified).
- Defaults without an AMI: SageMaker "Best practices to minimize interruptions during GPU driver
  upgrades" (inference-gpu-drivers): 470 / CUDA 11.4 on ml.g4dn, g5, p4d, p4de; 535 / CUDA 12.2 on
  ml.p5, g6 (../shared/README.md).
- Release CUDA versions: serving_facts/releases.py (NVIDIA's Triton release notes).

Rule: an AMI runs a release when its driver's CUDA version is at least the release's (a newer driver
runs older CUDA applications). CUDA forward compatibility is not relied on: the newer AMIs disable the
compat mounting, and #4990 shows it failing on SageMaker hosts. The pinned AMI is the newest one that
runs the release, so one AMI serves every release it can and a release bump does not flip the host OS.
Standard library only: imported by the CDK app and by the build image.
"""

from __future__ import annotations

from dataclasses import dataclass

from serving_facts import releases
from serving_facts.errors import ServingFactError


@dataclass(frozen=True)
class InferenceAmi:
    name: str  # ProductionVariant.InferenceAmiVersion
    driver: int  # NVIDIA driver branch
    cuda: str  # newest CUDA version the driver runs natively
    cuda_compat_mounting: bool
    families: frozenset[str] | None = None  # documented instance families; None: not documented

    def supports_family(self, family: str) -> bool:
        return self.families is None or family in self.families


@dataclass(frozen=True)
class DefaultDriver:
    """What a host runs when no InferenceAmiVersion is set."""

    driver: int
    cuda: str
    families: frozenset[str]


# Oldest first; `ami_for` picks the newest that fits.
AMIS: tuple[InferenceAmi, ...] = (
    InferenceAmi(
        "al2-ami-sagemaker-inference-gpu-2",
        535,
        "12.2",
        cuda_compat_mounting=True,
        families=frozenset({"ml.g4dn", "ml.g5", "ml.g6", "ml.p3", "ml.p4d", "ml.p4de", "ml.p5"}),
    ),
    InferenceAmi("al2-ami-sagemaker-inference-gpu-2-1", 535, "12.2", cuda_compat_mounting=False),
    InferenceAmi("al2-ami-sagemaker-inference-gpu-3-1", 550, "12.4", cuda_compat_mounting=False),
    InferenceAmi("al2023-ami-sagemaker-inference-gpu-4-1", 580, "13.0", cuda_compat_mounting=False),
)
AMI_NAMES: tuple[str, ...] = tuple(a.name for a in AMIS)

DEFAULT_DRIVERS: tuple[DefaultDriver, ...] = (
    DefaultDriver(470, "11.4", frozenset({"ml.g4dn", "ml.g5", "ml.p4d", "ml.p4de"})),
    DefaultDriver(535, "12.2", frozenset({"ml.p5", "ml.g6"})),
)


class DriverMatchError(ServingFactError):
    """No SageMaker inference AMI runs this release on this instance type."""


def _version(value: str) -> tuple[int, int]:
    major, _, rest = value.partition(".")
    return int(major), int(rest.split(".")[0] or 0)


def release_cuda(release_name: str) -> str:
    """CUDA major.minor of a Triton release, e.g. "12.6"."""
    return ".".join(releases.release(release_name).cuda.split(".")[:2])


def runs(ami: InferenceAmi, release_name: str, family: str) -> bool:
    return ami.supports_family(family) and _version(ami.cuda) >= _version(release_cuda(release_name))


def ami_named(name: str) -> InferenceAmi:
    for ami in AMIS:
        if ami.name == name:
            return ami
    raise DriverMatchError(f"unknown InferenceAmiVersion {name!r}; SageMaker's GPU AMIs are {', '.join(AMI_NAMES)}")


def releases_that_run(family: str) -> list[str]:
    return [r for r in releases.RELEASES if any(runs(ami, r, family) for ami in AMIS)]


def ami_for(release_name: str, family: str, *, requested: str | None = None) -> InferenceAmi:
    """The AMI a GPU variant of `family` ("ml.g5") pins for `release_name`.

    `requested` (an explicit choice) is checked instead of picked. Raises DriverMatchError naming what
    works: the AMIs for this release, or the releases some AMI runs.
    """
    cuda = release_cuda(release_name)
    fitting = [ami for ami in AMIS if runs(ami, release_name, family)]
    if requested is not None:
        ami = ami_named(requested)
        if ami in fitting:
            return ami
        reason = (
            f"its driver {ami.driver} runs CUDA up to {ami.cuda}"
            if ami.supports_family(family)
            else f"it is not documented for {family}"
        )
        works = ", ".join(a.name for a in fitting) or "none"
        raise DriverMatchError(
            f"{requested} cannot run Triton {release_name} (CUDA {cuda}) on {family}: {reason}; AMIs that can: {works}"
        )
    if not fitting:
        newest = max(AMIS, key=lambda a: _version(a.cuda))
        raise DriverMatchError(
            f"no SageMaker inference AMI has a driver for Triton {release_name} (CUDA {cuda}) on {family}: "
            f"the newest, {newest.name}, has driver {newest.driver} (CUDA {newest.cuda}); "
            f"use a triton_release one of them runs: {', '.join(releases_that_run(family))}"
        )
    return fitting[-1]
