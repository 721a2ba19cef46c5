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

# The generic reading of botocore's shapes and the limits the constructs enforce live once, in the construct
# library (triton_cdk/api_limits.py); re-exported here for the schema.
from triton_cdk.api_limits import (
    CANARY_PERCENT,
    ENDPOINT_NAME,
    INFERENCE_COMPONENT_NAME,
    LINEAR_STEP_PERCENT,
    MAX_ENDPOINT_NAME_LENGTH,
    MAX_INFERENCE_COMPONENT_NAME_LENGTH,
    MAX_VARIANT_NAME_LENGTH,
    MAXIMUM_EXECUTION_TIMEOUT_SECONDS,
    MIN_CPU_CORES,
    MIN_MEMORY_MB,
    MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS,
    ROLLING_BATCH_PERCENT,
    SAMPLING_PERCENT,
    STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS,
    TERMINATION_WAIT_SECONDS,
    VARIANT_NAME,
    VOLUME_SIZE_GB,
    WAIT_INTERVAL_SECONDS,
    ShapeLimits,
    limits,
    service_model,
    shape_limits,
)
from triton_cdk.api_limits import maximum as _maximum

__all__ = [
    "CANARY_PERCENT",
    "ENDPOINT_NAME",
    "INFERENCE_COMPONENT_NAME",
    "LINEAR_STEP_PERCENT",
    "MAXIMUM_EXECUTION_TIMEOUT_SECONDS",
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
    "service_model",
    "shape_limits",
]

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


# SageMaker CreateEndpointConfig ProductionVariant: VolumeSizeInGB, the two start-up timeouts (also an inference
# component's StartupParameters), ProductionVariants (the primary and the extra variants), data capture's
# InitialSamplingPercentage; CreateEndpoint DeploymentConfig: WaitIntervalInSeconds, TerminationWaitInSeconds,
# AutoRollbackConfiguration.Alarms; CreateInferenceComponent: NumberOfCpuCoresRequired, Min/MaxMemoryRequiredInMb.
MAX_PRODUCTION_VARIANTS = _maximum("sagemaker", "ProductionVariantList")
MAX_ROLLBACK_ALARMS = _maximum("sagemaker", "AlarmList")

# CodeBuild CreateProject: timeoutInMinutes (BuildTimeOut) and queuedTimeoutInMinutes (TimeOut).
BUILD_TIMEOUT_MINUTES = limits("codebuild", "BuildTimeOut")
QUEUED_TIMEOUT_MINUTES = limits("codebuild", "TimeOut")

# Instance counts: SageMaker documents no maximum (ProductionVariant InitialInstanceCount, Application
# Auto Scaling MaxCapacity: "service quotas may impose lower limits"); per-type instance quotas are
# soft. 1000 leaves room for raised quotas and refuses typos such as 1e66.
MAX_INSTANCE_COUNT = 1000  # not an AWS limit: the schema's one typo guard on instance counts

# Application Auto Scaling cooldowns (TargetTrackingScalingPolicyConfiguration ScaleInCooldown / ScaleOutCooldown,
# StepScalingPolicyConfiguration Cooldown): botocore's `Cooldown` shape is an Integer stating no min or max
# (tests/foundation/test_config_props.py checks it still states none). A cooldown is "the amount of time, in seconds"
# (API reference), so below 0 means nothing; one day is not an AWS limit but the schema's typo guard.
COOLDOWN_SECONDS = (0, 86400)
COOLDOWN_RANGE = f"{COOLDOWN_SECONDS[0]}-{COOLDOWN_SECONDS[1]}"  # as the schema's descriptions state it

# CodePipeline CreatePipeline: PipelineName.
PIPELINE_NAME = shape_limits("codepipeline", "PipelineName")
