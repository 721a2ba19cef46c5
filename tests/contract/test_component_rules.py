"""Inference-component rules, checked over every template of every shipped configuration.

Sources: CloudFormation AWS::SageMaker::EndpointConfig / AWS::SageMaker::InferenceComponent (and cfn-lint's
schema of them); SageMaker API InferenceComponentComputeResourceRequirements and
InferenceComponentRollingUpdatePolicy; SageMaker "Scale an endpoint to zero instances"; SageMaker
"Auto-Rollback Configuration and Monitoring"; Triton docker/sagemaker/serve (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME).
"""

from __future__ import annotations

import re

from contract_helpers import ShippedTemplate, listed, logical_id_of, resources_of, seconds_to_alarm

from serving_facts.catalogue import INSTANCE_TYPES

NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")


def _with_components(templates: list[ShippedTemplate]) -> list[ShippedTemplate]:
    return [t for t in templates if resources_of(t.template, "AWS::SageMaker::InferenceComponent")]


def _variant_of(template: dict, component: dict) -> dict:
    """The production variant that hosts a component (through its endpoint and endpoint config)."""
    endpoint = template["Resources"][logical_id_of(component["Properties"]["EndpointName"])]
    config = template["Resources"][logical_id_of(endpoint["Properties"]["EndpointConfigName"])]
    (variant,) = [
        v
        for v in config["Properties"]["ProductionVariants"]
        if v["VariantName"] == component["Properties"]["VariantName"]
    ]
    return config, variant


def test_the_fixture_holds_a_component_endpoint_that_scales_to_zero(shipped_templates):
    found = [
        shipped
        for shipped in _with_components(shipped_templates)
        for c in resources_of(shipped.template, "AWS::SageMaker::InferenceComponent").values()
        if _variant_of(shipped.template, c)[1]["ManagedInstanceScaling"]["MinInstanceCount"] == 0
    ]
    assert any(t.config == "examples/config/components" for t in found)


def test_component_endpoints_carry_the_role_and_managed_instance_scaling(shipped_templates):
    """The endpoint config of an endpoint hosting components names the ExecutionRoleArn; its variant names no
    model and scales its own instances (ManagedInstanceScaling; "Scale an endpoint to zero instances")."""
    for shipped in _with_components(shipped_templates):
        for component in resources_of(shipped.template, "AWS::SageMaker::InferenceComponent").values():
            config, variant = _variant_of(shipped.template, component)
            assert "ExecutionRoleArn" in config["Properties"], shipped.label
            assert "ModelName" not in variant, shipped.label
            scaling = variant["ManagedInstanceScaling"]
            assert scaling["Status"] == "ENABLED", shipped.label
            assert 0 <= scaling["MinInstanceCount"] <= scaling["MaxInstanceCount"], shipped.label
            assert variant["RoutingConfig"]["RoutingStrategy"] in ("LEAST_OUTSTANDING_REQUESTS", "RANDOM")


def test_components_run_single_model_triton_with_its_default_model(shipped_templates):
    """Triton's serve script loads SAGEMAKER_TRITON_DEFAULT_MODEL_NAME in single-model mode; a component's
    model is never a multi-model container."""
    for shipped in _with_components(shipped_templates):
        for component in resources_of(shipped.template, "AWS::SageMaker::InferenceComponent").values():
            model = shipped.template["Resources"][logical_id_of(component["Properties"]["Specification"]["ModelName"])]
            container = model["Properties"]["PrimaryContainer"]
            assert container.get("Mode", "SingleModel") == "SingleModel", shipped.label
            assert container["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"], shipped.label


def test_component_requirements_respect_sagemaker_minimums_and_fit_the_instance(shipped_templates):
    """NumberOfAcceleratorDevicesRequired >= 1, NumberOfCpuCoresRequired >= 0.25, MinMemoryRequiredInMb required
    and >= 128 (API reference); one copy must fit one instance of the variant's type (catalogue)."""
    for shipped in _with_components(shipped_templates):
        for component in resources_of(shipped.template, "AWS::SageMaker::InferenceComponent").values():
            r = component["Properties"]["Specification"]["ComputeResourceRequirements"]
            instance = INSTANCE_TYPES[_variant_of(shipped.template, component)[1]["InstanceType"]]
            if "NumberOfAcceleratorDevicesRequired" in r:
                assert 1 <= r["NumberOfAcceleratorDevicesRequired"] <= instance.gpu_count, shipped.label
            assert 0.25 <= r.get("NumberOfCpuCoresRequired", 0.25) <= instance.vcpus, shipped.label
            assert 128 <= r["MinMemoryRequiredInMb"] <= instance.memory_gib * 1024, shipped.label
            assert r["MinMemoryRequiredInMb"] <= r.get("MaxMemoryRequiredInMb", r["MinMemoryRequiredInMb"])


