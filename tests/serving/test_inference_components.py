"""`mode: inference_components`: examples/config/components.yaml synthesized once, plus refusals.

Sources: CloudFormation AWS::SageMaker::EndpointConfig (ExecutionRoleArn, ManagedInstanceScaling,
RoutingConfig) and AWS::SageMaker::InferenceComponent (Specification, RuntimeConfig, DeploymentConfig);
SageMaker API InferenceComponentComputeResourceRequirements (accelerators >= 1, CPU >= 0.25, memory >= 128 MB,
MinMemoryRequiredInMb required) and InferenceComponentRollingUpdatePolicy (batch 5-50 % of the copies);
SageMaker "Scale an endpoint to zero instances" (MinInstanceCount 0, copies min 0 on
`inference-component/<name>` / `sagemaker:inference-component:DesiredCopyCount`, step scaling on a
NoCapacityInvocationFailures alarm); "Amazon SageMaker AI metrics in Amazon CloudWatch" (InferenceComponentName,
/aws/sagemaker/InferenceComponents); Triton docker/sagemaker/serve (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME).
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template
from serving_helpers import PROJECT_ROOT, write_config
from synth_helpers import Synthesized, new_app, synth_stage

from serving_facts.catalogue import instance_type
from stacks.artifact_plan import endpoint_artifacts
from stage_config import ConfigError, load_config, load_stage
from triton_cdk.serving import TritonEndpoint, TritonModel, TritonModelData, component_sizing
from triton_cdk.serving.component_scaling import CopyScaling, TritonComponentScaling
from triton_cdk.serving.inference_components import (
    ComponentVariant,
    TritonComponentEndpoint,
    TritonInferenceComponent,
)

EXAMPLES = PROJECT_ROOT / "examples" / "config"
DOCUMENT = yaml.safe_load((EXAMPLES / "components.yaml").read_text())
ENDPOINT = "triton-components"
DEPLOYED = "components-triton-components"


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Synthesized:
    return synth_stage("components", EXAMPLES, checks=False)  # checked once in tests/contract (shipped_assemblies)


@pytest.fixture(scope="module")
def raw(example) -> dict:
    return example.raw[ENDPOINT]


def _of(template: dict, kind: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _components(raw: dict) -> dict[str, dict]:
    """InferenceComponentName -> properties."""
    found = _of(raw, "AWS::SageMaker::InferenceComponent").values()
    return {c["Properties"]["InferenceComponentName"]: c["Properties"] for c in found}


def test_endpoint_config_carries_the_role_managed_scaling_and_routing_and_no_model(raw):
    (config,) = _of(raw, "AWS::SageMaker::EndpointConfig").values()
    props = config["Properties"]
    assert "Fn::ImportValue" in props["ExecutionRoleArn"]  # the artifact stack's execution role
    assert props["EnableNetworkIsolation"] is True
    (variant,) = props["ProductionVariants"]
    assert "ModelName" not in variant
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 1}
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert variant["InstanceType"] == "ml.g5.12xlarge" and variant["InitialInstanceCount"] == 1
    # serving_facts/drivers.py: GPU hosts pin an AMI whose driver runs the release.
    assert variant["InferenceAmiVersion"].startswith(("al2-ami-sagemaker-inference-gpu", "al2023-ami"))


def test_each_model_is_a_component_with_its_own_single_model_triton_model(raw):
    components = _components(raw)
    assert sorted(components) == [f"{DEPLOYED}-resnet50", f"{DEPLOYED}-yolov5s"]
    models = _of(raw, "AWS::SageMaker::Model")
    config = load_stage("components", EXAMPLES)
    keys = {a.model.name: a.key for a in endpoint_artifacts(config, config.endpoints[0], PROJECT_ROOT).models}
    for name, props in components.items():
        model_id = props["Specification"]["ModelName"]["Fn::GetAtt"][0]
        container = models[model_id]["Properties"]["PrimaryContainer"]
        served = name.removeprefix(f"{DEPLOYED}-")
        assert container["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == served
        assert container["Mode"] == "SingleModel"
        # The same content-addressed archive (and GPU-matched build) a single-model endpoint serves.
        assert keys[served] in str(container["ModelDataUrl"])
        assert models[model_id]["Properties"]["EnableNetworkIsolation"] is True
        assert props["EndpointName"] == {
            "Fn::GetAtt": [next(iter(_of(raw, "AWS::SageMaker::Endpoint"))), "EndpointName"]
        }
        assert props["VariantName"] == "AllTraffic"
        assert props["RuntimeConfig"] == {"CopyCount": 1}


def test_compute_requirements_explicit_and_derived_from_the_catalogue(raw):
    components = _components(raw)
    assert components[f"{DEPLOYED}-resnet50"]["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1,
        "NumberOfCpuCoresRequired": 8,
        "MinMemoryRequiredInMb": 4096,
        "MaxMemoryRequiredInMb": 192 * 1024 // 2,
    }
    # yolov5s sets only accelerators: 2 components share 48 vCPUs / 192 GiB -> half of a 24-vCPU share.
    assert components[f"{DEPLOYED}-yolov5s"]["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1,
        "NumberOfCpuCoresRequired": 12,
        "MinMemoryRequiredInMb": 1024,
        "MaxMemoryRequiredInMb": 98304,
    }
    assert components[f"{DEPLOYED}-yolov5s"]["Specification"]["StartupParameters"] == {
        "ContainerStartupHealthCheckTimeoutInSeconds": 600
    }


@pytest.mark.parametrize(
    ("instance", "count", "expected"),
    [
        ("ml.g5.xlarge", 2, component_sizing.ComputeRequirements(1, 2.0, 1024, 16384)),
        ("ml.g5.12xlarge", 1, component_sizing.ComputeRequirements(4, 24.0, 1024, 196608)),
        ("ml.g5.12xlarge", 3, component_sizing.ComputeRequirements(1, 8.0, 1024, 65536)),
        ("ml.c5.xlarge", 4, component_sizing.ComputeRequirements(None, 0.5, 1024, 2048)),
    ],
)
def test_default_requirements_share_the_instance(instance, count, expected):
    assert component_sizing.default_requirements(instance_type(instance), count) == expected


def test_copies_scale_on_invocations_per_copy_and_wake_from_zero(example, raw):
    t = example.templates[ENDPOINT]
    for name in _components(raw):
        t.has_resource_properties(
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "ResourceId": f"inference-component/{name}",
                "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
                "ServiceNamespace": "sagemaker",
                "MinCapacity": 0,
                "MaxCapacity": {"components-triton-components-resnet50": 2}.get(name, 1),  # max_copies
            },
        )
        t.has_resource_properties(
            "AWS::CloudWatch::Alarm",
            {
                "Namespace": "AWS/SageMaker",
                "MetricName": "NoCapacityInvocationFailures",
                "Dimensions": [{"Name": "InferenceComponentName", "Value": name}],
                "Statistic": "Sum",
                "Period": 60,
                "EvaluationPeriods": 1,
                "Threshold": 1,
                "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                "AlarmActions": [{"Ref": Match.string_like_regexp("ScaleFromZero")}],
            },
        )
    t.resource_properties_count_is(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
                },
                "TargetValue": 300,
                "ScaleInCooldown": 900,
                "ScaleOutCooldown": 60,
            },
        },
        2,
    )
    t.resource_properties_count_is(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": {
                "AdjustmentType": "ChangeInCapacity",
                "MetricAggregationType": "Maximum",
                "Cooldown": 60,
                "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
            },
        },
        2,
    )


def test_rolling_update_rolls_back_on_the_components_own_alarms(raw):
    alarms = _of(raw, "AWS::CloudWatch::Alarm")
    policies = _of(raw, "AWS::IAM::Policy")
    granted = {
        r["Fn::GetAtt"][0]
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "cloudwatch:DescribeAlarms"
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }
    for name, props in _components(raw).items():
        config = props["DeploymentConfig"]
        assert config["RollingUpdatePolicy"] == {
            # One copy per step and per rollback step (independent review: a percentage of one copy,
            # and a whole-fleet rollback that needs room the instance does not have).
            "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
            "RollbackMaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
            "WaitIntervalInSeconds": 900,
            "MaximumExecutionTimeoutInSeconds": 3600,
        }
        ids = [a["AlarmName"]["Ref"] for a in config["AutoRollbackConfiguration"]["Alarms"]]
        names = sorted(alarms[i]["Properties"]["AlarmName"] for i in ids)
        assert names == [f"{name}-errors-5xx", f"{name}-latency"]
        for i in ids:
            assert alarms[i]["Properties"]["Dimensions"] == [{"Name": "InferenceComponentName", "Value": name}]
        assert set(ids) <= granted


def test_alarms_and_dashboard_per_component(example, raw):
    alarms = [a["Properties"] for a in _of(raw, "AWS::CloudWatch::Alarm").values()]
    for name in _components(raw):
        kinds = {a["AlarmName"].removeprefix(f"{name}-") for a in alarms if a["AlarmName"].startswith(f"{name}-")}
        assert kinds == {"latency", "errors-5xx", "errors-4xx", "cpu", "memory", "gpu-memory", "wake-from-zero"}
    gpu_memory = [a for a in alarms if a["AlarmName"].endswith("-gpu-memory")]
    assert {a["Namespace"] for a in gpu_memory} == {"/aws/sagemaker/InferenceComponents"}
    assert {a["MetricName"] for a in gpu_memory} == {"GPUMemoryUtilizationNormalized"}
    assert {a["Threshold"] for a in gpu_memory} == {90}  # normalised per copy: not multiplied by GPUs
    (dashboard,) = _of(raw, "AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    for name in _components(raw):
        assert f"{name}: copy count" in body
    assert "GPUReservation" in body and "NoCapacityInvocationFailures" in body
    # Wake-from-zero alarms act on scaling, not on the topic; every other alarm may publish there.
    (topic_policy,) = _of(raw, "AWS::SNS::TopicPolicy").values()
    text = str(topic_policy)
    assert "wake-from-zero" not in text
    assert f"{DEPLOYED}-resnet50-latency" in text


def test_outputs_name_the_components(raw):
    assert raw["Outputs"]["InferenceComponentNames"]["Value"] == f"{DEPLOYED}-resnet50,{DEPLOYED}-yolov5s"


def test_cdk_reports_no_warning(example):
    """The same gates as dev and prod (tests/serving/test_gates.py): no CDK warning. cdk-nag, Guard and the other
    checks judge examples/config/components with every shipped config (tests/contract/test_guard_rules.py)."""
    assert [m for m in example.messages[ENDPOINT] if "info" not in m[0].lower()] == []


def test_cfn_lint_accepts_the_component_stack(example):
    """cfn-lint's AWS::SageMaker::InferenceComponent / EndpointConfig schemas (ranges, enums, required fields)."""
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    files = [str(f) for f in example.template_files()]
    result = subprocess.run(
        [str(cfn_lint), "--non-zero-exit-code", "warning", "--", *files], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _app_scope() -> tuple[cdk.Stack, iam.Role, s3.Bucket]:
    stack = cdk.Stack(new_app())
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    return stack, role, s3.Bucket(stack, "Bucket")


def _component(stack, role, bucket, *, min_instances=0, **kwargs) -> TritonInferenceComponent:
    endpoint = TritonComponentEndpoint(
        stack,
        "Endpoint",
        endpoint_name="ep",
        execution_role=role,
        variant=ComponentVariant(instance_type="ml.g5.xlarge", min_instances=min_instances, max_instances=2),
    )
    model = TritonModel(
        stack,
        "Model",
        image_uri="image",
        model_data=TritonModelData.from_archive(bucket, "m.tar.gz"),
        execution_role=role,
        default_model_name="m",
    )
    requirements = kwargs.pop("requirements", component_sizing.ComputeRequirements(1, 2, 1024))
    return TritonInferenceComponent(
        stack, "Component", endpoint=endpoint, component_name="ep-m", model=model, requirements=requirements, **kwargs
    )


def test_grant_invoke_names_the_endpoint_and_the_component():
    stack, role, bucket = _app_scope()
    component = _component(stack, role, bucket)
    client = iam.Role(stack, "Client", assumed_by=iam.AccountRootPrincipal())
    component.grant_invoke(client)
    component.endpoint.grant_invoke(client)
    statements = [
        s
        for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert statements
    for statement in statements:
        assert statement["Action"] == "sagemaker:InvokeEndpoint"
        text = str(statement["Resource"])
        assert ":endpoint/ep" in text and "InferenceComponentArn" in text


def test_an_imported_component_grants_invoke_on_its_endpoint_and_its_name():
    stack, _, _ = _app_scope()
    endpoint = TritonEndpoint.from_endpoint_name(stack, "Endpoint", "Prod-Components")
    component = TritonInferenceComponent.from_component_name(
        stack, "Component", "Prod-Components-Bert", endpoint=endpoint
    )
    client = iam.Role(stack, "Client", assumed_by=iam.AccountRootPrincipal())
    assert component.grant_invoke(client).success
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sagemaker:InvokeEndpoint"
    # SageMaker lower-cases names in ARNs.
    endpoint_arn, component_arn = (str(r) for r in statement["Resource"])
    assert ":endpoint/prod-components'" in endpoint_arn
    assert ":inference-component/prod-components-bert'" in component_arn
    metric = component.metric_invocations()
    assert (metric.metric_name, metric.dimensions) == (
        "Invocations",
        {"InferenceComponentName": "Prod-Components-Bert"},
    )


@pytest.mark.parametrize(
    ("requirements", "field"),
    [
        (component_sizing.ComputeRequirements(2, 2, 1024), "requirements.accelerators"),
        (component_sizing.ComputeRequirements(1, 5, 1024), "requirements.cpu_cores"),
        (component_sizing.ComputeRequirements(1, 2, 17 * 1024), "requirements.min_memory_mb"),
        (component_sizing.ComputeRequirements(1, 2, 2048, 1024), "requirements.max_memory_mb"),
    ],
)
def test_the_construct_refuses_requirements_that_do_not_fit(requirements, field):
    stack, role, bucket = _app_scope()
    with pytest.raises(ValueError, match=field):
        _component(stack, role, bucket, requirements=requirements)


def test_scaling_refuses_copies_above_zero_on_a_scale_to_zero_endpoint():
    stack, role, bucket = _app_scope()
    component = _component(stack, role, bucket)
    with pytest.raises(ValueError, match="min_copies 0 on every component"):
        TritonComponentScaling(stack, "S", component=component, settings=CopyScaling(1, 2, 10))


def _document(**endpoint) -> dict:
    document = copy.deepcopy(DOCUMENT)
    document["endpoints"][0].update(endpoint)
    return document


def _ic(**changes) -> dict:
    settings = copy.deepcopy(DOCUMENT["endpoints"][0]["inference_components"])
    settings.update(changes)
    return settings


def _refused(tmp_path: Path, document: dict, *expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, document))
    message = str(caught.value)
    assert "components.yaml" in message
    for text in expected:
        assert text in message, message


@pytest.mark.parametrize(
    ("component", "expected"),
    [
        ({"accelerators": 5}, "inference_components.components.resnet50.accelerators: 5 GPUs per copy"),
        ({"cpu_cores": 64}, "inference_components.components.resnet50.cpu_cores"),
        ({"min_memory_mb": 300_000}, "inference_components.components.resnet50.min_memory_mb"),
        ({"max_memory_mb": 300_000}, "inference_components.components.resnet50.max_memory_mb"),
        ({"max_copies": 9}, "inference_components.components.resnet50.max_copies"),
        ({"copy_count": 4, "accelerators": 1}, "inference_components.max_instances: the initial copies"),
    ],
)
def test_config_refuses_requirements_that_do_not_fit_naming_the_field(tmp_path, component, expected):
    components = {"resnet50": {**DOCUMENT["endpoints"][0]["inference_components"]["components"]["resnet50"]}}
    components["resnet50"].update(component)
    if "copy_count" in component:
        components["resnet50"]["max_copies"] = component["copy_count"]
    _refused(tmp_path, _document(inference_components=_ic(components=components)), expected)


def test_config_refuses_accelerators_on_a_cpu_instance(tmp_path):
    document = _document(models=["add_sub"], instance_type="ml.c5.xlarge", inference_ami_version=None)
    document["models"].append(
        {"name": "add_sub", "source": {"path": "examples/models/add_sub"}, "platform": "python", "max_batch_size": 8,
         "instance_groups": [{"count": 1, "kind": "KIND_CPU"}]}
    )  # fmt: skip
    document["endpoints"][0]["alarms"] = {}
    document["endpoints"][0]["inference_components"] = _ic(components={"add_sub": {"accelerators": 1}})
    _refused(tmp_path, document, "inference_components.components.add_sub.accelerators", "has no GPU")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"inference_components": _ic(copy_scaling=None)}, "min_instances 0 needs copy_scaling"),
        ({"inference_components": _ic(min_instances=2, max_instances=1)}, "min_instances 2 > max_instances 1"),
        ({"inference_components": _ic(components={"bert": {}})}, "inference_components.components: ['bert']"),
        ({"inference_components": _ic(routing_strategy="PREFIX_AWARE")}, "routing_strategy"),
        ({"autoscaling": {"min_capacity": 1, "max_capacity": 2, "invocations_per_instance": 10}}, "autoscaling is not"),
        ({"deployment": {"strategy": "blue_green"}}, "rolling policy only"),
        ({"initial_instance_count": 2}, "initial_instance_count 2 must lie between"),
        ({"mode": "single_model", "models": ["resnet50"]}, "inference_components is for mode 'inference_components'"),
        (
            {
                "deployment": {"strategy": "rolling", "rollback_alarms": ["gpu_memory"]},
                "inference_components": _ic(components={"resnet50": {"accelerators": 0}}),
            },
            "'gpu_memory' needs GPUs on every component",
        ),
        (
            {"name": "a" * 45},
            "endpoints[0].models: component name 'components-"
            + "a" * 45
            + "-resnet50' of model 'resnet50' has 65 characters; SageMaker allows 63",
        ),
    ],
)
def test_config_refusals(tmp_path, changes, expected):
    _refused(tmp_path, _document(**changes), expected)


