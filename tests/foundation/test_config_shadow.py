"""`shadow:` on an endpoint (issue #26 part 4): the schema, and the refusals where SageMaker allows no shadow.

Sources:
- botocore's sagemaker model, CreateEndpointConfig `ShadowProductionVariants` (a ProductionVariant list): "If you use
  this field, you can only specify one variant for ProductionVariants and one variant for ShadowProductionVariants".
- SageMaker developer guide "Create a shadow test": at most one shadow variant and one production variant; the
  share of requests copied is the traffic sampling percentage; Data Capture may log both variants.
- SageMaker developer guide "Shadow tests" > "Exclusions": serverless inference, asynchronous inference, Marketplace
  containers, multiple-container endpoints, multi-model endpoints, Inf1 instances, Elastic Inference.
- InferenceExperiment ShadowModelVariantConfig.SamplingPercentage: at most 100.
"""

from __future__ import annotations

import re

import botocore.session
import pytest
from config_edits import refusal, set_path, shipped, write

from stage_config import load_config
from stage_config.shadow import EXCLUSIONS_SOURCE

COMPONENTS = "examples/config/components.yaml"
# config/dev.yaml: endpoints[1] is triton-bert (single_model, bert_base on ml.g5.xlarge), endpoints[0] triton-mme.
BERT = "endpoints.1"
SHADOW = {"model": "yolov5s", "instance_type": "ml.g5.2xlarge", "sampling_percent": 25}


def _with_shadow(shadow: dict | None = None, at: str = BERT, document: dict | None = None) -> dict:
    return set_path(document or shipped(), f"{at}.shadow", dict(shadow or SHADOW))


def test_botocore_allows_one_production_and_one_shadow_variant():
    """The rule the config and the construct encode, as botocore's CreateEndpointConfig documents it."""
    operation = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateEndpointConfig")
    shadows = operation.input_shape.members["ShadowProductionVariants"]
    assert shadows.member.name == "ProductionVariant"
    text = re.sub(r"<[^>]+>", "", shadows.documentation)
    assert "one variant for ProductionVariants and one variant for ShadowProductionVariants" in text


def test_a_shadow_is_read_with_its_documented_defaults(tmp_path):
    shadow = load_config(write(tmp_path, _with_shadow(), "dev")).endpoints[1].shadow
    assert (shadow.model, shadow.instance_type, shadow.sampling_percent) == ("yolov5s", "ml.g5.2xlarge", 25)
    assert shadow.initial_instance_count == 1 and shadow.variant_name == "Shadow"


def test_the_same_model_on_another_instance_type_is_a_shadow(tmp_path):
    """ "Shadow tests": a change to the model, the container or the instance may be tested."""
    document = _with_shadow({"model": "bert_base", "instance_type": "ml.g6.xlarge", "sampling_percent": 100})
    assert load_config(write(tmp_path, document, "dev")).endpoints[1].shadow.instance_type == "ml.g6.xlarge"


@pytest.mark.parametrize("percent", [0, 101, -5])
def test_a_sampling_percentage_outside_1_to_100_is_refused(tmp_path, percent):
    message = refusal(write(tmp_path, _with_shadow({**SHADOW, "sampling_percent": percent}), "dev"))
    assert "endpoints[1].shadow.sampling_percent: " in message


def test_the_sampling_percentage_is_required(tmp_path):
    shadow = {k: v for k, v in SHADOW.items() if k != "sampling_percent"}
    assert "endpoints[1].shadow.sampling_percent: " in refusal(write(tmp_path, _with_shadow(shadow), "dev"))


def test_a_multi_model_endpoint_cannot_have_a_shadow(tmp_path):
    """ "Shadow tests" > "Exclusions": multi-model endpoints."""
    message = refusal(write(tmp_path, _with_shadow(at="endpoints.0"), "dev"))
    assert "multi-model endpoints cannot have a shadow variant" in message and EXCLUSIONS_SOURCE in message


