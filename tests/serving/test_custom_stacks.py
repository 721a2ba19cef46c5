"""Purpose-built endpoints: multi-GPU scaling, CPU models, uncompressed data, VPC, data capture,
rolling and linear deployments, extra variants (serving_helpers.CUSTOM_ENDPOINTS)."""

from __future__ import annotations

import json

from serving_helpers import only


def props(template, resource_type: str, match: dict | None = None) -> dict:
    return only(template, resource_type, match)[1]["Properties"]


def test_multi_gpu_single_model_scales_gpu_target_by_gpu_count(custom):
    template = custom.templates["multi-gpu"]  # ml.g5.12xlarge: 4 A10G, 48 vCPUs
    policies = template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    configs = [p["Properties"]["TargetTrackingScalingPolicyConfiguration"] for p in policies.values()]
    gpu = next(c for c in configs if "CustomizedMetricSpecification" in c)
    assert gpu["TargetValue"] == 70 * 4
    per_instance = next(c for c in configs if "PredefinedMetricSpecification" in c)
    assert per_instance["TargetValue"] == 300
    for config in configs:
        assert (config["ScaleInCooldown"], config["ScaleOutCooldown"], config["DisableScaleIn"]) == (600, 120, True)


def test_multi_gpu_alarms_are_normalised_per_device(custom):
    template = custom.templates["multi-gpu"]
    gpu_memory = props(template, "AWS::CloudWatch::Alarm", {"MetricName": "GPUMemoryUtilization"})
    assert gpu_memory["Threshold"] == 80 * 4
    assert props(template, "AWS::CloudWatch::Alarm", {"MetricName": "CPUUtilization"})["Threshold"] == 50 * 48
    latency = props(template, "AWS::CloudWatch::Alarm", {"MetricName": "ModelLatency"})
    assert (latency["Threshold"], latency["Period"]) == (250_000, 60)


def test_scheduled_actions_change_capacity(custom):
    target = props(custom.templates["multi-gpu"], "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 6)
    actions = {a["ScheduledActionName"]: a for a in target["ScheduledActions"]}
    assert actions["night"]["Schedule"] == "cron(0 20 * * ? *)"
    assert actions["night"]["ScalableTargetAction"] == {"MinCapacity": 1}
    assert actions["night"]["Timezone"] == "Europe/Berlin"
    assert actions["morning"]["ScalableTargetAction"] == {"MinCapacity": 2, "MaxCapacity": 6}


def test_container_environment_from_config(custom):
    model = props(custom.templates["multi-gpu"], "AWS::SageMaker::Model")
    assert model["PrimaryContainer"]["Environment"] == {
        "OMP_NUM_THREADS": "1",
        "SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--backend-config=tensorrt,version-compatible=true",
        "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": "4",
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "bert_base",
        "SAGEMAKER_TRITON_LOG_VERBOSE": "true",
        "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": "0.8",
        "SAGEMAKER_TRITON_OVERRIDE_PING_MODE": "live",
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432",
        "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "2097152",
        "SAGEMAKER_TRITON_THREAD_COUNT": "16",
    }


def test_variant_volume_and_timeouts(custom):
    config = props(custom.templates["multi-gpu"], "AWS::SageMaker::EndpointConfig")
    (variant,) = config["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g5.12xlarge"
    assert variant["InitialInstanceCount"] == 2
    assert "VolumeSizeInGB" not in variant  # NVMe instance storage only
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 1200
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 900
    (cpu,) = props(custom.templates["cpu-python"], "AWS::SageMaker::EndpointConfig")["ProductionVariants"]
    assert cpu["VolumeSizeInGB"] == 50 and "InferenceAmiVersion" not in cpu


def test_rolling_deployment(custom):
    template = custom.templates["multi-gpu"]
    endpoint = props(template, "AWS::SageMaker::Endpoint")
    config = endpoint["DeploymentConfig"]
    assert "BlueGreenUpdatePolicy" not in config
    assert config["RollingUpdatePolicy"] == {
        "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 25},
        "MaximumExecutionTimeoutInSeconds": 7200,
        "WaitIntervalInSeconds": 180,
    }
    resources = template.to_json()["Resources"]
    names = [
        resources[a["AlarmName"]["Ref"]]["Properties"]["AlarmName"]
        for a in config["AutoRollbackConfiguration"]["Alarms"]
    ]
    assert names == ["test-multi-gpu-AllTraffic-latency", "test-multi-gpu-AllTraffic-gpu-memory"]


def test_cpu_endpoint_uses_the_cpu_image_and_uncompressed_data(custom):
    template = custom.templates["cpu-python"]
    model = props(template, "AWS::SageMaker::Model")
    container = model["PrimaryContainer"]
    image = container["Image"]["Fn::FindInMap"]
    assert image[2] == "cpu"
    assert custom.raw["cpu-python"]["Mappings"][image[0]]["us-east-1"]["cpu"].endswith("-py3-cpu")
    assert "ModelDataUrl" not in container
    source = container["ModelDataSource"]["S3DataSource"]
    assert (source["S3DataType"], source["CompressionType"]) == ("S3Prefix", "None")
    (artifact,) = custom.stacks.endpoints["cpu-python"].endpoint_artifacts.models
    assert source["S3Uri"]["Fn::Join"][1][2] == "/" + artifact.uncompressed_prefix
    assert artifact.uncompressed_prefix.endswith("/uncompressed/")
    assert container["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "add_sub"


def test_cpu_endpoint_has_no_gpu_scaling_or_gpu_alarm(custom):
    template = custom.templates["cpu-python"]
    policies = template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    assert len(policies) == 1
    (policy,) = policies.values()
    assert "PredefinedMetricSpecification" in policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert not template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "GPUMemoryUtilization"}})
    assert props(template, "AWS::CloudWatch::Alarm", {"MetricName": "CPUUtilization"})["Threshold"] == 90 * 4


