"""The serving patterns' props checks (issue #23 items 7, H1, M1, M2): every problem collected before anything is built.

TritonServingEndpoint and TritonServingComponents judge their instance types with the instance catalogue
(`serving_facts.catalogue`): a type outside it is a problem (the pattern derives the image, alarms and scaling from
it). They fill each GPU variant's host AMI that is not given with the newest AMI whose driver runs the image's
Triton release (`serving_facts.drivers.ami_for`) and check a given one the same way: without an AMI, g4dn/g5/p4d
hosts keep driver 470 (CUDA 11.4), too old for every Triton release (serving_facts/drivers.py; ../shared/README.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TypeVar

from serving_facts import drivers
from serving_facts.catalogue import InstanceType, instance_type
from serving_facts.errors import ServingFactError
from triton_cdk.errors import InvalidPropsError

__all__ = ["Problems", "catalogue_entries", "hardware_kind_problems", "with_host_ami"]

V = TypeVar("V")


class Problems(list[str]):
    """Messages collected across a pattern's props; `raise_for(what)` raises them as one InvalidPropsError."""

    def raise_for(self, what: str) -> None:
        if self:
            raise InvalidPropsError(f"{what}: " + "; ".join(self))


def catalogue_entries(typed: Iterable[tuple[str, str]], problems: list[str]) -> dict[str, InstanceType]:
    """The catalogue entry of every `(label, instance type)`; each unknown type is a problem naming its label."""
    found: dict[str, InstanceType] = {}
    for label, name in typed:
        try:
            found[name] = instance_type(name)
        except ServingFactError as error:
            problems.append(f"{label}: {error} (the pattern reads the instance catalogue, serving_facts.catalogue)")
    return found


def with_host_ami(variant: V, label: str, release: str, instances: dict[str, InstanceType], problems: list[str]) -> V:
    """`variant` (a dataclass with `instance_type` and `inference_ami_version`) with its GPU host AMI filled in by
    `drivers.ami_for(release, family)`, or its given AMI checked (`requested=`); a CPU variant, an unknown type and
    an AMI name outside SageMaker's list (the variant's own problems name it) are left as they are."""
    instance = instances.get(variant.instance_type)  # type: ignore[attr-defined]
    requested = variant.inference_ami_version  # type: ignore[attr-defined]
    if instance is None or not instance.has_gpu or (requested is not None and requested not in drivers.AMI_NAMES):
        return variant
    try:
        ami = drivers.ami_for(release, instance.family, requested=requested).name
    except ServingFactError as error:
        problems.append(f"{label}: {error}")
        return variant
    return variant if ami == requested else dataclasses.replace(variant, inference_ami_version=ami)  # type: ignore[type-var]


def hardware_kind_problems(variants: Sequence[tuple[str, str]], instances: dict[str, InstanceType]) -> list[str]:
    """Every variant must have the primary's hardware kind (GPU or CPU): the model, and so the image (GPU or CPU
    Triton image, TritonImageLookup), is chosen once for the primary variant and every production variant runs it."""
    if not variants:
        return []
    primary_label, primary_type = variants[0]
    primary = instances.get(primary_type)
    if primary is None:
        return []
    found = []
    for label, name in variants[1:]:
        instance = instances.get(name)
        if instance is not None and instance.has_gpu != primary.has_gpu:
            kind = "a GPU" if instance.has_gpu else "no GPU"
            primary_kind = "a GPU" if primary.has_gpu else "none"
            found.append(
                f"{label}: {name} has {kind} but the primary {primary_label} ({primary_type}) has {primary_kind}; "
                "every variant runs the primary's model and image, so every variant needs its hardware kind"
            )
    return found