def test_extra_variants_and_a_shadow_are_refused(tmp_path):
    """CreateEndpointConfig ShadowProductionVariants: one production variant beside a shadow."""
    document = set_path(_with_shadow(), f"{BERT}.extra_variants", [{"name": "Big", "instance_type": "ml.g5.2xlarge"}])
    message = refusal(write(tmp_path, document, "dev"))
    assert "an endpoint with a shadow variant has one production variant; remove extra_variants" in message


def test_a_rolling_deployment_and_a_shadow_are_refused(tmp_path):
    """SageMaker deployment guardrails "Exclusions": "If you're doing a rolling deployment, there are additional
    feature-based exclusions: ... Multi-variant inference endpoints"; an endpoint with a shadow variant has two
    variants, so a cautious reading refuses rolling beside a shadow, and the message says it is one and names the
    source. blue_green stays allowed."""
    document = set_path(_with_shadow(), f"{BERT}.deployment.strategy", "rolling")
    message = refusal(write(tmp_path, document, "dev"))
    assert "deployment.strategy: 'rolling' is refused beside a shadow variant (a cautious reading" in message
    assert "Multi-variant inference endpoints" in message
    load_config(write(tmp_path, set_path(_with_shadow(), f"{BERT}.deployment.strategy", "blue_green"), "dev"))


def test_a_component_endpoint_cannot_have_a_shadow(tmp_path):
    document = shipped(COMPONENTS)
    document["endpoints"][0]["shadow"] = {**SHADOW, "model": document["endpoints"][0]["models"][0]}
    assert "shadow: not supported with mode 'inference_components'" in refusal(write(tmp_path, document))


def test_an_inf1_shadow_is_refused(tmp_path):
    """ "Shadow tests" > "Exclusions": endpoints that use Inf1 (Inferentia-based) instances."""
    message = refusal(write(tmp_path, _with_shadow({**SHADOW, "instance_type": "ml.inf1.xlarge"}), "dev"))
    assert "shadow.instance_type: Inf1 instances cannot take part in a shadow test" in message


def test_the_shadow_variant_name_must_differ_from_the_production_variant(tmp_path):
    message = refusal(write(tmp_path, _with_shadow({**SHADOW, "variant_name": "AllTraffic"}), "dev"))
    assert "shadow.variant_name: 'AllTraffic' is the endpoint's variant_name" in message


def test_an_unknown_shadow_model_is_refused_with_its_field(tmp_path):
    message = refusal(write(tmp_path, _with_shadow({**SHADOW, "model": "gpt9"}), "dev"))
    assert "endpoints[1].shadow.model: unknown model 'gpt9'" in message


def test_a_tensorrt_shadow_on_a_cpu_instance_is_refused_with_its_field(tmp_path):
    """The endpoint's own model rules apply to the shadow's model on the shadow's instance (TensorRT needs a GPU)."""
    message = refusal(write(tmp_path, _with_shadow({**SHADOW, "instance_type": "ml.c5.xlarge"}), "dev"))
    assert "endpoints[1].shadow.instance_type: model 'yolov5s' is a TensorRT plan and needs a GPU instance" in message


def test_an_unknown_shadow_instance_type_is_refused_with_its_field(tmp_path):
    message = refusal(write(tmp_path, _with_shadow({**SHADOW, "instance_type": "ml.zz9.xlarge"}), "dev"))
    assert "endpoints[1].shadow.instance_type: " in message


def test_data_capture_stays_allowed_with_a_shadow(tmp_path):
    """ "Create a shadow test": Data Capture may log the requests and responses of both variants."""
    document = set_path(_with_shadow(), f"{BERT}.data_capture", {"enabled": True})
    assert load_config(write(tmp_path, document, "dev")).endpoints[1].data_capture.enabled


def test_an_asynchronous_endpoint_cannot_have_a_shadow(tmp_path):
    """ "Shadow tests" > "Exclusions": asynchronous inference."""
    document = shipped("examples/config/async.yaml")
    endpoint = document["endpoints"][0]
    endpoint["shadow"] = {
        "model": endpoint["models"][0],
        "instance_type": endpoint["instance_type"],
        "sampling_percent": 10,
    }
    message = refusal(write(tmp_path, document))
    assert "shadow: asynchronous endpoints cannot have a shadow variant" in message and EXCLUSIONS_SOURCE in message
