"""Stateless stack: one Triton endpoint (model, endpoint config, endpoint, scaling, alarms).

It only maps config/<stage>.yaml onto the serving constructs (triton_cdk.serving) and grants
what they need; the S3 locations come from the stage plan's PlannedEndpoint (stacks/artifact_plan.py), the
one mapping from a configured model to its content-addressed key.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from serving_facts import drivers
from serving_facts.catalogue import InstanceType, instance_type
from stacks.artifact_plan import PlannedEndpoint
from stacks.artifact_stack import ArtifactImports, ArtifactStack
from stacks.async_endpoint import async_inference, scales_on_backlog, serve_async
from stacks.container_environment import container_environment
from stacks.endpoint_shadow import shadow_comparison, shadow_variant
from stage_config import AppConfig, ConfigError
from stage_config import endpoint_props as props
from stage_config.endpoint import (
    ComponentSettings,
    EndpointSettings,
    InferenceComponentsSettings,
    component_name,
    component_requirements,
)
from triton_cdk.artifact_keys import ModelArtifact
from triton_cdk.images import TritonImageLookup
from triton_cdk.nag import acknowledge
from triton_cdk.notifications import NotificationTopic
from triton_cdk.serving import (
    DeploymentPolicy,
    ProductionVariant,
    TrafficRouting,
    TritonEndpoint,
    TritonEndpointMonitoring,
    TritonEndpointScaling,
    TritonModel,
    TritonModelData,
)
from triton_cdk.serving.autoscaling import ScalingSettings
from triton_cdk.serving.component_monitoring import TritonComponentMonitoring
from triton_cdk.serving.component_scaling import TritonComponentScaling
from triton_cdk.serving.component_sizing import update_headroom_problem
from triton_cdk.serving.inference_components import (
    ComponentRollingUpdate,
    ComponentVariant,
    TritonComponentEndpoint,
    TritonInferenceComponent,
)
from triton_cdk.serving.instance_type_guard import InstanceTypeGuard
from triton_cdk.serving.monitoring import AlarmThresholds, VariantHardware

DATA_CAPTURE_PREFIX = "data-capture/"


def model_data_of(artifact: ModelArtifact, artifacts: ArtifactImports) -> TritonModelData:
    """One model's single-model archive (the key single-model endpoints serve)."""
    return TritonModelData.from_archive(artifacts.bucket, artifact.key)


def model_data(located: PlannedEndpoint, artifacts: ArtifactImports) -> TritonModelData:
    """The endpoint's S3 location, from its content-addressed artifact keys."""
    bucket = artifacts.bucket
    settings = located.endpoint
    if settings.mode == "multi_model":
        return TritonModelData.from_multi_model_prefix(bucket, located.multi_model_prefix)
    (model,) = located.models
    if settings.uncompressed_model_data:
        return TritonModelData.from_uncompressed_prefix(bucket, model.uncompressed_prefix)
    return TritonModelData.from_archive(bucket, model.key)


def deployment_policy(settings: EndpointSettings) -> DeploymentPolicy:
    d = settings.deployment
    if d.strategy == "rolling":
        return DeploymentPolicy.rolling(
            batch_percent=d.rolling_batch_percent,
            wait_seconds=d.wait_seconds,
            maximum_execution_timeout_seconds=d.maximum_execution_timeout_seconds,
        )
    traffic = {
        "all_at_once": lambda: TrafficRouting.all_at_once(wait_seconds=d.wait_seconds),
        "canary": lambda: TrafficRouting.canary(percent=d.canary_percent, wait_seconds=d.wait_seconds),
        "linear": lambda: TrafficRouting.linear(step_percent=d.linear_step_percent, wait_seconds=d.wait_seconds),
    }[d.traffic]()
    return DeploymentPolicy.blue_green(
        traffic,
        termination_wait_seconds=d.termination_wait_seconds,
        maximum_execution_timeout_seconds=d.maximum_execution_timeout_seconds,
    )


