"""`mode: inference_components` without an `inference_components:` block takes the documented default (one
instance, no copy scaling) and is judged by the components' rules, instead of failing with an AttributeError."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from stage_config.endpoint import EndpointSettings, InferenceComponentsSettings


def _endpoint(**overrides) -> dict:
    return {"name": "components", "mode": "inference_components", "models": ["a"], **overrides}


def test_left_out_block_takes_the_documented_default():
    endpoint = EndpointSettings.model_validate(_endpoint(instance_type="ml.c5.4xlarge"))
    assert endpoint.inference_components == InferenceComponentsSettings()


def test_left_out_block_is_still_judged_by_the_component_rules():
    with pytest.raises(ValidationError) as raised:
        EndpointSettings.model_validate(_endpoint(instance_type="ml.g5.xlarge"))
    assert "inference_components" in str(raised.value)
    assert "AttributeError" not in str(raised.value)
