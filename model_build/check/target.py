"""The serving target: how many GPUs Triton will see, which decides the GPU-dependent rules."""

from __future__ import annotations

from dataclasses import dataclass

from model_build.catalogue import instance_type as lookup_instance_type


@dataclass(frozen=True)
class Target:
    """What the model will be served on: decides the GPU-dependent rules (gpu ids, KIND_GPU, KIND_AUTO).

    `gpu_count` None means "not known": GPU-dependent rules are skipped rather than guessed.
    """

    name: str | None = None
    gpu_count: int | None = None
    compute_capability: str | None = None


def target_for(instance_type: str | None) -> Target:
    """The serving target of an instance type; an unknown type raises catalogue's ValueError with suggestions."""
    if instance_type is None:
        return Target()
    instance = lookup_instance_type(instance_type)
    capability = instance.gpu.compute_capability if instance.gpu else None
    return Target(instance.name, instance.gpu_count, capability)
