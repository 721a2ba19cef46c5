"""One log group for every CodeBuild project of the pipeline: KMS-encrypted, kept a year.

Without it CodeBuild writes to `/aws/codebuild/<project>` groups it creates itself, unencrypted by
a customer key and never expiring. AWS Control Tower's proactive controls CT.CODEBUILD.PR.3 (a
project's logging is configured), CT.CLOUDWATCH.PR.2 (a log group is kept at least a year) and
CT.CLOUDWATCH.PR.3 (a log group is encrypted with a KMS key) check this (triton_cdk/guard.py).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from triton_cdk.guard import restrict_grants_to_aws_services

__all__ = ["PipelineLogs"]


class PipelineLogs(Construct):
    """`options`: the logging every pipeline project gets (CDK Pipelines' `code_build_defaults`)."""

    def __init__(self, scope: Construct, construct_id: str, *, log_group_name: str) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.key = kms.Key(
            self, "Key", description="Encrypts the promotion pipeline's build logs", enable_key_rotation=True
        )
        restrict_grants_to_aws_services(self.key)
        # CloudWatch Logs User Guide, "Encrypt log data in CloudWatch Logs using AWS KMS": the regional
        # logs principal, limited by the encryption context to this log group. Its name is fixed so the
        # key can name it without depending on the group (which depends on the key).
        group_arn = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=log_group_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowThePipelineLogGroup",
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"],
                resources=["*"],  # in a key policy "*" means this key
                conditions={"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": group_arn}},
            )
        )
        self.log_group = logs.LogGroup(
            self,
            "Group",
            log_group_name=log_group_name,
            encryption_key=self.key,
            retention=logs.RetentionDays.ONE_YEAR,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.options = codebuild.LoggingOptions(
            cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=self.log_group)
        )
