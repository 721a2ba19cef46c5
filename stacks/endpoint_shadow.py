"""An endpoint's `shadow:` mapped onto TritonServingEndpoint's `shadow` prop (triton_cdk/serving/shadow.py).

The shadow runs its own SageMaker Model: the shadow model's archive (built for the shadow's instance type: the stage
plan's `PlannedEndpoint.shadows`), the image of the shadow's instance (GPU or CPU), and the endpoint's execution
role, container environment, VPC and network isolation (the pattern gives it those). The execution role already
reads every archive under the model prefix (triton_cdk/artifacts.py `grant_read_models`), the shadow's included: no
further grant.
"""

from __future__ import annotations

from serving_facts.catalogue import instance_type
from stacks.artifact_plan import PlannedEndpoint
from stacks.artifact_stack import ArtifactImports
from stage_config import AppConfig
from stage_config import endpoint_props as props
from stage_config.shadow import shadow_variant_timeouts
from triton_cdk.serving import TritonModelData
from triton_cdk.serving.serving_endpoint import ShadowModel


def shadow_model(config: AppConfig, located: PlannedEndpoint, artifacts: ArtifactImports) -> ShadowModel | None:
    """The endpoint's shadow variant and the archive it serves; None without `shadow:`."""
    settings = located.endpoint
    shadow = settings.shadow
    if shadow is None:
        return None
    (artifact,) = located.shadows
    # The config's AMI for a GPU shadow; the pattern checks it or picks the one whose driver runs the release.
    ami = settings.inference_ami_version if instance_type(shadow.instance_type).has_gpu else None
    variant = props.SHADOW_VARIANT.build(shadow, inference_ami_version=ami, **shadow_variant_timeouts(settings))
    return props.SHADOW.build(
        shadow, model_data=TritonModelData.from_archive(artifacts.bucket, artifact.key), variant=variant
    )
