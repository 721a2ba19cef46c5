"""Settings of the GPU model build (`build:` in config/<stage>.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, field_validator

from model_build.settings import StrictModel

# CloudFormation waits at most one hour for a custom resource (ServiceTimeout: 1..3600 s) and the
# CDK Provider framework documents totalTimeout's maximum as 1 hour; a longer wait would only
# fail later with a less helpful message. Builds that take longer keep running: the next deploy
# finds their artifact.
MAX_ARTIFACT_WAIT_MINUTES = 60
# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


class ReservedFleet(StrictModel):
    """A CodeBuild reserved-capacity fleet, for GPUs the on-demand GPU builds do not offer (e.g. T4)."""

    arn: str = Field(pattern=r"^arn:aws[a-z-]*:codebuild:[a-z0-9-]+:\d{12}:fleet/.+")
    gpu: str = Field(description="GPU model of the fleet's hosts, as in the instance catalogue: T4, A10G, L4, ...")
    compute_type: Literal[
        "CUSTOM_INSTANCE_TYPE", "ATTRIBUTE_BASED_COMPUTE", "BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_LARGE"
    ] = Field(
        default="CUSTOM_INSTANCE_TYPE",
        description="The fleet's compute type (the project's ComputeType must equal it). "
        "Default: CUSTOM_INSTANCE_TYPE, e.g. a fleet of g4dn instances for T4.",
    )


class BuildSettings(StrictModel):
    timeout_minutes: int = Field(default=120, ge=5, le=2160, description="CodeBuild build timeout.")
    queue_timeout_minutes: int = Field(default=60, ge=5, le=480, description="CodeBuild queued timeout.")
    concurrency: PositiveInt = Field(default=2, description="Concurrent build limit of each build project.")
    artifact_wait_minutes: int = Field(
        default=MAX_ARTIFACT_WAIT_MINUTES,
        ge=5,
        le=MAX_ARTIFACT_WAIT_MINUTES,
        description="How long a deployment waits for a missing artifact's build (CloudFormation allows 1 hour).",
    )
    log_retention_days: PositiveInt = Field(
        default=30, description=f"One of {', '.join(map(str, LOG_RETENTION_DAYS))}."
    )
    fleet: ReservedFleet | None = None

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(
                f"CloudWatch Logs does not offer {value} days; use one of {', '.join(map(str, LOG_RETENTION_DAYS))}"
            )
        return value
