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

from triton_cdk.guard import acknowledge_guard
from triton_cdk.nag import acknowledge, literal_or_placeholder

__all__ = ["ARTIFACT_ACTIONS", "PIPELINE_BUCKET_GUARD_RULES", "acknowledge_pipeline_findings"]

# AWS's Guard rules on CodePipeline's own buckets (the artifact bucket, cross-region replication buckets).
PIPELINE_BUCKET_GUARD_RULES = {
    "s3_bucket_logging_enabled_check": "Transient pipeline artifacts, reached only by the pipeline's roles; "
    "CloudTrail records their access.",
    "s3_bucket_object_lock_enabled_check": "Each execution writes new artifact objects; Object Lock (never "
    "disabled once on) would keep every source zip of every run.",
    "s3_event_notifications_enabled_check": "CodePipeline reads its artifacts by execution; nothing reacts to "
    "object events.",
    "s3_bucket_versioning_enabled_check": "Every execution writes its artifacts under new keys; no object is "
    "rewritten, so there is no earlier version to keep.",
    "s3_lifecycle_policy_check": "Kept: a V2 pipeline rolls a stage back to an earlier execution's artifacts "
    "(docs/pipeline.md, 'Roll back'), so they must not expire under it.",
}

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


def _account(scope: IConstruct) -> str:
    """The stack's account as cdk-nag writes it in findings: literal where the stack's env sets it."""
    return literal_or_placeholder(cdk.Stack.of(scope).account, "<AWS::AccountId>")


def _partition(scope: IConstruct) -> str:
    # Literal ("aws") once the region is known and @aws-cdk/core:enablePartitionLiterals is on (cdk.json).
    return literal_or_placeholder(cdk.Stack.of(scope).partition, "<AWS::Partition>")


def _env_parts(scope: IConstruct) -> str:
    """`<AWS::Region>:<AWS::AccountId>`, or the literal region/account where the stack's env sets them."""
    return f"{literal_or_placeholder(cdk.Stack.of(scope).region, '<AWS::Region>')}:{_account(scope)}"


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
    for rule, reason in PIPELINE_BUCKET_GUARD_RULES.items():
        acknowledge_guard(bucket, rule, reason)
    acknowledge(
        scope,
        "AwsSolutions-IAM5",
        "CDK Pipelines grants each action role read/write on the pipeline's own artifact bucket and key "
        "(CDK's grant action groups), scoped to that bucket's objects.",
        applies_to=[*ARTIFACT_ACTIONS, f"Resource::<{_ref(bucket)}.Arn>/*"],
    )
    for construct in scope.node.find_all():
        if isinstance(construct, codebuild.Project):
            project, env = _ref(construct), _env_parts(construct)
            acknowledge(
                construct,
                "AwsSolutions-IAM5",
                "The CodeBuild project writes its own log streams and test reports only (CDK's default policy).",
                applies_to=[
                    f"Resource::arn:{_partition(scope)}:logs:{env}:log-group:/aws/codebuild/<{project}>:*",
                    f"Resource::arn:{_partition(scope)}:codebuild:{env}:report-group/<{project}>-*",
                ],
            )
    _acknowledge_cross_region_support(scope, pipeline)
    _acknowledge_asset_publishing(pipeline)
    acknowledge(
        pipeline.self_mutation_project,
        "AwsSolutions-IAM5",
        "Self-mutation assumes the CDK bootstrap roles (tagged aws-cdk:bootstrap-role) of the pipeline's "
        "environments. Its DescribeStacks/ListBucket on * (CDK Pipelines' policy, which cdk-nag reads) are "
        "deployed narrowed to this environment's stacks and the CDK bootstrap buckets (pipeline/scoping.py).",
        applies_to=["Resource::*", f"Resource::arn:*:iam::{_account(scope)}:role/*"],
    )


def _acknowledge_cross_region_support(scope: IConstruct, pipeline: pipelines.CodePipeline) -> None:
    """A stage in another region than the pipeline gets a replication bucket there (CodePipeline's own)."""
    stack = cdk.Stack.of(scope)
    for support in pipeline.pipeline.cross_region_support.values():
        bucket = support.replication_bucket
        acknowledge(
            bucket,
            "AwsSolutions-S1",
            "CodePipeline's cross-region replication bucket: transient artifacts, KMS-encrypted, reached only by "
            "the pipeline's roles.",
        )
        for rule, reason in PIPELINE_BUCKET_GUARD_RULES.items():
            acknowledge_guard(bucket, rule, reason)
        acknowledge(
            scope,
            "AwsSolutions-IAM5",
            "The pipeline's roles read/write CodePipeline's cross-region replication bucket's objects only.",
            applies_to=[f"Resource::arn:{_partition(scope)}:s3:::{stack.resolve(bucket.bucket_name)}/*"],
        )
    if pipeline.pipeline.cross_region_support:
        acknowledge(
            pipeline.pipeline.role,
            "AwsSolutions-IAM5",
            "CodePipeline may use the KMS keys of its cross-region replication buckets, whose ARNs it does not know "
            "at synth (CDK's own statement on the pipeline role).",
            applies_to=["Resource::*"],
        )


def _acknowledge_asset_publishing(pipeline: pipelines.CodePipeline) -> None:
    """Stages with file assets (the build stack's Lambda code) get CDK Pipelines' asset publishing step."""
    assets = pipeline.node.try_find_child("Assets")
    if assets is None:
        return
    env = _env_parts(assets)
    acknowledge(
        assets,
        "AwsSolutions-IAM5",
        "CDK Pipelines' asset publishing role: runs its own CodeBuild projects (log groups, reports, builds) "
        "whose names are generated; it publishes through the bootstrap file-publishing roles only. Its "
        "StartBuild/StopBuild/BatchGetBuilds on * (what cdk-nag reads) are deployed narrowed to this account and "
        "region's projects (pipeline/scoping.py): the asset projects are made after the role.",
        applies_to=[
            "Resource::*",
            f"Resource::arn:{_partition(assets)}:logs:{env}:log-group:/aws/codebuild/*",
            f"Resource::arn:{_partition(assets)}:codebuild:{env}:report-group/*",
        ],
    )
