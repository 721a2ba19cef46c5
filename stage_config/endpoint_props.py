"""Which schema model validates into which construct props: the one declaration per pair (stage_config/props.py).

stacks/endpoint_stack.py and stacks/async_endpoint.py build props only through these maps; a field added to a schema
model or a props dataclass without its counterpart fails at import (tests/foundation/test_config_props.py).
"""

from __future__ import annotations

from stage_config.async_inference import AsyncScalingConfig
from stage_config.endpoint import (
    AlarmSettings,
    AutoscalingSettings,
    ComponentSettings,
    CopyScalingSettings,
    DataCaptureSettings,
    DeploymentSettings,
    InferenceComponentsSettings,
    MetricsSettings,
    ScheduledScaling,
    VariantSettings,
    VpcSettings,
)
from stage_config.props import PropsMap
from stage_config.shadow import ShadowSettings
from triton_cdk.serving.async_inference import AsyncScalingSettings
from triton_cdk.serving.autoscaling import ScalingSettings, ScheduledCapacity
from triton_cdk.serving.component_scaling import CopyScaling
from triton_cdk.serving.endpoint import DataCapture, MetricsPublishing, ProductionVariant
from triton_cdk.serving.inference_components import ComponentRollingUpdate, ComponentVariant
from triton_cdk.serving.monitoring import AlarmThresholds
from triton_cdk.serving.serving_components import ServedComponent
from triton_cdk.serving.serving_endpoint import ShadowModel
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
# The shadow's variant: its name is `variant_name` in the YAML; timeouts are the endpoint's (stage_config/shadow.py
# shadow_variant_timeouts) and the AMI follows its instance type; its weight follows sampling_percent (initial_weight
# is ignored) and its volume keeps SageMaker's default. `model` and `sampling_percent` go to SHADOW.
SHADOW_VARIANT = PropsMap(
    ShadowSettings,
    ProductionVariant,
    renames={"name": "variant_name"},
    computed=(
        "model_data_download_timeout_seconds",
        "container_startup_health_check_timeout_seconds",
        "inference_ami_version",
    ),
    construct_defaults=("initial_weight", "volume_size_gb"),
    not_props=("model", "sampling_percent"),
)
# The shadow's archive comes from the stage plan; its variant from SHADOW_VARIANT.
SHADOW = PropsMap(
    ShadowSettings,
    ShadowModel,
    renames={"default_model_name": "model"},
    computed=("model_data", "variant"),
    not_props=("instance_type", "initial_instance_count", "variant_name"),
)
# `mode: inference_components`: the endpoint's one variant. Its instance type, name, initial count, volume and AMI are
# the endpoint's; copy scaling and the components' settings go to COPY_SCALING and SERVED_COMPONENT.
COMPONENT_VARIANT = PropsMap(
    InferenceComponentsSettings,
    ComponentVariant,
    computed=("instance_type", "name", "initial_instance_count", "inference_ami_version", "volume_size_gb"),
    not_props=("copy_scaling", "components"),
)
# A component's rolling update takes the deployment's bake and execution timeout; the other deployment fields are
# the variant endpoints' (DeploymentPolicy) or the rollback alarms' kinds (given to the pattern).
COMPONENT_ROLLING = PropsMap(
    DeploymentSettings,
    ComponentRollingUpdate,
    not_props=(
        "strategy",
        "traffic",
        "canary_percent",
        "linear_step_percent",
        "termination_wait_seconds",
        "rolling_batch_percent",
        "rollback_alarms",
    ),
)
# One served component: names, archive and reservation are derived (stage plan, component_requirements); a left-out
# start-up timeout falls back to the endpoint's; max_copies goes to COPY_SCALING, the reservation fields to
# component_requirements.
SERVED_COMPONENT = PropsMap(
    ComponentSettings,
    ServedComponent,
    computed=(
        "model_name",
        "model_data",
        "component_name",
        "requirements",
        "copy_scaling",
        "model_data_download_timeout_seconds",
        "container_startup_health_check_timeout_seconds",
    ),
    not_props=("accelerators", "cpu_cores", "min_memory_mb", "max_memory_mb", "max_copies"),
)
