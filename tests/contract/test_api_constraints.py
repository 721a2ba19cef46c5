"""The API-constraint gate (issue #22 E1): every literal property of every SageMaker, Application Auto Scaling,
CloudWatch, CodeBuild, SNS and S3 resource against botocore's service models.

Source of every constraint: botocore's service models (`botocore/data/<service>/<version>/service-2.json`, the
models the AWS SDKs are generated from), as pinned by requirements.txt (boto3/botocore): a string's `min`/`max`
length, `pattern` (a Java regular expression the service matches against the whole value) and `enum`, a number's
`min`/`max`, a list's or map's `min`/`max` count, for the API member CloudFormation hands the property to
(CloudFormation's resource reference names the properties; triton_cdk/api_constraints/mapping.py maps them).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sagemaker as sagemaker
from contract_helpers import ShippedTemplate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth_helpers import CONFIG_DIR, cdk_context

from stacks.api_constraint_hints import config_field_hint
from triton_cdk.api_constraints import (
    MAPPINGS,
    PLUGIN_NAME,
    ApiConstraintsCheck,
    CheckResult,
    NotChecked,
    To,
    check_resource,
    check_template,
    in_scope,
    service_model,
)
from triton_cdk.api_constraints.java_regex import compiled_pattern


def _template(resource_type: str, properties: dict) -> dict:
    return {"Resources": {"Hostile": {"Type": resource_type, "Properties": properties}}}


def _gate(shipped_templates: list[ShippedTemplate]) -> dict[str, CheckResult]:
    return {t.label: check_template(t.template, t.stack, config_field_hint) for t in shipped_templates}


# ---------------------------------------------------------------------------------------------------------
# Every shipped template passes, and the gate sees every resource of the six services


def test_every_shipped_template_passes_the_gate(shipped_templates) -> None:
    """dev, prod, the pipeline with its stage assemblies, examples/config/*, tests/configs/*: nothing the APIs
    would refuse."""
    results = _gate(shipped_templates)
    problems = [v.message for result in results.values() for v in result.violations]
    assert not problems, "\n".join(problems)
    assert sum(r.checked_values for r in results.values()) > 1000, "the gate checked (almost) nothing"


def test_every_resource_type_of_the_six_services_is_mapped(shipped_templates) -> None:
    """A new SageMaker/Auto Scaling/CloudWatch/CodeBuild/SNS/S3 resource type, or a property no table maps and no
    API member matches, fails here until mapping.py maps it (or says why it is not checked)."""
    types = {r["Type"] for t in shipped_templates for r in t.template.get("Resources", {}).values()}
    in_scope_types = {t for t in types if in_scope(t)}
    assert len(in_scope_types) >= 10, in_scope_types
    assert in_scope_types <= set(MAPPINGS), sorted(in_scope_types - set(MAPPINGS))
    uncovered = Counter(u for result in _gate(shipped_templates).values() for u in result.uncovered)
    assert not uncovered, "properties mapped to no API member:\n" + "\n".join(sorted(uncovered))


def test_literals_of_every_mapped_type_are_checked(shipped_templates) -> None:
    """Not vacuous: each type with literal properties in the shipped templates has values checked."""
    checked: Counter[str] = Counter()
    for shipped in shipped_templates:
        for logical_id, resource in shipped.template.get("Resources", {}).items():
            checked[resource["Type"]] += check_resource(shipped.stack, logical_id, resource).checked_values
    for resource_type in (
        "AWS::SageMaker::Model",
        "AWS::SageMaker::EndpointConfig",
        "AWS::SageMaker::Endpoint",
        "AWS::SageMaker::InferenceComponent",
        "AWS::ApplicationAutoScaling::ScalableTarget",
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::Dashboard",
        "AWS::CodeBuild::Project",
        "AWS::S3::Bucket",
    ):
        assert checked[resource_type] > 0, f"no literal of {resource_type} checked"


def test_no_pattern_met_by_a_shipped_literal_is_skipped(shipped_templates) -> None:
    """Every botocore pattern a shipped value meets compiles in Python (Java's \\p{..} classes and surrogate pairs
    translated): nothing is waved through unchecked."""
    skipped = {(s.source, s.pattern, s.reason) for r in _gate(shipped_templates).values() for s in r.skipped_patterns}
    assert not skipped, skipped


def test_the_stage_and_pipeline_apps_register_the_gate() -> None:
    """stacks/app_factory.py registers the plugin on both apps (aws-cdk-lib leaves a plugin that found nothing out
    of validation-report.json, so the registration is read from the app, as app.py builds it: no synth needed).
    The pipeline app's plugins get its stage assemblies' templates too
    (test_the_plugin_fails_the_synth_naming_the_construct)."""
    from stacks.app_factory import create_app, create_pipeline_app
    from stage_config import load_stage
    from stage_config.pipeline import load_pipeline

    stage_app, _ = create_app(load_stage("dev", CONFIG_DIR), context=cdk_context())
    pipeline_config, stage_configs = load_pipeline(CONFIG_DIR / "pipeline.yaml", CONFIG_DIR)
    pipeline_app, _ = create_pipeline_app(pipeline_config, stage_configs, context=cdk_context())
    for app in (stage_app, pipeline_app):
        assert PLUGIN_NAME in [plugin.name for plugin in app.policy_validation_beta1]


# ---------------------------------------------------------------------------------------------------------
# The mapping table itself names real operations and members


def test_every_mapping_names_an_operation_and_members_of_botocores_model() -> None:
    for resource_type, mapping in MAPPINGS.items():
        model = service_model(mapping.service)
        assert mapping.operation in model.operation_names, (resource_type, mapping.operation)
        for prop, target in mapping.top.items():
            if isinstance(target, NotChecked):
                assert target.reason, (resource_type, prop)
                continue
            assert isinstance(target, To)
            shape = model.operation_model(target.operation).input_shape
            for name in target.member:
                assert name in shape.members, (resource_type, prop, target)
                shape = shape.members[name]


# CloudFormation's side of the table, from CloudFormation's resource schemas (the registry schemas cfn-lint ships,
# pinned in requirements-dev.txt): a property no table maps is reported, not passed silently.

# S3 bucket configurations the app never sets (the coverage test over shipped templates fails if one appears).
NOT_MAPPED = {
    f"AWS::S3::Bucket:{name}"
    for name in (
        "AbacStatus",
        "AnalyticsConfigurations",
        "BucketNamePrefix",
        "IntelligentTieringConfigurations",
        "InventoryConfigurations",
        "MetadataConfiguration",
        "MetadataTableConfiguration",
        "MetricsConfigurations",
        "NotificationConfiguration",
        "ReplicationConfiguration",
        "WebsiteConfiguration",
    )
}


def _cfn_schema(resource_type: str) -> dict:
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    return PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema


def _resolved(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["definitions"][node["$ref"].split("/")[-1]] | {k: v for k, v in node.items() if k != "$ref"}
    for key in ("oneOf", "anyOf"):
        if key in node and "properties" not in node and "type" not in node:
            node = node[key][0]
    return node


def _example(schema: dict, node: dict, path: str, read_only: set[str], depth: int = 0):
    """A literal for every writable property of `node`, nested (CloudFormation's read-only ones left out)."""
    node = _resolved(schema, node)
    kind = node.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if "properties" in node:
        return {
            key: _example(schema, child, f"{path}/{key}", read_only, depth + 1)
            for key, child in node["properties"].items()
            if f"{path}/{key}" not in read_only and depth < 6
        }
    if kind == "array":
        return [_example(schema, node.get("items", {}), f"{path}/*", read_only, depth + 1)]
    return {"integer": 1, "number": 1, "boolean": True, "object": {}}.get(kind, "x")


def test_every_cloudformation_property_of_a_mapped_type_reaches_an_api_member() -> None:
    """Every writable property, at every depth, of each mapped type in CloudFormation's resource schema maps to an
    API member or says why not; only the S3 configurations in NOT_MAPPED do neither."""
    uncovered = set()
    for resource_type in MAPPINGS:
        schema = _cfn_schema(resource_type)
        read_only = {p.removeprefix("/properties") for p in schema.get("readOnlyProperties", [])}
        properties = _example(schema, schema, "", read_only)
        uncovered |= set(check_resource("S", "R", {"Type": resource_type, "Properties": properties}).uncovered)
    assert uncovered == NOT_MAPPED


def test_every_renamed_property_exists_in_cloudformations_schema() -> None:
    """The explicit tables name real CloudFormation properties (no dead rows)."""
    for resource_type, mapping in MAPPINGS.items():
        schema = _cfn_schema(resource_type)
        for path in [*mapping.top, *mapping.nested]:
            node = schema
            for token in path.replace("[]", ".[]").split("."):
                node = _resolved(schema, node)
                node = node["items"] if token == "[]" else node.get("properties", {}).get(token)
                assert node is not None, (resource_type, path)


# ---------------------------------------------------------------------------------------------------------
# Hostile values: each refused, naming the property, the constraint and its source

_VARIANT = {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1}
_ALARM = {"ComparisonOperator": "GreaterThanThreshold", "EvaluationPeriods": 1, "Threshold": 1}
_BLUE_GREEN = {"TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE"}}
_SSE = {"ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES512"}}]}

HOSTILE = [
    # (case, resource type, properties, property path, constraint (part of), source (part of))
    (
        "endpoint name too long",
        "AWS::SageMaker::Endpoint",
        {"EndpointName": "e" * 64, "EndpointConfigName": "c"},
        "EndpointName",
        "at most 63 characters",
        "botocore sagemaker (2017-07-24) CreateEndpoint: EndpointName (shape EndpointName)",
    ),
    (
        "endpoint name pattern",
        "AWS::SageMaker::Endpoint",
        {"EndpointName": "dev_bert", "EndpointConfigName": "c"},
        "EndpointName",
        "matches the pattern [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
        "CreateEndpoint: EndpointName",
    ),
    (
        "instance type not in the enum",
        "AWS::SageMaker::EndpointConfig",
        {"ProductionVariants": [{**_VARIANT, "InstanceType": "ml.g5.huge"}]},
        "ProductionVariants[0].InstanceType",
        "one of ml.t2.medium",
        "CreateEndpointConfig: ProductionVariants.InstanceType (shape ProductionVariantInstanceType)",
    ),
    (
        "instance count below its minimum (a number written as a string)",
        "AWS::SageMaker::EndpointConfig",
        {"ProductionVariants": [{**_VARIANT, "InitialInstanceCount": "0"}]},
        "ProductionVariants[0].InitialInstanceCount",
        "at least 1",
        "CreateEndpointConfig: ProductionVariants.InitialInstanceCount",
    ),
    (
        "too many production variants",
        "AWS::SageMaker::EndpointConfig",
        {"ProductionVariants": [_VARIANT] * 11},
        "ProductionVariants",
        "at most 10 items (has 11)",
        "(shape ProductionVariantList)",
    ),
    (
        "container environment: too many entries",
        "AWS::SageMaker::Model",
        {"PrimaryContainer": {"Environment": {f"K{i}": "v" for i in range(101)}}},
        "PrimaryContainer.Environment",
        "at most 100 entries (has 101)",
        "CreateModel: PrimaryContainer.Environment (shape EnvironmentMap)",
    ),
    (
        "container environment: a key the pattern refuses",
        "AWS::SageMaker::Model",
        {"PrimaryContainer": {"Environment": {"1-BAD": "v"}}},
        "PrimaryContainer.Environment key '1-BAD'",
        "matches the pattern [a-zA-Z_][a-zA-Z0-9_]*",
        "(shape EnvironmentKey)",
    ),
    (
        "container environment: a value too long",
        "AWS::SageMaker::Model",
        {"PrimaryContainer": {"Environment": {"KEY": "v" * 1025}}},
        "PrimaryContainer.Environment['KEY']",
        "at most 1024 characters",
        "(shape EnvironmentValue)",
    ),
    (
        "a tag key with a control character (Java's \\p{L}\\p{Z}\\p{N} class)",
        "AWS::SageMaker::Model",
        {"Tags": [{"Key": "team\x00", "Value": "ml"}]},
        "Tags[0].Key",
        "matches the pattern",
        "CreateModel: Tags.Key (shape TagKey)",
    ),
    (
        "blue/green termination wait out of range",
        "AWS::SageMaker::Endpoint",
        {"DeploymentConfig": {"BlueGreenUpdatePolicy": {**_BLUE_GREEN, "TerminationWaitInSeconds": 3601}}},
        "DeploymentConfig.BlueGreenUpdatePolicy.TerminationWaitInSeconds",
        "at most 3600",
        "CreateEndpoint: DeploymentConfig.BlueGreenUpdatePolicy.TerminationWaitInSeconds",
    ),
    (
        "inference component copy count below zero",
        "AWS::SageMaker::InferenceComponent",
        {"RuntimeConfig": {"CopyCount": -1}},
        "RuntimeConfig.CopyCount",
        "at least 0",
        "CreateInferenceComponent: RuntimeConfig.CopyCount",
    ),
    (
        "inference component rolling batch type (UpdateInferenceComponent's member)",
        "AWS::SageMaker::InferenceComponent",
        {"DeploymentConfig": {"RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "PERCENT", "Value": 1}}}},
        "DeploymentConfig.RollingUpdatePolicy.MaximumBatchSize.Type",
        "one of COPY_COUNT, CAPACITY_PERCENT",
        "UpdateInferenceComponent: DeploymentConfig.RollingUpdatePolicy.MaximumBatchSize.Type",
    ),
    (
        "alarm comparison operator not in the enum",
        "AWS::CloudWatch::Alarm",
        {**_ALARM, "ComparisonOperator": "Bigger"},
        "ComparisonOperator",
        "one of GreaterThanOrEqualToThreshold",
        "botocore cloudwatch (2010-08-01) PutMetricAlarm: ComparisonOperator",
    ),
    (
        "alarm with too many dimensions",
        "AWS::CloudWatch::Alarm",
        {**_ALARM, "Dimensions": [{"Name": f"d{i}", "Value": "v"} for i in range(31)]},
        "Dimensions",
        "at most 30 items (has 31)",
        "PutMetricAlarm: Dimensions",
    ),
    (
        "alarm name too long",
        "AWS::CloudWatch::Alarm",
        {**_ALARM, "AlarmName": "a" * 256},
        "AlarmName",
        "at most 255 characters",
        "PutMetricAlarm: AlarmName",
    ),
    (
        "alarm evaluation periods zero",
        "AWS::CloudWatch::Alarm",
        {**_ALARM, "EvaluationPeriods": 0},
        "EvaluationPeriods",
        "at least 1",
        "PutMetricAlarm: EvaluationPeriods",
    ),
    (
        "scaling policy name with a control character (Java's \\p{Print})",
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {"PolicyName": "Gpu\x07Utilization", "PolicyType": "TargetTrackingScaling"},
        "PolicyName",
        "matches the pattern \\p{Print}+",
        "botocore application-autoscaling (2016-02-06) PutScalingPolicy: PolicyName",
    ),
    (
        "scalable dimension not in the enum",
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"ScalableDimension": "sagemaker:variant:Copies", "ServiceNamespace": "sagemaker", "MinCapacity": 1},
        "ScalableDimension",
        "one of",
        "RegisterScalableTarget: ScalableDimension",
    ),
    (
        "scheduled action name with a colon (PutScheduledAction's pattern)",
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"ScheduledActions": [{"ScheduledActionName": "night:off", "Schedule": "cron(0 20 * * ? *)"}]},
        "ScheduledActions[0].ScheduledActionName",
        "matches the pattern",
        "PutScheduledAction: ScheduledActionName",
    ),
    (
        "CodeBuild timeout above its maximum (camelCase member)",
        "AWS::CodeBuild::Project",
        {"TimeoutInMinutes": 2161},
        "TimeoutInMinutes",
        "at most 2160",
        "botocore codebuild (2016-10-06) CreateProject: timeoutInMinutes (shape BuildTimeOut)",
    ),
    (
        "CodeBuild compute type not in the enum",
        "AWS::CodeBuild::Project",
        {"Environment": {"Type": "LINUX_GPU_CONTAINER", "ComputeType": "BUILD_GPU1_HUGE", "Image": "i"}},
        "Environment.ComputeType",
        "one of BUILD_GENERAL1_SMALL",
        "CreateProject: environment.computeType",
    ),
    (
        "S3 encryption algorithm not in the enum (PutBucketEncryption, renamed members)",
        "AWS::S3::Bucket",
        {"BucketEncryption": _SSE},
        "BucketEncryption.ServerSideEncryptionConfiguration[0].ServerSideEncryptionByDefault.SSEAlgorithm",
        "one of AES256",
        "PutBucketEncryption: ServerSideEncryptionConfiguration.Rules.ApplyServerSideEncryptionByDefault.SSEAlgorithm",
    ),
    (
        "S3 lifecycle rule status not in the enum",
        "AWS::S3::Bucket",
        {"LifecycleConfiguration": {"Rules": [{"Status": "On", "ExpirationInDays": 1}]}},
        "LifecycleConfiguration.Rules[0].Status",
        "one of Enabled, Disabled",
        "PutBucketLifecycleConfiguration: LifecycleConfiguration.Rules.Status",
    ),
    (
        "S3 object ownership not in the enum",
        "AWS::S3::Bucket",
        {"OwnershipControls": {"Rules": [{"ObjectOwnership": "Mine"}]}},
        "OwnershipControls.Rules[0].ObjectOwnership",
        "one of BucketOwnerPreferred",
        "PutBucketOwnershipControls: OwnershipControls.Rules.ObjectOwnership",
    ),
    (
        "SNS tag key too long",
        "AWS::SNS::Topic",
        {"Tags": [{"Key": "k" * 129, "Value": "v"}]},
        "Tags[0].Key",
        "at most 128 characters",
        "botocore sns (2010-03-31) CreateTopic: Tags.Key",
    ),
]


@pytest.mark.parametrize(
    ("resource_type", "properties", "path", "constraint", "source"),
    [case[1:] for case in HOSTILE],
    ids=[case[0] for case in HOSTILE],
)
def test_a_hostile_value_is_refused_naming_property_constraint_and_source(
    resource_type: str, properties: dict, path: str, constraint: str, source: str
) -> None:
    result = check_template(_template(resource_type, properties), "Triton-dev-Endpoint-bert", config_field_hint)
    found = [v for v in result.violations if v.property_path == path and constraint in v.constraint]
    assert found, [v.message for v in result.violations]
    (violation,) = found[:1]
    assert source in violation.source
    message = violation.message
    for part in ("Triton-dev-Endpoint-bert", "Hostile", resource_type, path, constraint, "botocore "):
        assert part in message, (part, message)
    assert not result.uncovered, result.uncovered


def test_hostile_values_injected_into_a_shipped_template_are_refused(shipped_templates) -> None:
    """The same gate over a real template (dev's endpoint stack), with three literals made hostile."""
    shipped = next(t for t in shipped_templates if t.config == "config/dev" and "Endpoint-triton-bert" in t.stack)
    template = copy.deepcopy(shipped.template)
    resources = template["Resources"]
    config = next(r for r in resources.values() if r["Type"] == "AWS::SageMaker::EndpointConfig")
    config["Properties"]["ProductionVariants"][0]["InstanceType"] = "ml.g5.enormous"
    alarm = next(r for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm")
    alarm["Properties"]["AlarmName"] = "x" * 300
    endpoint = next(r for r in resources.values() if r["Type"] == "AWS::SageMaker::Endpoint")
    endpoint["Properties"]["EndpointName"] = "dev--"
    result = check_template(template, shipped.stack, config_field_hint)
    fields = {v.property_path: v.config_field for v in result.violations}
    assert fields == {
        "ProductionVariants[0].InstanceType": "endpoints[name=triton-bert].instance_type "
        "(or extra_variants[].instance_type)",
        "AlarmName": "stage and endpoints[name=triton-bert].name",
        "EndpointName": "stage and endpoints[name=triton-bert].name",
    }


def test_the_construct_path_is_named_where_the_synth_wrote_it() -> None:
    """`cdk synth` (the CLI) writes each resource's construct path as `aws:cdk:path` metadata."""
    template = _template("AWS::CloudWatch::Alarm", {**_ALARM, "EvaluationPeriods": 0})
    template["Resources"]["Hostile"]["Metadata"] = {"aws:cdk:path": "Triton-dev-Endpoint-bert/Monitoring/Resource"}
    (violation,) = check_template(template, "Triton-dev-Endpoint-bert").violations
    assert "Hostile [Triton-dev-Endpoint-bert/Monitoring/Resource] (AWS::CloudWatch::Alarm)" in violation.message


def test_values_resolved_at_deploy_time_are_not_checked() -> None:
    properties = {
        "EndpointName": {"Ref": "Name"},
        "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
        "DeploymentConfig": {"AutoRollbackConfiguration": {"Alarms": [{"AlarmName": {"Fn::Join": ["", ["a"]]}}]}},
    }
    result = check_template(_template("AWS::SageMaker::Endpoint", properties))
    assert not result.violations and not result.uncovered
    whole = _template("AWS::SageMaker::Endpoint", {})
    whole["Resources"]["Hostile"]["Properties"] = {"Fn::If": ["C", {"EndpointName": "-"}, {}]}
    assert check_template(whole).violations == []


def test_a_value_of_the_wrong_type_is_refused() -> None:
    variant = {**_VARIANT, "InitialInstanceCount": "one", "InitialVariantWeight": float("nan")}
    properties = {"ProductionVariants": [variant], "EnableNetworkIsolation": 3}
    result = check_template(_template("AWS::SageMaker::EndpointConfig", properties))
    assert {(v.property_path, v.constraint) for v in result.violations} == {
        ("ProductionVariants[0].InitialInstanceCount", "a whole number"),
        ("ProductionVariants[0].InitialVariantWeight", "a number"),
        ("EnableNetworkIsolation", "true or false"),
    }


def test_an_unmapped_property_or_type_is_reported_uncovered_not_passed_silently() -> None:
    result = check_template(_template("AWS::S3::Bucket", {"WebsiteConfiguration": {"IndexDocument": "i"}}))
    assert result.uncovered == ["AWS::S3::Bucket:WebsiteConfiguration"]
    result = check_template(_template("AWS::SageMaker::Workteam", {"WorkteamName": "w"}))
    assert result.uncovered == ["AWS::SageMaker::Workteam: no mapping to a botocore operation"]
    assert not check_template(_template("AWS::IAM::Role", {"RoleName": "r" * 500})).uncovered  # not in scope


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=80),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=20), children, max_size=4),
    max_leaves=20,
)
_MAPPED_PROPERTIES = sorted(
    (resource_type, name)
    for resource_type in MAPPINGS
    for name in {*MAPPINGS[resource_type].top, "Tags", "Name", "EndpointName", "ProductionVariants", "Dimensions"}
)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=st.sampled_from(_MAPPED_PROPERTIES), value=_JSON, extra=st.dictionaries(st.text(max_size=20), _JSON))
def test_the_gate_never_crashes_on_any_json_value(target: tuple[str, str], value, extra: dict) -> None:
    """Whatever a template holds (nulls, NaN, wrong types, unknown keys, surrogates), the gate answers with
    violations or uncovered names, never an exception: it must not turn a synth into a traceback."""
    resource_type, name = target
    result = check_resource("S", "R", {"Type": resource_type, "Properties": {**extra, name: value}})
    for violation in result.violations:
        assert violation.message


def test_config_field_hints() -> None:
    assert config_field_hint("Triton-prod-Endpoint-bert", "AWS::SageMaker::EndpointConfig", "DataCaptureConfig.X") == (
        "endpoints[name=bert].data_capture"
    )
    assert config_field_hint("Triton-dev-Artifacts", "AWS::S3::Bucket", "BucketName") == "artifacts.bucket_name"
    assert config_field_hint("Triton-dev-Build", "AWS::CodeBuild::Project", "TimeoutInMinutes") == (
        "build.timeout_minutes"
    )
    assert config_field_hint("Triton-dev-Endpoint-x", "AWS::IAM::Role", "RoleName") is None
    assert config_field_hint("Triton-Pipeline", "AWS::CodeBuild::Project", "Name") == (
        "pipeline.yaml (name, source, stages, smoke)"
    )


# ---------------------------------------------------------------------------------------------------------
# botocore's Java patterns in Python


def test_java_unicode_classes_and_surrogate_pairs_are_translated() -> None:
    tag_key = compiled_pattern(r"([\p{L}\p{Z}\p{N}_.:/=+\-@]*)")  # SageMaker's TagKey
    assert tag_key.fullmatch("Équipe 42:ml") and not tag_key.fullmatch("a\x00")
    printable = compiled_pattern(r"\p{Print}+")  # Application Auto Scaling's PolicyName
    assert printable.fullmatch("GpuUtilization") and not printable.fullmatch("a\tb")
    resource_id = compiled_pattern(r"[\u0020-\uD7FF\uE000-\uFFFD\uD800\uDC00-\uDBFF\uDFFF\r\n\t]*")
    assert resource_id.fullmatch("endpoint/x/variant/\U0001f600") and not resource_id.fullmatch("a\x01")


def test_java_classes_are_ascii_and_whole_value() -> None:
    """Java's \\d and \\w are ASCII unless told otherwise; the service matches the whole value."""
    digits = compiled_pattern(r"\d+")
    assert digits.fullmatch("42") and not digits.fullmatch("\u0664\u0662") and not digits.fullmatch("42\n")


def test_the_cheap_ascii_form_agrees_with_the_full_unicode_form_on_ascii_values() -> None:
    """ASCII values are matched with Unicode classes cut at U+007F (no pass over every code point): the same
    answers as the full classes, for every printable and control ASCII character."""
    patterns = [r"([\p{L}\p{Z}\p{N}_.:/=+\-@]*)", r"[\p{L}\p{M}\p{S}\p{N}\p{P}]+", r"\P{M}+", r"[\p{Lu}\p{Nd}]*"]
    values = [chr(code) for code in range(128)] + ["Team 42", "a\tb", "UPPER9", ""]
    for pattern in patterns:
        full, cheap = compiled_pattern(pattern), compiled_pattern(pattern, ascii_only=True)
        for value in values:
            assert bool(full.fullmatch(value)) == bool(cheap.fullmatch(value)), (pattern, value)


def test_a_pattern_python_cannot_compile_is_recorded_not_raised() -> None:
    assert isinstance(compiled_pattern(r"([\p{L}]*)${1,128}"), str)
    assert isinstance(compiled_pattern(r"\p{InGreek}"), str)
    assert isinstance(compiled_pattern(r"[^\P{L}]"), str)


# ---------------------------------------------------------------------------------------------------------
# The plugin at synth


def test_the_plugin_fails_the_synth_naming_the_construct(tmp_path: Path) -> None:
    """A CDK app with the plugin registered (as stacks/app_factory.py does) refuses to synthesize a hostile
    literal, in its own stacks and in a nested stage's (a pipeline stage); aws-cdk-lib's report names the
    construct path, our description the rest."""
    app = cdk.App(outdir=str(tmp_path))
    cdk.Validations.of(app).add_plugins(ApiConstraintsCheck(config_field_hint=config_field_hint))
    stack = cdk.Stack(app, "Triton-dev-Endpoint-bert")
    sagemaker.CfnEndpoint(stack, "Endpoint", endpoint_config_name="c", endpoint_name="dev_bert")
    nested = cdk.Stack(cdk.Stage(app, "prod"), "Triton-prod-Endpoint-bert")
    sagemaker.CfnEndpoint(nested, "Endpoint", endpoint_config_name="c", endpoint_name="-prod")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (ours,) = [r for r in report["pluginReports"] if r["pluginName"] == PLUGIN_NAME]
    assert ours["conclusion"] == "failure"
    by_path = {v["violatingConstructs"][0]["constructPath"]: v for v in ours["violations"]}
    assert set(by_path) == {"Triton-dev-Endpoint-bert/Endpoint", "prod/Triton-prod-Endpoint-bert/Endpoint"}
    violation = by_path["Triton-dev-Endpoint-bert/Endpoint"]
    assert violation["ruleName"] == "sagemaker:CreateEndpoint:EndpointName"
    assert "'dev_bert'" in violation["description"]
    assert "stage and endpoints[name=bert].name" in violation["description"]
    assert "botocore sagemaker (2017-07-24) CreateEndpoint: EndpointName" in violation["description"]
    assert "Triton-prod-Endpoint-bert: Endpoint" in by_path["prod/Triton-prod-Endpoint-bert/Endpoint"]["description"]
