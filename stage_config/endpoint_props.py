"""Which schema model validates into which construct props: the one declaration per pair (stage_config/props.py).

stacks/endpoint_stack.py and stacks/async_endpoint.py build props only through these maps; a field added to a schema
model or a props dataclass without its counterpart fails at import (tests/foundation/test_config_props.py).
"""

from __future__ import annotations

from stage_config.async_inference import AsyncScalingConfig
from stage_config.endpoint import (
    AlarmSettings,
    AutoscalingSettings,
    CopyScalingSettings,
    DataCaptureSettings,
    MetricsSettings,
    ScheduledScaling,
    VariantSettings,
    VpcSettings,
)
from stage_config.props import PropsMap
from triton_cdk.serving.async_inference import AsyncScalingSettings
from triton_cdk.serving.autoscaling import ScalingSettings, ScheduledCapacity
from triton_cdk.serving.component_scaling import CopyScaling
from triton_cdk.serving.endpoint import DataCapture, MetricsPublishing, ProductionVariant
from triton_cdk.serving.monitoring import AlarmThresholds
from triton_cdk.serving.triton_model import ModelVpc

ALARMS = PropsMap(AlarmSettings, AlarmThresholds)
# `metrics.enhanced` in the YAML is MetricsPublishing.enhanced_metrics (EnableEnhancedMetrics).
METRICS = PropsMap(MetricsSettings, MetricsPublishing, renames={"enhanced_metrics": "enhanced"})
# Copies per component come from the component's copy_count / max_copies and the endpoint's max_instances.
COPY_SCALING = PropsMap(CopyScalingSettings, CopyScaling, computed=("min_copies", "max_copies"))
# gpu_count from the instance catalogue; scheduled actions become ScheduledCapacity values.
AUTOSCALING = PropsMap(AutoscalingSettings, ScalingSettings, computed=("gpu_count", "scheduled"))
SCHEDULED = PropsMap(ScheduledScaling, ScheduledCapacity)
VPC = PropsMap(VpcSettings, ModelVpc)
# The wake policy's cooldown is SageMaker's own example's (the construct's default), not configurable.
ASYNC_SCALING = PropsMap(AsyncScalingConfig, AsyncScalingSettings, construct_defaults=("wake_cooldown_seconds",))
# Bucket, prefix and key are the artifact stack's; `enabled` decides whether there is data capture at all.
DATA_CAPTURE = PropsMap(DataCaptureSettings, DataCapture, computed=("bucket", "prefix", "key"), not_props=("enabled",))
# Start-up timeouts, volume and AMI are the endpoint's (shared by every variant).
VARIANT = PropsMap(
    VariantSettings,
    ProductionVariant,
    computed=(
        "volume_size_gb",
        "model_data_download_timeout_seconds",
        "container_startup_health_check_timeout_seconds",
        "inference_ami_version",
    ),
)
