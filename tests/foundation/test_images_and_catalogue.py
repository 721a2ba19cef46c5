"""Image URIs come from the SageMaker SDK's table; the catalogue matches ../shared/README.md."""

from __future__ import annotations

import functools

import pytest

from serving_facts import releases
from serving_facts.catalogue import INSTANCE_TYPES, UnknownInstanceTypeError, instance_type
from triton_cdk.images import _table, known_triton_releases, triton_image


def test_known_releases_are_the_sdks() -> None:
    assert known_triton_releases() == ["23.12", "24.01", "24.03", "24.05", "24.09", "25.04", "25.09", "26.05"]


def test_every_sdk_release_has_tensorrt_facts() -> None:
    # The build pins TensorRT per release; a release the SDK adds must be added there too.
    assert set(known_triton_releases()) == set(releases.RELEASES)


def test_image_uris_equal_the_sdks_retrieve_for_every_region_and_release(monkeypatch) -> None:
    image_uris = pytest.importorskip("sagemaker.core.image_uris")
    # The SDK builds a new botocore endpoint resolver (re-reading endpoints.json) on every call: 466 calls
    # cost ~35 s of CPU. One resolver answers the same (it is read-only), so the comparison is unchanged.
    from sagemaker.core import common_utils

    one_resolver = functools.cache(common_utils._botocore_resolver)
    monkeypatch.setattr(common_utils, "_botocore_resolver", one_resolver)
    checked = 0
    for release, entry in _table()["versions"].items():
        for region in entry["registries"]:
            for instance, gpu in (("ml.g5.xlarge", True), ("ml.c5.xlarge", False)):
                expected = image_uris.retrieve(
                    "sagemaker-tritonserver", region=region, version=release, instance_type=instance
                )
                assert triton_image(release, region, gpu=gpu).uri == expected
                checked += 1
    assert checked > 200


def test_unknown_region_lists_where_the_image_exists() -> None:
    expected = r"no SageMaker Triton 24\.09 image in region 'xx-east-1'; available in: af-south-1"
    with pytest.raises(ValueError, match=expected):
        triton_image("24.09", "xx-east-1", gpu=True)


# (family, GPU model, compute capability) from ../shared/README.md
SHARED_GPU_TABLE = [
    ("ml.g4dn", "T4", "7.5"),
    ("ml.g5", "A10G", "8.6"),
    ("ml.g6", "L4", "8.9"),
    ("ml.g6e", "L40S", "8.9"),
    ("ml.p3", "V100", "7.0"),
    ("ml.p4d", "A100", "8.0"),
    ("ml.p5", "H100", "9.0"),
]


@pytest.mark.parametrize(("family", "gpu", "compute_capability"), SHARED_GPU_TABLE)
def test_catalogue_gpus_match_the_shared_table(family: str, gpu: str, compute_capability: str) -> None:
    members = [i for i in INSTANCE_TYPES.values() if i.family == family]
    assert members, family
    for instance in members:
        assert instance.gpu is not None and instance.gpu_count >= 1
        assert (instance.gpu.model, instance.gpu.compute_capability) == (gpu, compute_capability)


def test_catalogue_knows_gpu_counts_and_sizes() -> None:
    assert (instance_type("ml.g5.xlarge").gpu_count, instance_type("ml.g5.xlarge").vcpus) == (1, 4)
    assert instance_type("ml.g5.12xlarge").gpu_count == 4
    assert instance_type("ml.p4d.24xlarge").gpu_count == 8
    assert instance_type("ml.c5.xlarge").has_gpu is False
    assert instance_type("ml.g5.xlarge").gpu.sm == "sm86"


def test_unknown_instance_type_suggests_close_names() -> None:
    with pytest.raises(UnknownInstanceTypeError, match=r"did you mean ml\.g5\.xlarge"):
        instance_type("ml.g5.xlrge")
