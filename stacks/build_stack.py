"""Stateless stack: the CodeBuild GPU model build and the ensure-artifact custom resources.

SCAFFOLD: the GPU-build issue fills this in (build project, ensure-artifact resources).
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from constructs import Construct

from stacks.artifact_stack import ArtifactStack
from triton_cdk.artifact_keys import EndpointArtifacts
from triton_cdk.config import AppConfig


class BuildStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        artifacts: ArtifactStack,
        endpoint_artifacts: Sequence[EndpointArtifacts],
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.endpoint_artifacts = list(endpoint_artifacts)
