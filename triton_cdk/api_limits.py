"""AWS API limits the constructs enforce, read from botocore's service models instead of written by hand.

botocore ships each AWS API's model (the same files the SDKs are generated from): every input member's
shape states its `min`/`max` (length of a string, count of a list or map, value of a number) and its
`pattern` (a Java regular expression, anchored as a whole-value match). Each constant below names the
service and the shape it comes from, so a reviewer can check it with
`botocore.session.get_session().get_service_model(<service>).shape_for(<shape>).metadata`.

This is the one place of each limit: the app's config schema (stage_config/api_limits.py) imports these and adds
the ones only the schema needs. Patterns are used with `re.fullmatch` (the whole value, no trailing newline) and
only where Python's `re` reads them as Java does (ASCII character classes); tests/serving/test_api_limits.py and
tests/foundation/test_config_api_limits.py check the constants against botocore's own session.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from botocore.loaders import Loader
from botocore.model import ServiceModel

__all__ = [
    "CANARY_PERCENT",
    "ENDPOINT_NAME",
    "INFERENCE_COMPONENT_NAME",
    "LINEAR_STEP_PERCENT",
    "MAXIMUM_EXECUTION_TIMEOUT_SECONDS",
    "MAX_CONCURRENT_INVOCATIONS",
    "MAX_ENDPOINT_NAME_LENGTH",
    "MAX_INFERENCE_COMPONENT_NAME_LENGTH",
    "MAX_VARIANT_NAME_LENGTH",
    "MIN_CPU_CORES",
    "MIN_MEMORY_MB",
    "MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS",
    "ROLLING_BATCH_PERCENT",
    "SAMPLING_PERCENT",
    "STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS",
    "TERMINATION_WAIT_SECONDS",
    "VARIANT_NAME",
    "VOLUME_SIZE_GB",
    "WAIT_INTERVAL_SECONDS",
    "ShapeLimits",
    "limits",
    "maximum",
    "minimum",
    "service_model",
    "shape_limits",
]


@functools.cache
def service_model(service: str) -> ServiceModel:
    """botocore's model of `service` (the newest API version the installed botocore ships), loaded once."""
    return ServiceModel(Loader().load_service_model(service, "service-2"), service_name=service)


@dataclass(frozen=True)
class ShapeLimits:
    """What one botocore shape states: `minimum`/`maximum` (None: not stated) and `pattern`."""

    service: str
    shape: str
    minimum: int | None
    maximum: int | None
    pattern: str | None

    @property
    def source(self) -> str:
        """'botocore sagemaker 2017-07-24, shape EnvironmentKey': where a message says the limit comes from."""
        return f"botocore {self.service} {service_model(self.service).api_version}, shape {self.shape}"

    @property
    def anchored(self) -> str:
        """The pattern anchored for JSON Schema / pydantic (`^(?:...)$`, which search rather than match)."""
        if self.pattern is None:
            raise LookupError(f"{self.source} states no pattern")
        return f"^(?:{self.pattern})$"

    def fullmatch(self, value: str) -> bool:
        """The value matches the shape's whole pattern (True where the shape states none)."""
        return self.pattern is None or re.fullmatch(self.pattern, value, flags=re.ASCII) is not None

    def name_problem(self, what: str, value: str) -> str | None:
        """Why `value` is no valid name of this shape (pattern and maximum length), or None."""
        if self.fullmatch(value) and (self.maximum is None or len(value) <= self.maximum):
            return None
        return f"{what} {value!r} must match {self.pattern} and have at most {self.maximum} characters ({self.source})"


@functools.cache
def shape_limits(service: str, shape: str) -> ShapeLimits:
    metadata = service_model(service).shape_for(shape).metadata
    return ShapeLimits(service, shape, metadata.get("min"), metadata.get("max"), metadata.get("pattern"))


def maximum(service: str, shape: str) -> int:
    found = shape_limits(service, shape).maximum
    if found is None:
        raise LookupError(f"botocore {service} shape {shape} states no maximum")
    return found


def minimum(service: str, shape: str) -> float:
    found = shape_limits(service, shape).minimum
    if found is None:
        raise LookupError(f"botocore {service} shape {shape} states no minimum")
    return found


def limits(service: str, shape: str) -> tuple[float, int]:
    """(minimum, maximum) a botocore shape states; both must be stated."""
    return minimum(service, shape), maximum(service, shape)


# SageMaker names: EndpointName, VariantName (ProductionVariant), InferenceComponentName.
ENDPOINT_NAME = shape_limits("sagemaker", "EndpointName")
VARIANT_NAME = shape_limits("sagemaker", "VariantName")
INFERENCE_COMPONENT_NAME = shape_limits("sagemaker", "InferenceComponentName")
MAX_ENDPOINT_NAME_LENGTH = maximum("sagemaker", "EndpointName")
MAX_VARIANT_NAME_LENGTH = maximum("sagemaker", "VariantName")
MAX_INFERENCE_COMPONENT_NAME_LENGTH = maximum("sagemaker", "InferenceComponentName")

# SageMaker CreateEndpointConfig ProductionVariant: VolumeSizeInGB and the two start-up timeouts (also an inference
# component's StartupParameters); data capture's InitialSamplingPercentage.
VOLUME_SIZE_GB = limits("sagemaker", "ProductionVariantVolumeSizeInGB")
MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS = limits("sagemaker", "ProductionVariantModelDataDownloadTimeoutInSeconds")
STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS = limits(
    "sagemaker", "ProductionVariantContainerStartupHealthCheckTimeoutInSeconds"
)
SAMPLING_PERCENT = limits("sagemaker", "SamplingPercentage")

# SageMaker CreateInferenceComponent ComputeResourceRequirements: NumberOfCpuCoresRequired (NumberOfCpuCores) and
# Min/MaxMemoryRequiredInMb (MemoryInMb) minimums.
MIN_CPU_CORES = minimum("sagemaker", "NumberOfCpuCores")
MIN_MEMORY_MB = int(minimum("sagemaker", "MemoryInMb"))

# SageMaker CreateEndpointConfig AsyncInferenceConfig.ClientConfig: MaxConcurrentInvocationsPerInstance.
MAX_CONCURRENT_INVOCATIONS = limits("sagemaker", "MaxConcurrentInvocationsPerInstance")

# SageMaker CreateEndpoint DeploymentConfig (blue/green TrafficRoutingConfig and BlueGreenUpdatePolicy, rolling
# RollingUpdatePolicy) and CreateInferenceComponent's InferenceComponentRollingUpdatePolicy: WaitIntervalInSeconds,
# TerminationWaitInSeconds and MaximumExecutionTimeoutInSeconds (600-28800 in both policies; the API reference
# BlueGreenUpdatePolicy states the same range).
WAIT_INTERVAL_SECONDS = limits("sagemaker", "WaitIntervalInSeconds")
TERMINATION_WAIT_SECONDS = limits("sagemaker", "TerminationWaitInSeconds")
MAXIMUM_EXECUTION_TIMEOUT_SECONDS = limits("sagemaker", "MaximumExecutionTimeoutInSeconds")
# Stated by the API reference only (botocore's CapacitySize.Value states min 1 and nothing per type):
# TrafficRoutingConfig canary size at most 50 %, linear step 10-50 %; RollingUpdatePolicy.MaximumBatchSize
# "between 5% to 50% of the variant's total instance count".
CANARY_PERCENT = (1, 50)
LINEAR_STEP_PERCENT = (10, 50)
ROLLING_BATCH_PERCENT = (5, 50)
