"""The Triton container's environment, from the app's ContainerSettings (config -> props, app side).

Every variable is read by Triton's `docker/sagemaker/serve` (../shared/README.md): unset ones
keep Triton's defaults there (16 MiB / 1 MiB Python-backend shared memory, verbose logging).
The schema (stage_config/container.py) refuses an `extra_environment` that sets a variable the
typed fields own, with the config file and field, so the check here only guards other callers.
"""

from __future__ import annotations

from stage_config.container import OWNED_VARIABLES, ContainerSettings, typed_environment


def container_environment(settings: ContainerSettings) -> dict[str, str]:
    environment = typed_environment(settings)
    clashes = sorted(set(settings.extra_environment) & OWNED_VARIABLES)
    if clashes:
        raise ValueError(
            f"container.extra_environment sets {clashes}, which the typed container settings own; "
            "use the matching container.* field (SAGEMAKER_MULTI_MODEL and the default model name follow the mode)"
        )
    return {**environment, **settings.extra_environment}