def test_the_component_refuses_a_rollback_alarm_slower_than_the_bake():
    """SageMaker rolls back only on alarms that reach ALARM while a batch bakes (WaitIntervalInSeconds)."""
    from aws_cdk import aws_cloudwatch as cloudwatch

    from triton_cdk.serving.inference_components import ComponentRollingUpdate

    stack, role, bucket = _app_scope()
    component = _component(stack, role, bucket, rolling=ComponentRollingUpdate(wait_seconds=300))
    metric = component.metric_model_latency(period=cdk.Duration.minutes(5))
    slow = cloudwatch.Alarm(stack, "Slow", metric=metric, threshold=1, evaluation_periods=2, datapoints_to_alarm=2)
    with pytest.raises(ValueError, match="needs 900 s to reach ALARM, longer than the 300 s bake"):
        component.add_rollback_alarm(slow)


def test_a_layout_without_room_for_one_more_copy_is_refused(tmp_path):
    """A rolling step starts a new copy before it stops an old one (InferenceComponentRollingUpdatePolicy:
    "provisions capacity on the new endpoint fleet ... and terminates capacity on the old"): at the most
    copies, one more copy of the largest component must still fit (independent review)."""
    import yaml

    from stage_config.loader import ConfigError, load_config

    document = yaml.safe_load((EXAMPLES / "components.yaml").read_text())
    endpoint = document["endpoints"][0]
    endpoint["inference_components"]["components"]["yolov5s"]["max_copies"] = 2  # 2 + 2 copies = 4 GPUs, no room
    (tmp_path / "components.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(
        ConfigError,
        match=r"inference_components.max_instances: at their most copies \(resnet50 x 2, yolov5s x 2\) the "
        r"components hold 4 GPUs",
    ):
        load_config(tmp_path / "components.yaml")
    endpoint["inference_components"]["components"]["yolov5s"]["max_copies"] = 1
    endpoint["deployment"]["rolling_batch_percent"] = 50
    (tmp_path / "components.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(ConfigError, match=r"deployment.rolling_batch_percent: inference components roll one copy"):
        load_config(tmp_path / "components.yaml")
