"""Each SageMaker name pattern and limit lives once, in the construct library (triton_cdk/api_limits.py), read from
botocore's service model; the config schema and the constructs use that one definition (issue #23 item 4).

Source: botocore's sagemaker service model (shapes EndpointName, VariantName, InferenceComponentName,
ProductionVariantVolumeSizeInGB, ProductionVariant*TimeoutInSeconds, SamplingPercentage), read here through
botocore's own session, independently of triton_cdk/api_limits.py's loader.
"""

from __future__ import annotations

import botocore.session
import pytest

from stage_config import api_limits as schema_limits
from stage_config import async_inference as async_schema
from stage_config import endpoint as schema
from stage_config import shadow as shadow_schema
from triton_cdk import api_limits
from triton_cdk.serving import async_inference as async_construct
from triton_cdk.serving import component_sizing
from triton_cdk.serving.endpoint import ProductionVariant
from triton_cdk.serving.inference_components import ComponentVariant

SAGEMAKER = botocore.session.get_session().get_service_model("sagemaker")


@pytest.mark.parametrize(
    ("limits", "shape"),
    [
        (api_limits.ENDPOINT_NAME, "EndpointName"),
        (api_limits.VARIANT_NAME, "VariantName"),
        (api_limits.INFERENCE_COMPONENT_NAME, "InferenceComponentName"),
    ],
)
def test_name_patterns_are_botocores(limits, shape):
    stated = SAGEMAKER.shape_for(shape).metadata
    assert (limits.pattern, limits.maximum) == (stated["pattern"], stated["max"])


@pytest.mark.parametrize(
    ("bounds", "shape"),
    [
        (api_limits.VOLUME_SIZE_GB, "ProductionVariantVolumeSizeInGB"),
        (api_limits.MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS, "ProductionVariantModelDataDownloadTimeoutInSeconds"),
        (
            api_limits.STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS,
            "ProductionVariantContainerStartupHealthCheckTimeoutInSeconds",
        ),
        (api_limits.SAMPLING_PERCENT, "SamplingPercentage"),
        (api_limits.WAIT_INTERVAL_SECONDS, "WaitIntervalInSeconds"),
        (api_limits.TERMINATION_WAIT_SECONDS, "TerminationWaitInSeconds"),
        (api_limits.MAXIMUM_EXECUTION_TIMEOUT_SECONDS, "MaximumExecutionTimeoutInSeconds"),
        (api_limits.MAX_CONCURRENT_INVOCATIONS, "MaxConcurrentInvocationsPerInstance"),
    ],
)
def test_numeric_limits_are_botocores(bounds, shape):
    stated = SAGEMAKER.shape_for(shape).metadata
    assert bounds == (stated["min"], stated["max"])


def test_the_schema_uses_the_construct_librarys_definitions():
    """One definition: the schema's names and limits are the very objects triton_cdk/api_limits.py defines."""
    assert schema_limits.ENDPOINT_NAME is api_limits.ENDPOINT_NAME
    assert schema_limits.INFERENCE_COMPONENT_NAME is api_limits.INFERENCE_COMPONENT_NAME
    assert schema_limits.VOLUME_SIZE_GB is api_limits.VOLUME_SIZE_GB
    assert async_schema.MAX_CONCURRENT_INVOCATIONS is async_construct.MAX_CONCURRENT_INVOCATIONS
    assert async_construct.MAX_CONCURRENT_INVOCATIONS is api_limits.MAX_CONCURRENT_INVOCATIONS
    for name in ("WAIT_INTERVAL_SECONDS", "TERMINATION_WAIT_SECONDS", "MAXIMUM_EXECUTION_TIMEOUT_SECONDS"):
        assert getattr(schema_limits, name) is getattr(api_limits, name), name
    anchored = "^(?:{})$".format(SAGEMAKER.shape_for("EndpointName").metadata["pattern"])
    assert anchored == schema.ENDPOINT_NAME_PATTERN
    assert schema.VARIANT_NAME_PATTERN == shadow_schema.VARIANT_NAME_PATTERN == api_limits.VARIANT_NAME.anchored


@pytest.mark.parametrize(
    ("name", "valid"),
    [("a", True), ("a-b--c9", True), ("a" * 63, True), ("a" * 64, False), ("-a", False), ("a-", False),
     ("a_b", False), ("a\n", False)],
)  # fmt: skip
def test_the_constructs_refuse_what_botocore_refuses(name, valid):
    """ProductionVariant and ComponentVariant judge names by the same botocore shape (VariantName)."""
    assert api_limits.VARIANT_NAME.name_problem("name", name) is None or not valid
    assert any("must match" in p for p in ProductionVariant(name, "ml.g5.xlarge").problems()) is not valid
    assert any("must match" in p for p in ComponentVariant("ml.g5.xlarge", name=name).problems()) is not valid


@pytest.mark.parametrize(
    ("policy_member", "shape"),
    [
        (("BlueGreenUpdatePolicy", "MaximumExecutionTimeoutInSeconds"), "MaximumExecutionTimeoutInSeconds"),
        (("RollingUpdatePolicy", "MaximumExecutionTimeoutInSeconds"), "MaximumExecutionTimeoutInSeconds"),
        (("InferenceComponentRollingUpdatePolicy", "MaximumExecutionTimeoutInSeconds"),
         "MaximumExecutionTimeoutInSeconds"),
        (("TrafficRoutingConfig", "WaitIntervalInSeconds"), "WaitIntervalInSeconds"),
        (("RollingUpdatePolicy", "WaitIntervalInSeconds"), "WaitIntervalInSeconds"),
        (("InferenceComponentRollingUpdatePolicy", "WaitIntervalInSeconds"), "WaitIntervalInSeconds"),
        (("BlueGreenUpdatePolicy", "TerminationWaitInSeconds"), "TerminationWaitInSeconds"),
    ],
)  # fmt: skip
def test_every_deployment_policy_member_has_the_one_shape(policy_member, shape):
    """One constant per shape is enough only while every policy's member is that shape (botocore sagemaker)."""
    structure, member = policy_member
    assert SAGEMAKER.shape_for(structure).members[member].name == shape


def test_component_minimums_are_botocores_and_sizing_uses_them():
    """botocore sagemaker: NumberOfCpuCores min 0.25, MemoryInMb min 128 (ComputeResourceRequirements)."""
    assert SAGEMAKER.shape_for("NumberOfCpuCores").metadata["min"] == api_limits.MIN_CPU_CORES
    assert SAGEMAKER.shape_for("MemoryInMb").metadata["min"] == api_limits.MIN_MEMORY_MB
    assert component_sizing.MIN_CPU_CORES is api_limits.MIN_CPU_CORES
    assert schema_limits.MIN_MEMORY_MB is api_limits.MIN_MEMORY_MB


def test_metric_publish_frequencies_are_listed_once():
    """SageMaker API MetricsConfig.MetricPublishFrequencyInSeconds ("Valid values: 10, 30, 60, 120, 180, 240, 300";
    botocore states no enum): the schema's choices are the construct's list."""
    from typing import get_args

    from triton_cdk.serving.endpoint import METRIC_PUBLISH_FREQUENCIES

    annotation = schema.MetricsSettings.model_fields["publish_frequency_seconds"].annotation
    assert get_args(annotation) == METRIC_PUBLISH_FREQUENCIES
