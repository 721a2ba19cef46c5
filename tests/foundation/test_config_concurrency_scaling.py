"""Config of fast scaling on concurrency (issue #26 part 2): `autoscaling.concurrent_requests_per_model` and
`inference_components.copy_scaling.concurrent_requests_per_copy`.

Sources: botocore's application-autoscaling model (TargetTrackingScalingPolicyConfiguration.TargetValue is a
Double with no min/max, so "above 0" is the only bound: a concurrency target of 0 could never be met); SageMaker
"Define a scaling policy" ("Specify a high-resolution predefined metric").
"""

from __future__ import annotations

import botocore.session
import pytest
from config_edits import refusal, set_path, shipped, write

from stage_config import load_config

COMPONENTS = "examples/config/components.yaml"


def test_target_value_has_no_bound_in_botocore():
    model = botocore.session.get_session().get_service_model("application-autoscaling")
    target = model.shape_for("TargetTrackingScalingPolicyConfiguration").members["TargetValue"]
    assert target.type_name == "double"
    assert "min" not in target.metadata and "max" not in target.metadata


def test_a_concurrency_target_alone_is_accepted(tmp_path):
    document = shipped()
    autoscaling = document["endpoints"][0]["autoscaling"]
    autoscaling.pop("invocations_per_instance", None)
    autoscaling.pop("gpu_utilization_percent", None)
    autoscaling["concurrent_requests_per_model"] = 2.5
    config = load_config(write(tmp_path, document, "dev"))
    assert config.endpoints[0].autoscaling.concurrent_requests_per_model == 2.5


@pytest.mark.parametrize("value", [0, -3])
def test_a_concurrency_target_not_above_zero_is_refused_with_its_field(tmp_path, value):
    document = set_path(shipped(), "endpoints.0.autoscaling.concurrent_requests_per_model", value)
    message = refusal(write(tmp_path, document, "dev"))
    assert "dev.yaml: endpoints[0].autoscaling.concurrent_requests_per_model: " in message
    assert "greater than 0" in message


def test_autoscaling_without_any_target_names_the_three(tmp_path):
    document = shipped()
    autoscaling = document["endpoints"][0]["autoscaling"]
    for key in ("invocations_per_instance", "gpu_utilization_percent", "concurrent_requests_per_model"):
        autoscaling.pop(key, None)
    message = refusal(write(tmp_path, document, "dev"))
    assert "set invocations_per_instance, concurrent_requests_per_model and/or gpu_utilization_percent" in message


def _copy_scaling(**settings) -> dict:
    document = shipped(COMPONENTS)
    document["endpoints"][0]["inference_components"]["copy_scaling"] = settings
    return document


def test_copies_may_scale_on_concurrency_alone(tmp_path):
    config = load_config(write(tmp_path, _copy_scaling(concurrent_requests_per_copy=4)))
    scaling = config.endpoints[0].inference_components.copy_scaling
    assert scaling.concurrent_requests_per_copy == 4 and scaling.invocations_per_copy is None


def test_copy_scaling_needs_a_target(tmp_path):
    message = refusal(write(tmp_path, _copy_scaling(scale_in_cooldown_seconds=600)))
    assert "components.yaml: endpoints[0].inference_components.copy_scaling: " in message
    assert "set invocations_per_copy and/or concurrent_requests_per_copy" in message


def test_a_copy_concurrency_target_not_above_zero_is_refused(tmp_path):
    message = refusal(write(tmp_path, _copy_scaling(concurrent_requests_per_copy=0)))
    assert "endpoints[0].inference_components.copy_scaling.concurrent_requests_per_copy: " in message


# `metrics:` (issue #26 part 3): SageMaker API MetricsConfig, MetricPublishFrequencyInSeconds valid values
# 10, 30, 60, 120, 180, 240, 300.


def test_metrics_are_read_with_their_defaults(tmp_path):
    document = set_path(shipped(), "endpoints.0.metrics", {"enhanced": True})
    metrics = load_config(write(tmp_path, document, "dev")).endpoints[0].metrics
    assert metrics.enhanced is True and metrics.publish_frequency_seconds == 60


@pytest.mark.parametrize("seconds", [5, 45, 3600])
def test_an_undocumented_publish_frequency_is_refused_with_its_field(tmp_path, seconds):
    document = set_path(shipped(), "endpoints.0.metrics", {"publish_frequency_seconds": seconds})
    message = refusal(write(tmp_path, document, "dev"))
    assert "dev.yaml: endpoints[0].metrics.publish_frequency_seconds: " in message


def test_metrics_are_refused_on_a_component_endpoint(tmp_path):
    document = shipped(COMPONENTS)
    document["endpoints"][0]["metrics"] = {"enhanced": True}
    message = refusal(write(tmp_path, document))
    assert "metrics is not supported with mode 'inference_components'" in message
