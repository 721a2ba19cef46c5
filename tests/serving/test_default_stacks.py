"""The shipped dev and prod configs synthesize into complete endpoint stacks."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match
from serving_helpers import only

from serving_facts.content_address import MULTI_MODEL_PREFIX
from triton_cdk.images import triton_image

ENDPOINTS = ("triton-mme", "triton-bert")


def model_data_url(synth, endpoint: str) -> str:
    """The literal key part of the Model's S3 location (the bucket is imported from the artifact stack)."""
    _, model = only(synth.templates[endpoint], "AWS::SageMaker::Model")
    url = model["Properties"]["PrimaryContainer"]["ModelDataUrl"]["Fn::Join"][1]
    assert url[0] == "s3://" and "Fn::ImportValue" in url[1]
    return url[2]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_every_endpoint_stack_has_the_full_set_of_resources(stage, request):
    synth = request.getfixturevalue(stage)
    assert sorted(synth.templates) == sorted(ENDPOINTS)
    for endpoint in ENDPOINTS:
        template = synth.templates[endpoint]
        for resource_type in (
            "AWS::SageMaker::Model",
            "AWS::SageMaker::EndpointConfig",
            "AWS::SageMaker::Endpoint",
            "AWS::ApplicationAutoScaling::ScalableTarget",
            "AWS::SNS::Topic",
            "AWS::CloudWatch::Dashboard",
        ):
            template.resource_count_is(resource_type, 1)
        template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 2)
        alarms = 9 if endpoint == "triton-mme" else 6
        template.resource_count_is("AWS::CloudWatch::Alarm", alarms)


def test_multi_model_endpoint_points_at_the_prefix_of_its_models(dev):
    located = dev.stacks.endpoints["triton-mme"].endpoint_artifacts
    template = dev.templates["triton-mme"]
    _, model = only(template, "AWS::SageMaker::Model")
    container = model["Properties"]["PrimaryContainer"]
    assert container["Mode"] == "MultiModel"
    assert model_data_url(dev, "triton-mme") == "/" + located.multi_model_prefix
    assert located.multi_model_prefix.startswith(MULTI_MODEL_PREFIX) and located.multi_model_prefix.endswith("/")
    # Triton chooses the model per request (TargetModel), so no default model is set.
    assert "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" not in container["Environment"]
    assert container["Environment"]["SAGEMAKER_TRITON_LOG_VERBOSE"] == "false"
    assert "ModelDataSource" not in container


def test_single_model_endpoint_serves_the_content_addressed_archive(dev):
    located = dev.stacks.endpoints["triton-bert"].endpoint_artifacts
    (artifact,) = located.models
    _, model = only(dev.templates["triton-bert"], "AWS::SageMaker::Model")
    container = model["Properties"]["PrimaryContainer"]
    assert container["Mode"] == "SingleModel"
    assert model_data_url(dev, "triton-bert") == "/" + artifact.key
    assert artifact.key.endswith("/model.tar.gz") and artifact.digest in artifact.key
    assert container["Environment"] == {
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "bert_base",
        "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
    }
    assert "VpcConfig" not in model["Properties"] and model["Properties"]["EnableNetworkIsolation"] is True


def test_same_model_gets_the_same_key_in_both_endpoints(dev):
    """One function maps a model to its key: bert_base's single-model archive is also an MME member."""
    mme = {a.model.name: a.key for a in dev.stacks.endpoints["triton-mme"].endpoint_artifacts.models}
    (bert,) = dev.stacks.endpoints["triton-bert"].endpoint_artifacts.models
    assert mme["bert_base"] == bert.key


def test_image_is_the_sagemaker_sdk_gpu_image_for_the_stack_region(dev):
    template = dev.templates["triton-bert"]
    _, model = only(template, "AWS::SageMaker::Model")
    image = model["Properties"]["PrimaryContainer"]["Image"]["Fn::FindInMap"]
    assert image[1] == {"Ref": "AWS::Region"} and image[2] == "gpu"
    mapping = dev.raw["triton-bert"]["Mappings"][image[0]]
    assert mapping["us-east-1"]["gpu"] == triton_image("24.09", "us-east-1", gpu=True).uri
    assert mapping["us-east-1"]["gpu"].endswith("/sagemaker-tritonserver:24.09-py3")
    assert mapping["eu-west-1"]["cpu"].endswith("/sagemaker-tritonserver:24.09-py3-cpu")


def test_endpoint_config_names_are_generated_and_variant_is_configured(prod):
    template = prod.templates["triton-bert"]
    _, config = only(template, "AWS::SageMaker::EndpointConfig")
    assert "EndpointConfigName" not in config["Properties"]
    assert config["Properties"]["ProductionVariants"] == [
        {
            "InitialInstanceCount": 2,
            "InitialVariantWeight": 1,
            "InferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1",
            "InstanceType": "ml.g5.xlarge",
            "ModelName": {"Fn::GetAtt": [only(template, "AWS::SageMaker::Model")[0], "ModelName"]},
            "VariantName": "AllTraffic",
        }
    ]
    assert "DataCaptureConfig" not in config["Properties"]
    _, model = only(template, "AWS::SageMaker::Model")
    assert "ModelName" not in model["Properties"]


