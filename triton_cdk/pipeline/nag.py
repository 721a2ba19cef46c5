"""cdk-nag findings on CDK Pipelines' own resources, each acknowledged narrowly with its reason.

All come from grants CDK Pipelines writes itself (aws-cdk-lib `pipelines`): the artifact bucket
and its key granted read/write to every action role with CDK's wildcard action groups, each
CodeBuild project's own log group and report groups, and the self-mutation step assuming the CDK
bootstrap roles. None reaches the stages' resources.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import pipelines
from constructs import IConstruct

from triton_cdk.nag import acknowledge

# CDK's grantReadWrite on the artifact bucket and its KMS key.
ARTIFACT_ACTIONS = (
    "Action::s3:GetObject*",
    "Action::s3:GetBucket*",
    "Action::s3:List*",
    "Action::s3:DeleteObject*",
    "Action::s3:Abort*",
    "Action::kms:GenerateDataKey*",
    "Action::kms:ReEncrypt*",
)


def _ref(scope: IConstruct) -> str:
    """`<LogicalId>` as cdk-nag writes a resource's reference in its findings."""
    stack = cdk.Stack.of(scope)
    return stack.resolve(stack.get_logical_id(scope.node.default_child))


def acknowledge_pipeline_findings(scope: IConstruct, pipeline: pipelines.CodePipeline) -> None:
    """Call after `build_pipeline()`: the projects and roles exist only then."""
    code_pipeline = pipeline.pipeline
    bucket = code_pipeline.artifact_bucket
    acknowledge(
        bucket,
        "AwsSolutions-S1",
        "Pipeline artifact bucket: transient, KMS-encrypted, TLS-only, reached only by the pipeline's own roles; "
        "CloudTrail records their access.",
    )
    acknowledge(
        scope,
        "AwsSolutions-IAM5",
        "CDK Pipelines grants each action role read/write on the pipeline's own artifact bucket and key "
        "(CDK's grant action groups), scoped to that bucket's objects.",
        applies_to=[*ARTIFACT_ACTIONS, f"Resource::<{_ref(bucket)}.Arn>/*"],
    )
    for construct in scope.node.find_all():
        if isinstance(construct, codebuild.Project):
            project = _ref(construct)
            acknowledge(
                construct,
                "AwsSolutions-IAM5",
                "The CodeBuild project writes its own log streams and test reports only (CDK's default project policy).",
                applies_to=[
                    "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/codebuild/"
                    f"<{project}>:*",
                    f"Resource::arn:<AWS::Partition>:codebuild:<AWS::Region>:<AWS::AccountId>:report-group/<{project}>-*",
                ],
            )
    acknowledge(
        pipeline.self_mutation_project,
        "AwsSolutions-IAM5",
        "Self-mutation assumes the CDK bootstrap roles (tagged aws-cdk:bootstrap-role) of the pipeline's "
        "environments and reads stack state: CDK Pipelines' own policy.",
        applies_to=["Resource::*", "Resource::arn:*:iam::<AWS::AccountId>:role/*"],
    )
