"""The API-constraint gate: every literal property of every SageMaker, Application Auto Scaling, CloudWatch,
CodeBuild, SNS and S3 resource of a synthesized template, checked against the constraints that botocore's
service models state for the API member CloudFormation passes it to (issue #22 E1).

Source: botocore's service models (`botocore/data/<service>/<api-version>/service-2.json`, the models the AWS SDKs
are generated from): a string's `min`/`max` length (in characters), `pattern` and `enum`; an integer's or a
float's `min`/`max` value; a list's or a map's `min`/`max` count. CloudFormation hands a resource's properties to
the service's API (SageMaker's `CreateEndpoint`, CloudWatch's `PutMetricAlarm`, ...), and the service refuses
what its model refuses, after the stacks before it have deployed: this gate refuses it at synth instead.

A CloudFormation property maps to the API member of the same name (PascalCase; CodeBuild's camelCase members match
regardless of case), or through `MAPPINGS`' explicit tables where CloudFormation names or nests it differently
(S3's `BucketEncryption.ServerSideEncryptionConfiguration` is `PutBucketEncryption`'s `Rules`; a scalable
target's `ScheduledActions` are `PutScheduledAction` calls). A property no table maps and no member matches is
"uncovered" (`CheckResult.uncovered`); properties deliberately left out carry the reason (`NotChecked`).

Values that CloudFormation resolves at deploy time (`Ref`, `Fn::*`) are not checked; only literals are. A
botocore pattern is a Java regular expression matched against the whole value (`re.fullmatch`, ASCII `\\w\\d\\s` as
in Java); Java's `\\p{..}` classes and UTF-16 surrogate ranges are translated, and a pattern Python still cannot
compile is recorded in `CheckResult.skipped_patterns`, never a crash.

`ApiConstraintsCheck` runs the gate as a CDK policy-validation plugin (aws-cdk-lib's `IPolicyValidationPluginBeta1`,
registered by stacks/app_factory.py): each violation names the stack, the resource, the property path, the value,
the constraint and its source (service model, operation, member), and, given a `config_field_hint` (the app's:
stacks/api_constraint_hints.py; this package knows no config), the config field that produced it.
"""

from triton_cdk.api_constraints.check import (
    CheckResult,
    SkippedPattern,
    Violation,
    check_resource,
    check_template,
    check_template_file,
    is_intrinsic,
    service_model,
)
from triton_cdk.api_constraints.mapping import MAPPINGS, SERVICE_PREFIXES, NotChecked, ResourceMapping, To, in_scope
from triton_cdk.api_constraints.plugin import PLUGIN_NAME, ApiConstraintsCheck

# What the package re-exports, then its modules (each lists its own public names in its `__all__`).
__all__ = [
    "MAPPINGS",
    "PLUGIN_NAME",
    "SERVICE_PREFIXES",
    "ApiConstraintsCheck",
    "CheckResult",
    "NotChecked",
    "ResourceMapping",
    "SkippedPattern",
    "To",
    "Violation",
    "check",
    "check_resource",
    "check_template",
    "check_template_file",
    "in_scope",
    "is_intrinsic",
    "java_regex",
    "mapping",
    "plugin",
    "service_model",
]
