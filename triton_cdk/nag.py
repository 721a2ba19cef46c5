"""cdk-nag: the AwsSolutions pack on every synth, and acknowledgements with specific reasons.

cdk-nag 3 runs as a CDK policy-validation plugin: any finding not acknowledged fails synth.
"""

from __future__ import annotations

from collections.abc import Iterable

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def literal_or_placeholder(value: str, placeholder: str) -> str:
    """How cdk-nag writes a stack attribute in a finding: the literal value where the stack's env
    fixes it (e.g. "us-east-1"), the CloudFormation placeholder (e.g. "<AWS::Region>") where not."""
    return placeholder if cdk.Token.is_unresolved(value) else value


def arn_pattern(scope: IConstruct, service: str, resource: str) -> str:
    """`arn:<partition>:<service>:<region>:<account>:<resource>` as cdk-nag prints it for `scope`'s stack."""
    stack = cdk.Stack.of(scope)
    partition = literal_or_placeholder(stack.partition, "<AWS::Partition>")
    region = literal_or_placeholder(stack.region, "<AWS::Region>")
    account = literal_or_placeholder(stack.account, "<AWS::AccountId>")
    return f"arn:{partition}:{service}:{region}:{account}:{resource}"


def enable_aws_solutions_checks(app: cdk.App) -> None:
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks())


def acknowledge(scope: IConstruct, rule: str, reason: str, *, applies_to: Iterable[str] = ()) -> None:
    """Acknowledge `rule` (e.g. "AwsSolutions-IAM5") on `scope` and everything under it.

    `applies_to` narrows it to specific findings, e.g. "Resource::<Bucket.Arn>/models/*"; with
    none the whole rule is acknowledged.
    """
    findings = list(applies_to) or [None]
    for finding in findings:
        rule_id = f"AwsSolutions::{rule}" + (f"[{finding}]" if finding else "")
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
