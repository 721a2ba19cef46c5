"""The Triton container's environment, from the app's ContainerSettings (config -> props, app side).

Every variable is read by Triton's `docker/sagemaker/serve` (../shared/README.md): unset ones
keep Triton's defaults there (16 MiB / 1 MiB Python-backend shared memory, verbose logging).
"""

from __future__ import annotations

from triton_cdk.config.endpoint import ContainerSettings
from triton_cdk.serving.environment import DEFAULT_MODEL_NAME

_OPTIONAL = {
    "thread_count": "SAGEMAKER_TRITON_THREAD_COUNT",
    "buffer_manager_thread_count": "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT",
    "shm_default_byte_size": "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE",
    "shm_growth_byte_size": "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE",
    "model_load_gpu_limit": "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT",
    # serve sets SAGEMAKER_TRITON_PING_MODE itself (ready / live by mode) unless this one is set.
    "ping_mode": "SAGEMAKER_TRITON_OVERRIDE_PING_MODE",
    "additional_args": "SAGEMAKER_TRITON_ADDITIONAL_ARGS",
}


def container_environment(settings: ContainerSettings) -> dict[str, str]:
    # Always set: the serve script turns verbose logging on when the variable is absent.
    environment = {"SAGEMAKER_TRITON_LOG_VERBOSE": "true" if settings.log_verbose else "false"}
    for field, variable in _OPTIONAL.items():
        value = getattr(settings, field)
        if value is not None:
            environment[variable] = str(value)
    # The serve script overwrites SAGEMAKER_TRITON_PING_MODE, so setting it has no effect.
    owned = {
        *_OPTIONAL.values(),
        *environment,
        DEFAULT_MODEL_NAME,
        "SAGEMAKER_MULTI_MODEL",
        "SAGEMAKER_TRITON_PING_MODE",
    }
    clashes = sorted(set(settings.extra_environment) & owned)
    if clashes:
        raise ValueError(
            f"container.extra_environment sets {clashes}, which the typed container settings own; "
            "use the matching container.* field (SAGEMAKER_MULTI_MODEL and the default model name follow the mode)"
        )
    environment.update(settings.extra_environment)
    return environment
