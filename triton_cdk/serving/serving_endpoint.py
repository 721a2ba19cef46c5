"""TritonServingEndpoint: one Triton endpoint with everything it runs with, from typed props (issue #23 item 7).

The pattern composes the serving constructs of this package: the model (`TritonModel`, its image picked for the
primary variant's hardware), the endpoint config and endpoint (`TritonEndpoint`), an optional shadow variant and
asynchronous inference, autoscaling (`TritonEndpointScaling`), monitoring (`TritonEndpointMonitoring`: alarms to an
encrypted topic that CloudWatch may publish to, and a dashboard), rollback alarms, the deployment policy, the
instance-type guard (`InstanceTypeGuard`) and what the execution role needs for this endpoint (one policy,
`ExecutionRoleAdditions`, filled by the resources' `grant_*` methods).

Give it the construct id "Default" to add it to an existing stack without changing any logical id: CDK leaves a
"Default" path component out of its children's logical ids (aws-cdk-lib `core/lib/private/uniqueid.ts`,
HIDDEN_ID = 'Default'), so its children's logical ids are those they would have as children of the stack.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct

from serving_facts.catalogue import InstanceType, instance_type
from triton_cdk.errors import InvalidPropsError
from triton_cdk.images import TritonImageLookup
from triton_cdk.notifications import NotificationTopic
from triton_cdk.serving.async_inference import (
    AsyncAlarmThresholds,
    AsyncInference,
    AsyncScalingSettings,
    TritonAsyncMonitoring,
    TritonAsyncScaling,
)
from triton_cdk.serving.autoscaling import ScalingSettings, TritonEndpointScaling
from triton_cdk.serving.deployment import DeploymentPolicy
from triton_cdk.serving.endpoint import DataCapture, MetricsPublishing, ProductionVariant, TritonEndpoint
from triton_cdk.serving.instance_type_guard import InstanceTypeGuard
from triton_cdk.serving.model_data import TritonModelData
from triton_cdk.serving.monitoring import AlarmThresholds, TritonEndpointMonitoring, VariantHardware
from triton_cdk.serving.role_policy import RolePolicy
from triton_cdk.serving.shadow import ShadowComparison, ShadowVariant
from triton_cdk.serving.triton_model import ModelVpc, TritonModel

ROLE_ADDITIONS_ID = "ExecutionRoleAdditions"


@dataclass(frozen=True)
class ServingContainer:
    """What every model of a serving pattern shares: the image lookup (GPU or CPU image per instance type), the
    execution role (it must already read the model data), the container environment, the VPC and network isolation
    (TritonModel's props of the same names)."""

    image: TritonImageLookup
    execution_role: iam.IRole
    environment: Mapping[str, str] = field(default_factory=dict)
    vpc: ModelVpc | None = None
    network_isolation: bool = True

    def model(
        self, scope: Construct, construct_id: str, *, model_data: TritonModelData, instance: str, **props: Any
    ) -> TritonModel:
        """A TritonModel running the image of `instance`'s hardware (further TritonModel props in `props`)."""
        return TritonModel(
            scope,
            construct_id,
            image_uri=self.image.image_uri(gpu=hardware(instance).has_gpu),
            model_data=model_data,
            execution_role=self.execution_role,
            environment=self.environment,
            vpc=self.vpc,
            network_isolation=self.network_isolation,
            **props,
        )


@dataclass(frozen=True)
class ShadowModel:
    """A shadow variant (CreateEndpointConfig ShadowProductionVariants) and the single-model archive it serves: a
    sampled copy of the production variant's requests, answers not returned (triton_cdk/serving/shadow.py)."""

    model_data: TritonModelData
    default_model_name: str
    variant: ProductionVariant
    sampling_percent: int


@dataclass(frozen=True)
class AsyncServing:
    """Asynchronous inference: `inference` (S3 locations and topics, an `AsyncInference` the caller made), the alarm
    on the oldest queued request, and backlog scaling of the primary variant. Default scaling: - none."""

    inference: AsyncInference
    max_backlog_age_seconds: int
    scaling: AsyncScalingSettings | None = None


def hardware(instance: str) -> InstanceType:
    """The instance catalogue's entry of `instance` (serving_facts/catalogue.py)."""
    try:
        return instance_type(instance)
    except ValueError as error:
        raise InvalidPropsError(str(error)) from error


class TritonServingEndpoint(Construct):
    """One Triton endpoint and what it runs with (module docstring).

    Props (keyword-only):
    - endpoint_name: the endpoint's fixed name.
    - container: image, execution role, environment, VPC, network isolation (ServingContainer).
    - model_data: the primary model's artifacts (`TritonModelData.from_*`: single-model archive or prefix, or a
      multi-model prefix). Multi-model monitoring (disk, loading wait, cache hits) follows from it.
    - default_model_name: the Triton model a single-model endpoint loads. Default: - none (multi-model).
    - variants: the production variants, primary first. The image and each variant's alarms and dashboard rows
      (GPU memory, utilisation ranges) follow from their instance types (instance catalogue).
    - deployment: Default: - blue/green, all traffic at once (TritonEndpoint's default).
    - rollback_alarms: alarm kinds (TritonEndpointMonitoring) that roll a deployment back. Default: - none.
    - data_capture: Default: - no capture. The execution role may write it (`DataCapture.grant_write`).
    - metrics: MetricsConfig. Default: - SageMaker's.
    - thresholds: alarm thresholds. Default: - AlarmThresholds' defaults.
    - scaling: autoscaling applied to every variant; `gpu_count` is each variant's, from the instance catalogue
      (the value given is replaced). Default: - fixed instance counts.
    - alarm_emails: subscribers of the alarm topic. Default: - none.
    - dashboard_name: Default: - generated by CloudFormation.
    - shadow: Default: - no shadow variant (its model is `ShadowModel`, dashboard rows `ShadowComparison`).
    - asynchronous: Default: - a real-time endpoint.

    Attributes: model, endpoint, notifications (topic), monitoring, shadow, scaling, asynchronous (scaling and
    monitoring of an asynchronous endpoint), instance_type_guard, role_additions (the policy, None when nothing
    was granted).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        container: ServingContainer,
        model_data: TritonModelData,
        variants: Sequence[ProductionVariant],
        default_model_name: str | None = None,
        deployment: DeploymentPolicy | None = None,
        rollback_alarms: Sequence[str] = (),
        data_capture: DataCapture | None = None,
        metrics: MetricsPublishing | None = None,
        thresholds: AlarmThresholds | None = None,
        scaling: ScalingSettings | None = None,
        alarm_emails: Sequence[str] = (),
        dashboard_name: str | None = None,
        shadow: ShadowModel | None = None,
        asynchronous: AsyncServing | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if not variants:
            raise InvalidPropsError(f"TritonServingEndpoint {self.node.path}: at least one production variant")
        instances = {v.name: hardware(v.instance_type) for v in variants}
        primary = variants[0]
        role = container.execution_role
        thresholds = thresholds or AlarmThresholds()

        # What SageMaker checks on the role when it creates the model and endpoint: granted before either exists.
        grants = RolePolicy(self, ROLE_ADDITIONS_ID, role)
        if data_capture is not None:
            data_capture.grant_write(grants)
        self.model = container.model(
            self, "Model", model_data=model_data, instance=primary.instance_type, default_model_name=default_model_name
        )
        self.model.grant_vpc_access(grants)
        checked_at_creation = grants.policy
        if checked_at_creation is not None:
            self.model.node.add_dependency(checked_at_creation)

        self.shadow = self._shadow(container, shadow, checked_at_creation)
        self.endpoint = TritonEndpoint(
            self,
            "Endpoint",
            model=self.model,
            endpoint_name=endpoint_name,
            variants=variants,
            deployment=deployment,
            data_capture=data_capture,
            metrics=metrics,
            shadow=self.shadow,
            async_output=asynchronous.inference.output if asynchronous else None,
        )
        if checked_at_creation is not None:
            self.endpoint.node.add_dependency(checked_at_creation)

        self.notifications = NotificationTopic(self, "Alarms", emails=alarm_emails)
        self.monitoring = TritonEndpointMonitoring(
            self,
            "Monitoring",
            endpoint=self.endpoint,
            thresholds=thresholds,
            hardware_by_variant={name: VariantHardware(i.vcpus, i.gpu_count) for name, i in instances.items()},
            multi_model=model_data.mode == "MultiModel",
            topic=self.notifications.topic,
            dashboard_name=dashboard_name,
        )
        if self.shadow:  # dashboard rows only: a shadow's alarm never rolls production back
            ShadowComparison(
                self,
                "ShadowComparison",
                endpoint_name=endpoint_name,
                production_variant=primary.name,
                shadow_variant=self.shadow.variant.name,
                dashboard=self.monitoring.dashboard,
            )
        self.asynchronous = self._serve_async(asynchronous, role, primary.name, thresholds)
        # Alarms reach the topic only if its policy and key let CloudWatch in (triton_cdk/notifications.py).
        self.notifications.allow_alarms(self.monitoring.alarm_names)
        for alarm in self.monitoring.alarms_of_kind(rollback_alarms):
            self.endpoint.add_rollback_alarm(alarm)
        rollback_reads = self.endpoint.describe_rollback_alarms_statement()
        if rollback_reads is not None:
            # SageMaker reads the rollback alarms with the execution role; the endpoint must not be created or
            # updated before the role may.
            grants.add_to_principal_policy(rollback_reads)
            self.model.node.add_dependency(grants.policy)
            self.endpoint.node.add_dependency(grants.policy)
        self.role_additions = grants.policy

        self.scaling = None
        if scaling is not None:
            self.scaling = TritonEndpointScaling(
                self,
                "Scaling",
                endpoint=self.endpoint,
                settings_by_variant={
                    name: dataclasses.replace(scaling, gpu_count=i.gpu_count) for name, i in instances.items()
                },
            )
        # SageMaker refuses to change the instance type of an autoscaled variant; the guard refuses such an update
        # first, naming the procedure (triton_cdk/serving/instance_type_guard.py).
        autoscaled = scaling is not None or (asynchronous is not None and asynchronous.scaling is not None)
        self.instance_type_guard = InstanceTypeGuard(
            self,
            "InstanceTypeGuard",
            endpoint_name=endpoint_name,
            variants={v.name: v.instance_type for v in variants},
            autoscaled=[v.name for v in variants] if autoscaled else [],
            log_key=self.notifications.key,
        )
        self.endpoint.resource.node.add_dependency(self.instance_type_guard.resource)

    @property
    def topic(self) -> sns.ITopic:
        """The alarm topic (encrypted, CloudWatch may publish the monitoring's alarms to it)."""
        return self.notifications.topic

    def _shadow(
        self, container: ServingContainer, shadow: ShadowModel | None, checked_at_creation: iam.Policy | None
    ) -> ShadowVariant | None:
        if shadow is None:
            return None
        model = container.model(
            self,
            "ShadowModel",
            model_data=shadow.model_data,
            instance=shadow.variant.instance_type,
            default_model_name=shadow.default_model_name,
        )
        if checked_at_creation is not None:
            model.node.add_dependency(checked_at_creation)
        return ShadowVariant(model=model, variant=shadow.variant, sampling_percent=shadow.sampling_percent)

    def _serve_async(
        self, asynchronous: AsyncServing | None, role: iam.IRole, variant: str, thresholds: AlarmThresholds
    ) -> AsyncParts | None:
        """The execution role's grants, backlog scaling and alarms of an asynchronous endpoint."""
        if asynchronous is None:
            return None
        inference = asynchronous.inference
        inference.grant_read_inputs(role)
        inference.grant_write_results(role)
        inference.grant_publish(role)
        # An imported role keeps the grants in a policy of its own (aws-cdk-lib names it Policy<stack id>).
        for policy in [c for c in role.node.children if isinstance(c, iam.Policy)]:
            # SageMaker acts as the execution role for every request; the endpoint waits for the role's policy.
            self.endpoint.node.add_dependency(policy)
        scaling = None
        if asynchronous.scaling is not None:
            scaling = TritonAsyncScaling(
                self, "AsyncScaling", endpoint=self.endpoint, variant=variant, settings=asynchronous.scaling
            )
        output = inference.output
        monitoring = TritonAsyncMonitoring(
            self,
            "AsyncMonitoring",
            endpoint=self.endpoint,
            thresholds=AsyncAlarmThresholds(
                max_backlog_age_seconds=asynchronous.max_backlog_age_seconds,
                period_seconds=thresholds.period_seconds,
                evaluation_periods=thresholds.evaluation_periods,
                datapoints_to_alarm=thresholds.datapoints_to_alarm,
            ),
            topic=self.notifications.topic,
            notifications=output.success_topic is not None or output.error_topic is not None,
            dashboard=self.monitoring.dashboard,
        )
        self.notifications.allow_alarms(monitoring.alarm_names)
        return AsyncParts(inference, scaling, monitoring)


@dataclass
class AsyncParts:
    """What TritonServingEndpoint built for an asynchronous endpoint."""

    inference: AsyncInference
    scaling: TritonAsyncScaling | None
    monitoring: TritonAsyncMonitoring
