"""Stateful stack: key, buckets, bucket policy and the roles the policy names."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from triton_cdk.artifacts import ArtifactStore
from triton_cdk.config import AppConfig
from triton_cdk.images import TritonImageLookup
from triton_cdk.roles import ModelBuildRole, SageMakerExecutionRole


class ArtifactStack(cdk.Stack):
    """Kept apart from the stateless stacks and termination-protected: deleting or replacing
    the bucket or key would lose every built model."""

    def __init__(self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, termination_protection=True, **kwargs)
        images = TritonImageLookup(self, "TritonImage", release=config.triton_release)
        self.store = ArtifactStore(
            self,
            "Artifacts",
            noncurrent_version_expiration=cdk.Duration.days(config.artifacts.noncurrent_version_expiration_days),
            access_log_expiration=cdk.Duration.days(config.artifacts.access_log_expiration_days),
            bucket_name=config.artifacts.bucket_name,
        )
        # The build stack's log groups (CodeBuild, the ensure-artifact functions) are encrypted with this key.
        self.store.allow_log_groups(f"Triton-{config.stage}-")
        for account in config.artifacts.reader_accounts:
            self.store.allow_account_read(account)
        self.execution_role = SageMakerExecutionRole(self, "ExecutionRole", store=self.store, images=images).role
        self.build_role = ModelBuildRole(self, "BuildRole", store=self.store).role

        cdk.CfnOutput(self, "ArtifactBucketName", value=self.store.bucket.bucket_name)
        cdk.CfnOutput(self, "ExecutionRoleArn", value=self.execution_role.role_arn)
        # The one export of the bucket's ARN under a fixed name (consumers' policies, and so their
        # cdk-nag acknowledgements, name it). Made here, never by a consumer: CloudFormation refuses
        # a second export of the same name (export names are unique per account and region).
        self.bucket_arn_export = cdk.CfnOutput(
            self,
            "ArtifactBucketArnExport",
            value=self.store.bucket.bucket_arn,
            export_name=f"{self.stack_name}-ArtifactBucketArn",
        )
        # The key's ARN likewise, for a consumer that exists on one deploy path only (the pipeline's smoke
        # access): a reference would add an automatic export that the other path's synth lacks.
        self.key_arn_export = cdk.CfnOutput(
            self, "ArtifactKeyArnExport", value=self.store.key.key_arn, export_name=f"{self.stack_name}-ArtifactKeyArn"
        )

    @property
    def bucket_arn_import(self) -> str:
        """`Fn::ImportValue` of the bucket's ARN, for the stage's other stacks."""
        return cdk.Fn.import_value(self.bucket_arn_export.export_name)

    @property
    def key_arn_import(self) -> str:
        """`Fn::ImportValue` of the key's ARN, for the stage's other stacks."""
        return cdk.Fn.import_value(self.key_arn_export.export_name)
