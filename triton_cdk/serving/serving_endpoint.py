"""TritonServingEndpoint: one Triton endpoint with everything it runs with, from typed props (issue #23 item 7).

The pattern composes the serving constructs of this package: the model (`TritonModel`, its image picked for the
primary variant's hardware), the endpoint config and endpoint (`TritonEndpoint`), an optional shadow variant and
asynchronous inference, autoscaling (`TritonEndpointScaling`), monitoring (`TritonEndpointMonitoring`: alarms to an
encrypted topic that CloudWatch may publish to, and a dashboard), rollback alarms, the deployment policy, the
instance-type guard (`InstanceTypeGuard`) and what the execution role needs for this endpoint in addition to what
it already allows ("Execution role prerequisites" below): what SageMaker checks when it creates the model and
endpoint (data capture, VPC network interfaces, reading the rollback alarms) goes into one policy,
`ExecutionRoleAdditions`, filled by the resources' `grant_*` methods, which the model and endpoint wait for; the
grants of an asynchronous endpoint (`AsyncInference.grant_read_inputs` / `grant_write_results` / `grant_publish`)
go to the role itself (an imported role's own policy, `Policy<stack id>`), which the endpoint waits for too. The
policy is attached as aws-cdk-lib's `iam.Policy` attaches one, also to a role imported with `mutable=False`
(RolePolicy): give the pattern a role this stack may change.

Execution role prerequisites (the patterns grant none of these; `triton_cdk.roles.SageMakerExecutionRole` is a role
that has them all):
- read the model data and decrypt it: `ArtifactStore.grant_read_models` (or `bucket.grant_read` on your own bucket);
- pull the Triton image from SageMaker's ECR account: `TritonImageLookup.grant_pull`;
- write its logs: logs:CreateLogGroup / CreateLogStream / PutLogEvents / DescribeLogStreams on the log groups
  `/aws/sagemaker/Endpoints/*` (and `/aws/sagemaker/InferenceComponents/*` for inference components);
- publish metrics: cloudwatch:PutMetricData (no resource type; SageMakerExecutionRole narrows it to the SageMaker
  namespaces with a `cloudwatch:namespace` condition).

Instance types must be in the instance catalogue (`serving_facts.catalogue`): the image (GPU or CPU), the GPU host
AMI, the alarms and the scaling targets follow from it; a type outside it is refused with the other problems.

Give it the construct id "Default" to add it to an existing stack without changing any logical id: CDK leaves a
"Default" path component out of its children's logical ids (aws-cdk-lib `core/lib/private/uniqueid.ts`,
HIDDEN_ID = 'Default'), so its children's logical ids are those they would have as children of the stack.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
from triton_cdk.serving.deployment import DeploymentPolicy, TrafficRouting
from triton_cdk.serving.endpoint import (
    DataCapture,
    MetricsPublishing,
    ProductionVariant,
    TritonEndpoint,
    endpoint_problems,
)
from triton_cdk.serving.instance_type_guard import InstanceTypeGuard
from triton_cdk.serving.model_data import TritonModelData
from triton_cdk.serving.monitoring import AlarmThresholds, TritonEndpointMonitoring
from triton_cdk.serving.pattern_props import Problems, catalogue_entries, hardware_kind_problems, with_host_ami
from triton_cdk.serving.role_policy import RolePolicy
from triton_cdk.serving.shadow import ShadowComparison, ShadowVariant
from triton_cdk.serving.triton_model import ModelVpc, TritonModel

__all__ = [
    "ROLE_ADDITIONS_ID",
    "AsyncParts",
    "AsyncServing",
    "ServingContainer",
    "ShadowModel",
    "TritonServingEndpoint",
    "hardware",
]

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

    Every problem of the props (unknown instance types, all of them; model, variant, shadow, scaling and endpoint
    problems; a GPU host AMI that cannot run the release) is raised as one InvalidPropsError naming the construct
    path, before anything is built.

    Props (keyword-only):
    - endpoint_name: the endpoint's fixed name.
    - container: image, execution role, environment, VPC, network isolation (ServingContainer). The execution role
      must already allow what the module docstring lists ("Execution role prerequisites": model data read, ECR pull
      of the Triton image, CloudWatch Logs, cloudwatch:PutMetricData).
    - model_data: the primary model's artifacts (`TritonModelData.from_*`: single-model archive or prefix, or a
      multi-model prefix). Multi-model monitoring (disk, loading wait, cache hits) follows from it.
    - default_model_name: the Triton model a single-model endpoint loads. Default: - none (multi-model).
    - variants: the production variants, primary first; instance types from the instance catalogue
      (`serving_facts.catalogue`), every variant of the primary's hardware kind (GPU or CPU: the model and its image
      are chosen once, for the primary). The image and each variant's alarms and dashboard rows (GPU memory,
      utilisation ranges) follow from their instance types. A GPU variant's `inference_ami_version`: Default: - the
      newest AMI whose driver runs the image's release (`serving_facts.drivers.ami_for`); a given one is checked.
    - deployment: Default: - blue/green, all traffic at once (TritonEndpoint's default).
    - rollback_alarms: alarm kinds (TritonEndpointMonitoring) that roll a deployment back. Default: - none.
    - data_capture: Default: - no capture. The execution role may write it (`DataCapture.grant_write`).
    - metrics: MetricsConfig. Default: - SageMaker's.
    - thresholds: alarm thresholds. Default: - AlarmThresholds' defaults.
    - scaling: autoscaling applied to every variant; `gpu_count` left out is each variant's, from the instance
      catalogue (a given one must be it). Default: - fixed instance counts.
    - alarm_emails: subscribers of the alarm topic. Default: - none.
    - dashboard_name: Default: - generated by CloudFormation.
    - shadow: Default: - no shadow variant (its model is `ShadowModel`, dashboard rows `ShadowComparison`; its GPU
      host AMI is filled in and checked as the variants').
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
        variants, shadow = self._checked(
            endpoint_name,
            container,
            model_data,
            variants,
            default_model_name,
            deployment,
            data_capture,
            metrics,
            shadow,
            asynchronous,
            scaling,
        )
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
            thresholds=thresholds,  # hardware per variant and multi-model: derived from the endpoint
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
            if grants.policy is not None:  # None for an immutable role (RolePolicy)
                self.model.node.add_dependency(grants.policy)
                self.endpoint.node.add_dependency(grants.policy)
        self.role_additions = grants.policy

        self.scaling = None
        if scaling is not None:
            self.scaling = TritonEndpointScaling(  # gpu_count None: each variant's, from the catalogue
                self, "Scaling", endpoint=self.endpoint, settings_by_variant={v.name: scaling for v in variants}
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

    def _checked(
        self,
        endpoint_name: str,
        container: ServingContainer,
        model_data: TritonModelData,
        variants: Sequence[ProductionVariant],
        default_model_name: str | None,
        deployment: DeploymentPolicy | None,
        data_capture: DataCapture | None,
        metrics: MetricsPublishing | None,
        shadow: ShadowModel | None,
        asynchronous: AsyncServing | None,
        scaling: ScalingSettings | None,
    ) -> tuple[list[ProductionVariant], ShadowModel | None]:
        """Every problem of the props in one InvalidPropsError naming this construct's path; the variants (and the
        shadow's) with their GPU host AMI filled in (pattern_props.py)."""
        problems = Problems()  # no variant at all: endpoint_problems says so
        typed = [(f"variant '{v.name}'", v.instance_type) for v in variants]
        if shadow is not None:
            typed.append((f"shadow variant '{shadow.variant.name}'", shadow.variant.instance_type))
        instances = catalogue_entries(typed, problems)
        release = container.image.release
        variants = [with_host_ami(v, f"variant '{v.name}'", release, instances, problems) for v in variants]
        problems += hardware_kind_problems([(f"variant '{v.name}'", v.instance_type) for v in variants], instances)
        problems += TritonModel.problems(model_data, default_model_name, container.environment)
        problems += endpoint_problems(
            endpoint_name,
            variants,
            deployment or DeploymentPolicy.blue_green(TrafficRouting.all_at_once()),
            data_capture=data_capture,
            metrics=metrics,
        )
        if asynchronous is not None:
            problems += asynchronous.inference.output.problems()
        for variant in variants if scaling is not None else ():
            instance = instances.get(variant.instance_type)
            if scaling.gpu_count is None and instance is None:
                continue  # its unknown type is already a problem
            if scaling.gpu_count is not None and instance is not None and scaling.gpu_count != instance.gpu_count:
                problems.append(
                    f"scaling of variant '{variant.name}': gpu_count {scaling.gpu_count} but {variant.instance_type} "
                    f"has {instance.gpu_count} GPUs (instance catalogue); leave gpu_count out"
                )
                continue
            gpus = scaling.gpu_count if scaling.gpu_count is not None else instance.gpu_count
            problems += [
                f"scaling of variant '{variant.name}': {p}" for p in replace(scaling, gpu_count=gpus).problems()
            ]
        if shadow is not None:
            label = f"shadow variant '{shadow.variant.name}'"
            shadow = dataclasses.replace(
                shadow, variant=with_host_ami(shadow.variant, label, release, instances, problems)
            )
            problems += [
                f"shadow model: {p}"
                for p in TritonModel.problems(shadow.model_data, shadow.default_model_name, container.environment)
            ]
            # What TritonEndpoint refuses about the shadow beside the variants (its model is not read there).
            unbuilt = ShadowVariant(model=None, variant=shadow.variant, sampling_percent=shadow.sampling_percent)  # type: ignore[arg-type]
            problems += unbuilt.problems_with(variants)
        problems.raise_for(f"TritonServingEndpoint {self.node.path}")
        return variants, shadow

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
