"""Autoscaling of a Triton endpoint's variants (Application Auto Scaling).

Per variant: a scalable target on `sagemaker:variant:DesiredInstanceCount` (min >= 1), target
tracking on SageMakerVariantInvocationsPerInstance, on
SageMakerVariantConcurrentRequestsPerModelHighResolution and/or on GPUUtilization (a customized metric
on `/aws/sagemaker/Endpoints`), and optional scheduled actions (../shared/README.md,
"Autoscaling"). Each target set is its own target-tracking policy on the same scalable target: Application
Auto Scaling scales out when any policy asks and in only when all do.

The concurrency metric (ConcurrentRequestsPerModel, requests in flight in the model container, queued ones
included) is high resolution: SageMaker emits it every 10 s instead of every minute, so the policy scales out
faster on a burst and scales in at the standard pace (SageMaker "Define a scaling policy", "Specify a
high-resolution predefined metric"). It needs no MetricsConfig: that setting's publish frequency is for the
utilization metrics (SageMaker API MetricsConfig).

GPUUtilization runs 0-100 x GPU count, so the per-GPU target is multiplied by the instance's GPU count:
70 % on a 4-GPU ml.g5.12xlarge tracks 280.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from constructs import Construct

from serving_facts.catalogue import INSTANCE_TYPES
from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving.endpoint import TritonEndpoint

__all__ = ["SCALABLE_DIMENSION", "SERVICE_LINKED_ROLE", "ScalingSettings", "ScheduledCapacity", "TritonEndpointScaling"]

SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
# Application Auto Scaling's service-linked role for SageMaker variants (it creates the role on
# first use); without it aws-cdk-lib would create an extra, unused role per target.
SERVICE_LINKED_ROLE = (
    "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)


@dataclass(frozen=True)
class ScheduledCapacity:
    """A scheduled change of min/max capacity, e.g. a lower minimum at night."""

    name: str
    schedule: str  # cron(...), rate(...) or at(...)
    min_capacity: int | None = None
    max_capacity: int | None = None
    time_zone: str | None = None


@dataclass(frozen=True)
class ScalingSettings:
    """What to track. Targets left None are not tracked; at least one is required.

    gpu_utilization_percent is per GPU (0-100); gpu_count scales it to the metric's range.
    gpu_count: Default: - the scaled variant's, from its instance type in the instance catalogue
    (serving_facts.catalogue; TritonEndpointScaling fills it in, and refuses a type outside the catalogue).
    """

    min_capacity: int
    max_capacity: int
    gpu_count: int | None = None
    invocations_per_instance: float | None = None
    concurrent_requests_per_model: float | None = None
    gpu_utilization_percent: float | None = None
    scale_in_cooldown_seconds: int = 300
    scale_out_cooldown_seconds: int = 60
    disable_scale_in: bool = False
    scheduled: Sequence[ScheduledCapacity] = ()

    @property
    def gpu_utilization_target(self) -> float | None:
        if self.gpu_utilization_percent is None:
            return None
        return self.gpu_utilization_percent * (self.gpu_count or 0)

    def problems(self) -> list[str]:
        found = []
        if self.min_capacity < 1:
            found.append(f"min_capacity must be at least 1 (SageMaker keeps one instance), got {self.min_capacity}")
        if self.max_capacity < self.min_capacity:
            found.append(f"max_capacity {self.max_capacity} is below min_capacity {self.min_capacity}")
        targets = (self.invocations_per_instance, self.concurrent_requests_per_model, self.gpu_utilization_percent)
        if all(t is None for t in targets):
            found.append("set invocations_per_instance, concurrent_requests_per_model and/or gpu_utilization_percent")
        if self.concurrent_requests_per_model is not None and self.concurrent_requests_per_model <= 0:
            found.append(f"concurrent_requests_per_model must be above 0, got {self.concurrent_requests_per_model}")
        if self.gpu_utilization_percent is not None:
            if self.gpu_count is not None and self.gpu_count < 1:
                found.append("GPU-utilization scaling needs a GPU instance; this variant has none")
            if not 0 < self.gpu_utilization_percent <= 100:
                found.append(f"gpu_utilization_percent is per GPU (0-100], got {self.gpu_utilization_percent}")
        return found


class TritonEndpointScaling(Construct):
    """Scales every variant of `endpoint` with the same settings.

    `settings_by_variant` maps variant name to ScalingSettings (the GPU count differs per
    instance type). The scalable targets depend on the endpoint, so CloudFormation deletes them
    (deregisters the variant) before it deletes the endpoint.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: TritonEndpoint,
        settings_by_variant: dict[str, ScalingSettings],
    ) -> None:
        super().__init__(scope, construct_id)
        unknown = sorted(set(settings_by_variant) - set(endpoint.variant_names))
        problems = [f"unknown variants {unknown}; the endpoint has {endpoint.variant_names}"] if unknown else []
        instance_types = {v.name: v.instance_type for v in endpoint.variants}
        settings_by_variant = dict(settings_by_variant)
        for name, settings in settings_by_variant.items():
            if settings.gpu_count is None and name in instance_types:
                instance = INSTANCE_TYPES.get(instance_types[name])
                if instance is None:
                    problems.append(
                        f"variant '{name}': {instance_types[name]} is not in the instance catalogue "
                        "(serving_facts.catalogue); give gpu_count"
                    )
                    continue
                settings_by_variant[name] = settings = dataclasses.replace(settings, gpu_count=instance.gpu_count)
            problems.extend(f"variant '{name}': {p}" for p in settings.problems())
        if problems:
            raise InvalidPropsError(f"TritonEndpointScaling {self.node.path}: " + "; ".join(problems))

        role_arn = cdk.Stack.of(self).format_arn(
            service="iam", region="", resource="role", resource_name=SERVICE_LINKED_ROLE
        )
        self.role = iam.Role.from_role_arn(self, "ServiceLinkedRole", role_arn, mutable=False)
        self.targets: dict[str, appscaling.ScalableTarget] = {}
        for variant, settings in settings_by_variant.items():
            self.targets[variant] = self._scale_variant(endpoint, variant, settings)
        endpoint.retain_instance_counts()

    def _scale_variant(
        self, endpoint: TritonEndpoint, variant: str, settings: ScalingSettings
    ) -> appscaling.ScalableTarget:
        scope = Construct(self, variant)
        target = appscaling.ScalableTarget(
            scope,
            "Target",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"endpoint/{endpoint.endpoint_name}/variant/{variant}",
            scalable_dimension=SCALABLE_DIMENSION,
            min_capacity=settings.min_capacity,
            max_capacity=settings.max_capacity,
            role=self.role,
        )
        # The resource id is a plain string, so CloudFormation would not see the dependency:
        # without it the target could be registered before the variant exists, and on delete
        # the endpoint could go first (which leaves a dangling registration).
        target.node.add_dependency(endpoint.resource)
        cooldowns = {
            "scale_in_cooldown": cdk.Duration.seconds(settings.scale_in_cooldown_seconds),
            "scale_out_cooldown": cdk.Duration.seconds(settings.scale_out_cooldown_seconds),
            "disable_scale_in": settings.disable_scale_in,
        }
        if settings.invocations_per_instance is not None:
            target.scale_to_track_metric(
                "InvocationsPerInstance",
                # Fixed: a generated name follows the construct path, which differs between `make deploy` and the
                # pipeline's stage, so each deploy path would replace the policy (PutScalingPolicy names are per
                # scalable target).
                policy_name="InvocationsPerInstance",
                target_value=settings.invocations_per_instance,
                predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
                **cooldowns,
            )
        if settings.concurrent_requests_per_model is not None:
            target.scale_to_track_metric(
                "ConcurrentRequestsPerModel",
                policy_name="ConcurrentRequestsPerModel",
                target_value=settings.concurrent_requests_per_model,
                predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
                **cooldowns,
            )
        if settings.gpu_utilization_target is not None:
            target.scale_to_track_metric(
                "GpuUtilization",
                policy_name="GpuUtilization",
                target_value=settings.gpu_utilization_target,
                custom_metric=endpoint.metric_gpu_utilization(variant=variant, period=cdk.Duration.minutes(1)),
                **cooldowns,
            )
        for action in settings.scheduled:
            target.scale_on_schedule(
                action.name,
                schedule=appscaling.Schedule.expression(action.schedule),
                min_capacity=action.min_capacity,
                max_capacity=action.max_capacity,
                time_zone=cdk.TimeZone.of(action.time_zone) if action.time_zone else None,
            )
        return target
