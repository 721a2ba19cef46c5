"""InstanceTypeGuard: refuses, with the procedure, an update SageMaker would refuse halfway.

SageMaker "Update endpoints that use auto scaling": changing the instance type of a variant that is a
scalable target (or removing such a variant) fails; the variant has to be deregistered first, updated,
and registered again. One CloudFormation update cannot do that in order (the scalable target is
deregistered only in the clean-up phase, after the endpoint update), so the endpoint depends on this
custom resource: its handler (`index.py` in the folder the `handler_dir` prop names; this app ships
lambda/instance_type_guard/) compares the previous and the new variants and fails the update before the
endpoint is touched, naming the three-deploy procedure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from triton_cdk.guard import acknowledge_guard

__all__ = ["HANDLER_DIR", "RESOURCE_TYPE", "InstanceTypeGuard"]

RESOURCE_TYPE = "Custom::TritonInstanceTypeGuard"
# The handler ships with the construct (package data; pyproject.toml): a folder, not a Python package.
HANDLER_DIR = Path(__file__).resolve().parent / "handlers" / "instance_type_guard"


class InstanceTypeGuard(Construct):
    """Props: endpoint_name; variants (name -> instance type); autoscaled (names of scaled variants);
    handler_dir: the folder holding the handler's `index.py` (`handler`), inlined into the template (it uses
    only the standard library). Default: - the handler shipped with this construct (package data:
    triton_cdk/serving/handlers/instance_type_guard/);
    log_key: a key of this stack that encrypts the handler's log group. Default: - CloudWatch Logs' own keys.

    Create it whether or not the endpoint is autoscaled now: the previous deployment's autoscaling is
    what matters, and removing autoscaling in the same update as the instance type fails too.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variants: Mapping[str, str],
        autoscaled: Sequence[str],
        handler_dir: Path | None = None,
        log_key: kms.Key | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        log_group_name = f"/triton/endpoints/{endpoint_name}/instance-type-guard"
        if log_key is not None:
            _allow_log_group(log_key, log_group_name)
        log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=log_group_name,
            encryption_key=log_key,
            retention=logs.RetentionDays.ONE_YEAR,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        self.function = lambda_.Function(
            self,
            "Handler",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.handler",
            code=lambda_.Code.from_inline(((handler_dir or HANDLER_DIR) / "index.py").read_text()),
            timeout=cdk.Duration.seconds(60),
            role=role,
            log_group=log_group,
            description="Refuses instance-type changes of autoscaled SageMaker variants (SageMaker refuses them)",
        )
        log_group.grant_write(role)
        # CDK makes the function depend on its role, which the Role GetAtt already does (cfn-lint W3005): keep
        # only the wait for the role's policy, so the first invocation may write its logs.
        policy = role.node.find_child("DefaultPolicy").node.default_child
        self.function.node.default_child.add_override("DependsOn", [cdk.Stack.of(self).get_logical_id(policy)])
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            resource_type=RESOURCE_TYPE,
            # The handler answers in seconds; a lost answer must not hold the deployment for CloudFormation's hour.
            service_timeout=cdk.Duration.minutes(5),
            properties={"EndpointName": endpoint_name, "Variants": dict(variants), "Autoscaled": sorted(autoscaled)},
        )
        acknowledge_guard(
            self.function,
            "lambda_inside_vpc_check",
            "Compares two sets of resource properties and answers CloudFormation's pre-signed S3 URL; it reads "
            "nothing and serves nothing, and the stage has no VPC to place it in.",
        )
        if log_key is None:
            acknowledge_guard(
                log_group,
                "cloudwatch_log_group_encrypted_check",
                "Logs of the guard's decisions (variant names and instance types only); CloudWatch Logs encrypts "
                "all log data at rest with its own keys.",
            )


def _allow_log_group(key: kms.Key, log_group_name: str) -> None:
    """CloudWatch Logs User Guide, "Encrypt log data in CloudWatch Logs using AWS KMS": the regional logs
    principal, limited by the encryption context to this one log group (named, so the key need not depend on
    the group, which depends on the key)."""
    stack = cdk.Stack.of(key)
    group_arn = stack.format_arn(
        service="logs", resource="log-group", resource_name=log_group_name, arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AllowTheInstanceTypeGuardLogs",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"],
            resources=["*"],  # in a key policy "*" means this key
            conditions={"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": group_arn}},
        )
    )
