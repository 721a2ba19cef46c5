"""All stacks of one stage, in dependency order; used by app.py and by the pipeline's stages."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from constructs import Construct

from stacks.artifact_stack import ArtifactStack
from stacks.build_stack import BuildStack
from stacks.endpoint_stack import EndpointStack
from triton_cdk.artifact_keys import endpoint_artifacts
from triton_cdk.config import AppConfig


@dataclass
class StageStacks:
    artifacts: ArtifactStack
    build: BuildStack
    endpoints: dict[str, EndpointStack]


def stack_prefix(config: AppConfig) -> str:
    return f"Triton-{config.stage}"


def add_stage_stacks(scope: Construct, config: AppConfig) -> StageStacks:
    env = cdk.Environment(account=config.account, region=config.region) if config.account or config.region else None
    prefix = stack_prefix(config)
    common = {"env": env, "tags": {"triton-stage": config.stage}}
    artifacts = ArtifactStack(scope, f"{prefix}-Artifacts", config=config, **common)
    per_endpoint = {endpoint.name: endpoint_artifacts(config, endpoint) for endpoint in config.endpoints}
    build = BuildStack(
        scope,
        f"{prefix}-Build",
        config=config,
        artifacts=artifacts,
        endpoint_artifacts=list(per_endpoint.values()),
        **common,
    )
    endpoints = {}
    for name, located in per_endpoint.items():
        stack = EndpointStack(
            scope, f"{prefix}-Endpoint-{name}", config=config, artifacts=artifacts, endpoint_artifacts=located, **common
        )
        # The build stack's ensure-artifact resources finish (artifacts exist) before any model
        # is created; and on delete the endpoint goes first.
        stack.add_stack_dependency(build, "model artifacts must exist before the SageMaker models")
        endpoints[name] = stack
    return StageStacks(artifacts=artifacts, build=build, endpoints=endpoints)
