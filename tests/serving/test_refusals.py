"""Every serving refusal, at config load (before synth) and in the constructs, with its message."""

from __future__ import annotations

import copy

import pytest
from serving_helpers import DEV_DOCUMENT, custom_document, write_config

from stage_config import ConfigError, load_config

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


@pytest.mark.parametrize(
    "instance",
    ["ml.g4dn.xlarge", "ml.g5.12xlarge", "ml.g6.12xlarge", "ml.g6e.12xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge"],
)
def test_volume_size_on_an_nvme_only_instance(tmp_path, instance):
    """g4dn, g5, g6, g6e, p4d and p5 have NVMe instance storage only: SageMaker refuses VolumeSizeInGB there
    (SageMaker Python SDK `volume_size_supported`; CreateEndpointConfig; ../shared/README.md "Instance storage")."""
    message = refused(tmp_path, lambda d: endpoint(d, "multi-gpu").update(volume_size_gb=100, instance_type=instance))
    assert (
        f"endpoints[0]: volume_size_gb: {instance} has NVMe instance storage only (catalogue field nvme_storage_only) "
        "and SageMaker refuses VolumeSizeInGB there"
    ) in message


def test_volume_size_counts_every_variant(tmp_path):
    """Extra variants share the primary's volume size, so their instance types count too."""
    message = refused(tmp_path, lambda d: endpoint(d, "two-variants").update(volume_size_gb=20))
    assert "volume_size_gb: ml.g5.2xlarge, ml.g5.xlarge have NVMe instance storage only" in message


@pytest.mark.parametrize(
    ("deployment", "alarms", "needed"),
    [
        ({"traffic": "canary", "wait_seconds": 600}, {}, 900),
        ({"strategy": "rolling", "wait_seconds": 180}, {"period_seconds": 60, "datapoints_to_alarm": 3}, 240),
        ({"traffic": "all_at_once", "wait_seconds": 60}, {"period_seconds": 60, "datapoints_to_alarm": 1}, 120),
    ],
)
def test_rollback_alarms_that_cannot_fire_within_the_bake_time(tmp_path, deployment, alarms, needed):
    """SageMaker watches the rollback alarms while a step bakes (WaitIntervalInSeconds); an alarm reaches ALARM
    after `datapoints_to_alarm` breaching periods, and the last one is seen only once its period has closed
    and its datapoint arrived: one period more (SageMaker "Auto-Rollback Configuration and Monitoring";
    CloudWatch "Evaluating an alarm"; ../shared/README.md "Deployment guardrails")."""

    def change(d):
        e = endpoint(d, "multi-gpu")
        e["deployment"] = {"rollback_alarms": ["latency"], **deployment}
        e["alarms"] = {"evaluation_periods": 3, **alarms}

    message = refused(tmp_path, change)
    assert "deployment.wait_seconds: the bake time" in message
    assert f"shorter than the {needed} s the rollback alarms need to reach ALARM" in message


def test_no_rollback_alarms_need_no_bake_time(tmp_path):
    document = custom_document()
    endpoint(document, "multi-gpu")["deployment"] = {"wait_seconds": 0, "rollback_alarms": []}
    load_config(write_config(tmp_path, document))


def test_a_release_no_gpu_ami_runs(tmp_path):
    """Triton 26.05 needs CUDA 13.2; the newest SageMaker GPU AMI (al2023-ami-sagemaker-inference-gpu-4-1) has
    driver 580 / CUDA 13.0 (ProductionVariant.InferenceAmiVersion, botocore's SageMaker API model)."""

    def change(d):
        d["triton_release"] = "26.05"

    message = refused(tmp_path, change)
    assert "endpoints[0].instance_type: no SageMaker inference AMI has a driver for Triton 26.05 (CUDA 13.2)" in message
    assert "use a triton_release one of them runs: 23.12, 24.01, 24.03, 24.05, 24.09, 25.04, 25.09" in message
    assert "endpoints[1]" not in message  # CPU endpoints pin no AMI


def test_an_ami_too_old_for_the_release(tmp_path):
    message = refused(
        tmp_path, lambda d: endpoint(d, "multi-gpu").update(inference_ami_version="al2-ami-sagemaker-inference-gpu-3-1")
    )
    assert (
        "endpoints[0].inference_ami_version: al2-ami-sagemaker-inference-gpu-3-1 cannot run Triton 24.09 (CUDA 12.6) "
        "on ml.g5: its driver 550 runs CUDA up to 12.4; AMIs that can: al2023-ami-sagemaker-inference-gpu-4-1"
    ) in message


def test_an_unknown_ami(tmp_path):
    message = refused(tmp_path, lambda d: endpoint(d, "multi-gpu").update(inference_ami_version="al2-ami-gpu-9"))
    assert "unknown InferenceAmiVersion 'al2-ami-gpu-9'" in message
