"""`async_inference:` (issue #26 part 1): the config schema's limits and refusals, and the constructs' props.

Sources are named per test; the module docs of stage_config/async_inference.py and
triton_cdk/serving/async_inference.py quote them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import botocore.session
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template
from pydantic import ValidationError
from synth_helpers import PROJECT_ROOT

from stage_config import ConfigError
from stage_config.async_inference import MAX_CONCURRENT_INVOCATIONS
from stage_config.endpoint import EndpointSettings
from stage_config.loader import load_config
from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving import ProductionVariant, TritonEndpoint, TritonModel, TritonModelData
from triton_cdk.serving.async_inference import (
    AsyncAlarmThresholds,
    AsyncInference,
    AsyncOutput,
    AsyncScalingSettings,
    TritonAsyncMonitoring,
    TritonAsyncScaling,
)
from triton_cdk.serving.endpoint import MetricsPublishing
from triton_cdk.serving.monitoring import AlarmThresholds, TritonEndpointMonitoring, VariantHardware

BASE = {"name": "a", "mode": "single_model", "models": ["m"], "instance_type": "ml.g5.xlarge"}
EXAMPLE = PROJECT_ROOT / "examples" / "config" / "async.yaml"


def endpoint(**changes) -> EndpointSettings:
    return EndpointSettings(**{**BASE, "async_inference": {}, **changes})


def test_concurrency_limits_are_botocores():
    """botocore sagemaker, shape MaxConcurrentInvocationsPerInstance (AsyncInferenceClientConfig): min 1, max 1000."""
    metadata = (
        botocore.session.get_session()
        .get_service_model("sagemaker")
        .shape_for("MaxConcurrentInvocationsPerInstance")
        .metadata
    )
    assert (metadata["min"], metadata["max"]) == MAX_CONCURRENT_INVOCATIONS
    endpoint(async_inference={"max_concurrent_invocations_per_instance": metadata["max"]})
    for bad in (metadata["min"] - 1, metadata["max"] + 1):
        with pytest.raises(ValidationError, match="max_concurrent_invocations_per_instance"):
            endpoint(async_inference={"max_concurrent_invocations_per_instance": bad})


def test_request_ttl_and_invocation_timeout_are_not_endpoint_config_members():
    """botocore: RequestTTLSeconds and InvocationTimeoutSeconds are InvokeEndpointAsync (sagemaker-runtime) parameters,
    not members of AsyncInferenceConfig, so the endpoint config has no such field (the client sets them)."""
    session = botocore.session.get_session()
    invoke = session.get_service_model("sagemaker-runtime").operation_model("InvokeEndpointAsync").input_shape.members
    assert {"RequestTTLSeconds", "InvocationTimeoutSeconds"} <= set(invoke)
    sagemaker = session.get_service_model("sagemaker")
    members = set()
    for shape in ("AsyncInferenceConfig", "AsyncInferenceOutputConfig", "AsyncInferenceClientConfig"):
        members |= set(sagemaker.shape_for(shape).members)
    assert not members & {"RequestTTLSeconds", "InvocationTimeoutSeconds"}
    with pytest.raises(ValidationError):
        endpoint(async_inference={"request_ttl_seconds": 600})


@pytest.mark.parametrize("mode", ["multi_model", "inference_components"])
def test_async_is_for_single_model_endpoints(mode):
    """botocore's sagemaker-runtime model: InvokeEndpointAsync's input has no TargetModel and no
    InferenceComponentName, which InvokeEndpoint has, so the models of a multi-model endpoint and an endpoint's
    inference components cannot be addressed asynchronously; the message names that source."""
    runtime = botocore.session.get_session().get_service_model("sagemaker-runtime")
    addressing = {"TargetModel", "InferenceComponentName"}
    assert not set(runtime.operation_model("InvokeEndpointAsync").input_shape.members) & addressing
    assert set(runtime.operation_model("InvokeEndpoint").input_shape.members) >= addressing
    with pytest.raises(ValidationError, match="async_inference is for mode 'single_model' only") as raised:
        endpoint(mode=mode, models=["m", "n"])
    assert "InvokeEndpointAsync takes no TargetModel and no InferenceComponentName" in str(raised.value)


def test_inf1_instances_are_refused():
    """SageMaker "Asynchronous inference": "if your endpoint uses any of the features listed in this Exclusions page,
    you cannot use Asynchronous Inference"; the link is deployment-guardrails-exclusions.html, which lists "Endpoints
    that use Inf1 (Inferentia-based) instances" (besides Marketplace containers, which this project never builds).
    An extra variant's Inf1 type is refused already by the instance catalogue (no Inf1 family)."""
    with pytest.raises(ValidationError, match="cannot serve asynchronous inference") as raised:
        endpoint(instance_type="ml.inf1.xlarge")
    assert "instance_type: ml.inf1.xlarge" in str(raised.value) and "'Exclusions' page" in str(raised.value)


