"""The gate as an aws-cdk-lib policy-validation plugin over the synthesized templates."""

from __future__ import annotations

import aws_cdk as cdk
import jsii
from botocore import __version__ as BOTOCORE_VERSION

from triton_cdk.api_constraints.check import ConfigFieldHint, Violation, check_template_file

__all__ = ["PLUGIN_NAME", "ApiConstraintsCheck"]

PLUGIN_NAME = "TritonApiConstraints"


@jsii.implements(cdk.IPolicyValidationPluginBeta1)
class ApiConstraintsCheck:
    """The gate as an aws-cdk-lib policy-validation plugin (`cdk.Validations.of(app).add_plugins(...)` or
    `cdk.App(policy_validation_beta1=[...])`): each violation fails the synth, reported under the resource's
    construct path (aws-cdk-lib finds it from the logical id) with the property path as its location.

    `config_field_hint`: (stack, resource type, property path) -> the config field behind a property, named in
    each violation (the app's: stacks/api_constraint_hints.py). Default: no hint.
    """

    def __init__(self, *, config_field_hint: ConfigFieldHint | None = None) -> None:
        self._hint = config_field_hint

    @property
    def name(self) -> str:
        return PLUGIN_NAME

    @property
    def version(self) -> str:
        return BOTOCORE_VERSION

    @property
    def rule_ids(self) -> list[str] | None:
        return None

    def validate(self, context: cdk.IPolicyValidationContextBeta1) -> cdk.PolicyValidationPluginReportBeta1:
        violations = [
            _policy_violation(path, violation)
            for path in context.template_paths
            for violation in check_template_file(path, self._hint).violations
        ]
        return cdk.PolicyValidationPluginReportBeta1(
            success=not violations, violations=violations, plugin_version=BOTOCORE_VERSION
        )


def _policy_violation(template_path: str, violation: Violation) -> cdk.PolicyViolationBeta1:
    change = f"change {violation.config_field}" if violation.config_field else "change the value"
    return cdk.PolicyViolationBeta1(
        rule_name=f"{violation.service}:{violation.operation}:{violation.member}",
        description=violation.message,
        fix=f"{change} so that it meets the constraint: {violation.constraint}",
        severity="error",
        violating_resources=[
            cdk.PolicyViolatingResourceBeta1(
                resource_logical_id=violation.logical_id,
                template_path=template_path,
                locations=[f"Properties.{violation.property_path}"],
            )
        ],
    )
