"""Limits the config schema takes from botocore's service models (stage_config/api_limits.py), not by hand.

Each check compares a schema field's bound with what botocore's own session states for the API member the field
becomes (service, shape named in the test), so a botocore upgrade that changes a limit changes the schema.
"""

from __future__ import annotations

import annotated_types
import botocore.session
import pytest
from config_edits import refusal, set_path, shipped, write

from stage_config.build import BuildSettings
from stage_config.endpoint import (
    ComponentSettings,
    DataCaptureSettings,
    DeploymentSettings,
    EndpointSettings,
)
from stage_config.pipeline import PipelineConfig

SESSION = botocore.session.get_session()


def _shape(service: str, shape: str) -> dict:
    return SESSION.get_service_model(service).shape_for(shape).metadata


def _bounds(model, field: str) -> tuple[object, object]:
    metadata = model.model_fields[field].metadata
    low = next((m.ge for m in metadata if isinstance(m, annotated_types.Ge)), None)
    high = next((m.le for m in metadata if isinstance(m, annotated_types.Le)), None)
    return low, high


@pytest.mark.parametrize(
    ("model", "field", "service", "shape"),
    [
        (EndpointSettings, "volume_size_gb", "sagemaker", "ProductionVariantVolumeSizeInGB"),
        (EndpointSettings, "model_data_download_timeout_seconds", "sagemaker",
         "ProductionVariantModelDataDownloadTimeoutInSeconds"),
        (EndpointSettings, "container_startup_health_check_timeout_seconds", "sagemaker",
         "ProductionVariantContainerStartupHealthCheckTimeoutInSeconds"),
        (ComponentSettings, "model_data_download_timeout_seconds", "sagemaker",
         "ProductionVariantModelDataDownloadTimeoutInSeconds"),
        (ComponentSettings, "container_startup_health_check_timeout_seconds", "sagemaker",
         "ProductionVariantContainerStartupHealthCheckTimeoutInSeconds"),
        (DataCaptureSettings, "sampling_percent", "sagemaker", "SamplingPercentage"),
        (DeploymentSettings, "wait_seconds", "sagemaker", "WaitIntervalInSeconds"),
        (DeploymentSettings, "termination_wait_seconds", "sagemaker", "TerminationWaitInSeconds"),
        (BuildSettings, "timeout_minutes", "codebuild", "BuildTimeOut"),
        (BuildSettings, "queue_timeout_minutes", "codebuild", "TimeOut"),
    ],
)  # fmt: skip
def test_numeric_bounds_are_botocores(model, field, service, shape):
    stated = _shape(service, shape)
    assert _bounds(model, field) == (stated["min"], stated["max"])


def test_minimums_are_botocores():
    """NumberOfCpuCoresRequired (NumberOfCpuCores), Min/MaxMemoryRequiredInMb (MemoryInMb)."""
    assert _bounds(ComponentSettings, "cpu_cores")[0] == _shape("sagemaker", "NumberOfCpuCores")["min"]
    for field in ("min_memory_mb", "max_memory_mb"):
        assert _bounds(ComponentSettings, field)[0] == _shape("sagemaker", "MemoryInMb")["min"]


def test_counts_and_names_are_botocores():
    """ProductionVariantList (the primary plus extra variants); CodePipeline PipelineName."""
    extra = EndpointSettings.model_fields["extra_variants"].metadata
    assert (
        next(m.max_length for m in extra if hasattr(m, "max_length"))
        == _shape("sagemaker", "ProductionVariantList")["max"] - 1
    )
    name = PipelineConfig.model_fields["name"].metadata
    assert (
        next(m.max_length for m in name if getattr(m, "max_length", None))
        == _shape("codepipeline", "PipelineName")["max"]
    )
    assert _shape("codepipeline", "PipelineName")["pattern"] in next(
        m.pattern for m in name if getattr(m, "pattern", None)
    )


def test_rollback_alarms_fit_sagemakers_alarm_list(tmp_path):
    """botocore sagemaker AutoRollbackConfiguration.Alarms (shape AlarmList): at most 10; every kind listed in
    rollback_alarms is one alarm per variant, so 6 kinds on 2 variants are 12."""
    document = shipped()
    set_path(document, "endpoints.1.extra_variants", [{"name": "second", "instance_type": "ml.g5.2xlarge"}])
    set_path(
        document,
        "endpoints.1.deployment.rollback_alarms",
        ["latency", "errors_5xx", "errors_4xx", "gpu_memory", "cpu", "memory"],
    )
    set_path(document, "endpoints.1.deployment.wait_seconds", 900)
    message = refusal(write(tmp_path, document, "dev"))
    assert "deployment.rollback_alarms: 6 kinds x 2 variants = 12 alarms; SageMaker's AutoRollbackConfiguration " in (
        message
    )
    assert _shape("sagemaker", "AlarmList")["max"] == 10