def test_invocation_autoscaling_is_refused_beside_async():
    """SageMaker "Alarms and logs for tracking metrics from asynchronous endpoints": Invocations and
    InvocationsPerInstance are not published for asynchronous endpoints, so invocation-based scaling never sees data."""
    with pytest.raises(ValidationError, match="publishes no Invocations"):
        endpoint(autoscaling={"invocations_per_instance": 10})


def test_backlog_scaling_is_refused_with_several_variants():
    """Same page: ApproximateBacklogSizePerInstance and HasBacklogWithoutCapacity carry the EndpointName dimension
    only, so they cannot steer one of several variants."""
    with pytest.raises(ValidationError, match="extra_variants"):
        endpoint(
            async_inference={"scaling": {}},
            extra_variants=[{"name": "b", "instance_type": "ml.g5.2xlarge"}],
        )


def test_the_4xx_rate_threshold_is_refused_and_the_4xx_count_may_roll_back():
    """Same page: Invocations is not published for asynchronous endpoints, so a 4XX rate over it never has data;
    Invocation4XXErrors is on the page's list ("Common Endpoint Metrics"), so the asynchronous endpoint's 4XX alarm
    counts it (triton_cdk/serving/monitoring.py) and may be a rollback alarm."""
    with pytest.raises(ValidationError, match=r"alarms\.errors_4xx_rate_percent: a rate over Invocations"):
        endpoint(alarms={"errors_4xx_rate_percent": 10})
    allowed = endpoint(deployment={"rollback_alarms": ["latency", "errors_4xx"]})
    assert allowed.deployment.rollback_alarms == ["latency", "errors_4xx"]


def test_scale_to_zero_is_allowed_on_async_only():
    """SageMaker "Autoscale an asynchronous endpoint": MinCapacity 0 for asynchronous endpoints; real-time variants
    keep at least one instance (autoscaling.min_capacity >= 1)."""
    assert endpoint(async_inference={"scaling": {"min_capacity": 0}}).async_inference.scaling.min_capacity == 0
    with pytest.raises(ValidationError, match="min_capacity"):
        EndpointSettings(**BASE, autoscaling={"min_capacity": 0, "invocations_per_instance": 10})


def test_initial_count_lies_within_the_backlog_scaling_bounds():
    """ProductionVariant InitialInstanceCount is at least 1; it must also lie within min/max capacity."""
    with pytest.raises(ValidationError, match="initial_instance_count 3 must lie within"):
        endpoint(initial_instance_count=3, async_inference={"scaling": {"max_capacity": 2}})


def _write(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    mutate(data["endpoints"][0])
    path = tmp_path / "async.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_refusal_at_config_load_names_the_file_and_the_field(tmp_path):
    path = _write(tmp_path, lambda e: e.update(mode="multi_model"))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert str(path.name) in message and "async_inference is for mode 'single_model' only" in message


def test_the_example_loads():
    config = load_config(EXAMPLE)
    (settings,) = config.endpoints
    assert settings.async_inference.scaling.min_capacity == 0


def _stack() -> tuple[cdk.Stack, s3.IBucket, kms.IKey]:
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account="111111111111", region="us-east-1"))
    bucket = s3.Bucket.from_bucket_name(stack, "B", "bucket")
    key = kms.Key.from_key_arn(stack, "K", "arn:aws:kms:us-east-1:111111111111:key/abc")
    return stack, bucket, key


