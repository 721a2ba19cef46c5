"""Compute requirements of inference components: defaults from the instance catalogue, and fit rules.

CDK-free (the config validator calls it to name the bad field before anything is synthesized).

Facts (SageMaker API reference, InferenceComponentComputeResourceRequirements; cfn-lint's
AWS::SageMaker::InferenceComponent schema): NumberOfAcceleratorDevicesRequired >= 1 (whole GPUs: a GPU
is never shared between components), NumberOfCpuCoresRequired >= 0.25, MinMemoryRequiredInMb >= 128
(required), MaxMemoryRequiredInMb >= 128. SageMaker places each copy on one instance and adds
instances up to ManagedInstanceScaling.MaxInstanceCount, so one copy must fit one instance, and the
copies started at deploy time must fit `max_instances` instances.

Defaults: the instance is shared equally by the components that can sit on it together (at most one
per GPU on GPU types). Accelerators: the GPUs of that share. CPU: half of the share's vCPUs (the host
and SageMaker's agents run beside the copies; the schedulable pool is not documented). Memory: the
reservation (min) defaults to 1024 MB, the value of the example in SageMaker's "Deploy models for
real-time inference" guide and the SageMaker SDK's docstrings, because copies are scheduled against a
pool smaller than the instance's memory (not documented; a third-party measurement saw 4096 MB refused
on a 16 GiB ml.g5.xlarge); the limit (max) defaults to the share of the instance's memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from serving_facts.catalogue import InstanceType
from triton_cdk.api_limits import MIN_CPU_CORES, MIN_MEMORY_MB  # botocore sagemaker NumberOfCpuCores, MemoryInMb

__all__ = [
    "DEFAULT_MIN_MEMORY_MB",
    "ComputeRequirements",
    "default_requirements",
    "fit_problems",
    "memory_mb",
    "placement_problem",
    "resolve",
    "sharing",
    "update_headroom_problem",
]

DEFAULT_MIN_MEMORY_MB = 1024


@dataclass(frozen=True)
class ComputeRequirements:
    """One copy's reservation. accelerators None: no GPU requested (CPU instances)."""

    accelerators: int | None
    cpu_cores: float
    min_memory_mb: int
    max_memory_mb: int | None = None


def memory_mb(instance: InstanceType) -> int:
    return instance.memory_gib * 1024


def sharing(instance: InstanceType, component_count: int) -> int:
    """How many components share one instance by default: every one, but at most one per GPU."""
    count = max(1, component_count)
    return min(count, instance.gpu_count) if instance.has_gpu else count


def default_requirements(instance: InstanceType, component_count: int) -> ComputeRequirements:
    share = sharing(instance, component_count)
    cpu = max(MIN_CPU_CORES, math.floor(instance.vcpus / share / 2 / MIN_CPU_CORES) * MIN_CPU_CORES)
    limit = memory_mb(instance) // share
    return ComputeRequirements(
        accelerators=instance.gpu_count // share if instance.has_gpu else None,
        cpu_cores=cpu,
        min_memory_mb=min(DEFAULT_MIN_MEMORY_MB, limit),
        max_memory_mb=limit,
    )


def resolve(
    instance: InstanceType,
    component_count: int,
    *,
    accelerators: int | None = None,
    cpu_cores: float | None = None,
    min_memory_mb: int | None = None,
    max_memory_mb: int | None = None,
) -> ComputeRequirements:
    """Explicit values win; the rest come from `default_requirements`. accelerators 0: none requested."""
    default = default_requirements(instance, component_count)
    return ComputeRequirements(
        accelerators=default.accelerators if accelerators is None else (accelerators or None),
        cpu_cores=default.cpu_cores if cpu_cores is None else cpu_cores,
        min_memory_mb=default.min_memory_mb if min_memory_mb is None else min_memory_mb,
        max_memory_mb=default.max_memory_mb if max_memory_mb is None else max_memory_mb,
    )


