"""Where CodeBuild runs GPU builds: `LINUX_GPU_CONTAINER` exists in a subset of regions only.

Sources (checked 2026-11):

- On-demand projects: the CodeBuild API reference, `ProjectEnvironment.type` ("The environment type
  LINUX_GPU_CONTAINER is available only in regions US East (N. Virginia), US East (Ohio), US West
  (Oregon), Canada (Central), EU (Ireland), EU (London), EU (Frankfurt), Asia Pacific (Tokyo),
  Asia Pacific (Seoul), Asia Pacific (Singapore), Asia Pacific (Sydney), China (Beijing), and China
  (Ningxia)"), pointing at the user guide's "Build environment compute modes and types" page
  (docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-compute-types.html), whose
  on-demand table lists "Linux GPU Small" (BUILD_GENERAL1_SMALL, 1 x A10G) and "Linux GPU Large"
  (BUILD_GENERAL1_LARGE, 4 x V100) for LINUX_GPU_CONTAINER. The API reference names no narrower
  region set per compute type, so both compute types share the environment type's list.
- Reserved-capacity fleets: the CodeBuild API reference, `CreateFleet.environmentType` ("The
  environment type LINUX_GPU_CONTAINER is available only in regions US East (N. Virginia), US
  East (Ohio), US West (Oregon), EU (Ireland), EU (Frankfurt), Asia Pacific (Tokyo), and Asia
  Pacific (Sydney)"), as shipped in botocore's CodeBuild service model.

When AWS adds a region, add it here (and to the test that pins this table).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from triton_cdk.errors import InvalidPropsError

__all__ = [
    "FLEET_GPU_REGIONS",
    "GPU_BUILD_REGIONS",
    "ON_DEMAND_GPU_REGIONS",
    "Compute",
    "gpu_build_region_problem",
    "gpu_build_region_rule_description",
    "gpu_build_regions",
]

Compute = Literal["BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_LARGE", "fleet"]

ON_DEMAND_GPU_REGIONS: tuple[str, ...] = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "ca-central-1",
    "eu-west-1",
    "eu-west-2",
    "eu-central-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "cn-north-1",
    "cn-northwest-1",
)
FLEET_GPU_REGIONS: tuple[str, ...] = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-northeast-1",
    "ap-southeast-2",
)
GPU_BUILD_REGIONS: dict[Compute, tuple[str, ...]] = {
    "BUILD_GENERAL1_SMALL": ON_DEMAND_GPU_REGIONS,
    "BUILD_GENERAL1_LARGE": ON_DEMAND_GPU_REGIONS,
    "fleet": FLEET_GPU_REGIONS,
}
_DESCRIPTION: dict[Compute, str] = {
    "BUILD_GENERAL1_SMALL": "on-demand GPU builds (BUILD_GENERAL1_SMALL, A10G)",
    "BUILD_GENERAL1_LARGE": "on-demand GPU builds (BUILD_GENERAL1_LARGE, V100)",
    "fleet": "GPU reserved-capacity fleets (LINUX_GPU_CONTAINER)",
}


def gpu_build_region_problem(region: str, compute: Compute) -> str | None:
    """None when CodeBuild offers `compute` GPU builds in `region`, else what is wrong and the alternatives."""
    regions = GPU_BUILD_REGIONS[compute]
    if region in regions:
        return None
    return (
        f"CodeBuild has no {_DESCRIPTION[compute]} in {region} (AWS CodeBuild API reference, LINUX_GPU_CONTAINER); "
        f"regions with them: {', '.join(regions)}. Deploy this stage to one of those, or build in such a region "
        "and promote the artifacts (promote_from)"
    )


def gpu_build_regions(computes: Iterable[Compute], fleet_region: str | None = None) -> tuple[str, ...]:
    """The regions where every one of `computes` runs (a stage's GPU builds all run in its one region), in
    the order of the tables above; a fleet also pins its own region (a project uses a fleet of its region)."""
    wanted = sorted(set(computes))
    if not wanted:
        raise InvalidPropsError("gpu_build_regions: no GPU build compute given")
    regions = [r for r in GPU_BUILD_REGIONS[wanted[0]] if all(r in GPU_BUILD_REGIONS[c] for c in wanted)]
    if fleet_region is not None and "fleet" in wanted:
        regions = [r for r in regions if r == fleet_region]
    return tuple(regions)


def gpu_build_region_rule_description(computes: Iterable[Compute], regions: Sequence[str]) -> str:
    """The AssertDescription CloudFormation prints when the region rule refuses a deploy."""
    kinds = " and ".join(_DESCRIPTION[c] for c in sorted(set(computes)))
    where = ", ".join(regions) if regions else "no region (the fleet's region has none)"
    return (
        f"This stage needs CodeBuild {kinds}, which exist only in {where} (AWS CodeBuild API reference, "
        "LINUX_GPU_CONTAINER). Deploy to one of those regions (set region in the stage's config), or build in "
        "such a region and promote the artifacts (promote_from)."
    )