def test_component_names_are_valid_and_unique(shipped_templates):
    """InferenceComponentName: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$, at most 63 characters (cfn-lint schema)."""
    for shipped in _with_components(shipped_templates):
        names = [
            c["Properties"]["InferenceComponentName"]
            for c in resources_of(shipped.template, "AWS::SageMaker::InferenceComponent").values()
        ]
        assert len(names) == len(set(names)), shipped.label
        for name in names:
            assert NAME.match(name) and len(name) <= 63, (shipped.label, name)


def test_scale_to_zero_has_the_documented_wake_path(shipped_templates):
    """ "Scale an endpoint to zero instances": MinInstanceCount 0 on the variant; per component a scalable target
    inference-component/<name> on sagemaker:inference-component:DesiredCopyCount with min 0; a step-scaling policy
    (ChangeInCapacity, +1 from lower bound 0) run by an alarm on NoCapacityInvocationFailures (AWS/SageMaker,
    InferenceComponentName). Without the step policy an endpoint at zero never serves again."""
    checked = 0
    for shipped in _with_components(shipped_templates):
        template = shipped.template
        targets = resources_of(template, "AWS::ApplicationAutoScaling::ScalableTarget")
        policies = resources_of(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
        alarms = resources_of(template, "AWS::CloudWatch::Alarm").values()
        for component in resources_of(template, "AWS::SageMaker::InferenceComponent").values():
            name = component["Properties"]["InferenceComponentName"]
            zero = _variant_of(template, component)[1]["ManagedInstanceScaling"]["MinInstanceCount"] == 0
            mine = {
                i: t["Properties"]
                for i, t in targets.items()
                if t["Properties"]["ResourceId"] == f"inference-component/{name}"
            }
            for target in mine.values():
                assert target["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
                assert (target["MinCapacity"] == 0) == zero, shipped.label
            if not zero:
                continue
            (target_id,) = mine
            steps = [
                i
                for i, p in policies.items()
                if p["Properties"]["PolicyType"] == "StepScaling"
                and logical_id_of(p["Properties"]["ScalingTargetId"]) == target_id
            ]
            (step,) = steps
            config = policies[step]["Properties"]["StepScalingPolicyConfiguration"]
            assert config["AdjustmentType"] == "ChangeInCapacity", shipped.label
            assert {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1} in config["StepAdjustments"]
            waking = [
                a["Properties"]
                for a in alarms
                if any(logical_id_of(action) == step for action in a["Properties"].get("AlarmActions", []))
            ]
            (alarm,) = waking
            assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SageMaker", "NoCapacityInvocationFailures")
            assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": name}], shipped.label
            checked += 1
    assert checked


def test_component_rollback_alarms_are_describable_and_reach_alarm_within_the_bake(shipped_templates):
    """Rolling updates: MaximumBatchSize 5-50 % of the copies (InferenceComponentRollingUpdatePolicy); the execution
    role may cloudwatch:DescribeAlarms on the rollback alarms and the component waits for that policy; an alarm
    must reach ALARM within WaitIntervalInSeconds ("Auto-Rollback Configuration and Monitoring")."""
    checked = 0
    for shipped in _with_components(shipped_templates):
        template = shipped.template
        policies = resources_of(template, "AWS::IAM::Policy")
        for component in resources_of(template, "AWS::SageMaker::InferenceComponent").values():
            config = component["Properties"]["DeploymentConfig"]
            rolling = config["RollingUpdatePolicy"]
            size = rolling["MaximumBatchSize"]
            assert size["Type"] == "COPY_COUNT" or 5 <= size["Value"] <= 50, shipped.label
            # Without it a rollback replaces the whole fleet at once (RollbackMaximumBatchSize: "the default
            # value is 100%"), which needs room for every copy twice.
            assert rolling.get("RollbackMaximumBatchSize", {}).get("Type") == "COPY_COUNT", shipped.label
            for alarm in config.get("AutoRollbackConfiguration", {}).get("Alarms", []):
                alarm_id = logical_id_of(alarm["AlarmName"])
                granting = [
                    policy_id
                    for policy_id, policy in policies.items()
                    for s in listed(policy["Properties"]["PolicyDocument"]["Statement"])
                    if "cloudwatch:DescribeAlarms" in listed(s["Action"])
                    and {"Fn::GetAtt": [alarm_id, "Arn"]} in listed(s["Resource"])
                ]
                assert set(granting) & set(listed(component.get("DependsOn", []))), shipped.label
                assert seconds_to_alarm(template["Resources"][alarm_id]) <= rolling["WaitIntervalInSeconds"]
                checked += 1
    assert checked
