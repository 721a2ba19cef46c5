"""Every serving refusal, at config load (before synth) and in the constructs, with its message."""

from __future__ import annotations

import copy

import pytest
from serving_helpers import DEV_DOCUMENT, custom_document, write_config

from triton_cdk.config import ConfigError, load_config

CPU_PYTHON = 1  # index of the cpu-python endpoint in the custom document


def refused(tmp_path, change) -> str:
    document = custom_document()
    change(document)
    with pytest.raises(ConfigError) as error:
        load_config(write_config(tmp_path, document))
    return str(error.value)


def endpoint(document: dict, name: str) -> dict:
    return next(e for e in document["endpoints"] if e["name"] == name)


def test_the_custom_document_itself_loads(tmp_path):
    assert [e.name for e in load_config(write_config(tmp_path, custom_document())).endpoints] == [
        "multi-gpu",
        "cpu-python",
        "cpu-mme",
        "two-variants",
    ]


def test_multi_model_on_a_multi_gpu_instance(tmp_path):
    message = refused(
        tmp_path,
        lambda d: endpoint(d, "cpu-mme").update(instance_type="ml.g5.12xlarge", models=["resnet50", "yolov5s"]),
    )
    assert "endpoints[2].instance_type" in message
    assert "multi-model endpoints need a single-GPU instance; ml.g5.12xlarge has 4 GPUs" in message


def test_gpu_scaling_on_a_cpu_instance(tmp_path):
    message = refused(tmp_path, lambda d: endpoint(d, "cpu-python")["autoscaling"].update(gpu_utilization_percent=60))
    assert "endpoints[1].autoscaling.gpu_utilization_percent" in message
    assert "GPU scaling needs a GPU instance; ml.c5.xlarge has none" in message


def test_tensorrt_model_on_a_cpu_instance(tmp_path):
    message = refused(tmp_path, lambda d: endpoint(d, "cpu-python").update(models=["bert_base"]))
    assert "model 'bert_base' is a TensorRT plan and needs a GPU instance; ml.c5.xlarge has none" in message


def test_rolling_deployment_on_a_multi_variant_endpoint(tmp_path):
    message = refused(tmp_path, lambda d: endpoint(d, "two-variants").update(deployment={"strategy": "rolling"}))
    assert "deployment.strategy 'rolling' is not supported on an endpoint with several variants" in message
    assert "AllTraffic, Larger" in message


@pytest.mark.parametrize("traffic", ["canary", "linear"])
def test_canary_or_linear_without_rollback_alarms(tmp_path, traffic):
    message = refused(
        tmp_path,
        lambda d: endpoint(d, "cpu-python").update(
            deployment={"strategy": "blue_green", "traffic": traffic, "rollback_alarms": []}
        ),
    )
    assert (
        f"traffic '{traffic}' without rollback_alarms would shift all traffic even when the new fleet fails" in message
    )


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("model_data_download_timeout_seconds", 59, "greater than or equal to 60"),
        ("model_data_download_timeout_seconds", 3601, "less than or equal to 3600"),
        ("container_startup_health_check_timeout_seconds", 30, "greater than or equal to 60"),
        ("container_startup_health_check_timeout_seconds", 7200, "less than or equal to 3600"),
        ("volume_size_gb", 513, "less than or equal to 512"),
    ],
)
def test_timeouts_and_volume_outside_sagemaker_ranges(tmp_path, field, value, allowed):
    message = refused(tmp_path, lambda d: endpoint(d, "multi-gpu").update({field: value}))
    assert f"endpoints.0.{field}" in message or f"endpoints[0].{field}" in message
    assert allowed in message


@pytest.mark.parametrize(
    ("deployment", "allowed"),
    [
        ({"traffic": "canary", "canary_percent": 60}, "less than or equal to 50"),
        ({"traffic": "linear", "linear_step_percent": 5}, "greater than or equal to 10"),
        ({"strategy": "rolling", "rolling_batch_percent": 75}, "less than or equal to 50"),
        ({"traffic": "canary", "canary_percent": 12.5}, "valid integer"),
    ],
)
def test_traffic_step_sizes_outside_sagemaker_ranges(tmp_path, deployment, allowed):
    message = refused(tmp_path, lambda d: endpoint(d, "cpu-python")["deployment"].update(deployment))
    assert allowed in message


def test_extra_variant_needs_the_primary_gpu(tmp_path):
    message = refused(
        tmp_path, lambda d: endpoint(d, "two-variants")["extra_variants"][0].update(instance_type="ml.g4dn.xlarge")
    )
    assert "extra_variants 'Larger': ml.g4dn.xlarge must have the same GPU as ml.g5.xlarge (A10G)" in message


def test_duplicate_variant_names(tmp_path):
    message = refused(tmp_path, lambda d: endpoint(d, "two-variants")["extra_variants"][0].update(name="AllTraffic"))
    assert "variant names must be unique on an endpoint, got ['AllTraffic'] twice" in message


@pytest.mark.parametrize(
    ("name", "alarm", "expected"),
    [
        ("cpu-python", "gpu_memory", "'gpu_memory' needs a GPU instance; ml.c5.xlarge has none"),
        ("multi-gpu", "disk", "'disk' is alarmed on multi-model endpoints only"),
    ],
)
def test_rollback_alarm_that_the_endpoint_does_not_have(tmp_path, name, alarm, expected):
    message = refused(tmp_path, lambda d: endpoint(d, name)["deployment"].update(rollback_alarms=[alarm]))
    assert expected in message


def test_default_config_still_loads_unchanged(tmp_path):
    assert load_config(write_config(tmp_path, copy.deepcopy(DEV_DOCUMENT))).endpoints[0].variant_name == "AllTraffic"
