"""AWS API limits the config schema enforces, read from botocore's service models instead of written by hand.

botocore ships each AWS API's model (the same files the SDKs are generated from): every input member's
shape states its `min`/`max` (length of a string, count of a list or map, value of a number) and its
`pattern` (a Java regular expression, anchored as a whole-value match). Each constant below names the
service and the shape it comes from, so a reviewer can check it with
`botocore.session.get_session().get_service_model(<service>).shape_for(<shape>).metadata`.

Patterns are used with `re.fullmatch` (the whole value, no trailing newline) and only where Python's `re`
reads them as Java does (ASCII character classes); `tests/foundation/test_config_api_limits.py` checks
each constant against the model.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from botocore.loaders import Loader
from botocore.model import ServiceModel


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

    def fullmatch(self, value: str) -> bool:
        """The value matches the shape's whole pattern (True where the shape states none)."""
        return self.pattern is None or re.fullmatch(self.pattern, value, flags=re.ASCII) is not None


@functools.cache
def shape_limits(service: str, shape: str) -> ShapeLimits:
    metadata = service_model(service).shape_for(shape).metadata
    return ShapeLimits(service, shape, metadata.get("min"), metadata.get("max"), metadata.get("pattern"))


def _maximum(service: str, shape: str) -> int:
    maximum = shape_limits(service, shape).maximum
    if maximum is None:
        raise LookupError(f"botocore {service} shape {shape} states no maximum")
    return maximum


# SageMaker CreateModel, ContainerDefinition.Environment (shape EnvironmentMap): at most this many variables,
# each key matching EnvironmentKey's pattern. The per-key and per-value maximum (1024) is stated by the shapes;
# the API reference says "bytes" for it and "32 KB" for all keys and values together (not in the model).
ENVIRONMENT = shape_limits("sagemaker", "EnvironmentMap")
ENVIRONMENT_KEY = shape_limits("sagemaker", "EnvironmentKey")
ENVIRONMENT_VALUE = shape_limits("sagemaker", "EnvironmentValue")
MAX_ENVIRONMENT_VARIABLES = _maximum("sagemaker", "EnvironmentMap")
MAX_ENVIRONMENT_KEY_BYTES = _maximum("sagemaker", "EnvironmentKey")
MAX_ENVIRONMENT_VALUE_BYTES = _maximum("sagemaker", "EnvironmentValue")
# ContainerDefinition.Environment's documentation: "The maximum length of all keys and values in the map,
# combined, is 32 KB" (a sentence of the model's documentation, not a constraint of its shapes).
MAX_ENVIRONMENT_TOTAL_BYTES = 32 * 1024

# SageMaker names: EndpointName, VariantName (ProductionVariant), InferenceComponentName.
ENDPOINT_NAME = shape_limits("sagemaker", "EndpointName")
VARIANT_NAME = shape_limits("sagemaker", "VariantName")
INFERENCE_COMPONENT_NAME = shape_limits("sagemaker", "InferenceComponentName")
MAX_ENDPOINT_NAME_LENGTH = _maximum("sagemaker", "EndpointName")
MAX_VARIANT_NAME_LENGTH = _maximum("sagemaker", "VariantName")
MAX_INFERENCE_COMPONENT_NAME_LENGTH = _maximum("sagemaker", "InferenceComponentName")

# SageMaker VpcConfig: Subnets (1..16 ids), SecurityGroupIds (1..5 ids), each id at most 32 of [-0-9a-zA-Z].
SUBNET_ID = shape_limits("sagemaker", "SubnetId")
SECURITY_GROUP_ID = shape_limits("sagemaker", "SecurityGroupId")
MAX_SUBNETS = _maximum("sagemaker", "Subnets")
MAX_SECURITY_GROUPS = _maximum("sagemaker", "VpcSecurityGroupIds")

# Application Auto Scaling PutScheduledAction: ScheduledActionName (1..256, no control characters, no : / |,
# no leading or trailing space), Schedule and Timezone (each 1..1600).
SCHEDULED_ACTION_NAME = shape_limits("application-autoscaling", "ScheduledActionName")
MAX_SCHEDULED_ACTION_NAME_LENGTH = _maximum("application-autoscaling", "ScheduledActionName")
MAX_SCHEDULE_LENGTH = _maximum("application-autoscaling", "ResourceIdMaxLen1600")


def _minimum(service: str, shape: str) -> float:
    minimum = shape_limits(service, shape).minimum
    if minimum is None:
        raise LookupError(f"botocore {service} shape {shape} states no minimum")
    return minimum


def limits(service: str, shape: str) -> tuple[float, int]:
    """(minimum, maximum) a botocore shape states; both must be stated."""
    return _minimum(service, shape), _maximum(service, shape)


# SageMaker CreateEndpointConfig ProductionVariant: VolumeSizeInGB, the two start-up timeouts (also an inference
# component's StartupParameters), ProductionVariants (the primary and the extra variants), data capture's
# InitialSamplingPercentage; CreateEndpoint DeploymentConfig: WaitIntervalInSeconds, TerminationWaitInSeconds,
# AutoRollbackConfiguration.Alarms; CreateInferenceComponent: NumberOfCpuCoresRequired, Min/MaxMemoryRequiredInMb.
VOLUME_SIZE_GB = limits("sagemaker", "ProductionVariantVolumeSizeInGB")
MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS = limits("sagemaker", "ProductionVariantModelDataDownloadTimeoutInSeconds")
STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS = limits(
    "sagemaker", "ProductionVariantContainerStartupHealthCheckTimeoutInSeconds"
)
MAX_PRODUCTION_VARIANTS = _maximum("sagemaker", "ProductionVariantList")
SAMPLING_PERCENT = limits("sagemaker", "SamplingPercentage")
WAIT_INTERVAL_SECONDS = limits("sagemaker", "WaitIntervalInSeconds")
TERMINATION_WAIT_SECONDS = limits("sagemaker", "TerminationWaitInSeconds")
MAX_ROLLBACK_ALARMS = _maximum("sagemaker", "AlarmList")
MIN_CPU_CORES = _minimum("sagemaker", "NumberOfCpuCores")
MIN_MEMORY_MB = int(_minimum("sagemaker", "MemoryInMb"))

# CodeBuild CreateProject: timeoutInMinutes (BuildTimeOut) and queuedTimeoutInMinutes (TimeOut).
BUILD_TIMEOUT_MINUTES = limits("codebuild", "BuildTimeOut")
QUEUED_TIMEOUT_MINUTES = limits("codebuild", "TimeOut")

# CodePipeline CreatePipeline: PipelineName.
PIPELINE_NAME = shape_limits("codepipeline", "PipelineName")