def test_dev_deploys_blue_green_all_at_once_with_rollback_alarms(dev):
    template = dev.templates["triton-mme"]
    _, endpoint = only(template, "AWS::SageMaker::Endpoint")
    props = endpoint["Properties"]
    assert props["EndpointName"] == "dev-triton-mme"
    policy = props["DeploymentConfig"]["BlueGreenUpdatePolicy"]
    # 900 s: the rollback alarms ((2 + 1) x 300 s periods) can reach ALARM while the new fleet bakes.
    assert policy["TrafficRoutingConfiguration"] == {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 900}
    assert policy["TerminationWaitInSeconds"] == 300 and policy["MaximumExecutionTimeoutInSeconds"] == 3600
    alarms = [a["AlarmName"]["Ref"] for a in props["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]]
    names = {alarm_id: template.to_json()["Resources"][alarm_id]["Properties"]["AlarmName"] for alarm_id in alarms}
    assert sorted(names.values()) == ["dev-triton-mme-AllTraffic-errors-5xx", "dev-triton-mme-AllTraffic-latency"]


def test_prod_deploys_canary_and_rolls_back_on_three_alarms(prod):
    for endpoint_name in ENDPOINTS:
        template = prod.templates[endpoint_name]
        resources = template.to_json()["Resources"]
        _, endpoint = only(template, "AWS::SageMaker::Endpoint")
        config = endpoint["Properties"]["DeploymentConfig"]
        assert config["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"] == {
            "Type": "CANARY",
            "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 25},
            "WaitIntervalInSeconds": 900,
        }
        rollback = [resources[a["AlarmName"]["Ref"]] for a in config["AutoRollbackConfiguration"]["Alarms"]]
        assert [a["Properties"].get("MetricName", "4xx-rate") for a in rollback] == [
            "ModelLatency",
            "Invocation5XXErrors",
            "4xx-rate",
        ]
        assert all(a["Type"] == "AWS::CloudWatch::Alarm" for a in rollback)


def test_updates_keep_the_autoscaled_instance_count(dev):
    """RetainAllVariantProperties false would reset the count on every deploy (../shared/README.md)."""
    _, endpoint = only(dev.templates["triton-bert"], "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True
    assert endpoint["Properties"]["ExcludeRetainedVariantProperties"] == [
        {"VariantPropertyType": "DesiredWeight"},
        {"VariantPropertyType": "DataCaptureConfig"},
    ]


@pytest.mark.parametrize(
    ("stage", "endpoint", "low", "high", "invocations"),
    [("dev", "triton-mme", 1, 2, 200), ("dev", "triton-bert", 1, 2, 500), ("prod", "triton-mme", 2, 4, 200)],
)
def test_scalable_target_and_both_policies(stage, endpoint, low, high, invocations, request):
    synth = request.getfixturevalue(stage)
    template = synth.templates[endpoint]
    endpoint_id, _ = only(template, "AWS::SageMaker::Endpoint")
    target_id, target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    props = target["Properties"]
    assert (props["MinCapacity"], props["MaxCapacity"]) == (low, high)
    assert props["ResourceId"] == f"endpoint/{stage}-{endpoint}/variant/AllTraffic"
    assert props["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert props["ServiceNamespace"] == "sagemaker"
    assert "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint" in str(props["RoleARN"])
    # Deletion order: the target (and its policies) depend on the endpoint, so they go first.
    assert target["DependsOn"] == [endpoint_id]
    policies = template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    assert all(p["DependsOn"] == [endpoint_id] for p in policies.values())
    assert all(p["Properties"]["ScalingTargetId"] == {"Ref": target_id} for p in policies.values())
    configs = sorted(
        (p["Properties"]["TargetTrackingScalingPolicyConfiguration"] for p in policies.values()),
        key=lambda c: "PredefinedMetricSpecification" in c,
    )
    gpu, per_instance = configs
    assert per_instance["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
    }
    assert per_instance["TargetValue"] == invocations
    assert gpu["CustomizedMetricSpecification"] == {
        "Dimensions": [
            {"Name": "EndpointName", "Value": f"{stage}-{endpoint}"},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ],
        "MetricName": "GPUUtilization",
        "Namespace": "/aws/sagemaker/Endpoints",
        "Statistic": "Average",
    }
    assert gpu["TargetValue"] == 70  # ml.g5.xlarge has one GPU
    for config in configs:
        assert (config["ScaleInCooldown"], config["ScaleOutCooldown"], config["DisableScaleIn"]) == (300, 60, False)


def alarm(template, metric_name: str) -> dict:
    _, found = only(template, "AWS::CloudWatch::Alarm", {"MetricName": metric_name})
    return found["Properties"]


def test_latency_alarm_converts_milliseconds_to_microseconds(dev):
    latency = alarm(dev.templates["triton-mme"], "ModelLatency")
    assert latency["Namespace"] == "AWS/SageMaker"
    assert latency["ExtendedStatistic"] == "p99"
    assert latency["Threshold"] == 500 * 1000  # config: 500 ms
    assert latency["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm(dev.templates["triton-bert"], "ModelLatency")["Threshold"] == 100_000


def test_every_alarm_ignores_missing_data_and_notifies_the_topic(dev):
    for endpoint in ENDPOINTS:
        template = dev.templates[endpoint]
        topic_id, _ = only(template, "AWS::SNS::Topic")
        for found in template.find_resources("AWS::CloudWatch::Alarm").values():
            props = found["Properties"]
            assert props["TreatMissingData"] == "notBreaching", props["AlarmName"]
            assert props["AlarmActions"] == [{"Ref": topic_id}] and props["OKActions"] == [{"Ref": topic_id}]
            assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (3, 2)
            assert props["AlarmName"].startswith(f"dev-{endpoint}-AllTraffic-")


def test_error_alarms(dev):
    template = dev.templates["triton-bert"]
    errors = alarm(template, "Invocation5XXErrors")
    assert (errors["Statistic"], errors["Threshold"], errors["ComparisonOperator"]) == (
        "Sum",
        1,
        "GreaterThanOrEqualToThreshold",
    )
    _, rate = only(template, "AWS::CloudWatch::Alarm", {"AlarmName": "dev-triton-bert-AllTraffic-errors-4xx"})
    props = rate["Properties"]
    assert props["Threshold"] == 5 and props["ComparisonOperator"] == "GreaterThanThreshold"
    expression = next(m for m in props["Metrics"] if "Expression" in m)
    assert expression["Expression"] == "IF(invocations > 0, 100 * errors / invocations, 0)"
    used = {m["Id"]: m["MetricStat"]["Metric"]["MetricName"] for m in props["Metrics"] if "MetricStat" in m}
    assert used == {"errors": "Invocation4XXErrors", "invocations": "Invocations"}


def test_utilisation_alarms_scale_with_the_device_count(dev):
    template = dev.templates["triton-bert"]  # ml.g5.xlarge: 4 vCPUs, 1 GPU
    gpu_memory = alarm(template, "GPUMemoryUtilization")
    assert gpu_memory["Namespace"] == "/aws/sagemaker/Endpoints" and gpu_memory["Threshold"] == 90
    assert alarm(template, "CPUUtilization")["Threshold"] == 90 * 4
    assert alarm(template, "MemoryUtilization")["Threshold"] == 90
    for metric in ("DiskUtilization", "ModelLoadingWaitTime", "ModelCacheHit"):
        assert not template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {"MetricName": metric}})


def test_multi_model_loading_alarms(dev):
    template = dev.templates["triton-mme"]
    disk = alarm(template, "DiskUtilization")
    assert (disk["Namespace"], disk["Threshold"]) == ("/aws/sagemaker/Endpoints", 85)
    wait = alarm(template, "ModelLoadingWaitTime")
    # No percentiles are published for this metric; 30 000 ms in microseconds.
    assert (wait["Statistic"], wait["Threshold"]) == ("Average", 30_000_000)
    hit = alarm(template, "ModelCacheHit")
    assert (hit["Statistic"], hit["Threshold"], hit["ComparisonOperator"]) == ("Average", 0.5, "LessThanThreshold")


def test_topic_is_encrypted_and_tls_only(dev):
    template = dev.templates["triton-mme"]
    _, topic = only(template, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic["Properties"]
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def dashboard_body(synth, endpoint: str) -> str:
    _, dashboard = only(synth.templates[endpoint], "AWS::CloudWatch::Dashboard")
    body = dashboard["Properties"]["DashboardBody"]
    return "".join(part if isinstance(part, str) else "<token>" for part in body["Fn::Join"][1])


def test_dashboard_shows_the_alarmed_metrics_plus_invocations_and_instances(dev):
    _, dashboard = only(dev.templates["triton-mme"], "AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "triton-dev-triton-mme"
    body = dashboard_body(dev, "triton-mme")
    for metric in (
        "Invocations",
        "InvocationsPerInstance",
        "ModelLatency",
        "OverheadLatency",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "CPUUtilization",
        "MemoryUtilization",
        "GPUUtilization",
        "GPUMemoryUtilization",
        "DiskUtilization",
        "ModelLoadingWaitTime",
        "ModelCacheHit",
        "LoadedModelCount",
    ):
        assert f'"{metric}"' in body, metric
    assert "invocations / perinstance" in body
    assert '"type":"alarm"' in body
    single = dashboard_body(dev, "triton-bert")
    assert '"ModelCacheHit"' not in single and '"GPUMemoryUtilization"' in single
