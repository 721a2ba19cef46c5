"""Least-privilege roles for SageMaker (serving) and CodeBuild (model build)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from triton_cdk.artifacts import ArtifactStore
from triton_cdk.images import TritonImageLookup
from triton_cdk.nag import acknowledge, arn_pattern

__all__ = ["ModelBuildRole", "SageMakerExecutionRole"]


def _service_principal(service: str) -> iam.ServicePrincipal:
    # aws:SourceAccount stops another account's SageMaker/CodeBuild from using this role
    # (confused-deputy protection).
    return iam.ServicePrincipal(service, conditions={"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}})


class SageMakerExecutionRole(Construct):
    """The role SageMaker models assume: read models, decrypt, pull the Triton image, log.

    Props: store: the artifact store whose models it reads; images: the Triton image it pulls.
    No managed *FullAccess policy; `Resource: "*"` only for actions that have no resource type.
    """

    def __init__(self, scope: Construct, construct_id: str, *, store: ArtifactStore, images: TritonImageLookup) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.role = iam.Role(
            self,
            "Resource",
            assumed_by=_service_principal("sagemaker.amazonaws.com"),
            description="SageMaker execution role for Triton models",
        )
        store.grant_read_models(self.role)
        images.grant_pull(self.role)
        statements = [
            iam.PolicyStatement(
                sid="WriteLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                # Inference components' containers log to /aws/sagemaker/InferenceComponents/<name>.
                resources=[
                    stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name=f"/aws/sagemaker/{group}/*",
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                    for group in ("Endpoints", "InferenceComponents")
                ],
            ),
            # cloudwatch:PutMetricData has no resource type; the namespace condition narrows it.
            iam.PolicyStatement(
                sid="PutMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}},
            ),
        ]
        for statement in statements:
            self.role.add_to_principal_policy(statement)
        store.allow_model_read(self.role, "SageMakerExecution")
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Scoped to the model prefix, SageMaker's endpoint log groups, and two actions without a resource "
            "type (ecr:GetAuthorizationToken, cloudwatch:PutMetricData with a namespace condition).",
            applies_to=[
                f"Resource::<{stack.get_logical_id(store.bucket.node.default_child)}.Arn>/{store.model_prefix}*",
                "Resource::*",
                "Resource::" + arn_pattern(self, "logs", "log-group:/aws/sagemaker/Endpoints/*"),
                "Resource::" + arn_pattern(self, "logs", "log-group:/aws/sagemaker/InferenceComponents/*"),
            ],
        )


class ModelBuildRole(Construct):
    """The role the CodeBuild model build assumes: write the model prefix with the key.

    The build stack adds what its project needs on top (source read, its own log group).
    """

    def __init__(self, scope: Construct, construct_id: str, *, store: ArtifactStore) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.role = iam.Role(
            self,
            "Resource",
            assumed_by=_service_principal("codebuild.amazonaws.com"),
            description="CodeBuild role of the Triton model build",
        )
        store.grant_write_models(self.role)
        store.allow_model_write(self.role, "ModelBuild")
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Object access is scoped to the content-addressed model prefix; keys are not known at synth.",
            applies_to=[
                f"Resource::<{stack.get_logical_id(store.bucket.node.default_child)}.Arn>/{store.model_prefix}*"
            ],
        )
