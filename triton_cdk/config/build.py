"""Settings of the GPU model build (`build:` in config/<stage>.yaml)."""

from __future__ import annotations

from pydantic import Field, PositiveInt

from model_build.settings import StrictModel


class ReservedFleet(StrictModel):
    """A CodeBuild reserved-capacity fleet, for GPUs the on-demand GPU builds do not offer (e.g. T4)."""

    arn: str = Field(pattern=r"^arn:aws[a-z-]*:codebuild:[a-z0-9-]+:\d{12}:fleet/.+")
    gpu: str = Field(description="GPU model of the fleet's hosts, as in the instance catalogue: T4, A10G, L4, ...")


class BuildSettings(StrictModel):
    timeout_minutes: int = Field(default=120, ge=5, le=2160, description="CodeBuild build timeout.")
    queue_timeout_minutes: int = Field(default=60, ge=5, le=480)
    concurrency: PositiveInt = Field(default=2, description="Concurrent build limit of the project.")
    artifact_wait_minutes: int = Field(
        default=120, ge=5, le=120, description="How long a deployment waits for a missing artifact's build."
    )
    log_retention_days: PositiveInt = 30
    fleet: ReservedFleet | None = None