def test_async_output_renders_the_api_members():
    """AsyncInferenceOutputConfig: S3OutputPath, S3FailurePath, KmsKeyId, NotificationConfig; ClientConfig
    MaxConcurrentInvocationsPerInstance (SageMaker API reference)."""
    stack, bucket, key = _stack()
    inference = AsyncInference(
        stack,
        "Async",
        bucket=bucket,
        key=key,
        input_prefix="async-inference/a/input/",
        output_prefix="async-inference/a/output/",
        failure_prefix="async-inference/a/failure/",
        max_concurrent_invocations_per_instance=4,
    )
    rendered = stack.resolve(inference.output.render())
    assert rendered["outputConfig"]["s3OutputPath"] == "s3://bucket/async-inference/a/output"
    assert rendered["outputConfig"]["s3FailurePath"] == "s3://bucket/async-inference/a/failure"
    assert rendered["outputConfig"]["kmsKeyId"] == "arn:aws:kms:us-east-1:111111111111:key/abc"
    assert set(rendered["outputConfig"]["notificationConfig"]) == {"successTopic", "errorTopic"}
    assert rendered["clientConfig"] == {"maxConcurrentInvocationsPerInstance": 4}
    Template.from_stack(stack).resource_count_is("AWS::SNS::Topic", 2)
    Template.from_stack(stack).has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"output_prefix": "/abs/"}, "output_prefix must be relative"),
        ({"failure_prefix": "async-inference/a/output/"}, "must differ"),
        ({"max_concurrent_invocations_per_instance": 1001}, "between 1 and 1000"),
    ],
)
def test_async_output_refuses_bad_props(changes, message):
    _, bucket, key = _stack()
    props = {
        "bucket": bucket,
        "key": key,
        "output_prefix": "async-inference/a/output/",
        "failure_prefix": "async-inference/a/failure/",
        **changes,
    }
    assert any(message in p for p in AsyncOutput(**props).problems())


def test_scaling_settings_allow_zero_but_not_below():
    assert AsyncScalingSettings(min_capacity=0, max_capacity=1).problems() == []
    assert AsyncScalingSettings(min_capacity=-1, max_capacity=1).problems()
    assert AsyncScalingSettings(min_capacity=0, max_capacity=0).problems()


def test_construct_refuses_a_shared_input_prefix():
    stack, bucket, key = _stack()
    with pytest.raises(InvalidPropsError, match="input_prefix must differ"):
        AsyncInference(
            stack,
            "Async",
            bucket=bucket,
            key=key,
            input_prefix="async-inference/a/output/",
            output_prefix="async-inference/a/output/",
            failure_prefix="async-inference/a/failure/",
        )


def _endpoint(
    stack: cdk.Stack, bucket: s3.IBucket, key: kms.IKey, *, asynchronous: bool, metrics: MetricsPublishing | None = None
):
    output = None
    if asynchronous:
        output = AsyncInference(
            stack,
            "Async",
            bucket=bucket,
            key=key,
            input_prefix="async-inference/a/input/",
            output_prefix="async-inference/a/output/",
            failure_prefix="async-inference/a/failure/",
        ).output
    model = TritonModel(
        stack,
        "Model",
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3",
        model_data=TritonModelData.from_archive(bucket, "models/m/abc/model.tar.gz"),
        execution_role=iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::111111111111:role/sm"),
        default_model_name="m",
    )
    return TritonEndpoint(
        stack,
        "Endpoint",
        model=model,
        endpoint_name="dev-a",
        variants=[ProductionVariant("AllTraffic", "ml.g5.xlarge")],
        async_output=output,
        metrics=metrics,
    )


def test_the_endpoint_renders_its_async_output_and_backlog_scaling_reaches_zero():
    """TritonEndpoint `async_output` -> AsyncInferenceConfig; TritonAsyncScaling: MinCapacity 0, target tracking on
    ApproximateBacklogSizePerInstance and the HasBacklogWithoutCapacity step policy under a fixed name (SageMaker
    "Autoscale an asynchronous endpoint")."""
    stack, bucket, key = _stack()
    endpoint = _endpoint(stack, bucket, key, asynchronous=True)
    TritonAsyncScaling(stack, "Scaling", endpoint=endpoint, variant="AllTraffic", settings=AsyncScalingSettings(0, 2))
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig", {"AsyncInferenceConfig": {"OutputConfig": Match.object_like({})}}
    )
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 0})
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {"PolicyName": "HasBacklogWithoutCapacity", "PolicyType": "StepScaling"},
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "HasBacklogWithoutCapacity",
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "EvaluationPeriods": 2,
            "DatapointsToAlarm": 2,
        },
    )


def test_backlog_scaling_refuses_a_real_time_endpoint():
    """Scale to zero is for asynchronous endpoints only (SageMaker "Autoscale an asynchronous endpoint")."""
    stack, bucket, key = _stack()
    endpoint = _endpoint(stack, bucket, key, asynchronous=False)
    with pytest.raises(InvalidPropsError, match="no AsyncInferenceConfig"):
        TritonAsyncScaling(
            stack, "Scaling", endpoint=endpoint, variant="AllTraffic", settings=AsyncScalingSettings(0, 2)
        )


