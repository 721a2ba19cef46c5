"""Copy scaling of inference components, and the way back from zero.

Per component (SageMaker "Scale an endpoint to zero instances"; ../shared/README.md "Inference components"):
- a scalable target `inference-component/<name>` on `sagemaker:inference-component:DesiredCopyCount`
  (min 0 allowed, unlike variants);
- target tracking on the predefined `SageMakerInferenceComponentInvocationsPerCopy` and/or on the high-resolution
  `SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution` (requests in flight per copy, emitted every
  10 s: faster scale-out; SageMaker "Define a scaling policy"), each its own policy on the same scalable target;
- on an endpoint that scales to zero: copies min 0, and a step-scaling policy (ChangeInCapacity +1 from a
  lower bound of 0, MetricAggregationType Maximum, cooldown 60 s) run by an alarm over
  `NoCapacityInvocationFailures` (AWS/SageMaker, InferenceComponentName, Sum over 60 s, one datapoint).
  Target tracking cannot leave zero copies (it divides by the copy count), so without this pair an
  endpoint that reached zero would never serve again. The guide's alarm compares GreaterThanThreshold 1;
  this one uses GreaterThanOrEqualToThreshold 1 so that a single refused request already wakes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from constructs import Construct

from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving.autoscaling import SERVICE_LINKED_ROLE
from triton_cdk.serving.inference_components import TritonInferenceComponent

__all__ = ["SCALABLE_DIMENSION", "WAKE_COOLDOWN", "WAKE_PERIOD", "CopyScaling", "TritonComponentScaling"]

SCALABLE_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
WAKE_PERIOD = cdk.Duration.minutes(1)
WAKE_COOLDOWN = cdk.Duration.seconds(60)


@dataclass(frozen=True)
class CopyScaling:
    """Props of TritonComponentScaling: the copy bounds and the target(s) to track.

    min_copies 0 only on an endpoint that scales to zero instances."""

    min_copies: int
    max_copies: int
    invocations_per_copy: float | None = None
    concurrent_requests_per_copy: float | None = None
    scale_in_cooldown_seconds: int = 300
    scale_out_cooldown_seconds: int = 60

    def problems(self) -> list[str]:
        found = []
        if self.min_copies < 0 or self.max_copies < max(1, self.min_copies):
            found.append(f"copies must satisfy 0 <= min {self.min_copies} <= max {self.max_copies}, max >= 1")
        if self.invocations_per_copy is None and self.concurrent_requests_per_copy is None:
            found.append("set invocations_per_copy and/or concurrent_requests_per_copy")
        for name in ("invocations_per_copy", "concurrent_requests_per_copy"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                found.append(f"{name} must be above 0, got {value}")
        return found


class TritonComponentScaling(Construct):
    """Scales the copies of `component`; with min_copies 0, also wakes it from zero.

    The component's endpoint must scale to zero instances (ManagedInstanceScaling MinInstanceCount 0)
    for min_copies 0: otherwise the instances stay and only the copies go.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, component: TritonInferenceComponent, settings: CopyScaling
    ) -> None:
        super().__init__(scope, construct_id)
        problems = settings.problems()
        if settings.min_copies == 0 and not component.endpoint.scales_to_zero:
            problems.append("min_copies 0 needs an endpoint whose variant has min_instances 0")
        if component.endpoint.scales_to_zero and settings.min_copies != 0:
            problems.append("an endpoint that scales to zero needs min_copies 0 on every component")
        if problems:
            raise InvalidPropsError(f"TritonComponentScaling {self.node.path}: " + "; ".join(problems))
        # The endpoint's update headroom counts the component at this maximum (TritonComponentEndpoint).
        component.scale_copies_up_to(settings.max_copies)
        role_arn = cdk.Stack.of(self).format_arn(
            service="iam", region="", resource="role", resource_name=SERVICE_LINKED_ROLE
        )
        role = iam.Role.from_role_arn(self, "ServiceLinkedRole", role_arn, mutable=False)
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"inference-component/{component.component_name}",
            scalable_dimension=SCALABLE_DIMENSION,
            min_capacity=settings.min_copies,
            max_capacity=settings.max_copies,
            role=role,
        )
        # The resource id is a plain string: register after the component exists, deregister before it goes.
        self.target.node.add_dependency(component.resource)
        cooldowns = {
            "scale_in_cooldown": cdk.Duration.seconds(settings.scale_in_cooldown_seconds),
            "scale_out_cooldown": cdk.Duration.seconds(settings.scale_out_cooldown_seconds),
        }
        if settings.invocations_per_copy is not None:
            self.target.scale_to_track_metric(
                "InvocationsPerCopy",
                policy_name="InvocationsPerCopy",  # fixed, as triton_cdk/serving/autoscaling.py explains
                target_value=settings.invocations_per_copy,
                predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_INVOCATIONS_PER_COPY,
                **cooldowns,
            )
        if settings.concurrent_requests_per_copy is not None:
            self.target.scale_to_track_metric(
                "ConcurrentRequestsPerCopy",
                policy_name="ConcurrentRequestsPerCopy",
                target_value=settings.concurrent_requests_per_copy,
                predefined_metric=(
                    appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION
                ),
                **cooldowns,
            )
        self.wake_alarm: cloudwatch.Alarm | None = None
        if settings.min_copies == 0:
            self.wake_alarm = self._wake_from_zero(component)

    def _wake_from_zero(self, component: TritonInferenceComponent) -> cloudwatch.Alarm:
        step = appscaling.StepScalingAction(
            self,
            "ScaleFromZero",
            scaling_target=self.target,
            policy_name="ScaleFromZero",
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
            cooldown=WAKE_COOLDOWN,
        )
        step.add_adjustment(adjustment=1, lower_bound=0)
        alarm = cloudwatch.Alarm(
            self,
            "NoCapacityAlarm",
            alarm_name=f"{component.component_name}-wake-from-zero",
            alarm_description=(
                f"Inference component {component.component_name}: a request found no copy; add one (scale from zero)"
            ),
            metric=component.metric_no_capacity_invocation_failures(period=WAKE_PERIOD),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(actions.ApplicationScalingAction(step))
        return alarm