def inference_ami(settings: EndpointSettings, instance_type_name: str, triton_release: str) -> str | None:
    """The GPU host AMI whose driver runs the release (serving_facts/drivers.py); None on CPU types."""
    instance = instance_type(instance_type_name)
    if not instance.has_gpu:
        return None
    return drivers.ami_for(triton_release, instance.family, requested=settings.inference_ami_version).name


def production_variants(settings: EndpointSettings, triton_release: str) -> list[ProductionVariant]:
    timeouts = {
        "volume_size_gb": settings.volume_size_gb,
        "model_data_download_timeout_seconds": settings.model_data_download_timeout_seconds,
        "container_startup_health_check_timeout_seconds": settings.container_startup_health_check_timeout_seconds,
    }
    primary = ProductionVariant(
        name=settings.variant_name,
        instance_type=settings.instance_type,
        initial_instance_count=settings.initial_instance_count,
        initial_weight=settings.initial_weight,
        inference_ami_version=inference_ami(settings, settings.instance_type, triton_release),
        **timeouts,
    )
    extra = [
        props.VARIANT.build(
            v, inference_ami_version=inference_ami(settings, v.instance_type, triton_release), **timeouts
        )
        for v in settings.extra_variants
    ]
    return [primary, *extra]


def alarm_thresholds(settings: EndpointSettings) -> AlarmThresholds:
    return props.ALARMS.build(settings.alarms)


def scaling_settings(settings: EndpointSettings, instance: InstanceType) -> ScalingSettings:
    s = settings.autoscaling
    assert s is not None
    return props.AUTOSCALING.build(
        s,
        gpu_count=instance.gpu_count,
        scheduled=[props.SCHEDULED.build(a) for a in s.scheduled],
    )


class EndpointStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        artifacts: ArtifactStack,
        endpoint_artifacts: PlannedEndpoint,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # The bucket, key and role through the artifact stack's named exports (Fn::ImportValue): the stateful
        # artifact stack cannot lose them while an endpoint still serves from it, and no config edit changes
        # which exports exist (stacks/artifact_stack.py; issue #22 A1).
        # Any reference to another stack's resource that slips in becomes a plain automatic export, which the
        # deploy rules refuse (tests/contract/test_deploy_rules.py), not a weak reference nobody checks. Set
        # before any child is added (it is node context).
        cdk.CrossStackReferences.of(self).consume(cdk.ReferenceStrength.STRONG)
        shared = artifacts.imports_for(self)
        self.config = config
        self.endpoint_artifacts = endpoint_artifacts
        settings = endpoint_artifacts.endpoint
        endpoint_name = config.deployed_endpoint_name(settings)
        variants = production_variants(settings, config.triton_release)
        instances = {v.name: instance_type(v.instance_type) for v in variants}
        primary = instances[settings.variant_name]
        role = shared.execution_role

        image = TritonImageLookup(self, "TritonImage", release=config.triton_release)
        # Statements the execution role needs only for this endpoint live here, attached to the
        # imported role, so the stateful artifact stack never changes for them.
        role_additions = self._role_additions(settings, endpoint_name, shared)
        if settings.mode == "inference_components":
            self._serve_components(config, shared, endpoint_artifacts, image, role_additions, endpoint_name)
            return
        data_capture = None
        if settings.data_capture.enabled:
            data_capture = props.DATA_CAPTURE.build(
                settings.data_capture,
                bucket=shared.bucket,
                prefix=f"{DATA_CAPTURE_PREFIX}{endpoint_name}/",
                key=shared.key,
            )

        self.model = TritonModel(
            self,
            "Model",
            image_uri=image.image_uri(gpu=primary.has_gpu),
            model_data=model_data(endpoint_artifacts, shared),
            execution_role=role,
            default_model_name=settings.models[0] if settings.mode == "single_model" else None,
            environment=container_environment(settings.container),
            vpc=props.VPC.build(settings.vpc) if settings.vpc else None,
            network_isolation=settings.network_isolation,
        )
        if role_additions is not None:
            # SageMaker checks the role's VPC / S3 permissions when the model and endpoint are created.
            self.model.node.add_dependency(role_additions)
        self.shadow = shadow_variant(self, config, endpoint_artifacts, shared, image, role_additions)

        self.async_inference = async_inference(self, settings, shared)  # `async_inference:` (stacks/async_endpoint.py)
        self.endpoint = TritonEndpoint(
            self,
            "Endpoint",
            model=self.model,
            endpoint_name=endpoint_name,
            variants=variants,
            deployment=deployment_policy(settings),
            data_capture=data_capture,
            metrics=props.METRICS.build(settings.metrics) if settings.metrics else None,
            shadow=self.shadow,
            async_output=self.async_inference.output if self.async_inference else None,
        )
        if role_additions is not None:
            self.endpoint.node.add_dependency(role_additions)

        self.notifications = NotificationTopic(self, "Alarms", emails=config.notifications.emails)
        self.topic = self.notifications.topic
        self.monitoring = TritonEndpointMonitoring(
            self,
            "Monitoring",
            endpoint=self.endpoint,
            thresholds=alarm_thresholds(settings),
            hardware_by_variant={name: VariantHardware(i.vcpus, i.gpu_count) for name, i in instances.items()},
            multi_model=settings.mode == "multi_model",
            topic=self.topic,
            dashboard_name=f"triton-{endpoint_name}",
        )
        if self.shadow:  # dashboard rows only: a shadow's alarm never rolls production back
            shadow_comparison(self, endpoint_name, settings.variant_name, self.shadow, self.monitoring.dashboard)
        # `async_inference:` (stacks/async_endpoint.py): AsyncInferenceConfig, grants, backlog scaling, alarms.
        self.asynchronous = serve_async(
            self, settings, self.async_inference, self.endpoint, shared, self.notifications, self.monitoring
        )
        # Alarms reach the topic only if its policy and key let CloudWatch in (triton_cdk/notifications.py).
        self.notifications.allow_alarms(self.monitoring.alarm_names)
        for alarm in self.monitoring.alarms_of_kind(settings.deployment.rollback_alarms):
            self.endpoint.add_rollback_alarm(alarm)
        rollback_reads = self.endpoint.describe_rollback_alarms_statement()
        if rollback_reads is not None:
            # SageMaker reads the rollback alarms with the execution role; the endpoint must not be
            # created or updated before the role may.
            if role_additions is None:
                role_additions = iam.Policy(self, "ExecutionRoleAdditions", roles=[shared.execution_role])
                self.model.node.add_dependency(role_additions)
            role_additions.add_statements(rollback_reads)
            self.endpoint.node.add_dependency(role_additions)

        if settings.autoscaling:
            self.scaling = TritonEndpointScaling(
                self,
                "Scaling",
                endpoint=self.endpoint,
                settings_by_variant={name: scaling_settings(settings, i) for name, i in instances.items()},
            )
        # SageMaker refuses to change the instance type of an autoscaled variant; the guard refuses such an
        # update first, naming the procedure (triton_cdk/serving/instance_type_guard.py).
        self.instance_type_guard = InstanceTypeGuard(
            self,
            "InstanceTypeGuard",
            endpoint_name=endpoint_name,
            variants={v.name: v.instance_type for v in variants},
            autoscaled=[v.name for v in variants] if settings.autoscaling or scales_on_backlog(settings) else [],
            log_key=self.notifications.key,
        )
        self.endpoint.resource.node.add_dependency(self.instance_type_guard.resource)

        cdk.CfnOutput(self, "EndpointName", value=endpoint_name)
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn)

    def _serve_components(
        self,
        config: AppConfig,
        artifacts: ArtifactImports,
        located: PlannedEndpoint,
        image: TritonImageLookup,
        role_additions: iam.Policy | None,
        endpoint_name: str,
    ) -> None:
        """`mode: inference_components`: one single-model Triton Model and component per configured model,
        from the same content-addressed archives as single-model endpoints."""
        settings = located.endpoint
        ic = settings.inference_components or InferenceComponentsSettings()
        instance = instance_type(settings.instance_type)
        role = artifacts.execution_role
        self.endpoint = TritonComponentEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            execution_role=role,
            variant=ComponentVariant(
                instance_type=settings.instance_type,
                name=settings.variant_name,
                initial_instance_count=settings.initial_instance_count,
                min_instances=ic.min_instances,
                max_instances=ic.max_instances,
                routing_strategy=ic.routing_strategy,
                inference_ami_version=inference_ami(settings, settings.instance_type, config.triton_release),
                volume_size_gb=settings.volume_size_gb,
            ),
            network_isolation=settings.network_isolation,
        )
        d = settings.deployment
        rolling = ComponentRollingUpdate(
            wait_seconds=d.wait_seconds,
            maximum_execution_timeout_seconds=d.maximum_execution_timeout_seconds,
        )
        parent = Construct(self, "Components")
        self.components: dict[str, TritonInferenceComponent] = {}
        for artifact in located.models:
            name = artifact.model.name
            c = ic.components.get(name, ComponentSettings())
            scope = Construct(parent, name)
            model = TritonModel(
                scope,
                "Model",
                image_uri=image.image_uri(gpu=instance.has_gpu),
                model_data=model_data_of(artifact, artifacts),
                execution_role=role,
                default_model_name=name,
                environment=container_environment(settings.container),
                vpc=props.VPC.build(settings.vpc) if settings.vpc else None,
                network_isolation=settings.network_isolation,
            )
            self.components[name] = TritonInferenceComponent(
                scope,
                "Component",
                endpoint=self.endpoint,
                component_name=component_name(endpoint_name, name),
                model=model,
                requirements=component_requirements(settings, name, instance),
                copy_count=c.copy_count,
                rolling=rolling,
                model_data_download_timeout_seconds=c.model_data_download_timeout_seconds
                or settings.model_data_download_timeout_seconds,
                container_startup_health_check_timeout_seconds=c.container_startup_health_check_timeout_seconds
                or settings.container_startup_health_check_timeout_seconds,
            )
            if ic.copy_scaling:
                TritonComponentScaling(
                    scope,
                    "Scaling",
                    component=self.components[name],
                    settings=props.COPY_SCALING.build(
                        ic.copy_scaling,
                        min_copies=0 if ic.scales_to_zero else c.copy_count,
                        max_copies=c.max_copies or c.copy_count * ic.max_instances,
                    ),
                )

        _check_update_headroom(config, settings, self.components, instance)

        self.notifications = NotificationTopic(self, "Alarms", emails=config.notifications.emails)
        self.topic = self.notifications.topic
        self.monitoring = TritonComponentMonitoring(
            self,
            "Monitoring",
            endpoint=self.endpoint,
            thresholds=alarm_thresholds(settings),
            topic=self.topic,
            dashboard_name=f"triton-{endpoint_name}",
        )
        self.notifications.allow_alarms(self.monitoring.alarm_names)
        for component in self.components.values():
            for alarm in self.monitoring.alarms_of(component, d.rollback_alarms):
                component.add_rollback_alarm(alarm)
        rollback_reads = self.endpoint.describe_rollback_alarms_statement()
        if rollback_reads is not None:
            if role_additions is None:
                role_additions = iam.Policy(self, "ExecutionRoleAdditions", roles=[role])
            role_additions.add_statements(rollback_reads)
        if role_additions is not None:
            # SageMaker checks the role (VPC, DescribeAlarms on rollback alarms) when these are created.
            self.endpoint.node.add_dependency(role_additions)
            for component in self.components.values():
                component.node.add_dependency(role_additions)
                component.model.node.add_dependency(role_additions)
        # No variant is a scalable target here (copies are); the guard still refuses instance-type changes.
        self.instance_type_guard = InstanceTypeGuard(
            self,
            "InstanceTypeGuard",
            endpoint_name=endpoint_name,
            variants={settings.variant_name: settings.instance_type},
            autoscaled=[],
            log_key=self.notifications.key,
        )
        self.endpoint.resource.node.add_dependency(self.instance_type_guard.resource)
        cdk.CfnOutput(self, "EndpointName", value=endpoint_name)
        cdk.CfnOutput(
            self, "InferenceComponentNames", value=",".join(c.component_name for c in self.components.values())
        )
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn)

    def _role_additions(
        self, settings: EndpointSettings, endpoint_name: str, artifacts: ArtifactImports
    ) -> iam.Policy | None:
        statements = []
        applies_to = []
        if settings.data_capture.enabled:
            export_name, bucket_arn = _artifact_bucket_arn(artifacts)
            prefix = f"/{DATA_CAPTURE_PREFIX}{endpoint_name}/*"
            statements += [
                iam.PolicyStatement(sid="WriteDataCapture", actions=["s3:PutObject"], resources=[bucket_arn + prefix]),
                iam.PolicyStatement(
                    sid="EncryptDataCapture",
                    actions=["kms:GenerateDataKey", "kms:Encrypt"],
                    resources=[artifacts.key_arn],
                ),
            ]
            applies_to.append(f"Resource::{export_name}{prefix}")
        if settings.vpc:
            # The ENI actions SageMaker's VPC-mode documentation lists; the Describe* actions have
            # no resource-level scoping, so "*" is required.
            statements.append(
                iam.PolicyStatement(
                    sid="VpcNetworkInterfaces",
                    actions=[
                        "ec2:CreateNetworkInterface",
                        "ec2:CreateNetworkInterfacePermission",
                        "ec2:DeleteNetworkInterface",
                        "ec2:DeleteNetworkInterfacePermission",
                        "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeVpcs",
                        "ec2:DescribeDhcpOptions",
                        "ec2:DescribeSubnets",
                        "ec2:DescribeSecurityGroups",
                    ],
                    resources=["*"],
                )
            )
            applies_to.append("Resource::*")
        if not statements:
            return None
        policy = iam.Policy(self, "ExecutionRoleAdditions", statements=statements, roles=[artifacts.execution_role])
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "Data capture writes only under this endpoint's data-capture prefix (object keys are chosen by "
            "SageMaker); the EC2 network-interface actions of VPC mode have no resource-level scoping.",
            applies_to=applies_to,
        )
        return policy


