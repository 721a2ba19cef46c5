"""AWS's Guard rules on every synth: the cdklabs plugin (`cdklabs-cdk-validator-cfnguard`) registered the
documented way, with one in-process adjustment: every violation it reports is an error.

Why the adjustment: the plugin gives its violations no severity, and aws-cdk-lib (2.275,
`synthesis-validation.js`) re-judges a report once any of its findings is acknowledged: success unless a
violation left has severity "error" or "fatal". Registered as is, the first acknowledgement would let every
later finding pass (tests/contract/test_guard_rules.py proves both). `StrictGuardValidator` calls the plugin's
own `validate` in the jsii kernel and returns the same findings, each marked "error", under the plugin's name,
so acknowledgements stay `cdk-validator-cfnguard::<rule>`.

The rules are AWS Control Tower's proactive controls bundled with the plugin (pinned in requirements.txt), run
by the cfn-guard binary it bundles: all of them, on every template (issue #23: no rule selection of our own).
A plugin failure (the binary missing, a crash) is reported by aws-cdk-lib as a failed plugin: the synth fails.
"""

from __future__ import annotations

import importlib.metadata

import aws_cdk as cdk
import jsii
from cdklabs.cdk_validator_cfnguard import CfnGuardValidator

from triton_cdk.guard import GUARD_PLUGIN

__all__ = ["GUARD_PACKAGE", "StrictGuardValidator"]

GUARD_PACKAGE = "cdklabs-cdk-validator-cfnguard"


@jsii.implements(cdk.IPolicyValidationPluginBeta1)
class StrictGuardValidator:
    """`CfnGuardValidator(**props)` whose every violation is an error (see the module doc)."""

    def __init__(self, **props) -> None:
        self._plugin = CfnGuardValidator(**props)

    @property
    def name(self) -> str:
        return GUARD_PLUGIN

    @property
    def version(self) -> str:
        return importlib.metadata.version(GUARD_PACKAGE)

    @property
    def rule_ids(self) -> list[str] | None:
        return self._plugin.rule_ids

    def validate(self, context: cdk.IPolicyValidationContextBeta1) -> cdk.PolicyValidationPluginReportBeta1:
        report = self._plugin.validate(context)
        violations = [
            cdk.PolicyViolationBeta1(
                rule_name=violation.rule_name,
                description=violation.description or violation.rule_name,
                fix=violation.fix,
                rule_metadata=violation.rule_metadata,
                severity="error",
                violating_resources=list(violation.violating_resources),
            )
            for violation in report.violations
        ]
        return cdk.PolicyValidationPluginReportBeta1(
            success=report.success and not violations,
            violations=violations,
            plugin_version=self.version,
            metadata=report.metadata,
        )
