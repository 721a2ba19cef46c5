"""`async_inference:` on an endpoint (issue #26 part 1): SageMaker Asynchronous Inference.

The endpoint config gets an AsyncInferenceConfig (answers and failures under the stage's artifact bucket at
stage_config/async_paths.py's prefixes, encrypted with the artifact key; optional success/error SNS topics; the
container's concurrency per instance), the bucket a lifecycle rule that expires those objects, and the variant
backlog scaling that may reach zero instances.

What is not here: a request's time to live and invocation timeout are InvokeEndpointAsync parameters
(`RequestTTLSeconds` 60-21600, `InvocationTimeoutSeconds` 1-3600 in botocore's sagemaker-runtime model), chosen per
request by the client (`python -m endpoint_client invoke-async`), not endpoint-config members.

Combinations refused at config load, each with its source:
- Inf1 instances (`instance_type` or an `extra_variants` instance type): SageMaker "Asynchronous inference": "if your
  endpoint uses any of the features listed in this Exclusions page, you cannot use Asynchronous Inference"; the link
  is the deployment guardrails' "Exclusions" page (docs/sagemaker/latest/dg/deployment-guardrails-exclusions.html),
  which lists "Marketplace containers" and "Endpoints that use Inf1 (Inferentia-based) instances", and for rolling
  deployments "Serverless inference endpoints" and "Multi-variant inference endpoints". This project builds no
  Marketplace or serverless endpoints, and refuses rolling deployments of multi-variant endpoints for every endpoint
  (stage_config/endpoint.py), so Inf1 is the one left to refuse here. (An earlier version of that page, in the
  archived awsdocs/amazon-sagemaker-developer-guide, also listed multi-container, multi-model, network isolation,
  multi-variant, KMS, data capture and Elastic Inference; the current page does not, and an AsyncInferenceConfig
  itself takes a KmsKeyId.)
- mode multi_model / inference_components: InvokeEndpointAsync's input has no TargetModel and no
  InferenceComponentName (botocore's sagemaker-runtime model; InvokeEndpoint has both), so a request cannot name
  the model of a multi-model endpoint or the inference component that should answer it.
- `autoscaling:` beside `async_inference:`: SageMaker "Alarms and logs for tracking metrics from asynchronous
  endpoints": "Any metric not listed below is not published if the endpoint is enabled for asynchronous inference",
  naming "Invocations" and "InvocationsPerInstance", so invocation-based targets never see data; backlog scaling
  (`async_inference.scaling`) replaces it, and one scalable target per variant carries the policies.
- `extra_variants:` with backlog scaling: the backlog metrics (ApproximateBacklogSizePerInstance,
  HasBacklogWithoutCapacity) carry the EndpointName dimension only (same page), so they cannot steer one variant
  among several.
- `alarms.errors_4xx_rate_percent`: a rate over `Invocations` (same page: not published); an asynchronous endpoint's
  4XX alarm counts Invocation4XXErrors instead (triton_cdk/serving/monitoring.py), so it may roll a deployment back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, PositiveInt, model_validator

from serving_facts.settings import StrictModel
from stage_config.api_limits import COOLDOWN_RANGE, COOLDOWN_SECONDS
from stage_config.api_limits import MAX_INSTANCE_COUNT as _MAX_INSTANCES
from triton_cdk.api_limits import MAX_CONCURRENT_INVOCATIONS
from triton_cdk.serving.async_inference import (
    DEFAULT_BACKLOG_PER_INSTANCE,
    DEFAULT_MAX_BACKLOG_AGE_SECONDS,
    DEFAULT_OUTPUT_EXPIRATION_DAYS,
    AsyncScalingSettings,
)

if TYPE_CHECKING:
    from stage_config.endpoint import EndpointSettings

# MAX_CONCURRENT_INVOCATIONS: botocore sagemaker, shape MaxConcurrentInvocationsPerInstance
# (AsyncInferenceClientConfig), defined once in the construct library (triton_cdk/api_limits.py); instance counts
# are bounded by stage_config/api_limits.py MAX_INSTANCE_COUNT (no SageMaker maximum; typo guard).
_SCALING_DEFAULTS = AsyncScalingSettings(min_capacity=0, max_capacity=1)
ALARMED_DOCS = "docs/serving.md, 'Asynchronous endpoints'"
METRICS_SOURCE = "SageMaker 'Alarms and logs for tracking metrics from asynchronous endpoints'"
EXCLUSIONS_SOURCE = (
    "SageMaker 'Asynchronous inference': an endpoint using a feature of the deployment guardrails' 'Exclusions' page "
    "cannot use Asynchronous Inference; that page lists 'Endpoints that use Inf1 (Inferentia-based) instances'"
)
INF1_PREFIX = "ml.inf1."
ADDRESSING_SOURCE = (
    "InvokeEndpointAsync takes no TargetModel and no InferenceComponentName (botocore's sagemaker-runtime model; "
    "InvokeEndpoint has both)"
)


class AsyncScalingConfig(StrictModel):
    """Backlog scaling of the endpoint's variant (Application Auto Scaling), to zero instances and back."""

    min_capacity: int = Field(
        default=0,
        ge=0,
        le=_MAX_INSTANCES,
        description="Fewest instances, 0-1000; 0 scales to zero when nothing waits (asynchronous endpoints only) and "
        "a step policy on HasBacklogWithoutCapacity starts one when a request arrives.",
    )
    max_capacity: PositiveInt = Field(default=1, le=_MAX_INSTANCES, description="Most instances, 1-1000.")
    backlog_per_instance: float = Field(
        default=DEFAULT_BACKLOG_PER_INSTANCE,
        gt=0,
        description="Target of ApproximateBacklogSizePerInstance (queued requests per instance).",
    )
    scale_in_cooldown_seconds: int = Field(
        default=_SCALING_DEFAULTS.scale_in_cooldown_seconds,
        ge=COOLDOWN_SECONDS[0],
        le=COOLDOWN_SECONDS[1],
        description=f"Seconds ({COOLDOWN_RANGE}).",
    )
    scale_out_cooldown_seconds: int = Field(
        default=_SCALING_DEFAULTS.scale_out_cooldown_seconds,
        ge=COOLDOWN_SECONDS[0],
        le=COOLDOWN_SECONDS[1],
        description=f"Seconds ({COOLDOWN_RANGE}).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> AsyncScalingConfig:
        if self.min_capacity > self.max_capacity:
            raise ValueError(f"min_capacity {self.min_capacity} > max_capacity {self.max_capacity}")
        return self


class AsyncInferenceSettings(StrictModel):
    """The endpoint answers through S3 (InvokeEndpointAsync) instead of in the response."""

    max_concurrent_invocations_per_instance: int | None = Field(
        default=None,
        ge=MAX_CONCURRENT_INVOCATIONS[0],
        le=MAX_CONCURRENT_INVOCATIONS[1],
        description=f"Requests SageMaker sends each instance's container at once, {MAX_CONCURRENT_INVOCATIONS[0]}-"
        f"{MAX_CONCURRENT_INVOCATIONS[1]} (AsyncInferenceClientConfig). Default: SageMaker chooses.",
    )
    output_expiration_days: PositiveInt = Field(
        default=DEFAULT_OUTPUT_EXPIRATION_DAYS,
        le=3650,
        description="Days after which the bucket's lifecycle rule expires inputs, answers and failures under "
        "async-inference/<endpoint>/ (1-3650); the bucket is versioned, so the expired versions are deleted 1 day "
        "later (stacks/async_endpoint.py).",
    )
    notifications: bool = Field(
        default=True,
        description="Success and error SNS topics (encrypted with the artifact key) that SageMaker notifies.",
    )
    max_backlog_age_seconds: PositiveInt = Field(
        default=DEFAULT_MAX_BACKLOG_AGE_SECONDS,
        le=21600,
        description="Alarm when the oldest queued request is this old (ApproximateAgeOfOldestRequest), 1-21600 s "
        "(21600: the longest RequestTTLSeconds).",
    )
    scaling: AsyncScalingConfig | None = Field(
        default=None, description="Backlog scaling, min_capacity 0 allowed. Default: none, a fixed instance count."
    )


def async_problems(endpoint: EndpointSettings) -> list[str]:
    """Why `async_inference:` cannot combine with the rest of the endpoint's settings (module doc: sources)."""
    settings = endpoint.async_inference
    if settings is None:
        return []
    problems = []
    if endpoint.mode != "single_model":
        problems.append(
            f"async_inference is for mode 'single_model' only (got '{endpoint.mode}'): {ADDRESSING_SOURCE}, so a "
            "multi-model endpoint's models and an endpoint's inference components cannot be addressed asynchronously"
        )
    instance_types = {"instance_type": endpoint.instance_type}
    for i, variant in enumerate(endpoint.extra_variants):
        instance_types[f"extra_variants[{i}].instance_type"] = variant.instance_type
    for field, instance_type in instance_types.items():
        if instance_type.startswith(INF1_PREFIX):
            problems.append(f"{field}: {instance_type} cannot serve asynchronous inference ({EXCLUSIONS_SOURCE})")
    if endpoint.autoscaling is not None:
        problems.append(
            f"autoscaling: an asynchronous endpoint publishes no Invocations / InvocationsPerInstance ({METRICS_SOURCE}"
            "); use async_inference.scaling (backlog target tracking, min_capacity 0 allowed) instead"
        )
    if endpoint.extra_variants and settings.scaling is not None:
        problems.append(
            "extra_variants: backlog scaling follows ApproximateBacklogSizePerInstance, which SageMaker publishes "
            f"per endpoint (EndpointName only: {METRICS_SOURCE}), so it cannot scale one of several variants; remove "
            "extra_variants or async_inference.scaling"
        )
    if "errors_4xx_rate_percent" in endpoint.alarms.model_fields_set:
        problems.append(
            "alarms.errors_4xx_rate_percent: a rate over Invocations, which an asynchronous endpoint does not publish "
            f"({METRICS_SOURCE}); its 4XX alarm counts Invocation4XXErrors (1 or more per alarms.period_seconds)"
        )
    scaling = settings.scaling
    if scaling is not None and not scaling.min_capacity <= endpoint.initial_instance_count <= scaling.max_capacity:
        problems.append(
            f"initial_instance_count {endpoint.initial_instance_count} must lie within async_inference.scaling "
            f"min_capacity {scaling.min_capacity} and max_capacity {scaling.max_capacity} (at least 1: "
            "ProductionVariant InitialInstanceCount)"
        )
    return problems