def test_vpc_and_network_isolation(custom):
    model = props(custom.templates["cpu-python"], "AWS::SageMaker::Model")
    assert model["EnableNetworkIsolation"] is True
    opted_out = props(custom.templates["cpu-mme"], "AWS::SageMaker::Model")
    assert opted_out["EnableNetworkIsolation"] is False
    assert model["VpcConfig"] == {
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
        "Subnets": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
    }


def test_data_capture_goes_to_its_own_prefix_encrypted_with_the_key(custom):
    template = custom.templates["cpu-python"]
    capture = props(template, "AWS::SageMaker::EndpointConfig")["DataCaptureConfig"]
    assert capture["EnableCapture"] is True
    assert capture["InitialSamplingPercentage"] == 50
    assert capture["CaptureOptions"] == [{"CaptureMode": "Input"}]  # capture_response: false
    destination = capture["DestinationS3Uri"]["Fn::Join"][1]
    assert destination[2] == "/data-capture/test-cpu-python"
    assert capture["KmsKeyId"]["Fn::ImportValue"].endswith("-Artifacts-ArtifactKeyArn")


def test_execution_role_gets_data_capture_and_vpc_permissions_before_the_model(custom):
    template = custom.templates["cpu-python"]
    policies = template.find_resources("AWS::IAM::Policy")
    (policy_id,) = [k for k in policies if k.startswith("ExecutionRoleAdditions")]
    policy = policies[policy_id]
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["DescribeRollbackAlarms"]["Action"] == "cloudwatch:DescribeAlarms"
    assert statements["WriteDataCapture"]["Action"] == "s3:PutObject"
    assert statements["WriteDataCapture"]["Resource"]["Fn::Join"][1][1] == "/data-capture/test-cpu-python/*"
    assert sorted(statements["EncryptDataCapture"]["Action"]) == ["kms:Encrypt", "kms:GenerateDataKey"]
    assert "ec2:CreateNetworkInterface" in statements["VpcNetworkInterfaces"]["Action"]
    assert "-Artifacts-ExecutionRoleArn" in json.dumps(policy["Properties"]["Roles"][0])  # the role's name
    _, model = only(template, "AWS::SageMaker::Model")
    assert policy_id in model["DependsOn"]
    _, endpoint = only(template, "AWS::SageMaker::Endpoint")
    assert policy_id in endpoint["DependsOn"]


def test_linear_deployment(custom):
    endpoint = props(custom.templates["cpu-python"], "AWS::SageMaker::Endpoint")
    policy = endpoint["DeploymentConfig"]["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"] == {
        "Type": "LINEAR",
        "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 20},
        "WaitIntervalInSeconds": 120,
    }
    assert policy["TerminationWaitInSeconds"] == 120
    assert len(endpoint["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]) == 2


def test_cpu_multi_model_endpoint(custom):
    template = custom.templates["cpu-mme"]
    container = props(template, "AWS::SageMaker::Model")["PrimaryContainer"]
    assert container["Mode"] == "MultiModel"
    assert container["Image"]["Fn::FindInMap"][2] == "cpu"
    located = custom.stacks.endpoints["cpu-mme"].endpoint_artifacts
    assert container["ModelDataUrl"]["Fn::Join"][1][2] == "/" + located.multi_model_prefix
    endpoint = props(template, "AWS::SageMaker::Endpoint")
    routing = endpoint["DeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing["CanarySize"] == {"Type": "CAPACITY_PERCENT", "Value": 10}
    resources = template.to_json()["Resources"]
    rollback = [
        resources[a["AlarmName"]["Ref"]]["Properties"]
        for a in endpoint["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    ]
    assert [a["MetricName"] for a in rollback] == ["DiskUtilization", "Invocation5XXErrors"]
    # Without autoscaling the config's instance counts stay authoritative on update.
    assert "RetainAllVariantProperties" not in endpoint
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)


def test_extra_variant_gets_its_own_scaling_alarms_and_weight(custom):
    template = custom.templates["two-variants"]
    config = props(template, "AWS::SageMaker::EndpointConfig")
    variants = {v["VariantName"]: v for v in config["ProductionVariants"]}
    assert variants["AllTraffic"]["InitialVariantWeight"] == 0.8
    assert variants["Larger"]["InitialVariantWeight"] == 0.2
    assert variants["Larger"]["InstanceType"] == "ml.g5.2xlarge"
    targets = template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget")
    assert sorted(t["Properties"]["ResourceId"] for t in targets.values()) == [
        "endpoint/test-two-variants/variant/AllTraffic",
        "endpoint/test-two-variants/variant/Larger",
    ]
    latency = template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "ModelLatency"}})
    dimensions = sorted(
        next(d["Value"] for d in a["Properties"]["Dimensions"] if d["Name"] == "VariantName") for a in latency.values()
    )
    assert dimensions == ["AllTraffic", "Larger"]
    # Rollback alarms (default: latency, errors_5xx) of every variant.
    endpoint = props(template, "AWS::SageMaker::Endpoint")
    assert len(endpoint["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]) == 4


def test_alarm_topic_has_the_configured_email_subscription(custom):
    subscription = props(custom.templates["cpu-mme"], "AWS::SNS::Subscription")
    assert (subscription["Protocol"], subscription["Endpoint"]) == ("email", "oncall@example.com")
