"""Build/serve matching: every catalogue family, fleets, Volta and release support, refusals."""

from __future__ import annotations

import pytest

from serving_facts.catalogue import INSTANCE_TYPES, instance_type
from serving_facts.matching import BuildMatchError, match_build
from stage_config.build import ReservedFleet

FLEET_ARN = "arn:aws:codebuild:us-east-1:111111111111:fleet/t4-fleet:abc"


def fleet(gpu: str) -> ReservedFleet:
    return ReservedFleet(arn=FLEET_ARN, gpu=gpu)


def test_g5_builds_on_the_small_a10g_with_an_exact_engine():
    plan = match_build(instance_type("ml.g5.xlarge"), "24.09")
    assert (plan.compute, plan.build_gpu.model, plan.hardware_compatibility) == ("BUILD_GENERAL1_SMALL", "A10G", "none")
    assert plan.gpu_target == "sm86"
    assert plan.expected_compute_capability == "8.6"
    assert plan.fleet_arn is None


@pytest.mark.parametrize("name", ["ml.g6.xlarge", "ml.g6e.2xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge"])
@pytest.mark.parametrize("release", ["24.09", "25.04"])
def test_ampere_or_newer_targets_build_on_the_a10g_with_ampere_plus(name, release):
    plan = match_build(instance_type(name), release)
    assert (plan.compute, plan.build_gpu.model, plan.hardware_compatibility) == (
        "BUILD_GENERAL1_SMALL",
        "A10G",
        "ampere+",
    )
    assert plan.gpu_target == "ampere+"
    # The build checks the host it runs on, which is the A10G, not the serving GPU.
    assert plan.expected_compute_capability == "8.6"


def test_p3_builds_on_the_large_v100_with_a_release_that_supports_volta():
    plan = match_build(instance_type("ml.p3.2xlarge"), "24.09")
    assert (plan.compute, plan.build_gpu.model, plan.hardware_compatibility) == ("BUILD_GENERAL1_LARGE", "V100", "none")
    assert plan.gpu_target == "sm70"
    assert plan.expected_compute_capability == "7.0"


def test_p3_with_a_release_that_dropped_volta_is_refused():
    with pytest.raises(
        BuildMatchError,
        match=r"Triton 25\.04 ships TensorRT 10\.9\.0\.34, which no longer supports "
        r"Volta \(V100\); use triton_release 24\.09 or older for ml\.p3",
    ):
        match_build(instance_type("ml.p3.2xlarge"), "25.04")


def test_g4dn_without_a_fleet_is_refused_with_every_option():
    with pytest.raises(BuildMatchError) as raised:
        match_build(instance_type("ml.g4dn.xlarge"), "24.09")
    message = str(raised.value)
    assert message.startswith("ml.g4dn.xlarge (T4) cannot be matched. Options:")
    for option in (
        "serve on ml.g5",
        "ampere+",
        "build.fleet",
        "ml.p3",
        "ml.g4dn only with build.fleet of T4 hosts",
        "onnxruntime_onnx",
    ):
        assert option in message


def test_g4dn_with_a_t4_fleet_builds_exactly_on_the_fleet():
    plan = match_build(instance_type("ml.g4dn.2xlarge"), "24.09", fleet("T4"))
    assert (plan.compute, plan.build_gpu.model, plan.hardware_compatibility) == ("fleet", "T4", "none")
    assert plan.fleet_arn == FLEET_ARN
    assert plan.gpu_target == "sm75"
    assert plan.expected_compute_capability == "7.5"


def test_a_fleet_of_the_serving_gpu_gives_an_exact_engine():
    plan = match_build(instance_type("ml.g6.xlarge"), "24.09", fleet("L4"))
    assert (plan.compute, plan.hardware_compatibility, plan.gpu_target) == ("fleet", "none", "sm89")


def test_an_ampere_fleet_builds_ampere_plus_for_another_ampere_gpu():
    plan = match_build(instance_type("ml.p5.48xlarge"), "24.09", fleet("A10G"))
    assert (plan.compute, plan.hardware_compatibility, plan.gpu_target) == ("fleet", "ampere+", "ampere+")
    assert plan.expected_compute_capability == "8.6"


def test_a_fleet_whose_gpu_cannot_serve_the_target_is_refused():
    with pytest.raises(
        BuildMatchError,
        match=r"build\.fleet has A10G hosts \(compute capability 8\.6\), which cannot "
        r"build engines for ml\.g4dn\.xlarge \(T4, 7\.5\)\. ml\.g4dn\.xlarge \(T4\) cannot be matched",
    ):
        match_build(instance_type("ml.g4dn.xlarge"), "24.09", fleet("A10G"))


def test_a_t4_fleet_cannot_serve_a_volta_target():
    with pytest.raises(BuildMatchError, match=r"build\.fleet has T4 hosts .* ml\.p3\.2xlarge \(V100, 7\.0\)"):
        match_build(instance_type("ml.p3.2xlarge"), "24.09", fleet("T4"))


def test_an_unknown_fleet_gpu_is_refused_with_the_known_gpus():
    with pytest.raises(BuildMatchError, match=r"build\.fleet\.gpu 'K80' is not a known GPU; use one of T4, A10G, L4"):
        match_build(instance_type("ml.g5.xlarge"), "24.09", fleet("K80"))


@pytest.mark.parametrize("name", ["ml.c5.xlarge", "ml.m5.2xlarge"])
def test_cpu_instances_have_no_engine_build(name):
    with pytest.raises(BuildMatchError, match=rf"{name} \(no GPU\) cannot be matched. Options: .*onnxruntime_onnx"):
        match_build(instance_type(name), "24.09")


def test_every_gpu_instance_in_the_catalogue_is_matched_or_refused_with_options():
    """No GPU type falls through: each gets a plan or the list of options."""
    for instance in INSTANCE_TYPES.values():
        if not instance.has_gpu:
            continue
        try:
            plan = match_build(instance, "24.09")
        except BuildMatchError as error:
            assert instance.family == "ml.g4dn", instance.name
            assert "Options:" in str(error)
        else:
            assert plan.build_gpu.compute_capability == "8.6" or plan.build_gpu.model == "V100"
            if plan.hardware_compatibility == "none":
                assert plan.build_gpu == instance.gpu, instance.name
            else:
                assert instance.gpu.is_ampere_or_newer, instance.name
