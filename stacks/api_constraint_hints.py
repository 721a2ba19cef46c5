"""Which field of the stage config a template property comes from: the hint the API-constraint gate
(triton_cdk/api_constraints) adds to each violation it reports.

Best effort: stack names follow config names (an endpoint's stack is `Triton-<stage>-Endpoint-<endpoint name>`,
stacks/stage.py), and each row below names the field that the stacks map to that property.
"""

from __future__ import annotations

import re

_EP = "endpoints[name={endpoint}]"
_IC = f"{_EP}.inference_components"
_COMPONENT = f"{_IC}.components.<component>"
_NAMES = f"stage and {_EP}.name"

# resource type -> (property path prefix without list indices, config field); the first prefix that matches wins,
# "" matches any property.
_HINTS: dict[str, tuple[tuple[str, str], ...]] = {
    "AWS::SageMaker::Model": (
        ("PrimaryContainer.Environment", f"{_EP}.container (its settings and extra_environment)"),
        ("VpcConfig", f"{_EP}.vpc"),
        ("EnableNetworkIsolation", f"{_EP}.network_isolation"),
        ("", f"{_NAMES}, {_EP}.models"),
    ),
    "AWS::SageMaker::EndpointConfig": (
        ("ProductionVariants.InstanceType", f"{_EP}.instance_type (or extra_variants[].instance_type)"),
        ("ProductionVariants.InitialInstanceCount", f"{_EP}.initial_instance_count"),
        ("ProductionVariants.InitialVariantWeight", f"{_EP}.initial_weight"),
        ("ProductionVariants.VariantName", f"{_EP}.variant_name (or extra_variants[].name)"),
        ("ProductionVariants.VolumeSizeInGB", f"{_EP}.volume_size_gb"),
        ("ProductionVariants.ModelDataDownloadTimeoutInSeconds", f"{_EP}.model_data_download_timeout_seconds"),
        (
            "ProductionVariants.ContainerStartupHealthCheckTimeoutInSeconds",
            f"{_EP}.container_startup_health_check_timeout_seconds",
        ),
        ("ProductionVariants.InferenceAmiVersion", f"{_EP}.inference_ami_version"),
        ("ProductionVariants.ManagedInstanceScaling", f"{_IC}.min_instances / max_instances"),
        ("ProductionVariants.RoutingConfig", f"{_IC}.routing_strategy"),
        ("ShadowProductionVariants", f"{_EP}.shadow"),
        ("DataCaptureConfig", f"{_EP}.data_capture"),
        ("VpcConfig", f"{_EP}.vpc"),
        ("EnableNetworkIsolation", f"{_EP}.network_isolation"),
        ("", _NAMES),
    ),
    "AWS::SageMaker::Endpoint": (("DeploymentConfig", f"{_EP}.deployment"), ("", _NAMES)),
    "AWS::SageMaker::InferenceComponent": (
        ("Specification.ComputeResourceRequirements.NumberOfAcceleratorDevicesRequired", f"{_COMPONENT}.accelerators"),
        ("Specification.ComputeResourceRequirements.NumberOfCpuCoresRequired", f"{_COMPONENT}.cpu_cores"),
        ("Specification.ComputeResourceRequirements.MinMemoryRequiredInMb", f"{_COMPONENT}.min_memory_mb"),
        ("Specification.ComputeResourceRequirements.MaxMemoryRequiredInMb", f"{_COMPONENT}.max_memory_mb"),
        (
            "Specification.StartupParameters.ContainerStartupHealthCheckTimeoutInSeconds",
            f"{_COMPONENT}.container_startup_health_check_timeout_seconds",
        ),
        (
            "Specification.StartupParameters.ModelDataDownloadTimeoutInSeconds",
            f"{_COMPONENT}.model_data_download_timeout_seconds",
        ),
        ("RuntimeConfig.CopyCount", f"{_COMPONENT}.copy_count"),
        ("DeploymentConfig", f"{_EP}.deployment"),
        ("", f"{_NAMES} and the component's name"),
    ),
    "AWS::ApplicationAutoScaling::ScalableTarget": (
        ("ScheduledActions", f"{_EP}.autoscaling.scheduled"),
        ("MinCapacity", f"{_EP}.autoscaling.min_capacity (components: {_COMPONENT}.copy_count)"),
        ("MaxCapacity", f"{_EP}.autoscaling.max_capacity (components: {_COMPONENT}.max_copies)"),
        ("", f"{_NAMES} and {_EP}.variant_name"),
    ),
    "AWS::ApplicationAutoScaling::ScalingPolicy": (
        (
            "TargetTrackingScalingPolicyConfiguration.TargetValue",
            f"{_EP}.autoscaling.invocations_per_instance / gpu_utilization_percent"
            f" (components: {_IC}.copy_scaling.invocations_per_copy)",
        ),
        ("TargetTrackingScalingPolicyConfiguration.ScaleInCooldown", f"{_EP}.autoscaling.scale_in_cooldown_seconds"),
        ("TargetTrackingScalingPolicyConfiguration.ScaleOutCooldown", f"{_EP}.autoscaling.scale_out_cooldown_seconds"),
        ("", f"{_EP}.autoscaling"),
    ),
    "AWS::CloudWatch::Alarm": (
        ("Period", f"{_EP}.alarms.period_seconds"),
        ("EvaluationPeriods", f"{_EP}.alarms.evaluation_periods"),
        ("DatapointsToAlarm", f"{_EP}.alarms.datapoints_to_alarm"),
        ("Threshold", f"{_EP}.alarms (the alarm's threshold)"),
        ("AlarmName", _NAMES),
        ("", f"{_EP}.alarms"),
    ),
    "AWS::CloudWatch::Dashboard": (("", _NAMES),),
    "AWS::CodeBuild::Project": (
        ("TimeoutInMinutes", "build.timeout_minutes"),
        ("QueuedTimeoutInMinutes", "build.queue_timeout_minutes"),
        ("ConcurrentBuildLimit", "build.concurrency"),
        ("Environment", "build.fleet and models[].build settings"),
        ("", "build (and stage)"),
    ),
    "AWS::S3::Bucket": (
        ("BucketName", "artifacts.bucket_name"),
        ("LifecycleConfiguration", "artifacts.noncurrent_version_expiration_days / access_log_expiration_days"),
        ("", "artifacts"),
    ),
    "AWS::SNS::Subscription": (("Endpoint", "notifications.emails"), ("", "notifications")),
    "AWS::SNS::Topic": (("", "notifications"),),
}


def config_field_hint(stack: str, resource_type: str, property_path: str) -> str | None:
    """The stage-config field behind `property_path` ("ProductionVariants[0].InstanceType") of a resource of
    `resource_type` in `stack`; None where no row names one."""
    if stack == "Triton-Pipeline":  # stacks/pipeline_stack.py: built from config/pipeline.yaml
        return "pipeline.yaml (name, source, stages, smoke)" if resource_type in _HINTS else None
    bare = re.sub(r"\[[^\]]*\]", "", property_path).split(" key ")[0]
    match = re.search(r"Endpoint-(.+)$", stack)
    endpoint = match[1] if match else "<endpoint>"
    for prefix, field in _HINTS.get(resource_type, ()):
        if not prefix or bare == prefix or bare.startswith(prefix + "."):
            return field.replace("{endpoint}", endpoint)
    return None
