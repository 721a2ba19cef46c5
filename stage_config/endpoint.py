"""Settings of one SageMaker endpoint (`endpoints:` in config/<stage>.yaml).

Ranges are SageMaker's own (CreateEndpointConfig / CreateEndpoint API reference); the checks
that need the instance catalogue or the model list live in stage_config.app.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.resources
import inspect
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from model_build.config_yaml import clip
from serving_facts import drivers
from serving_facts.catalogue import InstanceType, UnknownInstanceTypeError, instance_type
from serving_facts.settings import MODEL_NAME_PATTERN, StrictModel, repeated
from stage_config.api_limits import (
    CANARY_PERCENT,
    COOLDOWN_RANGE,
    COOLDOWN_SECONDS,
    ENDPOINT_NAME,
    LINEAR_STEP_PERCENT,
    MAX_ENDPOINT_NAME_LENGTH,
    MAX_INSTANCE_COUNT,
    MAX_PRODUCTION_VARIANTS,
    MAX_ROLLBACK_ALARMS,
    MAX_SCHEDULE_LENGTH,
    MAX_SCHEDULED_ACTION_NAME_LENGTH,
    MAX_SECURITY_GROUPS,
    MAX_SUBNETS,
    MAX_VARIANT_NAME_LENGTH,
    MAXIMUM_EXECUTION_TIMEOUT_SECONDS,
    MIN_CPU_CORES,
    MIN_MEMORY_MB,
    MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS,
    ROLLING_BATCH_PERCENT,
    SAMPLING_PERCENT,
    SECURITY_GROUP_ID,
    STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS,
    SUBNET_ID,
    TERMINATION_WAIT_SECONDS,
    VARIANT_NAME,
    VOLUME_SIZE_GB,
    WAIT_INTERVAL_SECONDS,
)
from stage_config.async_inference import AsyncInferenceSettings, async_problems
from stage_config.container import ContainerSettings
from stage_config.schedule import schedule_problem
from stage_config.shadow import ShadowSettings, shadow_problems
from triton_cdk.serving import component_sizing
from triton_cdk.serving.autoscaling import ScalingSettings
from triton_cdk.serving.component_scaling import CopyScaling
from triton_cdk.serving.deployment import DEFAULT_BAKE_SECONDS, DEFAULT_MAXIMUM_EXECUTION_TIMEOUT_SECONDS
from triton_cdk.serving.endpoint import (
    DEFAULT_VARIANT_NAME,
    METRIC_PUBLISH_FREQUENCIES,
    DataCapture,
    MetricsPublishing,
    ProductionVariant,
)
from triton_cdk.serving.inference_components import ComponentVariant, TritonInferenceComponent
from triton_cdk.serving.monitoring import AlarmThresholds
from triton_cdk.serving.triton_model import TritonModel

# SageMaker EndpointName and ProductionVariant VariantName: botocore's patterns and lengths, defined once in the
# construct library (triton_cdk/api_limits.py).
ENDPOINT_NAME_PATTERN = ENDPOINT_NAME.anchored
VARIANT_NAME_PATTERN = VARIANT_NAME.anchored


def construct_default(owner: type | Callable[..., Any], name: str) -> Any:
    """The default a construct gives `name`: a dataclass prop's, or a keyword argument's.

    Each default lives once, in the construct; the schema reads it from there (as `_ALARM_DEFAULTS` does), and
    tests/serving/test_alarm_defaults.py checks every one.
    """
    if dataclasses.is_dataclass(owner):
        default = {f.name: f.default for f in dataclasses.fields(owner)}[name]
    else:
        default = inspect.signature(owner).parameters[name].default
    if default is dataclasses.MISSING or default is inspect.Parameter.empty:
        raise TypeError(f"{getattr(owner, '__qualname__', owner)}: {name} has no default")
    return default


# The tz database's "factory" file defines Factory, a placeholder ("Local time zone must be set--see zic manual
# page"), not a place; tzdata lists it with the real zones.
NOT_A_TIME_ZONE = frozenset({"Factory"})


@functools.cache
def iana_time_zones() -> frozenset[str]:
    """The IANA names, read only from the pinned `tzdata` package's own zone list (its `zones` file), so every
    machine agrees: zoneinfo.available_timezones() also scans the system's zoneinfo folder, which holds files
    such as `localtime` that are no IANA name (Application Auto Scaling Timezone: "canonical names of the IANA
    time zones supported by Joda-Time")."""
    zones = importlib.resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    return frozenset(zones) - NOT_A_TIME_ZONE


class ScheduledScaling(StrictModel):
    """A scheduled change of a variant's capacity bounds (Application Auto Scaling scheduled action)."""

    # Application Auto Scaling ScheduledActionName allows 1-256 characters without : / | or control characters
    # (api_limits); letters, digits and - keep the name a plain CDK construct id too.
    name: str = Field(
        min_length=1,
        max_length=MAX_SCHEDULED_ACTION_NAME_LENGTH,
        pattern=r"^[A-Za-z0-9-]+$",
        description=f"Name of the scheduled action: 1-{MAX_SCHEDULED_ACTION_NAME_LENGTH} letters, digits or -, "
        "each name once per autoscaling.",
    )
    schedule: str = Field(
        max_length=MAX_SCHEDULE_LENGTH,
        description="at(yyyy-mm-ddThh:mm:ss), rate(<positive integer> minute(s)|hour(s)|day(s)) or cron(<6 fields: "
        "Minutes Hours Day-of-month Month Day-of-week Year>, one of the day fields ?) (Application Auto Scaling "
        "PutScheduledAction).",
    )
    min_capacity: PositiveInt | None = Field(
        default=None,
        le=MAX_INSTANCE_COUNT,
        description="New minimum instance count from that time on (1-1000); at least one of min_capacity and "
        "max_capacity. Default: unchanged.",
    )
    max_capacity: PositiveInt | None = Field(
        default=None,
        le=MAX_INSTANCE_COUNT,
        description="New maximum instance count from that time on (1-1000). Default: unchanged.",
    )
    time_zone: str | None = Field(
        default=None,
        max_length=1600,
        description="Time zone of a cron expression: a canonical IANA name, e.g. Europe/Berlin. Default: UTC.",
    )

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, schedule: str) -> str:
        problem = schedule_problem(schedule)
        if problem:
            raise ValueError(problem)
        return schedule

    @field_validator("time_zone")
    @classmethod
    def _time_zone(cls, time_zone: str | None) -> str | None:
        # Application Auto Scaling PutScheduledAction, Timezone: "the canonical names of the IANA time zones".
        if time_zone is not None and time_zone not in iana_time_zones():
            close = difflib.get_close_matches(time_zone, sorted(iana_time_zones()), n=2)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise ValueError(f"time_zone {time_zone[:64]!r} is not an IANA time zone name{hint}")
        return time_zone

    @model_validator(mode="after")
    def _bounds(self) -> ScheduledScaling:
        if self.min_capacity is None and self.max_capacity is None:
            raise ValueError("a scheduled action needs min_capacity and/or max_capacity")
        if self.min_capacity and self.max_capacity and self.min_capacity > self.max_capacity:
            raise ValueError(f"min_capacity {self.min_capacity} > max_capacity {self.max_capacity}")
        return self