def _check_update_headroom(
    config: AppConfig,
    settings: EndpointSettings,
    components: dict[str, TritonInferenceComponent],
    instance: InstanceType,
) -> None:
    """Every component at its most copies plus one rolling batch must fit `max_instances` (components update one
    after another: TritonComponentEndpoint). Refused here naming the config's fields, before the endpoint
    construct's own synth-time check would: the most copies are copy scaling's maximum, `copy_count` x
    `max_instances` where `max_copies` is left out."""
    ic = settings.inference_components or InferenceComponentsSettings()
    copies = {model: (c.max_copies, c.requirements) for model, c in components.items()}
    problem = update_headroom_problem(instance, ic.max_instances, copies)
    if problem:
        raise ConfigError(
            f"config/{config.stage}.yaml: endpoints[name={settings.name}].inference_components.max_instances: "
            f"{problem}; raise max_instances, or set or lower components.<model>.max_copies"
        )


def _artifact_bucket_arn(artifacts: ArtifactImports) -> tuple[str, str]:
    """(export name, imported value) of the artifact bucket's ARN, exported by the artifact stack itself.

    cdk-nag names a wildcard finding by the resource's text; the export's fixed name keeps the acknowledgement
    exact.
    """
    return artifacts.bucket_arn_export_name, artifacts.bucket_arn
