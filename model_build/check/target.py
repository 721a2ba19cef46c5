"""The serving target: how many GPUs Triton will see and which Triton release serves, which decide some rules."""

from __future__ import annotations

from dataclasses import dataclass

from serving_facts.catalogue import instance_type as lookup_instance_type
from serving_facts.releases import release as lookup_release
from serving_facts.releases import supports_compute_capability


@dataclass(frozen=True)
class Target:
    """What the model will be served on: decides the GPU-dependent rules (gpu ids, KIND_GPU, KIND_AUTO)
    and the release-dependent ones (TensorRT data types, the minimum GPU compute capability).

    `gpu_count` None means "not known": GPU-dependent rules are skipped rather than guessed; likewise
    `triton_release` None skips what differs between releases.
    """

    name: str | None = None
    gpu_count: int | None = None
    compute_capability: str | None = None
    triton_release: str | None = None

    @property
    def min_compute_capability(self) -> str | None:
        """The release's minimum GPU compute capability (Triton's --min-supported-compute-capability default)."""
        return lookup_release(self.triton_release).min_compute_capability if self.triton_release else None

    @property
    def supported_gpus(self) -> list[int] | None:
        """The GPU ids Triton would use: none when the GPU is below the release's minimum; None when not known.

        Triton's GetSupportedGPUs (core src/model_config_utils.cc) drops GPUs below the minimum
        compute capability before any instance-group rule is applied.
        """
        if self.gpu_count is None:
            return None
        release, capability = self.triton_release, self.compute_capability
        if release and capability and not supports_compute_capability(release, capability):
            return []
        return list(range(self.gpu_count))


def target_for(instance_type: str | None, triton_release: str | None = None) -> Target:
    """The serving target of an instance type and release.

    An unknown instance type raises catalogue's ValueError with suggestions, an unknown release
    releases.UnknownReleaseError.
    """
    if triton_release is not None:
        lookup_release(triton_release)
    if instance_type is None:
        return Target(triton_release=triton_release)
    instance = lookup_instance_type(instance_type)
    capability = instance.gpu.compute_capability if instance.gpu else None
    return Target(instance.name, instance.gpu_count, capability, triton_release)
