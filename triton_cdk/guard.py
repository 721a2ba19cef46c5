"""AWS's Guard rules (AWS Control Tower proactive controls) beside cdk-nag: fixes, and acknowledgements.

`cdklabs-cdk-validator-cfnguard` runs the controls' Guard rules on every synthesized template
(triton_cdk/guard_plugin.py; triton_cdk/nag.py adds it). A finding is fixed where the control fits
this app, else acknowledged on the one construct it concerns, with the reason. The rule ids are the
Guard rule names the plugin reports ("Acknowledge with 'cdk-validator-cfnguard::<rule>'"); the
control ids (CT.S3.PR.9, ...) and their pages:
https://docs.aws.amazon.com/controltower/latest/controlreference/proactive-controls.html
"""

from __future__ import annotations

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import IConstruct

__all__ = [
    "GUARD_ACKNOWLEDGEMENT_NAMESPACE",
    "GUARD_PLUGIN",
    "MIN_LOG_RETENTION_DAYS",
    "BuildStackFindings",
    "acknowledge_guard",
    "is_build_stack",
    "restrict_grants_to_aws_services",
]

# The plugin that reports the Guard rules' findings (its name in the validation report), and the namespace of
# their acknowledgements: the cdklabs plugin's own.
GUARD_PLUGIN = "cdk-validator-cfnguard"
GUARD_ACKNOWLEDGEMENT_NAMESPACE = "cdk-validator-cfnguard"
# CT.CLOUDWATCH.PR.2: log groups kept at least a year.
MIN_LOG_RETENTION_DAYS = 365


def acknowledge_guard(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge the Guard rule `rule` (e.g. "s3_bucket_object_lock_enabled_check") on `scope` and below."""
    cdk.Validations.of(scope).acknowledge(
        cdk.Acknowledgment(id=f"{GUARD_ACKNOWLEDGEMENT_NAMESPACE}::{rule}", reason=reason)
    )


def restrict_grants_to_aws_services(key: kms.IKey) -> None:
    """CT.KMS.PR.3: only AWS services may create grants on `key` (for resources they manage with it).

    The control's own statement: deny kms:CreateGrant to every principal unless the grant is for an
    AWS resource or the caller is an AWS service (both `BoolIfExists` false).
    """
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="DenyGrantsExceptForAwsServices",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["kms:CreateGrant"],
            resources=["*"],  # in a key policy "*" means this key
            conditions={"BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}},
        )
    )


def is_build_stack(stack: cdk.Stack) -> bool:
    """The stage's build stack (`Triton-<stage>-Build`): its frameworks' resources get the acknowledgements."""
    return stack.node.id.endswith("-Build")


@jsii.implements(cdk.IAspect)
class BuildStackFindings:
    """Acknowledges, per resource, the findings on what the build stack's frameworks make.

    Its Lambda functions are custom-resource handlers (ensure-artifact and CDK's Provider framework),
    its state machine the Provider framework's waiter, its log groups those of the handlers and the
    builds. Only the build stack's resources: the same resource elsewhere is a finding to look at. Run
    over a build stack's constructs, or as an Aspect with `only_build_stacks` on a Stage (triton_cdk/nag.py).
    """

    def __init__(self, *, only_build_stacks: bool = False) -> None:
        self._only_build_stacks = only_build_stacks

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, cdk.CfnResource):
            return
        if self._only_build_stacks and not is_build_stack(cdk.Stack.of(node)):
            return
        if isinstance(node, lambda_.CfnFunction) and node.vpc_config is None:
            acknowledge_guard(
                node,
                "lambda_inside_vpc_check",
                "A custom-resource handler that calls only AWS APIs (S3, KMS, CodeBuild, Step Functions) through "
                "their public endpoints and serves nothing; the stage has no VPC to place it in (a VPC would need "
                "a NAT gateway or an interface endpoint per service).",
            )
        elif isinstance(node, sfn.CfnStateMachine):
            acknowledge_guard(
                node,
                "step_functions_state_machine_tracing_enabled_check",
                "CDK's custom-resource Provider waiter: it only re-invokes the isComplete handler on a timer, and "
                "the Provider has no tracing option; the handlers' own logs record each call.",
            )
        elif isinstance(node, logs.CfnLogGroup):
            if node.kms_key_id is None:
                acknowledge_guard(
                    node,
                    "cloudwatch_log_group_encrypted_check",
                    "Build and custom-resource logs (commands, S3 keys, request ids; no model data or secrets): "
                    "CloudWatch Logs encrypts all log data at rest with its own keys.",
                )
            elif cdk.Token.is_unresolved(node.kms_key_id):
                acknowledge_guard(
                    node,
                    "cloudwatch_log_group_encrypted_check",
                    "Encrypted with the stage's KMS key (KmsKeyId), which lives in the stateful artifact stack and "
                    "arrives here as Fn::ImportValue; the Guard rule accepts only a literal or local reference.",
                )
            if node.retention_in_days is not None and node.retention_in_days < MIN_LOG_RETENTION_DAYS:
                acknowledge_guard(
                    node,
                    "cloudwatch_log_group_retention_period_check",
                    "Retention is the stage's choice (build.log_retention_days): these logs explain one build or "
                    "deploy; what was built is recorded with the artifact (content-addressed key) in S3.",
                )
