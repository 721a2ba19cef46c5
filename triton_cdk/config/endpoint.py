"""Settings of one SageMaker endpoint (`endpoints:` in config/<stage>.yaml).

Ranges are SageMaker's own (CreateEndpointConfig / CreateEndpoint API reference); the checks
that need the instance catalogue or the model list live in triton_cdk.config.app.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from model_build.catalogue import UnknownInstanceTypeError, instance_type
from model_build.settings import MODEL_NAME_PATTERN, StrictModel

# SageMaker: EndpointName / EndpointConfigName <= 63 chars, ^[a-zA-Z0-9](-*[a-zA-Z0-9])*
ENDPOINT_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$"
# ProductionVariant.VariantName: the same pattern, <= 63 chars.
VARIANT_NAME_PATTERN = ENDPOINT_NAME_PATTERN


class ContainerSettings(StrictModel):
    """Environment of the Triton container (read by Triton's docker/sagemaker/serve)."""

    log_verbose: bool = Field(default=False, description="SAGEMAKER_TRITON_LOG_VERBOSE (Triton's default: true).")
    thread_count: PositiveInt | None = Field(default=None, description="SAGEMAKER_TRITON_THREAD_COUNT")
    buffer_manager_thread_count: PositiveInt | None = Field(
        default=None, description="SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT"
    )
    shm_default_byte_size: PositiveInt | None = Field(
        default=None, description="SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE (Python backend; Triton default 16 MiB)"
    )
    shm_growth_byte_size: PositiveInt | None = Field(
        default=None, description="SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE (Python backend; Triton default 1 MiB)"
    )
    model_load_gpu_limit: float | None = Field(
        default=None, gt=0, le=1, description="SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT (fraction of GPU memory)"
    )
    ping_mode: Literal["ready", "live"] | None = Field(default=None, description="SAGEMAKER_TRITON_PING_MODE")
    additional_args: str | None = Field(default=None, description="SAGEMAKER_TRITON_ADDITIONAL_ARGS")
    extra_environment: dict[str, str] = Field(default_factory=dict)


class ScheduledScaling(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9-]{1,64}$")
    schedule: str = Field(description="cron(...), rate(...) or at(...) expression (Application Auto Scaling).")
    min_capacity: PositiveInt | None = None
    max_capacity: PositiveInt | None = None
    time_zone: str | None = None

    @model_validator(mode="after")
    def _bounds(self) -> ScheduledScaling:
        if not self.schedule.startswith(("cron(", "rate(", "at(")):
            raise ValueError(f"schedule must start with cron(, rate( or at(, got {self.schedule!r}")
        if self.min_capacity is None and self.max_capacity is None:
            raise ValueError("a scheduled action needs min_capacity and/or max_capacity")
        if self.min_capacity and self.max_capacity and self.min_capacity > self.max_capacity:
            raise ValueError(f"min_capacity {self.min_capacity} > max_capacity {self.max_capacity}")
        return self


class AutoscalingSettings(StrictModel):
    min_capacity: int = Field(default=1, ge=1, description="SageMaker needs at least 1 instance.")
    max_capacity: PositiveInt = 2
    invocations_per_instance: PositiveInt | None = Field(
        default=None, description="Target of SageMakerVariantInvocationsPerInstance (per minute)."
    )
    gpu_utilization_percent: float | None = Field(
        default=None, gt=0, le=100, description="Per-GPU target; multiplied by the instance's GPU count."
    )
    scale_in_cooldown_seconds: int = Field(default=300, ge=0, le=86400)
    scale_out_cooldown_seconds: int = Field(default=60, ge=0, le=86400)
    disable_scale_in: bool = False
    scheduled: list[ScheduledScaling] = Field(default_factory=list)

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingSettings:
        if self.min_capacity > self.max_capacity:
            raise ValueError(f"min_capacity {self.min_capacity} > max_capacity {self.max_capacity}")
        if self.invocations_per_instance is None and self.gpu_utilization_percent is None:
            raise ValueError("set invocations_per_instance and/or gpu_utilization_percent (or leave out autoscaling)")
        return self


class AlarmSettings(StrictModel):
    latency_p99_ms: float = Field(default=1000, gt=0, description="ModelLatency p99 threshold in milliseconds.")
    errors_5xx: int = Field(default=1, ge=1, description="Invocation5XXErrors count per period that alarms.")
    errors_4xx_rate_percent: float = Field(default=5, gt=0, le=100)
    gpu_memory_percent: float = Field(default=90, gt=0, le=100, description="Per GPU.")
    cpu_percent: float = Field(default=90, gt=0, le=100, description="Per vCPU.")
    memory_percent: float = Field(default=90, gt=0, le=100)
    disk_percent: float = Field(default=85, gt=0, le=100, description="Multi-model endpoints.")
    model_loading_wait_ms: float = Field(
        default=30000, gt=0, description="Multi-model: ModelLoadingWaitTime average (no percentiles are published)."
    )
    model_cache_hit_min_percent: float = Field(default=50, ge=0, le=100, description="Multi-model: ModelCacheHit.")
    period_seconds: Literal[60, 300, 900, 3600] = 300
    evaluation_periods: int = Field(default=3, ge=1, le=100)
    datapoints_to_alarm: int = Field(default=2, ge=1, le=100)

    @model_validator(mode="after")
    def _datapoints(self) -> AlarmSettings:
        if self.datapoints_to_alarm > self.evaluation_periods:
            raise ValueError(
                f"datapoints_to_alarm {self.datapoints_to_alarm} > evaluation_periods {self.evaluation_periods}"
            )
        return self


RollbackAlarm = Literal["latency", "errors_5xx", "errors_4xx", "gpu_memory", "cpu", "memory", "disk"]


class DeploymentSettings(StrictModel):
    strategy: Literal["blue_green", "rolling"] = "blue_green"
    traffic: Literal["all_at_once", "canary", "linear"] = Field(
        default="all_at_once", description="Blue/green traffic shifting."
    )
    # CapacitySize.Value is a whole number; TrafficRoutingConfig: canary <= 50 %, linear 10-50 % of
    # the variant's instance count (SageMaker API reference).
    canary_percent: int = Field(default=10, ge=1, le=50, description="Canary: share of capacity shifted first.")
    linear_step_percent: int = Field(default=20, ge=10, le=50, description="Linear: share shifted per step.")
    wait_seconds: int = Field(default=300, ge=0, le=3600, description="Bake time between traffic steps.")
    termination_wait_seconds: int = Field(default=300, ge=0, le=3600, description="Old fleet kept for rollback.")
    maximum_execution_timeout_seconds: int = Field(default=3600, ge=600, le=14400)
    # RollingUpdatePolicy.MaximumBatchSize: "between 5% to 50% of the variant's total instance count".
    rolling_batch_percent: int = Field(default=25, ge=5, le=50, description="Rolling: capacity per batch.")
    rollback_alarms: list[RollbackAlarm] = Field(
        default_factory=lambda: ["latency", "errors_5xx"],
        description="Endpoint alarms that roll a deployment back.",
    )

    @model_validator(mode="after")
    def _rollback(self) -> DeploymentSettings:
        if self.strategy == "blue_green" and self.traffic in ("canary", "linear") and not self.rollback_alarms:
            raise ValueError(
                f"traffic '{self.traffic}' without rollback_alarms would shift all traffic even when the new "
                "fleet fails; list at least one of latency, errors_5xx, errors_4xx, gpu_memory, cpu, memory, disk"
            )
        if len(set(self.rollback_alarms)) != len(self.rollback_alarms):
            raise ValueError("rollback_alarms lists an alarm twice")
        return self


class DataCaptureSettings(StrictModel):
    enabled: bool = False
    sampling_percent: int = Field(default=20, ge=0, le=100)
    capture_request: bool = True
    capture_response: bool = True


class VariantSettings(StrictModel):
    """A further production variant serving the same model(s), e.g. to compare instance sizes."""

    name: str = Field(pattern=VARIANT_NAME_PATTERN, max_length=63)
    instance_type: str
    initial_instance_count: PositiveInt = 1
    initial_weight: float = Field(default=1, ge=0, description="Relative share of traffic (InitialVariantWeight).")


class VpcSettings(StrictModel):
    subnet_ids: list[str] = Field(min_length=1, max_length=16)
    security_group_ids: list[str] = Field(min_length=1, max_length=5)


class EndpointSettings(StrictModel):
    name: str = Field(pattern=ENDPOINT_NAME_PATTERN, max_length=63)
    mode: Literal["single_model", "multi_model"]
    models: list[str] = Field(min_length=1)
    instance_type: str
    initial_instance_count: PositiveInt = 1
    volume_size_gb: int | None = Field(default=None, ge=1, le=512)
    model_data_download_timeout_seconds: int | None = Field(default=None, ge=60, le=3600)
    container_startup_health_check_timeout_seconds: int | None = Field(default=None, ge=60, le=3600)
    uncompressed_model_data: bool = Field(
        default=False, description="Single-model: serve the unpacked folder (ModelDataSource, CompressionType None)."
    )
    variant_name: str = Field(default="AllTraffic", pattern=VARIANT_NAME_PATTERN, max_length=63)
    initial_weight: float = Field(default=1, ge=0, description="InitialVariantWeight of the primary variant.")
    extra_variants: list[VariantSettings] = Field(
        default_factory=list, description="Further variants on the same artifacts (same GPU model)."
    )
    container: ContainerSettings = ContainerSettings()
    autoscaling: AutoscalingSettings | None = None
    alarms: AlarmSettings = AlarmSettings()
    deployment: DeploymentSettings = DeploymentSettings()
    data_capture: DataCaptureSettings = DataCaptureSettings()
    vpc: VpcSettings | None = None
    network_isolation: bool = False

    @model_validator(mode="after")
    def _models(self) -> EndpointSettings:
        bad = [m for m in self.models if not re.match(MODEL_NAME_PATTERN, m)]
        if bad:
            raise ValueError(f"model names {bad} are not valid Triton model names ({MODEL_NAME_PATTERN})")
        duplicates = sorted({m for m in self.models if self.models.count(m) > 1})
        if duplicates:
            raise ValueError(f"models listed twice on one endpoint: {duplicates}")
        if self.mode == "single_model" and len(self.models) != 1:
            raise ValueError(
                f"mode 'single_model' serves exactly one model, got {len(self.models)}; use mode 'multi_model'"
            )
        if self.uncompressed_model_data and self.mode != "single_model":
            raise ValueError("uncompressed_model_data is for single_model endpoints only")
        if self.autoscaling and self.initial_instance_count < self.autoscaling.min_capacity:
            raise ValueError(
                f"initial_instance_count {self.initial_instance_count} < autoscaling.min_capacity "
                f"{self.autoscaling.min_capacity}"
            )
        problem = _rollback_alarm_problem(self)
        if problem:
            raise ValueError(problem)
        self._check_variants()
        return self

    def _check_variants(self) -> None:
        names = [self.variant_name, *(v.name for v in self.extra_variants)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"variant names must be unique on an endpoint, got {duplicates} twice")
        if self.extra_variants and self.deployment.strategy == "rolling":
            # SageMaker deployment guardrails, "Exclusions": rolling deployments do not support
            # multi-variant endpoints.
            raise ValueError(
                f"deployment.strategy 'rolling' is not supported on an endpoint with several variants "
                f"({', '.join(names)}); use strategy 'blue_green' or remove extra_variants"
            )
        if self.extra_variants and all(v.initial_weight == 0 for v in self.extra_variants) and not self.initial_weight:
            raise ValueError("every variant has initial_weight 0; at least one must receive traffic")
        problems = [_variant_instance_problem(self, variant) for variant in self.extra_variants]
        problems = [p for p in problems if p]
        if problems:
            raise ValueError("; ".join(problems))


def _rollback_alarm_problem(endpoint: EndpointSettings) -> str | None:
    """Rollback alarms must exist on this endpoint: disk only on multi-model, gpu_memory only on GPUs."""
    alarms = endpoint.deployment.rollback_alarms
    if "disk" in alarms and endpoint.mode != "multi_model":
        return "deployment.rollback_alarms: 'disk' is alarmed on multi-model endpoints only (the model cache)"
    try:
        instance = instance_type(endpoint.instance_type)
    except UnknownInstanceTypeError:
        return None
    if "gpu_memory" in alarms and not instance.has_gpu:
        return f"deployment.rollback_alarms: 'gpu_memory' needs a GPU instance; {instance.name} has none"
    return None


def _variant_instance_problem(endpoint: EndpointSettings, variant: VariantSettings) -> str | None:
    """Extra variants serve the primary variant's artifacts: TensorRT plans are built per GPU model
    (../shared/README.md, "GPU build vs serve"), so every variant needs the primary's GPU."""
    try:
        primary = instance_type(endpoint.instance_type)
    except UnknownInstanceTypeError:
        return None  # reported with its field path by cross_field_problems
    try:
        instance = instance_type(variant.instance_type)
    except UnknownInstanceTypeError as error:
        return f"extra_variants '{variant.name}': {error}"
    if instance.gpu != primary.gpu:
        wanted = (
            f"the same GPU as {primary.name} ({primary.gpu.model})" if primary.gpu else "no GPU, like " + primary.name
        )
        return (
            f"extra_variants '{variant.name}': {instance.name} must have {wanted}, "
            "because every variant serves the same built artifacts"
        )
    if endpoint.mode == "multi_model" and instance.gpu_count > 1:
        return (
            f"extra_variants '{variant.name}': multi-model endpoints need a single-GPU instance; "
            f"{instance.name} has {instance.gpu_count} GPUs"
        )
    return None
