"""All stacks of one stage, in dependency order; used by app.py and by the pipeline's stages."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from constructs import Construct

from stacks.artifact_stack import ArtifactStack
from stacks.build_stack import BuildStack
from stacks.endpoint_stack import EndpointStack
from stacks.promotion import check_promotion, promotion_source_bucket
from stacks.stage_plan import StagePlan, plan_stage
from stage_config import AppConfig
from stage_config.loader import PROJECT_ROOT
from triton_cdk.artifact_build.gpu_regions import gpu_build_regions


@dataclass
class StageStacks:
    artifacts: ArtifactStack
    build: BuildStack
    endpoints: dict[str, EndpointStack]
    plan: StagePlan


def stack_prefix(config: AppConfig) -> str:
    return f"Triton-{config.stage}"


def add_stage_stacks(
    scope: Construct,
    config: AppConfig,
    *,
    promotion_source: AppConfig | None = None,
    plan: StagePlan | None = None,
    source_plan: StagePlan | None = None,
) -> StageStacks:
    """`promotion_source`: the config of the stage named by `config.promote_from` (required then).

    `plan` / `source_plan`: the stage plans of `config` / `promotion_source` when the caller already
    computed them (the pipeline plans each stage once); computed here otherwise.
    A promoting stage must need only artifacts its source builds (checked here, at synth) and
    copies them from the source's bucket instead of building.
    """
    plan = plan or plan_stage(config, PROJECT_ROOT)
    source_bucket = None
    if config.promote_from:
        if promotion_source is None or promotion_source.stage != config.promote_from:
            raise ValueError(f"stage {config.stage!r} promotes from {config.promote_from!r}: pass that stage's config")
        source_plan = source_plan or plan_stage(promotion_source, PROJECT_ROOT)
        check_promotion(config, promotion_source, plan.stage_artifacts(), source_plan.stage_artifacts())
        source_bucket = promotion_source_bucket(config, promotion_source)
    env = cdk.Environment(account=config.account, region=config.region) if config.account or config.region else None
    prefix = stack_prefix(config)
    common = {"env": env, "tags": {"triton-stage": config.stage}}
    # Stack names are the construct ids, also inside a pipeline stage (whose default would prefix the
    # stage's name): `make deploy` and the pipeline then deploy the same stacks, never two copies that
    # fight over the same fixed names (bucket, endpoint, alarms).
    computes = plan.gpu_build_computes()
    fleet_region = config.build.fleet.arn.split(":")[3] if config.build.fleet else None
    regions = gpu_build_regions(computes, fleet_region) if computes else ()
    artifacts = ArtifactStack(
        scope,
        f"{prefix}-Artifacts",
        stack_name=f"{prefix}-Artifacts",
        config=config,
        gpu_build_computes=computes,
        gpu_build_regions=regions,
        **common,
    )
    per_endpoint = plan.endpoints
    build = BuildStack(
        scope,
        f"{prefix}-Build",
        stack_name=f"{prefix}-Build",
        config=config,
        artifacts=artifacts,
        endpoint_artifacts=list(per_endpoint.values()),
        promotion_source_bucket=source_bucket,
        promotion_source_region=promotion_source.region if promotion_source else None,
        promotion_source_account=promotion_source.account if promotion_source else None,
        gpu_build_computes=computes,
        gpu_build_regions=regions,
        **common,
    )
    endpoints = {}
    for name, located in per_endpoint.items():
        stack_id = f"{prefix}-Endpoint-{name}"
        stack = EndpointStack(
            scope, stack_id, stack_name=stack_id, config=config, artifacts=artifacts, endpoint_artifacts=located,
            **common,
        )  # fmt: skip
        # The build stack's ensure-artifact resources finish (artifacts exist) before any model
        # is created; and on delete the endpoint goes first.
        stack.add_stack_dependency(build, "model artifacts must exist before the SageMaker models")
        endpoints[name] = stack
    return StageStacks(artifacts=artifacts, build=build, endpoints=endpoints, plan=plan)
