"""Serving rules of AWS, SageMaker and Triton, checked over every template of every shipped configuration.

Each test names its source. `shipped_templates` (conftest.py) holds dev (with the pipeline's stage
assemblies), prod, examples/config/*, tests/configs/* and the serving area's custom config.
"""

from __future__ import annotations

import json
import re

from contract_helpers import ShippedTemplate, listed, logical_id_of, resources_of, seconds_to_alarm, statements_of

from serving_facts import drivers
from serving_facts.catalogue import INSTANCE_TYPES

SERVICE_CONDITIONS = ("aws:SourceAccount", "aws:SourceArn")
IMAGE_RELEASE = re.compile(r"sagemaker-tritonserver:(\d\d\.\d\d)-py3")


def _service_principals(statement: dict) -> list[str]:
    principal = statement.get("Principal")
    if not isinstance(principal, dict):
        return []
    return [p for p in listed(principal.get("Service", [])) if isinstance(p, str)]


def _condition_keys(statement: dict) -> set[str]:
    return {key for operator in statement.get("Condition", {}).values() for key in operator}


def _with(templates: list[ShippedTemplate], resource_type: str) -> list[ShippedTemplate]:
    return [t for t in templates if resources_of(t.template, resource_type)]


def _alarms_by_topic(template: dict) -> dict[str, list[str]]:
    """Topic logical id -> names of the alarms whose ALARM / OK actions publish to it."""
    found: dict[str, list[str]] = {}
    for alarm in resources_of(template, "AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        for action in props.get("AlarmActions", []) + props.get("OKActions", []):
            topic = logical_id_of(action)
            if template["Resources"].get(topic, {}).get("Type") != "AWS::SNS::Topic":
                continue  # e.g. a scaling policy (inference components' wake-from-zero alarms)
            if topic and props.get("AlarmName") not in found.setdefault(topic, []):
                found[topic].append(props["AlarmName"])
    return found


def test_the_fixture_holds_endpoints_and_topics(shipped_templates):
    assert _with(shipped_templates, "AWS::SageMaker::Endpoint")
    assert _with(shipped_templates, "AWS::SNS::TopicPolicy")


def test_alarm_topics_let_cloudwatch_publish_for_exactly_their_alarms(shipped_templates):
    """An AWS::SNS::TopicPolicy replaces SNS's default policy: CloudWatch alarms publish only if it allows
    cloudwatch.amazonaws.com sns:Publish ("not authorized to perform SNS:Publish ... no resource-based policy
    allows", aws-solutions/automated-security-response-on-aws#43), under aws:SourceAccount / aws:SourceArn
    (IAM "The confused deputy problem"); the TLS-only deny stays (AwsSolutions-SNS3)."""
    checked = 0
    for shipped in _with(shipped_templates, "AWS::CloudWatch::Alarm"):
        template = shipped.template
        policies = resources_of(template, "AWS::SNS::TopicPolicy").values()
        for topic, alarm_names in _alarms_by_topic(template).items():
            (policy,) = [p for p in policies if any(logical_id_of(t) == topic for t in p["Properties"]["Topics"])]
            statements = statements_of(policy["Properties"]["PolicyDocument"])
            assert any(
                s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
                for s in statements
            ), shipped.label
            allows = [
                s
                for s in statements
                if s["Effect"] == "Allow" and "cloudwatch.amazonaws.com" in _service_principals(s)
                if "sns:Publish" in listed(s["Action"])
            ]
            assert allows, f"{shipped.label}: topic {topic} has no CloudWatch publish statement"
            for statement in allows:
                assert set(SERVICE_CONDITIONS) <= _condition_keys(statement), shipped.label
            arns = json.dumps([s["Condition"]["ArnLike"]["aws:SourceArn"] for s in allows])
            for name in alarm_names:
                assert f":alarm:{name}" in arns, f"{shipped.label}: alarm {name} may not publish to {topic}"
            checked += 1
    assert checked


def test_keys_of_alarm_topics_let_cloudwatch_encrypt(shipped_templates):
    """A KMS-encrypted topic needs its key to let the publishing service kms:GenerateDataKey* and kms:Decrypt
    (SNS "Enable compatibility between event sources from AWS services and encrypted topics"); an AWS-managed
    alias/aws/sns key cannot grant that (../shared/README.md "CloudWatch alarms -> SNS")."""
    checked = 0
    for shipped in _with(shipped_templates, "AWS::CloudWatch::Alarm"):
        template = shipped.template
        for topic in _alarms_by_topic(template):
            key_id = template["Resources"][topic]["Properties"].get("KmsMasterKeyId")
            assert key_id is not None and "alias/aws/sns" not in json.dumps(key_id), shipped.label
            key = template["Resources"][logical_id_of(key_id)]
            allows = [
                s
                for s in statements_of(key["Properties"]["KeyPolicy"])
                if "cloudwatch.amazonaws.com" in _service_principals(s)
            ]
            actions = {a for s in allows for a in listed(s["Action"])}
            assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= actions, shipped.label
            for statement in allows:
                assert set(SERVICE_CONDITIONS) <= _condition_keys(statement), shipped.label
            checked += 1
    assert checked


def test_service_principals_on_topics_and_their_keys_are_conditioned(shipped_templates):
    """Service principals on topic and key policies carry aws:SourceAccount / aws:SourceArn (IAM "The confused
    deputy problem"), the CloudWatch Logs principal its documented encryption-context condition ("Encrypt log
    data in CloudWatch Logs using AWS KMS"); EventBridge publishes through a role instead, because those keys
    are not supported in a KMS key policy for EventBridge-to-encrypted-topic delivery (SNS developer guide,
    quoted in awslabs/landing-zone-accelerator-on-aws#407)."""
    for shipped in _with(shipped_templates, "AWS::SNS::Topic"):
        template = shipped.template
        documents = [
            p["Properties"]["PolicyDocument"] for p in resources_of(template, "AWS::SNS::TopicPolicy").values()
        ]
        for topic in resources_of(template, "AWS::SNS::Topic").values():
            key = logical_id_of(topic["Properties"].get("KmsMasterKeyId"))
            if key in template["Resources"]:
                documents.append(template["Resources"][key]["Properties"]["KeyPolicy"])
        for document in documents:
            for statement in statements_of(document):
                principals = _service_principals(statement)
                if statement["Effect"] != "Allow" or not principals:
                    continue
                if all(p.startswith("logs.") for p in principals):
                    # CloudWatch Logs documents the encryption context as its key-policy condition.
                    assert "kms:EncryptionContext:aws:logs:arn" in _condition_keys(statement), shipped.label
                else:
                    assert set(SERVICE_CONDITIONS) <= _condition_keys(statement), f"{shipped.label}: {statement}"


def _release(template: dict) -> str | None:
    found = set(IMAGE_RELEASE.findall(json.dumps(template.get("Mappings", {}))))
    assert len(found) <= 1, found
    return next(iter(found), None)


def _variants(template: dict):
    for config in resources_of(template, "AWS::SageMaker::EndpointConfig").values():
        yield from config["Properties"]["ProductionVariants"]


def test_every_gpu_variant_pins_an_ami_whose_driver_runs_the_release(shipped_templates):
    """SageMaker hosts keep driver 470 (CUDA 11.4) on g4dn/g5/p4d without an InferenceAmiVersion (SageMaker "Best
    practices to minimize interruptions during GPU driver upgrades"); a Triton release needs a driver of at least
    its CUDA version (aws/deep-learning-containers#4990). The AMIs' drivers: ProductionVariant API reference
    (serving_facts/drivers.py)."""
    checked = 0
    for shipped in _with(shipped_templates, "AWS::SageMaker::EndpointConfig"):
        release = _release(shipped.template)
        for variant in _variants(shipped.template):
            instance = INSTANCE_TYPES[variant["InstanceType"]]
            if not instance.has_gpu:
                assert "InferenceAmiVersion" not in variant, shipped.label
                continue
            ami = drivers.ami_named(variant["InferenceAmiVersion"])
            assert release is not None and drivers.runs(ami, release, instance.family), (shipped.label, ami.name)
            checked += 1
    assert checked


def test_no_volume_size_on_instance_storage_types(shipped_templates):
    """ml.g4dn, g5, g6, g6e, p4d and p5 have NVMe instance storage only; SageMaker refuses a VolumeSizeInGB there
    (SageMaker Python SDK `volume_size_supported`; CreateEndpointConfig; ../shared/README.md)."""
    for shipped in _with(shipped_templates, "AWS::SageMaker::EndpointConfig"):
        for variant in _variants(shipped.template):
            if INSTANCE_TYPES[variant["InstanceType"]].nvme_storage_only:
                assert "VolumeSizeInGB" not in variant, f"{shipped.label}: {variant['VariantName']}"


def test_ping_mode_uses_the_variable_the_serve_script_reads(shipped_templates):
    """docker/sagemaker/serve (triton-inference-server/server) overwrites SAGEMAKER_TRITON_PING_MODE and honours
    SAGEMAKER_TRITON_OVERRIDE_PING_MODE only."""
    for shipped in _with(shipped_templates, "AWS::SageMaker::Model"):
        for model in resources_of(shipped.template, "AWS::SageMaker::Model").values():
            environment = model["Properties"]["PrimaryContainer"].get("Environment", {})
            assert "SAGEMAKER_TRITON_PING_MODE" not in environment, shipped.label


def test_models_state_network_isolation_and_shipped_stages_isolate(shipped_templates):
    """Triton needs no outbound network; SageMaker fetches image and model data outside the container (CreateModel
    EnableNetworkIsolation; AWS Config rule sagemaker-model-isolation-enabled). Opting out is per endpoint."""
    for shipped in _with(shipped_templates, "AWS::SageMaker::Model"):
        for model in resources_of(shipped.template, "AWS::SageMaker::Model").values():
            isolated = model["Properties"].get("EnableNetworkIsolation")
            assert isinstance(isolated, bool), shipped.label
            if shipped.config.startswith(("config/", "examples/config/")):
                assert isolated, shipped.label


def _rollback_alarm_ids(endpoint: dict) -> list[str]:
    config = endpoint["Properties"].get("DeploymentConfig", {}).get("AutoRollbackConfiguration", {})
    return [logical_id_of(alarm["AlarmName"]) for alarm in config.get("Alarms", [])]


def test_the_execution_role_may_describe_every_rollback_alarm(shipped_templates):
    """ "Ensure that your IAM execution role has permission to perform the cloudwatch:DescribeAlarms action on the
    auto-rollback alarms you specify" (SageMaker "Auto-Rollback Configuration and Monitoring"); the endpoint waits
    for that policy."""
    checked = 0
    for shipped in _with(shipped_templates, "AWS::SageMaker::Endpoint"):
        template = shipped.template
        policies = resources_of(template, "AWS::IAM::Policy")
        for endpoint in resources_of(template, "AWS::SageMaker::Endpoint").values():
            for alarm in _rollback_alarm_ids(endpoint):
                granting = [
                    policy_id
                    for policy_id, policy in policies.items()
                    for s in statements_of(policy["Properties"]["PolicyDocument"])
                    if "cloudwatch:DescribeAlarms" in listed(s["Action"])
                    and {"Fn::GetAtt": [alarm, "Arn"]} in listed(s["Resource"])
                ]
                assert granting, f"{shipped.label}: nothing grants DescribeAlarms on {alarm}"
                assert set(granting) & set(listed(endpoint.get("DependsOn", []))), shipped.label
                checked += 1
    assert checked


def _bake_seconds(endpoint: dict) -> int:
    config = endpoint["Properties"]["DeploymentConfig"]
    if "RollingUpdatePolicy" in config:
        return config["RollingUpdatePolicy"]["WaitIntervalInSeconds"]
    return config["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"].get("WaitIntervalInSeconds", 0)


def test_rollback_alarms_can_reach_alarm_while_a_step_bakes(shipped_templates):
    """SageMaker rolls back on alarms that go to ALARM while a traffic step or rolling batch bakes
    (WaitIntervalInSeconds; SageMaker "Auto-Rollback Configuration and Monitoring"); an alarm needs
    DatapointsToAlarm breaching periods to get there, the last seen a period late (CloudWatch "Evaluating an
    alarm")."""
    checked = 0
    for shipped in _with(shipped_templates, "AWS::SageMaker::Endpoint"):
        template = shipped.template
        for endpoint in resources_of(template, "AWS::SageMaker::Endpoint").values():
            for alarm in _rollback_alarm_ids(endpoint):
                needed = seconds_to_alarm(template["Resources"][alarm])
                assert needed <= _bake_seconds(endpoint), f"{shipped.label}: {alarm} needs {needed} s"
                checked += 1
    assert checked


def test_autoscaled_variants_are_guarded_against_instance_type_changes(shipped_templates):
    """SageMaker "Update endpoints that use auto scaling": an update that changes the instance type of (or removes)
    a variant registered as a scalable target fails; the endpoint waits for the guard that refuses it first."""
    checked = 0
    for shipped in _with(shipped_templates, "AWS::ApplicationAutoScaling::ScalableTarget"):
        template = shipped.template
        guards = resources_of(template, "Custom::TritonInstanceTypeGuard")
        scaled = {
            tuple(t["Properties"]["ResourceId"].split("/")[1::2])
            for t in resources_of(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
            if t["Properties"]["ServiceNamespace"] == "sagemaker"
            and t["Properties"]["ResourceId"].startswith("endpoint/")
        }
        for endpoint in resources_of(template, "AWS::SageMaker::Endpoint").values():
            name = endpoint["Properties"]["EndpointName"]
            (guard_id,) = [g for g in listed(endpoint.get("DependsOn", [])) if g in guards]
            props = guards[guard_id]["Properties"]
            assert props["EndpointName"] == name, shipped.label
            assert sorted(props["Autoscaled"]) == sorted(v for e, v in scaled if e == name), shipped.label
            variants = {v["VariantName"]: v["InstanceType"] for v in _variants(template)}
            assert props["Variants"] == variants, shipped.label
            checked += 1
    assert checked
