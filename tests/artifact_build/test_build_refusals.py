"""Synth refusals: every build/serve pair that cannot be matched stops at config loading (before
any stack exists, as `cdk synth` runs it through app.py), naming the field and the options."""

from __future__ import annotations

import pytest
from build_helpers import FLEET_ARN, write_configs

from stage_config import ConfigError, load_config


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


def test_the_removed_wait_setting_is_refused_with_what_replaced_it(tmp_path):
    message = refusal(tmp_path, document("ml.g5.xlarge", artifact_wait_minutes=45))
    assert (
        "refused.yaml: build: artifact_wait_minutes is no longer used: a deployment now waits for the build" in message
    )


def test_a_build_longer_than_a_wait_condition_can_wait_is_refused(tmp_path):
    """AWS::CloudFormation::WaitCondition (CloudFormation template reference): Timeout at most 43200 s (12 h)."""
    message = refusal(tmp_path, document("ml.g5.xlarge", timeout_minutes=700, queue_timeout_minutes=60))
    assert (
        "queue_timeout_minutes + timeout_minutes + 15 = 775 minutes, but a deployment can wait for a build at most "
        "720 minutes (CloudFormation's WaitCondition limit of 12 hours)" in message
    )


def regional(document_: dict, region: str) -> dict:
    return {**document_, "region": region, "account": "111111111111"}


@pytest.mark.parametrize("region", ["sa-east-1", "ap-south-1", "eu-north-1", "us-west-1"])
def test_a_region_without_gpu_codebuild_is_refused_with_the_alternatives(tmp_path, region):
    """LINUX_GPU_CONTAINER exists only in some regions (CodeBuild API reference, ProjectEnvironment.type;
    triton_cdk/artifact_build/gpu_regions.py)."""
    message = refusal(tmp_path, regional(document("ml.g5.xlarge"), region))
    assert (
        f"refused.yaml: region: endpoints[0] needs a GPU build: CodeBuild has no on-demand GPU builds "
        f"(BUILD_GENERAL1_SMALL, A10G) in {region}" in message
    )
    assert "regions with them: us-east-1, us-east-2, us-west-2, ca-central-1, eu-west-1, eu-west-2" in message


def test_a_region_without_gpu_fleets_is_refused_for_a_fleet_build(tmp_path):
    fleet = {"arn": "arn:aws:codebuild:ap-southeast-1:111111111111:fleet/t4:1", "gpu": "T4"}
    message = refusal(tmp_path, regional(document("ml.g4dn.xlarge", fleet=fleet), "ap-southeast-1"))
    assert "CodeBuild has no GPU reserved-capacity fleets (LINUX_GPU_CONTAINER) in ap-southeast-1" in message


def test_a_fleet_in_another_region_is_refused(tmp_path):
    message = refusal(
        tmp_path, regional(document("ml.g4dn.xlarge", fleet={"arn": FLEET_ARN, "gpu": "T4"}), "eu-west-1")
    )
    assert (
        "build.fleet.arn: the fleet is in us-east-1 but this stage deploys to eu-west-1; a CodeBuild project can "
        "only use a fleet of its own region" in message
    )


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1", "ap-northeast-1"])
def test_a_region_with_gpu_codebuild_loads(tmp_path, region):
    assert load_config(write_configs(tmp_path, regional(document("ml.g5.xlarge"), region)) / "refused.yaml").region


def test_a_stage_that_only_promotes_needs_no_gpu_codebuild(tmp_path):
    source = {**regional(document("ml.g5.xlarge"), "us-east-1"), "stage": "src"}
    target = {**regional(document("ml.g5.xlarge"), "sa-east-1"), "stage": "refused", "promote_from": "src"}
    write_configs(tmp_path, source)
    assert load_config(write_configs(tmp_path, target) / "refused.yaml").region == "sa-east-1"


def test_the_region_table_names_its_source_and_pins_the_documented_regions():
    from triton_cdk.artifact_build import gpu_regions

    assert "ProjectEnvironment.type" in gpu_regions.__doc__ and "CreateFleet.environmentType" in gpu_regions.__doc__
    assert set(gpu_regions.FLEET_GPU_REGIONS) <= set(gpu_regions.ON_DEMAND_GPU_REGIONS)
    assert "sa-east-1" not in gpu_regions.ON_DEMAND_GPU_REGIONS


def test_the_fleet_region_table_matches_botocores_codebuild_model():
    """botocore ships the CodeBuild API reference text: the fleet list must be the one it documents."""
    import re

    import botocore.session

    from triton_cdk.artifact_build.gpu_regions import FLEET_GPU_REGIONS

    shape = botocore.session.get_session().get_service_model("codebuild").shape_for("CreateFleetInput")
    text = " ".join(re.sub("<[^>]+>", " ", shape.members["environmentType"].documentation).split())
    sentence = re.search(r"LINUX_GPU_CONTAINER is available only in regions (.+?\))\.", text).group(1)
    names = {
        "US East (N. Virginia)": "us-east-1",
        "US East (Ohio)": "us-east-2",
        "US West (Oregon)": "us-west-2",
        "EU (Ireland)": "eu-west-1",
        "EU (Frankfurt)": "eu-central-1",
        "Asia Pacific (Tokyo)": "ap-northeast-1",
        "Asia Pacific (Sydney)": "ap-southeast-2",
    }
    documented = {names[n.strip().removeprefix("and ").strip()] for n in sentence.split(",")}
    assert documented == set(FLEET_GPU_REGIONS)


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


def test_a_stage_without_gpu_builds_may_use_any_region(tmp_path):
    """Models packaged on the CPU project (ONNX Runtime on a CPU instance) need no LINUX_GPU_CONTAINER."""
    doc = regional(document("ml.c5.xlarge"), "sa-east-1")
    doc["models"][0].update(platform="onnxruntime_onnx", instance_groups=[{"kind": "KIND_CPU", "count": 1}])
    assert load_config(write_configs(tmp_path, doc) / "refused.yaml").region == "sa-east-1"
