"""Stateless stack: one Triton endpoint (model, endpoint config, endpoint, scaling, alarms).

SCAFFOLD: the serving issue fills this in.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from stacks.artifact_stack import ArtifactStack
from triton_cdk.artifact_keys import EndpointArtifacts
from triton_cdk.config import AppConfig


class EndpointStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        artifacts: ArtifactStack,
        endpoint_artifacts: EndpointArtifacts,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.endpoint_artifacts = endpoint_artifacts
