"""Policy validation on every synth: cdk-nag's AwsSolutions pack and AWS's Guard rules, and
acknowledgements with specific reasons.

Both run as CDK policy-validation plugins: any finding not acknowledged fails synth. The Guard
rules are AWS Control Tower's proactive controls, run by `cdklabs-cdk-validator-cfnguard` with the
cfn-guard binary its package bundles (nothing to download at synth).
"""

from __future__ import annotations

from collections.abc import Iterable

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from triton_cdk.guard import BuildStackFindings
from triton_cdk.guard_plugin import StrictGuardValidator


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


def enable_checks(app: cdk.App) -> None:
    """cdk-nag (AwsSolutions) and the Guard rules on every stack of `app`, nested stages included."""
    # Before any stack exists: add_checks_to_stage does the same for each nested Stage.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(), StrictGuardValidator())
    add_checks_to_stage(app)


def add_checks_to_stage(stage: cdk.Stage) -> None:
    """What a Stage needs of its own for the checks: Aspects do not cross Stage boundaries."""
    cdk.Aspects.of(stage).add(BuildStackFindings())


# The name the area tests' own apps call.
enable_aws_solutions_checks = enable_checks


def acknowledge(scope: IConstruct, rule: str, reason: str, *, applies_to: Iterable[str] = ()) -> None:
    """Acknowledge `rule` (e.g. "AwsSolutions-IAM5") on `scope` and everything under it.

    `applies_to` narrows it to specific findings, e.g. "Resource::<Bucket.Arn>/models/*"; with
    none the whole rule is acknowledged.
    """
    findings = list(applies_to) or [None]
    for finding in findings:
        rule_id = f"AwsSolutions::{rule}" + (f"[{finding}]" if finding else "")
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