@pytest.mark.parametrize("asynchronous", [True, False])
def test_endpoint_monitoring_uses_only_what_an_asynchronous_endpoint_publishes(asynchronous):
    """SageMaker "Alarms and logs for tracking metrics from asynchronous endpoints": "Any metric not listed below is not
    published if the endpoint is enabled for asynchronous inference", e.g. OverheadLatency, Invocations,
    InvocationsPerInstance. On an asynchronous endpoint TritonEndpointMonitoring's 4XX alarm counts
    Invocation4XXErrors (Sum >= 1, listed) and its dashboard names none of the three; a real-time endpoint keeps the
    rate over Invocations and the invocation graphs."""
    stack, bucket, key = _stack()
    endpoint = _endpoint(stack, bucket, key, asynchronous=asynchronous)
    TritonEndpointMonitoring(
        stack,
        "Monitoring",
        endpoint=endpoint,
        thresholds=AlarmThresholds(),
        hardware_by_variant={"AllTraffic": VariantHardware(vcpus=4, gpu_count=1)},
        multi_model=False,
    )
    template = Template.from_stack(stack)
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    (errors_4xx,) = [a["Properties"] for a in alarms.values() if "4XX" in a["Properties"]["AlarmDescription"]]
    dashboard = json.dumps(template.find_resources("AWS::CloudWatch::Dashboard"))
    unpublished = ["OverheadLatency", '\\"Invocations\\"', "InvocationsPerInstance"]
    if asynchronous:
        assert errors_4xx["MetricName"] == "Invocation4XXErrors" and errors_4xx["Statistic"] == "Sum"
        assert (errors_4xx["Threshold"], errors_4xx["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
        assert not [name for name in unpublished if name in dashboard]
        assert "SampleCount" in dashboard  # the instance count: CPUUtilization's samples per minute
    else:
        assert {m["Id"] for m in errors_4xx["Metrics"]} >= {"errors", "invocations"}
        assert all(name in dashboard for name in unpublished)


def _async_dashboard(frequency: int) -> str:
    stack, bucket, key = _stack()
    endpoint = _endpoint(
        stack, bucket, key, asynchronous=True, metrics=MetricsPublishing(publish_frequency_seconds=frequency)
    )
    TritonEndpointMonitoring(
        stack,
        "Monitoring",
        endpoint=endpoint,
        thresholds=AlarmThresholds(),
        hardware_by_variant={"AllTraffic": VariantHardware(vcpus=4, gpu_count=1)},
        multi_model=False,
    )
    return json.dumps(Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard"))


@pytest.mark.parametrize(
    ("frequency", "expression", "period"),
    [(60, None, 60), (10, "samples / 6", 60), (30, "samples / 2", 60), (300, None, 300)],
)
def test_the_async_instance_count_follows_the_metrics_publish_frequency(frequency, expression, period):
    """SageMaker "Troubleshooting" (asynchronous inference) counts instances as CPUUtilization's SampleCount "for a
    1 minute period", one sample per instance per publication; MetricsConfig MetricPublishFrequencyInSeconds sets how
    often the utilization metrics are published (SageMaker API reference), so at 10 s an instance gives 6 samples a
    minute: the count is divided by period / frequency, over a period of max(60 s, frequency)."""
    dashboard = _async_dashboard(frequency)
    assert "SampleCount" in dashboard
    if expression is None:
        assert "samples /" not in dashboard
    else:
        assert expression in dashboard
    (options,) = re.findall(r"CPUUtilization[^{]*(\{[^}]*SampleCount[^}]*\})", dashboard)
    # A graph widget's period is 300 s unless a metric names another (CloudWatch dashboard body structure).
    assert (f'period\\":{period}' in options) or (period == 300 and "period" not in options)


def test_async_alarms_follow_the_alarm_settings_m_out_of_n():
    """CloudWatch "Evaluating an alarm": DatapointsToAlarm (M) of EvaluationPeriods (N); the asynchronous failure
    and backlog-age alarms take `alarms.evaluation_periods` / `datapoints_to_alarm` as the endpoint's other alarms
    (review of issue #26, item 12), and refuse M > N."""
    stack, bucket, key = _stack()
    endpoint = _endpoint(stack, bucket, key, asynchronous=True)
    thresholds = AsyncAlarmThresholds(period_seconds=60, evaluation_periods=3, datapoints_to_alarm=2)
    TritonAsyncMonitoring(stack, "AsyncMonitoring", endpoint=endpoint, thresholds=thresholds)
    alarms = Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm")
    assert alarms and all(
        (a["Properties"]["EvaluationPeriods"], a["Properties"]["DatapointsToAlarm"]) == (3, 2) for a in alarms.values()
    )
    with pytest.raises(InvalidPropsError, match="datapoints_to_alarm 4"):
        TritonAsyncMonitoring(
            stack,
            "Refused",
            endpoint=endpoint,
            thresholds=AsyncAlarmThresholds(evaluation_periods=3, datapoints_to_alarm=4),
        )
