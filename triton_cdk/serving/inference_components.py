"""Inference components: an endpoint whose variant hosts no model, and one component per Triton model.

Facts (CloudFormation AWS::SageMaker::EndpointConfig / InferenceComponent; SageMaker "Scale an endpoint to
zero instances"; ../shared/README.md "Inference components"):
- the endpoint config carries the `ExecutionRoleArn`; its variant names no model and scales its
  instances itself (`ManagedInstanceScaling` {Status, MinInstanceCount >= 0, MaxInstanceCount >= 1})
  and routes with `RoutingConfig.RoutingStrategy`;
- each component names its SageMaker Model (`Specification.ModelName`), reserves
  `ComputeResourceRequirements` per copy, starts `RuntimeConfig.CopyCount` copies and updates with
  `DeploymentConfig.RollingUpdatePolicy` (batch 5-50 % of the copies, WaitIntervalInSeconds 0-3600,
  MaximumExecutionTimeoutInSeconds 600-28800) and `AutoRollbackConfiguration.Alarms` (1-10);
- invocation metrics of a component: namespace `AWS/SageMaker`, dimension `InferenceComponentName`
  (Invocations, InvocationsPerCopy, ModelLatency, OverheadLatency, Invocation4XXErrors,
  Invocation5XXErrors, NoCapacityInvocationFailures); utilisation per copy, 0-100 whatever the device
  count: namespace `/aws/sagemaker/InferenceComponents` (CPUUtilizationNormalized,
  MemoryUtilizationNormalized, GPUUtilizationNormalized, GPUMemoryUtilizationNormalized)
  (SageMaker "Amazon SageMaker AI metrics in Amazon CloudWatch").
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IValidation

from serving_facts.catalogue import INSTANCE_TYPES
from triton_cdk.api_limits import (
    ENDPOINT_NAME,
    INFERENCE_COMPONENT_NAME,
    MAXIMUM_EXECUTION_TIMEOUT_SECONDS,
    VARIANT_NAME,
    WAIT_INTERVAL_SECONDS,
)
from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving.component_sizing import ComputeRequirements, fit_problems, update_headroom_problem
from triton_cdk.serving.deployment import DEFAULT_BAKE_SECONDS, DEFAULT_MAXIMUM_EXECUTION_TIMEOUT_SECONDS
from triton_cdk.serving.endpoint import (
    DEFAULT_VARIANT_NAME,
    INVOKE_ACTIONS,
    _EndpointBase,
    seconds_to_alarm,
)
from triton_cdk.serving.metrics import INVOCATION_NAMESPACE, SageMakerInvocationMetrics, sagemaker_metric
from triton_cdk.serving.triton_model import TritonModel

__all__ = [
    "COMPONENT_NAMESPACE",
    "ROUTING_STRATEGIES",
    "STARTUP_SECONDS",
    "ComponentRollingUpdate",
    "ComponentVariant",
    "ImportedTritonInferenceComponent",
    "TritonComponentEndpoint",
    "TritonInferenceComponent",
]

COMPONENT_NAMESPACE = "/aws/sagemaker/InferenceComponents"
ROUTING_STRATEGIES = ("LEAST_OUTSTANDING_REQUESTS", "RANDOM")
STARTUP_SECONDS = (60, 3600)


@dataclass(frozen=True)
class ComponentVariant:
    """The endpoint's one variant. Instances: Default: - between 1 and 1; routing: least outstanding requests.

    min_instances 0 lets the endpoint scale to zero instances once every component has 0 copies.
    """

    instance_type: str
    name: str = DEFAULT_VARIANT_NAME
    initial_instance_count: int = 1
    min_instances: int = 1
    max_instances: int = 1
    routing_strategy: str = "LEAST_OUTSTANDING_REQUESTS"
    inference_ami_version: str | None = None
    volume_size_gb: int | None = None

    def problems(self) -> list[str]:
        found = []
        name_problem = VARIANT_NAME.name_problem("variant name", self.name)
        if name_problem:
            found.append(name_problem)
        if self.min_instances < 0 or self.max_instances < 1 or self.min_instances > self.max_instances:
            found.append(f"instances must satisfy 0 <= min {self.min_instances} <= max {self.max_instances}, max >= 1")
        if not max(1, self.min_instances) <= self.initial_instance_count <= self.max_instances:
            found.append(
                f"initial_instance_count {self.initial_instance_count} must lie in "
                f"{max(1, self.min_instances)}..{self.max_instances}"
            )
        if self.routing_strategy not in ROUTING_STRATEGIES:
            found.append(f"routing_strategy {self.routing_strategy!r} is not one of {', '.join(ROUTING_STRATEGIES)}")
        return found


@dataclass(frozen=True)
class ComponentRollingUpdate:
    """RollingUpdatePolicy of a component: one copy per step and per rollback step, `wait_seconds` of bake
    (SageMaker watches the rollback alarms only while a batch bakes).

    One copy, not a percentage: each step "provisions capacity on the new endpoint fleet" before it
    terminates old capacity, and a percentage of a one-copy component is less than a copy (the API allows
    5-50 % of the copy count and leaves the rounding undocumented); RollbackMaximumBatchSize otherwise
    defaults to the whole fleet at once (CreateInferenceComponent, InferenceComponentRollingUpdatePolicy).
    The headroom one copy needs is checked at synth (component_sizing, config load)."""

    wait_seconds: int = DEFAULT_BAKE_SECONDS
    maximum_execution_timeout_seconds: int = DEFAULT_MAXIMUM_EXECUTION_TIMEOUT_SECONDS

    def problems(self) -> list[str]:
        found = []
        for name, value, (low, high) in (
            ("wait_seconds", self.wait_seconds, WAIT_INTERVAL_SECONDS),
            (
                "maximum_execution_timeout_seconds",
                self.maximum_execution_timeout_seconds,
                MAXIMUM_EXECUTION_TIMEOUT_SECONDS,
            ),
        ):
            if not low <= value <= high:
                found.append(f"rolling {name} must be between {low} and {high}, got {value}")
        return found


class TritonComponentEndpoint(_EndpointBase):
    """An endpoint config with `ExecutionRoleArn` and one model-less variant, and the endpoint.

    Props:
    - endpoint_name: the endpoint's name (updated in place); the config's name is generated.
    - execution_role: the role SageMaker uses for the components' containers.
    - variant: instance type, managed instance scaling and routing.
    - network_isolation: isolate every component's container. Default: True.

    Components are added by creating `TritonInferenceComponent`s on it; they update themselves (rolling), so
    the endpoint itself has no deployment policy. They are chained in the order they are added (each one's
    resource DependsOn the previous one's), so CloudFormation creates, updates and deletes them one at a time
    and only one rolling update needs room for its new copies at any moment; at synth the endpoint checks that
    room (`component_sizing.update_headroom_problem`, every component at its `max_copies`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        execution_role: iam.IRole,
        variant: ComponentVariant,
        network_isolation: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant = variant
        self.variant_names = [variant.name]
        self.components: list[TritonInferenceComponent] = []
        problems = variant.problems()
        if not cdk.Token.is_unresolved(endpoint_name):
            name_problem = ENDPOINT_NAME.name_problem("endpoint_name", endpoint_name)
            if name_problem:
                problems.append(name_problem)
        if problems:
            raise InvalidPropsError(f"TritonComponentEndpoint {self.node.path}: " + "; ".join(problems))

        self.config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            execution_role_arn=execution_role.role_arn,
            enable_network_isolation=network_isolation,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=variant.name,
                    instance_type=variant.instance_type,
                    initial_instance_count=variant.initial_instance_count,
                    inference_ami_version=variant.inference_ami_version,
                    volume_size_in_gb=variant.volume_size_gb,
                    managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                        status="ENABLED",
                        min_instance_count=variant.min_instances,
                        max_instance_count=variant.max_instances,
                    ),
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy=variant.routing_strategy
                    ),
                )
            ],
        )
        self.resource = sagemaker.CfnEndpoint(
            self, "Resource", endpoint_name=endpoint_name, endpoint_config_name=self.config.attr_endpoint_config_name
        )
        self.node.add_validation(_UpdateHeadroom(self))

    @property
    def scales_to_zero(self) -> bool:
        return self.variant.min_instances == 0

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """InvokeEndpoint on the endpoint and each of its components (IAM lists both resource types)."""
        arns = [self.endpoint_arn, *(c.component_arn for c in self.components)]
        return iam.Grant.add_to_principal(grantee=grantee, actions=list(INVOKE_ACTIONS), resource_arns=arns)

    def describe_rollback_alarms_statement(self) -> iam.PolicyStatement | None:
        """cloudwatch:DescribeAlarms on every component's rollback alarms, for the execution role
        (SageMaker "Auto-Rollback Configuration and Monitoring")."""
        alarms = [alarm for component in self.components for alarm in component.rollback_alarms]
        if not alarms:
            return None
        return iam.PolicyStatement(
            sid="DescribeRollbackAlarms",
            actions=["cloudwatch:DescribeAlarms"],
            resources=[alarm.alarm_arn for alarm in alarms],
        )


