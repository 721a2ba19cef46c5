"""`shadow:` on an endpoint: a shadow variant that receives a sampled copy of live requests and whose answers are
not returned (SageMaker "Shadow tests"; the construct: triton_cdk/serving/shadow.py, which cites the API).

Where SageMaker allows no shadow (each refusal names its source):
- SageMaker "Shadow tests" > "Exclusions": serverless inference, asynchronous inference, Marketplace containers,
  multiple-container endpoints, multi-model endpoints, Inf1 (Inferentia) instances, Elastic Inference. This project
  serves neither serverless, Marketplace, multi-container nor Elastic Inference endpoints; multi-model, async and
  Inf1 are refused here.
- CreateEndpointConfig `ShadowProductionVariants`: one production variant and one shadow variant only, so
  `extra_variants` is refused.
- `deployment.strategy: rolling`: the deployment guardrails' "Exclusions" page: "If you're doing a rolling
  deployment, there are additional feature-based exclusions: ... Multi-variant inference endpoints". Whether an
  endpoint with one production and one shadow variant counts as multi-variant is not said; read cautiously, it does.
- Inference-component endpoints: their variant hosts no model (components do), while a shadow variant is a
  ProductionVariant with a ModelName; not wired in this project.
Data capture stays allowed ("Create a shadow test": "optionally turn on Data Capture to log requests and responses of
your production and shadow variants").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, PositiveInt

from serving_facts.settings import StrictModel
from stage_config.api_limits import MAX_INSTANCE_COUNT, MAX_VARIANT_NAME_LENGTH, VARIANT_NAME
from triton_cdk.serving.shadow import DEFAULT_SHADOW_VARIANT_NAME, SAMPLING_PERCENT

if TYPE_CHECKING:
    from stage_config.app import AppConfig
    from stage_config.endpoint import EndpointSettings

VARIANT_NAME_PATTERN = VARIANT_NAME.anchored
# "Shadow tests" > "Exclusions": "Endpoints that use Inf1 (Inferentia-based) instances".
EXCLUDED_INSTANCE_FAMILY = "ml.inf1."
EXCLUSIONS_SOURCE = 'SageMaker "Shadow tests" > "Exclusions"'
ROLLING_SOURCE = (
    "SageMaker deployment guardrails 'Exclusions': \"If you're doing a rolling deployment, there are additional "
    'feature-based exclusions: ... Multi-variant inference endpoints"'
)
ONE_VARIANT_SOURCE = (
    "CreateEndpointConfig ShadowProductionVariants: one variant for ProductionVariants and one for "
    "ShadowProductionVariants"
)


class ShadowSettings(StrictModel):
    """A shadow production variant (CreateEndpointConfig ShadowProductionVariants): its own model and instances."""

    model: str = Field(
        description="The shadow's model: a name from models: (another artifact), or the endpoint's own model to try "
        "it on another instance_type (built for that instance). Served single-model from its archive."
    )
    instance_type: str = Field(
        description="Instance type of the shadow variant, from the instance catalogue; may differ from the "
        "endpoint's (the shadow's artifact is built for it)."
    )
    initial_instance_count: PositiveInt = Field(
        default=1, le=MAX_INSTANCE_COUNT, description="Instances of the shadow variant, 1-1000 (not autoscaled)."
    )
    sampling_percent: int = Field(
        ge=SAMPLING_PERCENT[0],
        le=SAMPLING_PERCENT[1],
        description=f"Share of the production variant's requests copied to the shadow, in percent "
        f"({SAMPLING_PERCENT[0]}-{SAMPLING_PERCENT[1]}): the shadow's InitialVariantWeight is the production "
        "variant's initial_weight x sampling_percent / 100.",
    )
    variant_name: str = Field(
        default=DEFAULT_SHADOW_VARIANT_NAME,
        pattern=VARIANT_NAME_PATTERN,
        max_length=MAX_VARIANT_NAME_LENGTH,
        description=f"Name of the shadow variant (at most {MAX_VARIANT_NAME_LENGTH} characters), other than the "
        f"endpoint's variant_name. Default: {DEFAULT_SHADOW_VARIANT_NAME}.",
    )


def shadow_problems(endpoint: EndpointSettings) -> list[str]:
    """The endpoint settings that SageMaker refuses next to a shadow variant (messages start with the field)."""
    shadow = endpoint.shadow
    if shadow is None:
        return []
    problems = []
    if endpoint.mode == "multi_model":
        problems.append(f"shadow: multi-model endpoints cannot have a shadow variant ({EXCLUSIONS_SOURCE})")
    if endpoint.mode == "inference_components":
        problems.append(
            "shadow: not supported with mode 'inference_components' (a component endpoint's variant hosts no model; "
            "a shadow variant is a ProductionVariant with its own model)"
        )
    if endpoint.async_inference is not None:
        problems.append(f"shadow: asynchronous endpoints cannot have a shadow variant ({EXCLUSIONS_SOURCE})")
    if endpoint.extra_variants:
        problems.append(
            f"shadow: an endpoint with a shadow variant has one production variant; remove extra_variants "
            f"({ONE_VARIANT_SOURCE})"
        )
    if endpoint.deployment.strategy == "rolling":
        problems.append(
            "deployment.strategy: 'rolling' is refused beside a shadow variant (a cautious reading of "
            f"{ROLLING_SOURCE}: an endpoint with a shadow is a multi-variant endpoint); use blue_green"
        )
    for field, name in (("instance_type", endpoint.instance_type), ("shadow.instance_type", shadow.instance_type)):
        if name.startswith(EXCLUDED_INSTANCE_FAMILY):
            problems.append(f"{field}: Inf1 instances cannot take part in a shadow test ({EXCLUSIONS_SOURCE})")
    if shadow.variant_name == endpoint.variant_name:
        problems.append(
            f"shadow.variant_name: {shadow.variant_name!r} is the endpoint's variant_name; variant names are unique "
            "on an endpoint"
        )
    return problems


def shadow_cross_field_problems(config: AppConfig, path: str, endpoint: EndpointSettings) -> list[tuple[str, str]]:
    """The rules a served model and its instance type meet on the endpoint itself (known model, catalogue type, GPU
    and driver for the release, a build for the GPU, TensorRT only on GPUs), applied to the shadow's model on the
    shadow's instance type, with the shadow's field paths."""
    # stage_config.app imports this module's schema (through stage_config.endpoint): import it when called.
    from stage_config.app import _endpoint_problems
    from triton_cdk.images import known_triton_releases

    shadow = endpoint.shadow
    if shadow is None:
        return []
    alone = endpoint.model_copy(
        update={
            "models": [shadow.model],
            "instance_type": shadow.instance_type,
            "initial_instance_count": shadow.initial_instance_count,
            "mode": "single_model",
            "extra_variants": [],
            "autoscaling": None,
            "uncompressed_model_data": False,
            "shadow": None,
        }
    )
    # Only the model's and the instance's rules: the endpoint's other fields are reported on the endpoint itself.
    # The GPU host image follows the endpoint's inference_ami_version, so that field keeps its own path.
    renamed = {
        f"{path}.models": f"{path}.shadow.model",
        f"{path}.instance_type": f"{path}.shadow.instance_type",
        f"{path}.inference_ami_version": f"{path}.inference_ami_version",
    }
    model_names = {m.name for m in config.models}
    release_known = config.triton_release in known_triton_releases()
    return [
        (renamed[field], message if field != f"{path}.inference_ami_version" else f"shadow: {message}")
        for field, message in _endpoint_problems(config, path, alone, model_names, release_known)
        if field in renamed
    ]


def shadow_variant_timeouts(endpoint: EndpointSettings) -> dict[str, int | None]:
    """The endpoint's download and start-up timeouts, which the shadow variant gets too (its volume keeps
    SageMaker's default: the endpoint's volume_size_gb may not suit the shadow's instance type)."""
    return {
        "model_data_download_timeout_seconds": endpoint.model_data_download_timeout_seconds,
        "container_startup_health_check_timeout_seconds": endpoint.container_startup_health_check_timeout_seconds,
    }
