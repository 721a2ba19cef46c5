"""The Triton container's environment (`endpoints[].container` in config/<stage>.yaml).

Every variable is read by Triton's `docker/sagemaker/serve` (../shared/README.md, "Container environment"):
unset ones keep Triton's defaults there. SageMaker's limits on the map (CreateModel
ContainerDefinition.Environment) come from botocore's model (stage_config/api_limits.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from model_build.config_yaml import clip
from serving_facts.settings import StrictModel
from stage_config import triton_metrics
from stage_config.api_limits import (
    ENVIRONMENT_KEY,
    ENVIRONMENT_VALUE,
    MAX_ENVIRONMENT_KEY_BYTES,
    MAX_ENVIRONMENT_TOTAL_BYTES,
    MAX_ENVIRONMENT_VALUE_BYTES,
    MAX_ENVIRONMENT_VARIABLES,
)
from triton_cdk.serving.environment import DEFAULT_MODEL_NAME

LOG_VERBOSE = "SAGEMAKER_TRITON_LOG_VERBOSE"
# Typed field -> the variable it sets.
TYPED_VARIABLES = {
    "thread_count": "SAGEMAKER_TRITON_THREAD_COUNT",
    "buffer_manager_thread_count": "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT",
    "shm_default_byte_size": "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE",
    "shm_growth_byte_size": "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE",
    "model_load_gpu_limit": "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT",
    # serve sets SAGEMAKER_TRITON_PING_MODE itself (ready / live by mode) unless this one is set.
    "ping_mode": "SAGEMAKER_TRITON_OVERRIDE_PING_MODE",
    "additional_args": "SAGEMAKER_TRITON_ADDITIONAL_ARGS",
}
# Variables extra_environment may not set: the typed fields', the default model (set from the endpoint's mode and
# model), SAGEMAKER_MULTI_MODEL (set by SageMaker for multi-model endpoints) and SAGEMAKER_TRITON_PING_MODE (the
# serve script overwrites it, so setting it has no effect).
OWNED_VARIABLES = frozenset(
    {
        LOG_VERBOSE,
        *TYPED_VARIABLES.values(),
        *triton_metrics.VARIABLES,
        DEFAULT_MODEL_NAME,
        "SAGEMAKER_MULTI_MODEL",
        "SAGEMAKER_TRITON_PING_MODE",
    }
)


class ContainerSettings(StrictModel):
    """Environment of the Triton container (read by Triton's docker/sagemaker/serve)."""

    log_verbose: bool = Field(
        default=False,
        description="Verbose server log (SAGEMAKER_TRITON_LOG_VERBOSE). Always set: false overrides Triton's own "
        "default, true.",
    )
    # Thread counts: no documented maximum; 1024 is over 5x the vCPUs of the largest catalogue type (192).
    thread_count: PositiveInt | None = Field(
        default=None,
        le=1024,
        description="Threads of the SageMaker HTTP front end (SAGEMAKER_TRITON_THREAD_COUNT), 1-1024. "
        "Default: Triton's.",
    )
    buffer_manager_thread_count: PositiveInt | None = Field(
        default=None,
        le=1024,
        description="Buffer manager threads (SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT), 1-1024. Default: Triton's.",
    )
    # Shared memory comes out of the instance's RAM; 64 GiB is far above one model's tensors.
    shm_default_byte_size: PositiveInt | None = Field(
        default=None,
        le=64 * 2**30,
        description="Python backend shared-memory size in bytes (SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE), at most "
        "64 GiB. Default: Triton's (16 MiB).",
    )
    shm_growth_byte_size: PositiveInt | None = Field(
        default=None,
        le=64 * 2**30,
        description="Python backend shared-memory growth step in bytes (SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE), at "
        "most 64 GiB. Default: Triton's (1 MiB).",
    )
    model_load_gpu_limit: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Fraction (0, 1] of each GPU's memory models may fill when loading "
        "(SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT). Default: no limit.",
    )
    # The serve script overwrites SAGEMAKER_TRITON_PING_MODE and reads the OVERRIDE variable
    # (docker/sagemaker/serve in triton-inference-server/server).
    ping_mode: Literal["ready", "live"] | None = Field(
        default=None,
        description="ready or live (SAGEMAKER_TRITON_OVERRIDE_PING_MODE). Default: the serve script's, ready on "
        "single-model and live on multi-model endpoints.",
    )
    # ContainerDefinition.Environment: each key and value at most 1024 bytes, all together 32 KB (api_limits).
    additional_args: str | None = Field(
        default=None,
        max_length=MAX_ENVIRONMENT_VALUE_BYTES,
        description="Extra tritonserver flags (SAGEMAKER_TRITON_ADDITIONAL_ARGS), e.g. "
        "--backend-config=tensorrt,version-compatible=true. Default: none.",
    )
    # Triton's Prometheus metrics: stage_config/triton_metrics.py (serve script lines 81-88, Triton's port rules).
    triton_metrics: bool = Field(
        default=False,
        description="Triton's Prometheus metrics (SAGEMAKER_TRITON_ALLOW_METRICS=true -> --allow-metrics=true). "
        "Default: off, as the serve script starts Triton (--allow-metrics=false). How SageMaker would bring them to "
        "CloudWatch is not documented for Triton: docs/serving.md.",
    )
    triton_metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Triton's metrics port (SAGEMAKER_TRITON_METRICS_PORT -> --metrics-port), 1-65535; only with "
        "triton_metrics, never 8080 (SageMaker's port) or gRPC's. Default: Triton's, 8002.",
    )
    extra_environment: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_ENVIRONMENT_VARIABLES,
        description=f"Further container variables: keys [a-zA-Z_][a-zA-Z0-9_]*, at most {MAX_ENVIRONMENT_VARIABLES} "
        f"variables in all (these and the ones the fields above set), each key and value at most "
        f"{MAX_ENVIRONMENT_VALUE_BYTES} bytes, {MAX_ENVIRONMENT_TOTAL_BYTES // 1024} KB in all (SageMaker's "
        "ContainerDefinition.Environment). Refused if it sets a variable of the fields above, "
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME, SAGEMAKER_MULTI_MODEL or SAGEMAKER_TRITON_PING_MODE (those follow the "
        "mode).",
    )

    @field_validator("extra_environment")
    @classmethod
    def _extra_environment(cls, environment: dict[str, str]) -> dict[str, str]:
        problems = []
        clashes = sorted(set(environment) & OWNED_VARIABLES)
        if clashes:
            problems.append(
                f"extra_environment sets {clashes}, which the typed container settings own; use the matching "
                "container.* field (SAGEMAKER_MULTI_MODEL and the default model name follow the mode)"
            )
        bad_keys = [clip(key, 60) for key in environment if not ENVIRONMENT_KEY.fullmatch(key)]
        if bad_keys:
            problems.append(
                f"keys {bad_keys} are not environment variable names ({ENVIRONMENT_KEY.pattern}, "
                f"{ENVIRONMENT_KEY.source})"
            )
        long_keys = [clip(key, 60) for key in environment if _bytes(key) > MAX_ENVIRONMENT_KEY_BYTES]
        long_values = [clip(k, 60) for k, value in environment.items() if _bytes(value) > MAX_ENVIRONMENT_VALUE_BYTES]
        if long_keys:
            problems.append(f"keys {long_keys} are over {MAX_ENVIRONMENT_KEY_BYTES} bytes ({ENVIRONMENT_KEY.source})")
        if long_values:
            problems.append(
                f"the values of {long_values} are over {MAX_ENVIRONMENT_VALUE_BYTES} bytes ({ENVIRONMENT_VALUE.source})"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return environment

    @model_validator(mode="after")
    def _triton_metrics(self) -> ContainerSettings:
        problems = triton_metrics.metrics_problems(
            self.triton_metrics, self.triton_metrics_port, self.extra_environment, self.additional_args
        )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @field_validator("additional_args")
    @classmethod
    def _additional_args(cls, value: str | None) -> str | None:
        if value is not None and _bytes(value) > MAX_ENVIRONMENT_VALUE_BYTES:
            raise ValueError(f"is {_bytes(value)} bytes in UTF-8; SageMaker allows {MAX_ENVIRONMENT_VALUE_BYTES}")
        return value


def _bytes(text: str) -> int:
    """UTF-8 length, as SageMaker counts; a lone surrogate (refused by the loader) counts, never raises."""
    return len(text.encode("utf-8", "surrogatepass"))


def typed_environment(settings: ContainerSettings) -> dict[str, str]:
    """The variables the typed fields set (extra_environment not included)."""
    # Always set: the serve script turns verbose logging on when the variable is absent.
    environment = {LOG_VERBOSE: "true" if settings.log_verbose else "false"}
    for field, variable in TYPED_VARIABLES.items():
        value = getattr(settings, field)
        if value is not None:
            environment[variable] = str(value)
    environment.update(triton_metrics.metrics_environment(settings.triton_metrics, settings.triton_metrics_port))
    return environment


def environment_size(environment: dict[str, str]) -> int:
    """Bytes of all keys and values together, as ContainerDefinition.Environment's 32 KB limit counts them."""
    return sum(_bytes(key) + _bytes(value) for key, value in environment.items())