class _ComponentBase(Construct, SageMakerInvocationMetrics):
    """What owned and imported components share: grants and metrics (aws-cdk-lib style)."""

    endpoint: _EndpointBase
    component_name: str

    @property
    def component_arn(self) -> str:
        raise NotImplementedError

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """InvokeEndpoint with this component's InferenceComponentName."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(INVOKE_ACTIONS),
            resource_arns=[self.endpoint.endpoint_arn, self.component_arn],
        )

    def metric(
        self,
        metric_name: str,
        *,
        namespace: str = INVOCATION_NAMESPACE,
        statistic: str = "Average",
        period: cdk.Duration | None = None,
        **props,
    ) -> cloudwatch.Metric:
        """Any metric of this component (dimension InferenceComponentName)."""
        dimensions = {"InferenceComponentName": self.component_name}
        return sagemaker_metric(
            metric_name, dimensions, namespace=namespace, statistic=statistic, period=period, **props
        )

    def metric_invocations_per_copy(self, **props) -> cloudwatch.Metric:
        """Invocations normalised by the copy count (the copy-scaling metric). Default: Sum."""
        return self.metric("InvocationsPerCopy", **{"statistic": "Sum", **props})

    def metric_no_capacity_invocation_failures(self, **props) -> cloudwatch.Metric:
        """Requests refused because no copy was running (the scale-from-zero signal). Default: Sum."""
        return self.metric("NoCapacityInvocationFailures", **{"statistic": "Sum", **props})

    def metric_cpu_utilization(self, **props) -> cloudwatch.Metric:
        """CPUUtilizationNormalized per copy, 0-100 of the reservation. Default: Average."""
        return self.metric("CPUUtilizationNormalized", namespace=COMPONENT_NAMESPACE, **props)

    def metric_memory_utilization(self, **props) -> cloudwatch.Metric:
        """MemoryUtilizationNormalized per copy, 0-100. Default: Average."""
        return self.metric("MemoryUtilizationNormalized", namespace=COMPONENT_NAMESPACE, **props)

    def metric_gpu_utilization(self, **props) -> cloudwatch.Metric:
        """GPUUtilizationNormalized per copy, 0-100 of the reserved GPUs. Default: Average."""
        return self.metric("GPUUtilizationNormalized", namespace=COMPONENT_NAMESPACE, **props)

    def metric_gpu_memory_utilization(self, **props) -> cloudwatch.Metric:
        """GPUMemoryUtilizationNormalized per copy, 0-100. Default: Average."""
        return self.metric("GPUMemoryUtilizationNormalized", namespace=COMPONENT_NAMESPACE, **props)


class ImportedTritonInferenceComponent(_ComponentBase):
    """A component defined elsewhere (`TritonInferenceComponent.from_component_name`)."""

    def __init__(self, scope: Construct, construct_id: str, *, endpoint: _EndpointBase, component_name: str) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = endpoint
        self.component_name = component_name

    @property
    def component_arn(self) -> str:
        # SageMaker lower-cases names in ARNs (as endpoint names).
        name = self.component_name if cdk.Token.is_unresolved(self.component_name) else self.component_name.lower()
        return cdk.Stack.of(self).format_arn(service="sagemaker", resource="inference-component", resource_name=name)


class TritonInferenceComponent(_ComponentBase):
    """One Triton model served as an inference component of `endpoint`.

    Props:
    - component_name: InferenceComponentName (fixed: clients address it, scaling targets it).
    - model: a single-model TritonModel.
    - requirements: one copy's reservation (`component_sizing.resolve`).
    - copy_count: copies at deploy time (RuntimeConfig.CopyCount).
    - rolling: the update policy. Default: - one copy per batch, 900 s bake, 3600 s execution timeout.
    - model_data_download_timeout_seconds / container_startup_health_check_timeout_seconds:
      StartupParameters. Default: - SageMaker's.
    """

    endpoint: TritonComponentEndpoint

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: TritonComponentEndpoint,
        component_name: str,
        model: TritonModel,
        requirements: ComputeRequirements,
        copy_count: int = 1,
        rolling: ComponentRollingUpdate | None = None,
        model_data_download_timeout_seconds: int | None = None,
        container_startup_health_check_timeout_seconds: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = endpoint
        self.component_name = component_name
        self.model = model
        self.requirements = requirements
        self.copy_count = copy_count
        self.rolling = rolling or ComponentRollingUpdate()
        self.rollback_alarms: list[cloudwatch.IAlarm] = []
        timeouts = {
            "model_data_download_timeout_in_seconds": model_data_download_timeout_seconds,
            "container_startup_health_check_timeout_in_seconds": container_startup_health_check_timeout_seconds,
        }
        self._check(timeouts)

        r = requirements
        self.resource = sagemaker.CfnInferenceComponent(
            self,
            "Resource",
            # The attribute (not the literal name) makes CloudFormation create the endpoint first.
            endpoint_name=endpoint.resource.attr_endpoint_name,
            variant_name=endpoint.variant.name,
            inference_component_name=component_name,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=model.model_name,
                compute_resource_requirements=(
                    sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                        number_of_accelerator_devices_required=r.accelerators,
                        number_of_cpu_cores_required=r.cpu_cores,
                        min_memory_required_in_mb=r.min_memory_mb,
                        max_memory_required_in_mb=r.max_memory_mb,
                    )
                ),
                startup_parameters=(
                    sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(**timeouts)
                    if any(v is not None for v in timeouts.values())
                    else None
                ),
            ),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=copy_count
            ),
            deployment_config=self._deployment_config(),
        )
        if endpoint.components:
            # One rolling update at a time (TritonComponentEndpoint): without this, CloudFormation updates the
            # components of an endpoint in parallel and every one starts its new copies at once.
            self.resource.add_resource_dependency(endpoint.components[-1].resource)
        endpoint.components.append(self)
        self.max_copies = copy_count

    def scale_copies_up_to(self, max_copies: int) -> None:
        """The most copies this component may reach (copy scaling's maximum): the endpoint's update headroom
        is checked with it. Default: - `copy_count`."""
        if max_copies < self.copy_count:
            raise InvalidPropsError(f"{self.node.path}: max_copies {max_copies} is below copy_count {self.copy_count}")
        self.max_copies = max_copies

    @classmethod
    def from_component_name(
        cls, scope: Construct, construct_id: str, component_name: str, *, endpoint: _EndpointBase
    ) -> ImportedTritonInferenceComponent:
        """A component defined elsewhere, for `grant_invoke` and `metric_*`; `endpoint`: the endpoint it runs on
        (e.g. `TritonEndpoint.from_endpoint_name`)."""
        return ImportedTritonInferenceComponent(scope, construct_id, endpoint=endpoint, component_name=component_name)

    @property
    def component_arn(self) -> str:
        return self.resource.attr_inference_component_arn

    def add_rollback_alarm(self, alarm: cloudwatch.IAlarm) -> None:
        """An alarm that, while in ALARM during this component's rolling update, rolls it back (at most 10)."""
        if len(self.rollback_alarms) >= 10:
            raise InvalidPropsError(f"{self.node.path}: AutoRollbackConfiguration takes at most 10 alarms")
        needed = seconds_to_alarm(alarm)
        if needed is not None and needed > self.rolling.wait_seconds:
            raise InvalidPropsError(
                f"{self.node.path}: rollback alarm {alarm.node.path} needs {needed} s to reach ALARM, longer than the "
                f"{self.rolling.wait_seconds} s bake (wait_seconds); it would never roll anything back"
            )
        self.rollback_alarms.append(alarm)
        self.resource.deployment_config = self._deployment_config()

    def _deployment_config(self) -> sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty:
        ic = sagemaker.CfnInferenceComponent
        return ic.InferenceComponentDeploymentConfigProperty(
            rolling_update_policy=ic.InferenceComponentRollingUpdatePolicyProperty(
                maximum_batch_size=ic.InferenceComponentCapacitySizeProperty(type="COPY_COUNT", value=1),
                rollback_maximum_batch_size=ic.InferenceComponentCapacitySizeProperty(type="COPY_COUNT", value=1),
                wait_interval_in_seconds=self.rolling.wait_seconds,
                maximum_execution_timeout_in_seconds=self.rolling.maximum_execution_timeout_seconds,
            ),
            auto_rollback_configuration=(
                ic.AutoRollbackConfigurationProperty(
                    alarms=[ic.AlarmProperty(alarm_name=a.alarm_name) for a in self.rollback_alarms]
                )
                if self.rollback_alarms
                else None
            ),
        )

    def _check(self, timeouts: dict[str, int | None]) -> None:
        problems = list(self.rolling.problems())
        name = self.component_name
        name_problem = INFERENCE_COMPONENT_NAME.name_problem("component_name", name)
        if name_problem:
            problems.append(name_problem)
        if self.model.mode != "SingleModel":
            problems.append("a component runs a single-model TritonModel (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME)")
        if self.copy_count < 0:
            problems.append(f"copy_count must be >= 0, got {self.copy_count}")
        for field, value in timeouts.items():
            if value is not None and not STARTUP_SECONDS[0] <= value <= STARTUP_SECONDS[1]:
                problems.append(f"{field} must be between {STARTUP_SECONDS[0]} and {STARTUP_SECONDS[1]}, got {value}")
        instance = INSTANCE_TYPES.get(self.endpoint.variant.instance_type)  # types outside the catalogue: not judged
        if instance is not None:
            fits = fit_problems(instance, self.requirements)
            problems += [f"requirements.{field}: {message}" for field, message in fits]
        if problems:
            raise InvalidPropsError(f"TritonInferenceComponent {self.node.path}: " + "; ".join(problems))


@jsii.implements(IValidation)
class _UpdateHeadroom:
    """Synth-time check: every component at its most copies, plus the biggest one rolling batch, fits the
    endpoint's `max_instances` instances (component_sizing.update_headroom_problem)."""

    def __init__(self, endpoint: TritonComponentEndpoint) -> None:
        self.endpoint = endpoint

    def validate(self) -> list[str]:
        instance = INSTANCE_TYPES.get(self.endpoint.variant.instance_type)  # outside the catalogue: not judged
        if instance is None:
            return []
        copies = {c.component_name: (c.max_copies, c.requirements) for c in self.endpoint.components}
        problem = update_headroom_problem(instance, self.endpoint.variant.max_instances, copies)
        if problem is None:
            return []
        path = self.endpoint.node.path
        return [f"TritonComponentEndpoint {path}: {problem}; raise max_instances or lower max_copies"]
