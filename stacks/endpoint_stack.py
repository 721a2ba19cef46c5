"""Stateless stack: one Triton endpoint (model, endpoint config, endpoint, scaling, alarms).

It only maps config/<stage>.yaml onto the serving pattern constructs (triton_cdk.serving TritonServingEndpoint and
TritonServingComponents, which compose the model, endpoint, scaling, monitoring, deployment policy, guard and role
grants); the S3 locations come from the stage plan's PlannedEndpoint (stacks/artifact_plan.py), the one mapping from
a configured model to its content-addressed key. What stays here is app policy: cdk-nag acknowledgements that name
the artifact stack's exports, the config-field error of the update-headroom check, and the stack outputs.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from serving_facts.catalogue import InstanceType, instance_type
from stacks.artifact_plan import PlannedEndpoint
from stacks.artifact_stack import ArtifactImports, ArtifactStack
from stacks.async_endpoint import acknowledge_async_grants, async_serving
from stacks.container_environment import container_environment
from stacks.endpoint_shadow import shadow_model
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
from triton_cdk.serving import (
    DeploymentPolicy,
    ProductionVariant,
    ServingContainer,
    TrafficRouting,
    TritonModelData,
    TritonServingComponents,
    TritonServingEndpoint,
)
from triton_cdk.serving.autoscaling import ScalingSettings
from triton_cdk.serving.component_sizing import update_headroom_problem
from triton_cdk.serving.inference_components import TritonInferenceComponent

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


def requested_ami(settings: EndpointSettings, instance_type_name: str) -> str | None:
    """The config's `inference_ami_version` for a GPU variant (the pattern checks it, or picks the newest AMI whose
    driver runs the release when it is left out: serving_facts/drivers.py); None on a CPU variant, which has no
    GPU host AMI."""
    return settings.inference_ami_version if instance_type(instance_type_name).has_gpu else None


def production_variants(settings: EndpointSettings) -> list[ProductionVariant]:
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
        inference_ami_version=requested_ami(settings, settings.instance_type),
        **timeouts,
    )
    extra = [
        props.VARIANT.build(v, inference_ami_version=requested_ami(settings, v.instance_type), **timeouts)
        for v in settings.extra_variants
    ]
    return [primary, *extra]


def scaling_settings(settings: EndpointSettings) -> ScalingSettings:
    """The config's `autoscaling:`; the pattern takes each variant's GPU count from the instance catalogue."""
    s = settings.autoscaling
    assert s is not None
    return props.AUTOSCALING.build(
        s,
        gpu_count=None,
        scheduled=[props.SCHEDULED.build(a) for a in s.scheduled],
    )


class EndpointStack(cdk.Stack):
    """One endpoint of the stage: its config mapped onto TritonServingEndpoint (or, for `mode: inference_components`,
    TritonServingComponents), created under the hidden id "Default" so that every logical id is that of a child of
    the stack (deployed endpoints keep their resources: tests/contract/test_endpoint_logical_ids.py)."""

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
        container = ServingContainer(
            image=TritonImageLookup(self, "TritonImage", release=config.triton_release),
            execution_role=shared.execution_role,
            environment=container_environment(settings.container),
            vpc=props.VPC.build(settings.vpc) if settings.vpc else None,
            network_isolation=settings.network_isolation,
        )
        if settings.mode == "inference_components":
            self._serve_components(config, shared, endpoint_artifacts, container, endpoint_name)
            return
        self.async_inference = async_serving(self, settings, shared)  # `async_inference:` (stacks/async_endpoint.py)
        serving = TritonServingEndpoint(
            self,
            "Default",
            endpoint_name=endpoint_name,
            container=container,
            model_data=model_data(endpoint_artifacts, shared),
            default_model_name=settings.models[0] if settings.mode == "single_model" else None,
            variants=production_variants(settings),
            deployment=deployment_policy(settings),
            rollback_alarms=settings.deployment.rollback_alarms,
            data_capture=props.DATA_CAPTURE.build(
                settings.data_capture,
                bucket=shared.bucket,
                prefix=data_capture_prefix(endpoint_name),
                key=shared.key,
            )
            if settings.data_capture.enabled
            else None,
            metrics=props.METRICS.build(settings.metrics) if settings.metrics else None,
            thresholds=props.ALARMS.build(settings.alarms),
            scaling=scaling_settings(settings) if settings.autoscaling else None,
            alarm_emails=config.notifications.emails,
            dashboard_name=f"triton-{endpoint_name}",
            shadow=shadow_model(config, endpoint_artifacts, shared),
            asynchronous=self.async_inference,
        )
        acknowledge_role_additions(serving.role_additions, settings, endpoint_name, shared)
        acknowledge_async_grants(settings, shared)
        self.serving = serving
        self.model, self.endpoint, self.shadow = serving.model, serving.endpoint, serving.shadow
        self.notifications, self.topic, self.monitoring = serving.notifications, serving.topic, serving.monitoring
        self.asynchronous, self.scaling = serving.asynchronous, serving.scaling
        self.instance_type_guard = serving.instance_type_guard
        cdk.CfnOutput(self, "EndpointName", value=endpoint_name)
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn)

    def _serve_components(
        self,
        config: AppConfig,
        artifacts: ArtifactImports,
        located: PlannedEndpoint,
        container: ServingContainer,
        endpoint_name: str,
    ) -> None:
        """`mode: inference_components`: one single-model Triton Model and component per configured model,
        from the same content-addressed archives as single-model endpoints."""
        settings = located.endpoint
        ic = settings.inference_components or InferenceComponentsSettings()
        instance = instance_type(settings.instance_type)
        served = []
        for artifact in located.models:
            name = artifact.model.name
            c = ic.components.get(name, ComponentSettings())
            copy_scaling = None
            if ic.copy_scaling:
                copy_scaling = props.COPY_SCALING.build(
                    ic.copy_scaling,
                    min_copies=0 if ic.scales_to_zero else c.copy_count,
                    max_copies=c.max_copies or c.copy_count * ic.max_instances,
                )
            served.append(
                props.SERVED_COMPONENT.build(
                    c,
                    model_name=name,
                    model_data=model_data_of(artifact, artifacts),
                    component_name=component_name(endpoint_name, name),
                    requirements=component_requirements(settings, name, instance),
                    copy_scaling=copy_scaling,
                    model_data_download_timeout_seconds=c.model_data_download_timeout_seconds
                    or settings.model_data_download_timeout_seconds,
                    container_startup_health_check_timeout_seconds=c.container_startup_health_check_timeout_seconds
                    or settings.container_startup_health_check_timeout_seconds,
                )
            )
        serving = TritonServingComponents(
            self,
            "Default",
            endpoint_name=endpoint_name,
            container=container,
            variant=props.COMPONENT_VARIANT.build(
                ic,
                instance_type=settings.instance_type,
                name=settings.variant_name,
                initial_instance_count=settings.initial_instance_count,
                inference_ami_version=requested_ami(settings, settings.instance_type),
                volume_size_gb=settings.volume_size_gb,
            ),
            components=served,
            rolling=props.COMPONENT_ROLLING.build(settings.deployment),
            rollback_alarms=settings.deployment.rollback_alarms,
            thresholds=props.ALARMS.build(settings.alarms),
            alarm_emails=config.notifications.emails,
            dashboard_name=f"triton-{endpoint_name}",
        )
        _check_update_headroom(config, settings, serving.components, instance)
        acknowledge_role_additions(serving.role_additions, settings, endpoint_name, artifacts)
        self.serving = serving
        self.endpoint, self.components = serving.endpoint, serving.components
        self.notifications, self.topic, self.monitoring = serving.notifications, serving.topic, serving.monitoring
        self.instance_type_guard = serving.instance_type_guard
        cdk.CfnOutput(self, "EndpointName", value=endpoint_name)
        cdk.CfnOutput(
            self, "InferenceComponentNames", value=",".join(c.component_name for c in self.components.values())
        )
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn)


def data_capture_prefix(endpoint_name: str) -> str:
    """Where an endpoint's data capture goes in the artifact bucket."""
    return f"{DATA_CAPTURE_PREFIX}{endpoint_name}/"


def acknowledge_role_additions(
    policy: iam.Policy | None, settings: EndpointSettings, endpoint_name: str, artifacts: ArtifactImports
) -> None:
    """cdk-nag's acknowledgement of the wildcards the pattern's `ExecutionRoleAdditions` holds (data capture's object
    keys, VPC mode's EC2 actions). cdk-nag names a wildcard finding by the resource's text: the artifact bucket ARN's
    export name, which only the app knows, keeps the acknowledgement exact."""
    applies_to = []
    if settings.data_capture.enabled:
        applies_to.append(f"Resource::{artifacts.bucket_arn_export_name}/{data_capture_prefix(endpoint_name)}*")
    if settings.vpc:
        applies_to.append("Resource::*")
    if policy is None or not applies_to:
        return
    acknowledge(
        policy,
        "AwsSolutions-IAM5",
        "Data capture writes only under this endpoint's data-capture prefix (object keys are chosen by "
        "SageMaker); the EC2 network-interface actions of VPC mode have no resource-level scoping.",
        applies_to=applies_to,
    )


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