def fit_problems(instance: InstanceType, requirements: ComputeRequirements) -> list[tuple[str, str]]:
    """(field, message) for every requirement one copy cannot get on one `instance`."""
    found = []
    r = requirements
    if r.accelerators is not None:
        if not instance.has_gpu:
            found.append(("accelerators", f"{instance.name} has no GPU; leave accelerators out or set 0"))
        elif r.accelerators > instance.gpu_count:
            found.append(
                ("accelerators", f"{r.accelerators} GPUs per copy, but {instance.name} has {instance.gpu_count}")
            )
    if r.cpu_cores < MIN_CPU_CORES or r.cpu_cores > instance.vcpus:
        found.append(
            ("cpu_cores", f"{r.cpu_cores:g} per copy; {instance.name} offers {MIN_CPU_CORES}..{instance.vcpus} vCPUs")
        )
    elif r.cpu_cores / MIN_CPU_CORES != int(r.cpu_cores / MIN_CPU_CORES):
        found.append(("cpu_cores", f"{r.cpu_cores:g} is not a multiple of {MIN_CPU_CORES}"))
    if not MIN_MEMORY_MB <= r.min_memory_mb <= memory_mb(instance):
        found.append(
            (
                "min_memory_mb",
                f"{r.min_memory_mb} MB per copy; {instance.name} has {memory_mb(instance)} MB "
                f"(SageMaker's minimum is {MIN_MEMORY_MB})",
            )
        )
    if r.max_memory_mb is not None:
        if r.max_memory_mb < r.min_memory_mb:
            found.append(("max_memory_mb", f"{r.max_memory_mb} MB is below min_memory_mb {r.min_memory_mb}"))
        elif r.max_memory_mb > memory_mb(instance):
            found.append(("max_memory_mb", f"{r.max_memory_mb} MB; {instance.name} has {memory_mb(instance)} MB"))
    return found


def placement_problem(
    instance: InstanceType,
    max_instances: int,
    copies: dict[str, tuple[int, ComputeRequirements]],
    what: str = "the initial copies",
) -> str | None:
    """`copies` ({component: (copy count, requirements)}) need at most `max_instances` instances of each
    resource (a lower bound: packing can need more)."""
    needs = {
        "GPUs": (sum(n * (r.accelerators or 0) for n, r in copies.values()), instance.gpu_count),
        "vCPUs": (sum(n * r.cpu_cores for n, r in copies.values()), instance.vcpus),
        "MB of memory": (sum(n * r.min_memory_mb for n, r in copies.values()), memory_mb(instance)),
    }
    for resource, (needed, per_instance) in needs.items():
        if needed > per_instance * max_instances:
            return (
                f"{what} ({', '.join(f'{name} x {n}' for name, (n, _) in copies.items())}) need "
                f"{needed:g} {resource}; {max_instances} x {instance.name} offer {per_instance * max_instances:g}"
            )
    return None


def update_headroom_problem(
    instance: InstanceType,
    max_instances: int,
    copies: dict[str, tuple[int, ComputeRequirements]],
    batch_copies: int = 1,
) -> str | None:
    """What a rolling update needs, when the components of one endpoint update one after another.

    `copies`: {component: (its most copies, requirements)}. A rolling step "provisions capacity on the new
    endpoint fleet, routes traffic to that fleet, and terminates capacity on the old endpoint fleet"
    (SageMaker API reference, InferenceComponentRollingUpdatePolicy.MaximumBatchSize): while a component
    updates, `batch_copies` new copies of it run beside all the old ones. The components of an endpoint are
    chained (DependsOn, `TritonInferenceComponent`), so CloudFormation updates one at a time (CloudFormation
    User Guide, "DependsOn attribute": it overrides the default parallelism of creates, updates and deletes).
    Per resource: every component at its most copies, plus the largest one batch of any single component.
    Without the chain every component could be mid-update at once and each would need its own batch."""
    if not copies:
        return None
    resources = {
        "GPUs": (lambda r: r.accelerators or 0, instance.gpu_count),
        "vCPUs": (lambda r: r.cpu_cores, instance.vcpus),
        "MB of memory": (lambda r: r.min_memory_mb, memory_mb(instance)),
    }
    for resource, (amount, per_instance) in resources.items():
        steady = sum(n * amount(r) for n, r in copies.values())
        # The first of the largest, in the components' order (the order they are chained in).
        batch, biggest = max(((batch_copies * amount(r), name) for name, (_, r) in copies.items()), key=lambda t: t[0])
        offered = per_instance * max_instances
        if steady + batch > offered:
            return (
                f"at their most copies ({', '.join(f'{name} x {n}' for name, (n, _) in copies.items())}) the "
                f"components hold {steady:g} {resource}, and a rolling update of {biggest} starts {batch_copies} "
                f"new cop{'y' if batch_copies == 1 else 'ies'} ({batch:g} more) before it stops an old one: "
                f"{steady + batch:g} needed, {max_instances} x {instance.name} offer {offered:g}"
            )
    return None
