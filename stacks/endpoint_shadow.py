"""An endpoint's `shadow:` mapped onto the serving constructs (triton_cdk/serving/shadow.py), for EndpointStack.

The shadow runs its own SageMaker Model: the shadow model's archive (built for the shadow's instance type: the stage
plan's `PlannedEndpoint.shadows`), the image of the shadow's instance (GPU or CPU), and the endpoint's execution
role, container environment, VPC and network isolation. The execution role already reads every archive under the
model prefix (triton_cdk/artifacts.py `grant_read_models`), the shadow's included: no further grant.
"""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from constructs import Construct

from serving_facts import drivers
from serving_facts.catalogue import instance_type
from stacks.artifact_plan import PlannedEndpoint
from stacks.artifact_stack import ArtifactImports
from stacks.container_environment import container_environment
from stage_config import AppConfig
from stage_config import endpoint_props as props
from stage_config.shadow import shadow_variant_timeouts
from triton_cdk.images import TritonImageLookup
from triton_cdk.serving import ProductionVariant, TritonModel, TritonModelData
from triton_cdk.serving.shadow import ShadowComparison, ShadowVariant


def shadow_variant(
    scope: Construct,
    config: AppConfig,
    located: PlannedEndpoint,
    artifacts: ArtifactImports,
    image: TritonImageLookup,
    role_additions: iam.Policy | None,
) -> ShadowVariant | None:
    """The endpoint's shadow variant and its model (construct id `ShadowModel`); None without `shadow:`."""
    settings = located.endpoint
    shadow = settings.shadow
    if shadow is None:
        return None
    (artifact,) = located.shadows
    instance = instance_type(shadow.instance_type)
    model = TritonModel(
        scope,
        "ShadowModel",
        image_uri=image.image_uri(gpu=instance.has_gpu),
        model_data=TritonModelData.from_archive(artifacts.bucket, artifact.key),
        execution_role=artifacts.execution_role,
        default_model_name=shadow.model,
        environment=container_environment(settings.container),
        vpc=props.VPC.build(settings.vpc) if settings.vpc else None,
        network_isolation=settings.network_isolation,
    )
    if role_additions is not None:
        model.node.add_dependency(role_additions)
    ami = None
    if instance.has_gpu:
        ami = drivers.ami_for(config.triton_release, instance.family, requested=settings.inference_ami_version).name
    variant = ProductionVariant(
        name=shadow.variant_name,
        instance_type=shadow.instance_type,
        initial_instance_count=shadow.initial_instance_count,
        inference_ami_version=ami,
        **shadow_variant_timeouts(settings),
    )
    return ShadowVariant(model=model, variant=variant, sampling_percent=shadow.sampling_percent)


def shadow_comparison(
    scope: Construct,
    endpoint_name: str,
    production_variant: str,
    shadow: ShadowVariant,
    dashboard: cloudwatch.Dashboard,
) -> ShadowComparison:
    """Dashboard rows comparing the shadow with production (construct id `ShadowComparison`); no alarm."""
    return ShadowComparison(
        scope,
        "ShadowComparison",
        endpoint_name=endpoint_name,
        production_variant=production_variant,
        shadow_variant=shadow.variant.name,
        dashboard=dashboard,
    )
