"""cdk-nag: the AwsSolutions pack on every synth, and acknowledgements with specific reasons.

cdk-nag 3 runs as a CDK policy-validation plugin: any finding not acknowledged fails synth.
"""

from __future__ import annotations

from collections.abc import Iterable

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


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
