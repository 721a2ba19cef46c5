"""Policy validation on every synth: cdk-nag's AwsSolutions pack and AWS's Guard rules, and
acknowledgements with specific reasons.

Both run as CDK policy-validation plugins, registered the documented way (`Validations.of(app).add_plugins`),
beside aws-cdk-lib's own CloudFormation default rules (cdk.json `@aws-cdk/core:validateAgainstDefaultRules`): any
finding not acknowledged fails synth. The Guard rules are AWS Control Tower's proactive controls, run by
`cdklabs-cdk-validator-cfnguard` with the cfn-guard binary its package bundles (nothing to download at synth;
triton_cdk/guard_plugin.py says why each finding is an error).
"""

from __future__ import annotations

from collections.abc import Iterable

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from triton_cdk.guard import BuildStackFindings, is_build_stack
from triton_cdk.guard_plugin import StrictGuardValidator

__all__ = [
    "acknowledge",
    "add_checks_to_stage",
    "arn_pattern",
    "enable_aws_solutions_checks",
    "enable_checks",
    "literal_or_placeholder",
]


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
    """cdk-nag (AwsSolutions) and the Guard rules on every stack of `app`, nested stages included, beside
    aws-cdk-lib's CloudFormation default rules (which every app runs unless `cdk synth --no-validation`).

    Call once the app's stacks are built: the build stacks' acknowledgements (`BuildStackFindings`) are made
    here, over each build stack's constructs fetched in one jsii round trip. As an Aspect on the app they cost a
    Python callback from Node for every construct of every stack (223 on the dev stage, about 0.3 s of each
    synth). A finding on a resource added after this call is not acknowledged: synth fails on it. Nested Stages
    (the pipeline's) call `add_checks_to_stage` when they are created instead: CDK Pipelines synthesizes a stage
    as soon as it is added, before this runs.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(), StrictGuardValidator())
    for child in app.node.children:
        if isinstance(child, cdk.Stack) and is_build_stack(child):
            findings = BuildStackFindings()
            for construct in child.node.find_all():  # one round trip, not a callback per construct
                findings.visit(construct)


def add_checks_to_stage(stage: cdk.Stage) -> None:
    """What a nested Stage needs of its own for the checks (Aspects do not cross Stage boundaries); call
    it before the stage's stacks are added. Visits the stage's every construct; only build stacks act."""
    cdk.Aspects.of(stage).add(BuildStackFindings(only_build_stacks=True))


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
