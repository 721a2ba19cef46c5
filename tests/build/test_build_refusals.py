"""Synth refusals: every build/serve pair that cannot be matched stops at config loading (before
any stack exists, as `cdk synth` runs it through app.py), naming the field and the options."""

from __future__ import annotations

import pytest
from build_helpers import FLEET_ARN, write_configs

from triton_cdk.config import ConfigError, load_config


def document(instance_type: str, *, release: str = "24.09", fleet: dict | None = None, **build) -> dict:
    if fleet is not None:
        build["fleet"] = fleet
    return {
        "stage": "refused",
        "triton_release": release,
        "build": build,
        "models": [{"name": "resnet50", "source": {"export": "resnet50"}, "platform": "tensorrt_plan"}],
        "endpoints": [{"name": "ep", "mode": "single_model", "models": ["resnet50"], "instance_type": instance_type}],
    }


def refusal(tmp_path, doc: dict) -> str:
    path = write_configs(tmp_path, doc) / "refused.yaml"
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    return str(raised.value)


OPTIONS = (
    "Options: serve on ml.g5 (built on CodeBuild's A10G, exact match); serve on ml.g6/g6e/p4d/p5 (A10G build with "
    "hardware compatibility ampere+, or build.fleet with hosts of the same GPU); serve on ml.p3 (CodeBuild's V100, "
    "Triton releases up to 24.09); serve on ml.g4dn only with build.fleet of T4 hosts; or use platform "
    "onnxruntime_onnx, which needs no GPU build"
)


@pytest.mark.parametrize("size", ["xlarge", "2xlarge", "12xlarge"])
def test_g4dn_without_a_fleet_is_refused_with_the_options(tmp_path, size):
    message = refusal(tmp_path, document(f"ml.g4dn.{size}"))
    assert f"refused.yaml: endpoints[0].instance_type: ml.g4dn.{size} (T4) cannot be matched. {OPTIONS}" in message


def test_p3_with_a_release_without_volta_is_refused(tmp_path):
    # The release check comes first (the matcher's own Volta message is in test_build_matching).
    message = refusal(tmp_path, document("ml.p3.2xlarge", release="25.04"))
    assert (
        "endpoints[0].instance_type: Triton 25.04 does not support V100 (compute capability 7.0); pick a newer GPU "
        "or an older triton_release" in message
    )


@pytest.mark.parametrize(
    ("instance", "fleet_gpu", "served"),
    [
        ("ml.g5.xlarge", "T4", "ml.g5.xlarge (A10G, 8.6)"),
        ("ml.p5.48xlarge", "T4", "ml.p5.48xlarge (H100, 9.0)"),
        ("ml.g4dn.xlarge", "A10G", "ml.g4dn.xlarge (T4, 7.5)"),
        ("ml.p3.2xlarge", "L4", "ml.p3.2xlarge (V100, 7.0)"),
    ],
)
def test_a_fleet_that_cannot_serve_the_target_is_refused(tmp_path, instance, fleet_gpu, served):
    message = refusal(tmp_path, document(instance, fleet={"arn": FLEET_ARN, "gpu": fleet_gpu}))
    assert f"build.fleet has {fleet_gpu} hosts" in message
    assert f"which cannot build engines for {served}." in message
    assert OPTIONS in message


def test_a_fleet_of_an_unknown_gpu_is_refused(tmp_path):
    message = refusal(tmp_path, document("ml.g4dn.xlarge", fleet={"arn": FLEET_ARN, "gpu": "K80"}))
    assert "build.fleet.gpu 'K80' is not a known GPU; use one of T4, A10G, L4, L40S, V100, A100, H100" in message


def test_a_tensorrt_model_on_a_cpu_instance_is_refused(tmp_path):
    message = refusal(tmp_path, document("ml.c5.xlarge"))
    assert "model 'resnet50' is a TensorRT plan and needs a GPU instance; ml.c5.xlarge has none" in message


def test_a_fleet_arn_must_be_a_codebuild_fleet(tmp_path):
    message = refusal(
        tmp_path, document("ml.g4dn.xlarge", fleet={"arn": "arn:aws:ec2:us-east-1:1:fleet/x", "gpu": "T4"})
    )
    assert "build.fleet.arn: String should match pattern" in message


def test_waiting_longer_than_cloudformation_allows_is_refused(tmp_path):
    message = refusal(tmp_path, document("ml.g5.xlarge", artifact_wait_minutes=120))
    assert "build.artifact_wait_minutes: Input should be less than or equal to 60 (got 120)" in message


def test_a_log_retention_cloudwatch_does_not_offer_is_refused(tmp_path):
    message = refusal(tmp_path, document("ml.g5.xlarge", log_retention_days=31))
    assert "build.log_retention_days: CloudWatch Logs does not offer 31 days; use one of 1, 3, 5, 7, 14, 30" in message


@pytest.mark.parametrize(
    ("instance", "fleet_gpu"),
    [("ml.g4dn.xlarge", "T4"), ("ml.g6.xlarge", "L4"), ("ml.p4d.24xlarge", "A10G"), ("ml.g5.xlarge", None)],
)
def test_matched_pairs_load(tmp_path, instance, fleet_gpu):
    fleet = {"arn": FLEET_ARN, "gpu": fleet_gpu} if fleet_gpu else None
    assert load_config(write_configs(tmp_path, document(instance, fleet=fleet)) / "refused.yaml").endpoints