class AutoscalingSettings(StrictModel):
    """Target tracking of every variant's instance count (Application Auto Scaling)."""

    min_capacity: int = Field(
        default=1,
        ge=1,
        le=MAX_INSTANCE_COUNT,
        description="Fewest instances per variant, 1-1000 (SageMaker keeps at least one).",
    )
    max_capacity: PositiveInt = Field(
        default=2, le=MAX_INSTANCE_COUNT, description="Most instances per variant, min_capacity-1000."
    )
    invocations_per_instance: PositiveInt | None = Field(
        default=None,
        le=1_000_000,
        description="Target of SageMakerVariantInvocationsPerInstance (requests per instance per minute). "
        "Default: not tracked; set it, concurrent_requests_per_model and/or gpu_utilization_percent.",
    )
    # Application Auto Scaling TargetValue is a Double with no bound in botocore's model; above 0 is ours.
    concurrent_requests_per_model: float | None = Field(
        default=None,
        gt=0,
        description="Target of the high-resolution SageMakerVariantConcurrentRequestsPerModelHighResolution "
        "(requests in flight per model container, emitted every 10 s: faster scale-out). Default: not tracked.",
    )
    gpu_utilization_percent: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="Per-GPU GPUUtilization target in percent (0, 100], multiplied by the instance's GPU count; GPU "
        "instances only. Default: not tracked.",
    )
    scale_in_cooldown_seconds: int = Field(
        default=construct_default(ScalingSettings, "scale_in_cooldown_seconds"),
        ge=COOLDOWN_SECONDS[0],
        le=COOLDOWN_SECONDS[1],
        description=f"Seconds after a scale-in before the policies scale in again ({COOLDOWN_RANGE}).",
    )
    scale_out_cooldown_seconds: int = Field(
        default=construct_default(ScalingSettings, "scale_out_cooldown_seconds"),
        ge=COOLDOWN_SECONDS[0],
        le=COOLDOWN_SECONDS[1],
        description=f"Seconds after a scale-out before the policies scale out again ({COOLDOWN_RANGE}).",
    )
    disable_scale_in: bool = Field(
        default=construct_default(ScalingSettings, "disable_scale_in"),
        description="The policies only add instances; removing them is left to you.",
    )
    # Application Auto Scaling quotas: 200 scheduled actions per scalable target (not adjustable).
    scheduled: list[ScheduledScaling] = Field(
        default_factory=list,
        max_length=200,
        description="Scheduled capacity changes, e.g. a lower minimum at night (at most 200).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingSettings:
        if self.min_capacity > self.max_capacity:
            raise ValueError(f"min_capacity {self.min_capacity} > max_capacity {self.max_capacity}")
        targets = (self.invocations_per_instance, self.concurrent_requests_per_model, self.gpu_utilization_percent)
        if all(t is None for t in targets):
            raise ValueError(
                "set invocations_per_instance, concurrent_requests_per_model and/or gpu_utilization_percent "
                "(or leave out autoscaling)"
            )
        twice = repeated([action.name for action in self.scheduled])
        if twice:
            # A scalable target holds each scheduled action name once (and the name is the action's construct id).
            raise ValueError(f"scheduled action names {twice} are used twice; each name once")
        return self


# The defaults live once, in the construct (triton_cdk.serving.monitoring.AlarmThresholds).
_ALARM_DEFAULTS = AlarmThresholds()


class AlarmSettings(StrictModel):
    # InvokeEndpoint: "model containers must respond to requests within 60 seconds".
    latency_p99_ms: float = Field(
        default=_ALARM_DEFAULTS.latency_p99_ms,
        gt=0,
        le=60_000,
        description="ModelLatency p99 threshold in milliseconds (0-60000], converted to the metric's microseconds.",
    )
    errors_5xx: int = Field(
        default=_ALARM_DEFAULTS.errors_5xx,
        ge=1,
        le=1_000_000,
        description="Invocation5XXErrors per period that alarm (>=), 1-1000000.",
    )
    errors_4xx_rate_percent: float = Field(
        default=_ALARM_DEFAULTS.errors_4xx_rate_percent,
        gt=0,
        le=100,
        description="Invocation4XXErrors as a share of Invocations, in percent (0, 100].",
    )
    gpu_memory_percent: float = Field(
        default=_ALARM_DEFAULTS.gpu_memory_percent,
        gt=0,
        le=100,
        description="GPUMemoryUtilization threshold per GPU, in percent (0, 100] (multiplied by the GPU count).",
    )
    cpu_percent: float = Field(
        default=_ALARM_DEFAULTS.cpu_percent,
        gt=0,
        le=100,
        description="CPUUtilization threshold per vCPU, in percent (0, 100] (multiplied by the vCPU count).",
    )
    memory_percent: float = Field(
        default=_ALARM_DEFAULTS.memory_percent,
        gt=0,
        le=100,
        description="MemoryUtilization threshold, in percent (0, 100].",
    )
    disk_percent: float = Field(
        default=_ALARM_DEFAULTS.disk_percent,
        gt=0,
        le=100,
        description="Multi-model endpoints: DiskUtilization (the model cache) threshold, in percent (0, 100].",
    )
    model_loading_wait_ms: float = Field(
        default=_ALARM_DEFAULTS.model_loading_wait_ms,
        gt=0,
        le=3_600_000,
        description="Multi-model endpoints: ModelLoadingWaitTime average threshold in milliseconds (0-3600000]; "
        "SageMaker publishes no percentiles for it.",
    )
    model_cache_hit_min_percent: float = Field(
        default=_ALARM_DEFAULTS.model_cache_hit_min_percent,
        ge=0,
        le=100,
        description="Multi-model endpoints: alarm when fewer requests than this percentage (0-100) find their model "
        "loaded (ModelCacheHit).",
    )
    period_seconds: Literal[60, 300, 900, 3600] = Field(
        default=_ALARM_DEFAULTS.period_seconds, description="Period of every alarm, in seconds: 60, 300, 900 or 3600."
    )
    evaluation_periods: int = Field(
        default=_ALARM_DEFAULTS.evaluation_periods,
        ge=1,
        le=100,
        description="Periods each alarm evaluates (N of 'M out of N'), 1-100; period x evaluation_periods at most "
        "1 day (7 days with 3600 s periods).",
    )
    datapoints_to_alarm: int = Field(
        default=_ALARM_DEFAULTS.datapoints_to_alarm,
        ge=1,
        le=100,
        description="Breaching periods that set ALARM (M of 'M out of N'), at most evaluation_periods.",
    )

    @model_validator(mode="after")
    def _datapoints(self) -> AlarmSettings:
        if self.datapoints_to_alarm > self.evaluation_periods:
            raise ValueError(
                f"datapoints_to_alarm {self.datapoints_to_alarm} > evaluation_periods {self.evaluation_periods}"
            )
        return self


RollbackAlarm = Literal["latency", "errors_5xx", "errors_4xx", "gpu_memory", "cpu", "memory", "disk"]


class DeploymentSettings(StrictModel):
    """How an endpoint update shifts traffic, and which alarms roll it back (SageMaker deployment guardrails)."""

    strategy: Literal["blue_green", "rolling"] = Field(
        default="blue_green",
        description="blue_green (a new fleet takes the traffic) or rolling (the fleet is replaced in batches; "
        "single-variant endpoints only).",
    )
    traffic: Literal["all_at_once", "canary", "linear"] = Field(
        default="all_at_once", description="Blue/green traffic shifting: all_at_once, canary or linear."
    )
    # CapacitySize.Value is a whole number; the ranges are the construct's (triton_cdk/api_limits.py).
    canary_percent: int = Field(
        default=10,
        ge=CANARY_PERCENT[0],
        le=CANARY_PERCENT[1],
        description="Canary: share of the new fleet's capacity that takes traffic first, in percent (whole, "
        f"{CANARY_PERCENT[0]}-{CANARY_PERCENT[1]}).",
    )
    linear_step_percent: int = Field(
        default=20,
        ge=LINEAR_STEP_PERCENT[0],
        le=LINEAR_STEP_PERCENT[1],
        description="Linear: share of capacity shifted per step, in percent (whole, "
        f"{LINEAR_STEP_PERCENT[0]}-{LINEAR_STEP_PERCENT[1]}).",
    )
    # 900 s: the default rollback alarms (2 x 300 s periods, plus one for the last datapoint to arrive)
    # must be able to reach ALARM while the new fleet bakes (SageMaker deployment guardrails; see
    # rollback_alarm_seconds).
    wait_seconds: int = Field(
        default=DEFAULT_BAKE_SECONDS,
        ge=WAIT_INTERVAL_SECONDS[0],
        le=WAIT_INTERVAL_SECONDS[1],
        description="Bake time between traffic steps (rolling: per batch; components: per copy), in seconds "
        f"({WAIT_INTERVAL_SECONDS[0]}-{WAIT_INTERVAL_SECONDS[1]}); "
        "at least the rollback alarms' time to ALARM, alarms.period_seconds x (alarms.datapoints_to_alarm + 1).",
    )
    termination_wait_seconds: int = Field(
        default=300,
        ge=TERMINATION_WAIT_SECONDS[0],
        le=TERMINATION_WAIT_SECONDS[1],
        description=f"Blue/green: seconds ({TERMINATION_WAIT_SECONDS[0]}-{TERMINATION_WAIT_SECONDS[1]}) the old fleet "
        "is kept for a rollback after the shift.",
    )
    maximum_execution_timeout_seconds: int = Field(
        default=DEFAULT_MAXIMUM_EXECUTION_TIMEOUT_SECONDS,
        ge=MAXIMUM_EXECUTION_TIMEOUT_SECONDS[0],
        le=MAXIMUM_EXECUTION_TIMEOUT_SECONDS[1],
        description="Time limit of the whole deployment, in seconds "
        f"({MAXIMUM_EXECUTION_TIMEOUT_SECONDS[0]}-{MAXIMUM_EXECUTION_TIMEOUT_SECONDS[1]}).",
    )
    # RollingUpdatePolicy.MaximumBatchSize (triton_cdk/api_limits.py).
    rolling_batch_percent: int = Field(
        default=25,
        ge=ROLLING_BATCH_PERCENT[0],
        le=ROLLING_BATCH_PERCENT[1],
        description="Rolling: capacity replaced per batch, in percent (whole, "
        f"{ROLLING_BATCH_PERCENT[0]}-{ROLLING_BATCH_PERCENT[1]}); refused on inference components.",
    )
    rollback_alarms: list[RollbackAlarm] = Field(
        default_factory=lambda: ["latency", "errors_5xx"],
        description="Alarms (of every variant) that roll a deployment back while in ALARM; no duplicates, disk on "
        "multi-model and gpu_memory on GPU endpoints only. Required (non-empty) for canary and linear.",
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
        # A step size the chosen traffic shifting never reads (stacks/endpoint_stack.py passes canary_percent to
        # canary routing and linear_step_percent to linear routing only) is a contradiction, not a default.
        for field, traffic in (("canary_percent", "canary"), ("linear_step_percent", "linear")):
            if field in self.model_fields_set and (self.strategy != "blue_green" or self.traffic != traffic):
                raise ValueError(
                    f"{field} is for strategy 'blue_green' with traffic '{traffic}' only (here strategy "
                    f"'{self.strategy}', traffic '{self.traffic}'), where it is ignored; remove it or set traffic "
                    f"'{traffic}'"
                )
        return self


class DataCaptureSettings(StrictModel):
    """Request/response capture to the artifact bucket (EndpointConfig DataCaptureConfig)."""

    enabled: bool = Field(
        default=False,
        description="Capture to s3://<artifact bucket>/data-capture/<stage>-<name>/, encrypted with the artifact key.",
    )
    sampling_percent: int = Field(
        default=construct_default(DataCapture, "sampling_percent"),
        ge=SAMPLING_PERCENT[0],
        le=SAMPLING_PERCENT[1],
        description=f"Share of requests captured, in percent {SAMPLING_PERCENT[0]}-{SAMPLING_PERCENT[1]} "
        "(InitialSamplingPercentage).",
    )
    capture_request: bool = Field(
        default=construct_default(DataCapture, "capture_request"), description="Capture requests (capture mode Input)."
    )
    capture_response: bool = Field(
        default=construct_default(DataCapture, "capture_response"),
        description="Capture responses (capture mode Output); at least one of capture_request and capture_response.",
    )


class VariantSettings(StrictModel):
    """A further production variant serving the same model(s), e.g. to compare instance sizes."""

    name: str = Field(
        pattern=VARIANT_NAME_PATTERN,
        max_length=MAX_VARIANT_NAME_LENGTH,
        description=f"Variant name (at most {MAX_VARIANT_NAME_LENGTH} characters), unique on the endpoint; keep it "
        "stable on a live endpoint.",
    )
    instance_type: str = Field(
        description="Instance type: the same GPU model as the endpoint's instance_type (or CPU if that is CPU), "
        "single-GPU on multi_model endpoints."
    )
    initial_instance_count: PositiveInt = Field(
        default=construct_default(ProductionVariant, "initial_instance_count"),
        le=MAX_INSTANCE_COUNT,
        description="Instances at creation, 1-1000.",
    )
    initial_weight: float = Field(
        default=construct_default(ProductionVariant, "initial_weight"),
        ge=0,
        le=1000,
        description="Share of traffic relative to the other variants (InitialVariantWeight), 0-1000.",
    )


class VpcSettings(StrictModel):
    """The VPC the containers' network interfaces are placed in (VpcConfig)."""

    subnet_ids: list[str] = Field(
        min_length=1,
        max_length=MAX_SUBNETS,
        description=f"VpcConfig.Subnets: 1-{MAX_SUBNETS} subnet ids (subnet-0123456789abcdef0), each once.",
    )
    security_group_ids: list[str] = Field(
        min_length=1,
        max_length=MAX_SECURITY_GROUPS,
        description=f"VpcConfig.SecurityGroupIds: 1-{MAX_SECURITY_GROUPS} security group ids (sg-0123456789abcdef0), "
        "each once.",
    )

    @field_validator("subnet_ids", "security_group_ids")
    @classmethod
    def _ids(cls, ids: list[str], info: ValidationInfo) -> list[str]:
        """SageMaker's SubnetId / SecurityGroupId (botocore: at most 32 of [-0-9a-zA-Z]) and EC2's id format
        (EC2 User Guide, "Resource IDs": the type's prefix, a hyphen and 8 or 17 lowercase letters or digits)."""
        prefix, shape = ("subnet", SUBNET_ID) if info.field_name == "subnet_ids" else ("sg", SECURITY_GROUP_ID)
        bad = [
            clip(i, 40)
            for i in ids
            if not (shape.fullmatch(i) and len(i) <= (shape.maximum or len(i)))
            or not re.fullmatch(f"{prefix}-[0-9a-z]{{8}}([0-9a-z]{{9}})?", i)
        ]
        if bad:
            raise ValueError(f"{bad} are not {prefix}- ids ({prefix}- and 8 or 17 lowercase letters or digits)")
        twice = repeated(ids)
        if twice:
            raise ValueError(f"{twice} listed twice")
        return ids


# ProductionVariantRoutingConfig.RoutingStrategy; PREFIX_AWARE (KV-cache routing for LLMs) is left out: Triton
# models have no prompt prefix to route by.
RoutingStrategy = Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM"]


class ComponentSettings(StrictModel):
    """One model's inference component. Left-out requirements are derived from the instance catalogue and the
    number of components (triton_cdk/serving/component_sizing.py)."""

    accelerators: int | None = Field(
        default=None,
        ge=0,
        le=8,
        description="Whole GPUs per copy (NumberOfAcceleratorDevicesRequired), 0-8 and at most the instance's; 0: "
        "none. Default: the instance's GPUs divided among the components sharing it (at most one per GPU).",
    )
    cpu_cores: float | None = Field(
        default=None,
        ge=MIN_CPU_CORES,
        le=192,
        description=f"vCPUs per copy (NumberOfCpuCoresRequired), a multiple of {MIN_CPU_CORES} up to the instance's "
        "vCPUs. "
        "Default: half of the component's share of the vCPUs.",
    )
    min_memory_mb: int | None = Field(
        default=None,
        ge=MIN_MEMORY_MB,
        le=2048 * 1024,
        description="Memory reservation per copy in MB (MinMemoryRequiredInMb), the value SageMaker schedules by; "
        f"{MIN_MEMORY_MB} up to the instance's memory. Default: {component_sizing.DEFAULT_MIN_MEMORY_MB} (at most the "
        "instance's memory).",
    )
    max_memory_mb: int | None = Field(
        default=None,
        ge=MIN_MEMORY_MB,
        le=2048 * 1024,
        description="Memory limit per copy in MB (MaxMemoryRequiredInMb), min_memory_mb up to the instance's memory. "
        "Default: the component's share of the instance's memory.",
    )
    copy_count: int = Field(
        default=construct_default(TritonInferenceComponent.__init__, "copy_count"),
        ge=1,
        le=MAX_INSTANCE_COUNT,
        description="Copies at deploy time (RuntimeConfig.CopyCount), 1-1000.",
    )
    max_copies: PositiveInt | None = Field(
        default=None,
        le=MAX_INSTANCE_COUNT,
        description="Copy-scaling maximum, copy_count-1000. Default: copy_count x max_instances.",
    )
    # InferenceComponentStartupParameters: the ProductionVariant's shapes (api_limits).
    model_data_download_timeout_seconds: int | None = Field(
        default=None,
        ge=MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS[0],
        le=MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS[1],
        description="StartupParameters.ModelDataDownloadTimeoutInSeconds, "
        f"{MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS[0]}-{MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS[1]}. Default: the endpoint's "
        "model_data_download_timeout_seconds, else SageMaker's.",
    )
    container_startup_health_check_timeout_seconds: int | None = Field(
        default=None,
        ge=STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS[0],
        le=STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS[1],
        description="StartupParameters.ContainerStartupHealthCheckTimeoutInSeconds, "
        f"{STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS[0]}-{STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS[1]}. Default: the "
        "endpoint's container_startup_health_check_timeout_seconds, else SageMaker's.",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ComponentSettings:
        if self.min_memory_mb and self.max_memory_mb and self.max_memory_mb < self.min_memory_mb:
            raise ValueError(f"max_memory_mb {self.max_memory_mb} < min_memory_mb {self.min_memory_mb}")
        if self.max_copies is not None and self.max_copies < self.copy_count:
            raise ValueError(f"max_copies {self.max_copies} < copy_count {self.copy_count}")
        return self


class CopyScalingSettings(StrictModel):
    """Target tracking on SageMakerInferenceComponentInvocationsPerCopy and/or on the high-resolution
    SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution, per component."""

    invocations_per_copy: PositiveInt | None = Field(
        default=None,
        le=1_000_000,
        description="Target invocations per copy per minute, 1-1000000. Default: not tracked; set it and/or "
        "concurrent_requests_per_copy.",
    )
    concurrent_requests_per_copy: float | None = Field(
        default=None,
        gt=0,
        description="Target of the high-resolution SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution "
        "(requests in flight per copy, emitted every 10 s: faster scale-out). Default: not tracked.",
    )
    scale_in_cooldown_seconds: int = Field(
        default=construct_default(CopyScaling, "scale_in_cooldown_seconds"),
        ge=COOLDOWN_SECONDS[0],
        le=COOLDOWN_SECONDS[1],
        description=f"Seconds after a scale-in before the policy scales in again ({COOLDOWN_RANGE}).",
    )
    scale_out_cooldown_seconds: int = Field(
        default=construct_default(CopyScaling, "scale_out_cooldown_seconds"),
        ge=COOLDOWN_SECONDS[0],
        le=COOLDOWN_SECONDS[1],
        description=f"Seconds after a scale-out before the policy scales out again ({COOLDOWN_RANGE}).",
    )

    @model_validator(mode="after")
    def _a_target(self) -> CopyScalingSettings:
        if self.invocations_per_copy is None and self.concurrent_requests_per_copy is None:
            raise ValueError("set invocations_per_copy and/or concurrent_requests_per_copy")
        return self


class InferenceComponentsSettings(StrictModel):
    """`mode: inference_components`: the endpoint's instances (ManagedInstanceScaling) and its components."""

    # ProductionVariantManagedInstanceScaling: MinInstanceCount >= 0, MaxInstanceCount >= 1. Only an endpoint
    # hosting inference components may reach 0 ("Scale an endpoint to zero instances").
    min_instances: int = Field(
        default=construct_default(ComponentVariant, "min_instances"),
        ge=0,
        le=MAX_INSTANCE_COUNT,
        description="MinInstanceCount, 0 up to max_instances; 0 scales to zero when idle and needs copy_scaling.",
    )
    max_instances: PositiveInt = Field(
        default=construct_default(ComponentVariant, "max_instances"),
        le=MAX_INSTANCE_COUNT,
        description="MaxInstanceCount: the most instances SageMaker starts to place copies, 1-1000.",
    )
    routing_strategy: RoutingStrategy = Field(
        default=construct_default(ComponentVariant, "routing_strategy"),
        description="How requests are routed to copies: LEAST_OUTSTANDING_REQUESTS or RANDOM (RoutingConfig).",
    )
    copy_scaling: CopyScalingSettings | None = Field(
        default=None,
        description="Target tracking of every component's copies. Default: none, fixed copy counts.",
    )
    components: dict[str, ComponentSettings] = Field(
        default_factory=dict,
        max_length=200,
        description="Per-model overrides of the component settings, keyed by a model of the endpoint's models. "
        "Default: every setting derived from the instance catalogue and the number of components.",
    )

    @property
    def scales_to_zero(self) -> bool:
        return self.min_instances == 0

    @model_validator(mode="after")
    def _bounds(self) -> InferenceComponentsSettings:
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances {self.min_instances} > max_instances {self.max_instances}")
        if self.scales_to_zero and self.copy_scaling is None:
            raise ValueError(
                "min_instances 0 needs copy_scaling: instances reach zero only when every component's copies "
                'scale to zero ("Scale an endpoint to zero instances"); set copy_scaling.invocations_per_copy'
            )
        return self


class MetricsSettings(StrictModel):
    """The endpoint config's MetricsConfig (SageMaker API MetricsConfig)."""

    enhanced: bool = Field(
        default=construct_default(MetricsPublishing, "enhanced_metrics"),
        description="EnableEnhancedMetrics: utilization and invocation metrics per instance and container.",
    )
    # The valid frequencies are the construct's (one list, SageMaker API MetricsConfig).
    publish_frequency_seconds: Literal[METRIC_PUBLISH_FREQUENCIES] = Field(  # type: ignore[valid-type]
        default=construct_default(MetricsPublishing, "publish_frequency_seconds"),
        description="MetricPublishFrequencyInSeconds: "
        + ", ".join(map(str, METRIC_PUBLISH_FREQUENCIES[:-1]))
        + f" or {METRIC_PUBLISH_FREQUENCIES[-1]}. Without enhanced metrics it "
        "applies to the utilization metrics only (invocation metrics stay at 60).",
    )
    detailed_observability: bool = Field(
        default=construct_default(MetricsPublishing, "detailed_observability"),
        description="EnableDetailedObservability: container Prometheus metrics, per-GPU and per-instance host "
        "metrics. Set explicitly (SageMaker's own default for a new endpoint config is true).",
    )


class EndpointSettings(StrictModel):
    """One SageMaker endpoint (its own stack), deployed as <stage>-<name>."""

    name: str = Field(
        pattern=ENDPOINT_NAME_PATTERN,
        max_length=MAX_ENDPOINT_NAME_LENGTH,
        description=f"Endpoint name; deployed as <stage>-<name>, at most {MAX_ENDPOINT_NAME_LENGTH} characters in "
        "all; unique in the stage ignoring case (SageMaker's names are).",
    )
    mode: Literal["single_model", "multi_model", "inference_components"] = Field(
        description="single_model (exactly one model), multi_model (single-GPU instance types only) or "
        "inference_components (one component per model, own resources and copy scaling)."
    )
    models: list[str] = Field(
        min_length=1,
        max_length=200,
        description="What the endpoint serves: names from models:, each once (1-200); exactly one in single_model.",
    )
    instance_type: str = Field(
        description="Instance type of the primary variant, from the instance catalogue (serving_facts/catalogue.py); "
        "CPU types get the -py3-cpu image."
    )
    initial_instance_count: PositiveInt = Field(
        default=construct_default(ProductionVariant, "initial_instance_count"),
        le=MAX_INSTANCE_COUNT,
        description="Instances at creation, 1-1000 and at least autoscaling.min_capacity (afterwards the autoscaler "
        "decides).",
    )
    volume_size_gb: int | None = Field(
        default=None,
        ge=VOLUME_SIZE_GB[0],
        le=VOLUME_SIZE_GB[1],
        description=f"VolumeSizeInGB of each instance's EBS volume, {VOLUME_SIZE_GB[0]}-{VOLUME_SIZE_GB[1]}; refused "
        "on NVMe-only types (g4dn, g5, g6, "
        "g6e, p4d, p5). Default: SageMaker's.",
    )
    model_data_download_timeout_seconds: int | None = Field(
        default=None,
        ge=MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS[0],
        le=MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS[1],
        description=f"ModelDataDownloadTimeoutInSeconds, {MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS[0]}-"
        f"{MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS[1]}. Default: SageMaker's.",
    )
    container_startup_health_check_timeout_seconds: int | None = Field(
        default=None,
        ge=STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS[0],
        le=STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS[1],
        description=f"ContainerStartupHealthCheckTimeoutInSeconds, {STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS[0]}-"
        f"{STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS[1]}; raise it for large TensorRT engines. "
        "Default: SageMaker's.",
    )
    uncompressed_model_data: bool = Field(
        default=False, description="Single-model: serve the unpacked folder (ModelDataSource, CompressionType None)."
    )
    variant_name: str = Field(
        default=DEFAULT_VARIANT_NAME,
        pattern=VARIANT_NAME_PATTERN,
        max_length=MAX_VARIANT_NAME_LENGTH,
        description=f"Name of the primary variant (at most {MAX_VARIANT_NAME_LENGTH} characters). Keep it stable: "
        "blue/green and rolling updates need the same variant names.",
    )
    initial_weight: float = Field(
        default=construct_default(ProductionVariant, "initial_weight"),
        ge=0,
        le=1000,
        description="InitialVariantWeight of the primary variant, 0-1000.",
    )
    # CreateEndpointConfig: ProductionVariants holds at most MAX_PRODUCTION_VARIANTS, the primary included.
    extra_variants: list[VariantSettings] = Field(
        default_factory=list,
        max_length=MAX_PRODUCTION_VARIANTS - 1,
        description=f"Further variants on the same artifacts (same GPU model), at most {MAX_PRODUCTION_VARIANTS - 1}.",
    )
    container: ContainerSettings = Field(
        default=ContainerSettings(), description="The Triton container's environment (SAGEMAKER_TRITON_* variables)."
    )
    autoscaling: AutoscalingSettings | None = Field(
        default=None, description="Instance autoscaling of every variant. Default: none, a fixed instance count."
    )
    alarms: AlarmSettings = Field(
        default=AlarmSettings(), description="Thresholds, period and datapoints of the endpoint's CloudWatch alarms."
    )
    deployment: DeploymentSettings = Field(
        default=DeploymentSettings(), description="How an update shifts traffic and which alarms roll it back."
    )
    data_capture: DataCaptureSettings = Field(
        default=DataCaptureSettings(), description="Request/response capture to the artifact bucket. Default: off."
    )
    metrics: MetricsSettings | None = Field(
        default=None,
        description="The endpoint config's MetricsConfig. Default: none, so SageMaker's defaults apply (for a new "
        "endpoint config: enhanced metrics off, detailed observability on).",
    )
    async_inference: AsyncInferenceSettings | None = Field(
        default=None,
        description="Asynchronous inference (InvokeEndpointAsync; single_model only): answers and failures in the "
        "artifact bucket, SNS notifications, backlog scaling to zero (docs/serving.md, 'Asynchronous endpoints'). "
        "Default: none, a real-time endpoint.",
    )
    vpc: VpcSettings | None = Field(
        default=None, description="Run the containers' network interfaces in your VPC. Default: none."
    )
    shadow: ShadowSettings | None = Field(
        default=None,
        description="A shadow variant: a sampled copy of live requests, answers not returned "
        '(docs/serving.md, "Shadow tests"). Default: none.',
    )
    inference_components: InferenceComponentsSettings | None = Field(
        default=None, description="mode inference_components only. Default: one instance, no copy scaling."
    )
    # Triton needs no outbound network (SageMaker downloads the model data outside the container); a
    # Python model that does opts out per endpoint (AWS Config rule sagemaker-model-isolation-enabled).
    network_isolation: bool = Field(
        default=construct_default(TritonModel.__init__, "network_isolation"),
        description="EnableNetworkIsolation: the container makes no inbound or outbound network calls; false only for "
        "an endpoint whose Python model must call out.",
    )
    inference_ami_version: str | None = Field(
        default=None,
        description="GPU host AMI (ProductionVariant.InferenceAmiVersion). Default: the newest AMI whose "
        "driver runs triton_release (serving_facts/drivers.py).",
    )

    @model_validator(mode="before")
    @classmethod
    def _component_defaults(cls, data: Any) -> Any:
        # The documented default of `inference_components:` (one instance, no copy scaling) also when the key
        # is left out, so the components' rules and the endpoint stack always have settings to read.
        if isinstance(data, dict) and data.get("mode") == "inference_components" and "inference_components" not in data:
            return {**data, "inference_components": {}}
        return data

    @model_validator(mode="after")
    def _models(self) -> EndpointSettings:
        bad = [m for m in self.models if not re.fullmatch(MODEL_NAME_PATTERN, m)]
        if bad:
            raise ValueError(f"model names {bad} are not valid Triton model names ({MODEL_NAME_PATTERN})")
        duplicates = repeated(self.models)
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
        problem = (
            _rollback_alarm_problem(self)
            or _rollback_alarm_count_problem(self)
            or _rollback_timing_problem(self)
            or _volume_problem(self)
        )
        if problem:
            raise ValueError(problem)
        self._check_variants()
        async_problem = async_problems(self)
        if async_problem:
            raise ValueError("; ".join(async_problem))
        problems = _component_problems(self) + shadow_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _check_variants(self) -> None:
        names = [self.variant_name, *(v.name for v in self.extra_variants)]
        duplicates = repeated(names)
        if duplicates:
            raise ValueError(f"variant names must be unique on an endpoint, got {duplicates} twice")
        if self.extra_variants and self.deployment.strategy == "rolling":
            # SageMaker deployment guardrails, "Exclusions": rolling deployments do not support
            # multi-variant endpoints.
            raise ValueError(
                f"deployment.strategy 'rolling' is not supported on an endpoint with several variants "
                f"({', '.join(names)}); use strategy 'blue_green' or remove extra_variants"
            )
        # Every variant at initial_weight 0: config/app.py _traffic_problems (names the field).
        problems = [_variant_instance_problem(self, variant) for variant in self.extra_variants]
        problems = [p for p in problems if p]
        if problems:
            raise ValueError("; ".join(problems))


def component_name(endpoint_name: str, model: str) -> str:
    """InferenceComponentName of a model's component: fixed, so clients can address it (InvokeEndpoint
    InferenceComponentName) and scaling can target `inference-component/<name>`; `_` is not allowed there."""
    return f"{endpoint_name}-{model.replace('_', '-')}"


def component_requirements(
    endpoint: EndpointSettings, model: str, instance: InstanceType
) -> component_sizing.ComputeRequirements:
    """One copy's reservation for `model`'s component: its settings, defaults from the instance and the number
    of components (the same at config load and in the endpoint stack)."""
    component = endpoint.inference_components.components.get(model, ComponentSettings())
    return component_sizing.resolve(
        instance,
        len(endpoint.models),
        accelerators=component.accelerators,
        cpu_cores=component.cpu_cores,
        min_memory_mb=component.min_memory_mb,
        max_memory_mb=component.max_memory_mb,
    )


def _most_copies(settings: InferenceComponentsSettings, model: str, copy_count: int) -> int:
    """The most copies of `model`'s component: copy scaling's maximum as the endpoint stack sets it
    (`max_copies`, else copy_count x max_instances), or copy_count when copies do not scale."""
    if not settings.copy_scaling:
        return copy_count
    return settings.components.get(model, ComponentSettings()).max_copies or copy_count * settings.max_instances


def _component_problems(endpoint: EndpointSettings) -> list[str]:
    """Rules of `mode: inference_components` (CreateEndpointConfig / CreateInferenceComponent)."""
    settings = endpoint.inference_components
    if endpoint.mode != "inference_components":
        return ["inference_components is for mode 'inference_components' only"] if settings else []
    settings = settings or InferenceComponentsSettings()
    problems = []
    unknown = sorted(set(settings.components) - set(endpoint.models))
    if unknown:
        problems.append(f"inference_components.components: {unknown} are not in models {endpoint.models}")
    refused = {
        "autoscaling": "use inference_components.copy_scaling; instances follow the copies (managed instance scaling)",
        "extra_variants": "a component endpoint has one variant",
        "data_capture": "data capture is not wired for component endpoints in this project",
        "metrics": "MetricsConfig is not wired for component endpoints in this project yet",
    }
    for field, why in refused.items():
        value = getattr(endpoint, field)
        if value and (field != "data_capture" or value.enabled):
            problems.append(f"{field} is not supported with mode 'inference_components': {why}")
    explicit = endpoint.deployment.model_fields_set
    if ("strategy" in explicit and endpoint.deployment.strategy != "rolling") or (
        "traffic" in explicit and endpoint.deployment.traffic != "all_at_once"
    ):
        problems.append(
            "deployment: inference components update with a rolling policy only (InferenceComponentDeploymentConfig "
            "has RollingUpdatePolicy); set strategy 'rolling' and leave traffic out"
        )
    no_gpu = [m for m, c in settings.components.items() if c.accelerators == 0]
    if "gpu_memory" in endpoint.deployment.rollback_alarms and no_gpu:
        problems.append(f"deployment.rollback_alarms: 'gpu_memory' needs GPUs on every component; {no_gpu} have none")
    if not settings.min_instances <= endpoint.initial_instance_count <= settings.max_instances:
        problems.append(
            f"initial_instance_count {endpoint.initial_instance_count} must lie between "
            f"inference_components.min_instances {settings.min_instances} and max_instances {settings.max_instances}"
        )
    # Component names (<stage>-<endpoint>-<model>) are checked with the stage in config/app.py.
    try:
        instance = instance_type(endpoint.instance_type)
    except UnknownInstanceTypeError:
        return problems  # reported with its field path by cross_field_problems
    copies = {}
    for model in endpoint.models:
        component = settings.components.get(model, ComponentSettings())
        requirements = component_requirements(endpoint, model, instance)
        fits = component_sizing.fit_problems(instance, requirements)
        problems += [f"inference_components.components.{model}.{field}: {message}" for field, message in fits]
        copies[model] = (component.copy_count, requirements)
        if component.max_copies and not fits:  # an explicit maximum must be reachable within max_instances
            alone = component_sizing.placement_problem(
                instance, settings.max_instances, {model: (component.max_copies, requirements)}, "max_copies"
            )
            if alone:
                problems.append(f"inference_components.components.{model}.max_copies: {alone}")
    placement = component_sizing.placement_problem(instance, settings.max_instances, copies)
    if placement and not any("inference_components.components." in p for p in problems):
        problems.append(f"inference_components.max_instances: {placement}")
    elif copies and not any("inference_components" in p for p in problems):
        # Every component at its most copies plus one rolling batch must fit (components update one after
        # another): the same rule and the same maxima as the endpoint stack (stacks/endpoint_stack.py
        # _check_update_headroom): copy scaling's maximum, max_copies or copy_count x max_instances, and
        # copy_count where copies do not scale.
        at_most = {m: (_most_copies(settings, m, n), r) for m, (n, r) in copies.items()}
        headroom = component_sizing.update_headroom_problem(instance, settings.max_instances, at_most)
        if headroom:
            problems.append(
                f"inference_components.max_instances: {headroom}; raise max_instances, or set or lower "
                "components.<model>.max_copies"
            )
    if "rolling_batch_percent" in endpoint.deployment.model_fields_set:
        problems.append(
            "deployment.rolling_batch_percent: inference components roll one copy at a time (a percentage of a "
            "one-copy component is less than a copy); leave it out"
        )
    return problems


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


def _rollback_alarm_count_problem(endpoint: EndpointSettings) -> str | None:
    """AutoRollbackConfiguration.Alarms holds at most MAX_ROLLBACK_ALARMS alarms (botocore sagemaker, shape
    AlarmList), and each kind in rollback_alarms is one alarm per variant (an inference component has its own
    rollback configuration, one alarm per kind)."""
    variants = 1 if endpoint.mode == "inference_components" else 1 + len(endpoint.extra_variants)
    count = len(endpoint.deployment.rollback_alarms) * variants
    if count <= MAX_ROLLBACK_ALARMS:
        return None
    return (
        f"deployment.rollback_alarms: {len(endpoint.deployment.rollback_alarms)} kinds x {variants} variants = "
        f"{count} alarms; SageMaker's AutoRollbackConfiguration takes at most {MAX_ROLLBACK_ALARMS} (botocore "
        "sagemaker AlarmList): list fewer kinds or fewer extra_variants"
    )


def rollback_alarm_seconds(alarms: AlarmSettings) -> int:
    """Shortest time a rollback alarm needs to reach ALARM: `datapoints_to_alarm` breaching periods, plus one
    period: CloudWatch evaluates a period only after it has closed and its datapoint has arrived (SageMaker
    publishes endpoint metrics after each minute), so the last breaching datapoint is seen a period late.
    Same rule as the construct's (triton_cdk.serving.endpoint.seconds_to_alarm)."""
    return alarms.period_seconds * (alarms.datapoints_to_alarm + 1)


def _rollback_timing_problem(endpoint: EndpointSettings) -> str | None:
    """Rollback alarms only act while SageMaker bakes a step (WaitIntervalInSeconds, per traffic step or
    rolling batch): an alarm that needs longer than the bake to reach ALARM never rolls anything back
    (SageMaker "Auto-Rollback Configuration and Monitoring"; ../shared/README.md "Deployment guardrails")."""
    deployment, alarms = endpoint.deployment, endpoint.alarms
    if not deployment.rollback_alarms:
        return None
    needed = rollback_alarm_seconds(alarms)
    if deployment.wait_seconds >= needed:
        return None
    return (
        f"deployment.wait_seconds: the bake time {deployment.wait_seconds} s is shorter than the "
        f"{needed} s the rollback alarms need to reach ALARM ((alarms.datapoints_to_alarm "
        f"{alarms.datapoints_to_alarm} + 1) x alarms.period_seconds {alarms.period_seconds}); raise wait_seconds to "
        f"at least {needed}, shorten alarms.period_seconds / datapoints_to_alarm, or empty rollback_alarms"
    )


def _volume_problem(endpoint: EndpointSettings) -> str | None:
    """VolumeSizeInGB is refused on NVMe-only types (serving_facts/catalogue.py, `nvme_storage_only`)."""
    if endpoint.volume_size_gb is None:
        return None
    names = [endpoint.instance_type, *(v.instance_type for v in endpoint.extra_variants)]
    nvme = []
    for name in names:
        try:
            if instance_type(name).nvme_storage_only:
                nvme.append(name)
        except UnknownInstanceTypeError:
            continue  # reported with its field path elsewhere
    if not nvme:
        return None
    return (
        f"volume_size_gb: {', '.join(sorted(set(nvme)))} {'has' if len(set(nvme)) == 1 else 'have'} NVMe instance "
        "storage only (catalogue field "
        "nvme_storage_only) and SageMaker refuses VolumeSizeInGB there; remove volume_size_gb (the instance "
        "storage holds the model data and the multi-model cache)"
    )


def endpoint_driver_problems(endpoint: EndpointSettings, triton_release: str) -> list[tuple[str, str]]:
    """(field, message) for every GPU variant no SageMaker inference AMI runs `triton_release` on."""
    problems = []
    variants = [("instance_type", endpoint.instance_type)]
    variants += [(f"extra_variants[{i}].instance_type", v.instance_type) for i, v in enumerate(endpoint.extra_variants)]
    for field, name in variants:
        try:
            instance = instance_type(name)
        except UnknownInstanceTypeError:
            continue
        if not instance.has_gpu:
            continue
        try:
            drivers.ami_for(triton_release, instance.family, requested=endpoint.inference_ami_version)
        except drivers.DriverMatchError as error:
            field = "inference_ami_version" if endpoint.inference_ami_version else field
            problems.append((field, str(error)))
    return problems


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
