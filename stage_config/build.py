"""Settings of the GPU model build (`build:` in config/<stage>.yaml)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from serving_facts.settings import StrictModel
from stage_config.api_limits import BUILD_TIMEOUT_MINUTES, QUEUED_TIMEOUT_MINUTES

if TYPE_CHECKING:
    from stage_config.app import AppConfig

# A deployment waits for a build through an AWS::CloudFormation::WaitCondition, whose Timeout is at
# most 43200 s = 12 h (CloudFormation template reference, AWS::CloudFormation::WaitCondition). It
# waits for the build's queue time plus its run time plus this margin (image pull, event delivery),
# so CodeBuild's own TIMED_OUT (reported with the build id and logs) always comes before the wait
# condition's generic timeout.
MAX_WAIT_MINUTES = 12 * 60
WAIT_MARGIN_MINUTES = 15
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

    arn: str = Field(
        pattern=r"^arn:aws[a-z-]*:codebuild:[a-z0-9-]+:[0-9]{12}:fleet/[^\x00-\x20\x7f]+$",
        description="ARN of the CodeBuild reserved-capacity fleet, in the stage's region.",
    )
    gpu: str = Field(
        max_length=32, description="GPU model of the fleet's hosts, as in the instance catalogue: T4, A10G, L4, ..."
    )
    compute_type: Literal[
        "CUSTOM_INSTANCE_TYPE", "ATTRIBUTE_BASED_COMPUTE", "BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_LARGE"
    ] = Field(
        default="CUSTOM_INSTANCE_TYPE",
        description="The fleet's compute type (the project's ComputeType must equal it). "
        "Default: CUSTOM_INSTANCE_TYPE, e.g. a fleet of g4dn instances for T4.",
    )


class BuildSettings(StrictModel):
    """The CodeBuild projects that build the model artifacts."""

    timeout_minutes: int = Field(
        default=120,
        ge=BUILD_TIMEOUT_MINUTES[0],
        le=BUILD_TIMEOUT_MINUTES[1],
        description=f"CodeBuild build timeout in minutes, {BUILD_TIMEOUT_MINUTES[0]}-{BUILD_TIMEOUT_MINUTES[1]}; with "
        "queue_timeout_minutes at most 705 in all.",
    )
    queue_timeout_minutes: int = Field(
        default=60,
        ge=QUEUED_TIMEOUT_MINUTES[0],
        le=QUEUED_TIMEOUT_MINUTES[1],
        description=f"CodeBuild queued timeout in minutes, {QUEUED_TIMEOUT_MINUTES[0]}-{QUEUED_TIMEOUT_MINUTES[1]}.",
    )
    # A project limit must stay below the account's concurrent-running-builds quota (60 by default,
    # "Quotas for AWS CodeBuild"); raise this bound together with the quota.
    concurrency: PositiveInt | None = Field(
        default=None,
        le=60,
        description="Concurrent build limit of each build project. Default: none, so builds over CodeBuild's "
        "account limit queue (with a project limit, StartBuild fails over it instead; 'Builds in AWS CodeBuild').",
    )
    log_retention_days: PositiveInt = Field(
        default=30,
        description=f"Days the build logs are kept: one of {', '.join(map(str, LOG_RETENTION_DAYS))}.",
    )
    fleet: ReservedFleet | None = Field(
        default=None,
        description="A reserved-capacity fleet for GPUs the on-demand GPU builds do not offer (e.g. T4). Default: "
        "none, on-demand builds.",
    )

    @model_validator(mode="before")
    @classmethod
    def _removed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "artifact_wait_minutes" in data:
            raise ValueError(
                "artifact_wait_minutes is no longer used: a deployment now waits for the build itself, up to "
                "queue_timeout_minutes + timeout_minutes (docs/build.md); remove it"
            )
        return data

    @model_validator(mode="after")
    def _fits_the_wait(self) -> BuildSettings:
        if self.wait_minutes > MAX_WAIT_MINUTES:
            raise ValueError(
                f"queue_timeout_minutes + timeout_minutes + {WAIT_MARGIN_MINUTES} = {self.wait_minutes} minutes, but "
                f"a deployment can wait for a build at most {MAX_WAIT_MINUTES} minutes (CloudFormation's "
                "WaitCondition limit of 12 hours); lower timeout_minutes or queue_timeout_minutes"
            )
        return self

    @property
    def wait_minutes(self) -> int:
        """How long a deployment waits for one build: queued, then running, plus a margin."""
        return self.queue_timeout_minutes + self.timeout_minutes + WAIT_MARGIN_MINUTES

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(
                f"CloudWatch Logs does not offer {value} days; use one of {', '.join(map(str, LOG_RETENTION_DAYS))}"
            )
        return value


def build_region_problems(config: AppConfig) -> list[tuple[str, str]]:
    """(field path, message) for GPU builds the stage's region cannot run (only when `region` is set)."""
    from serving_facts.catalogue import UnknownInstanceTypeError, instance_type
    from serving_facts.matching import BuildMatchError, match_build
    from triton_cdk.artifact_build.gpu_regions import gpu_build_region_problem

    if not config.region or config.promote_from:  # a promoting stage never builds
        return []
    problems: list[tuple[str, str]] = []
    fleet = config.build.fleet
    if fleet is not None:
        fleet_region = fleet.arn.split(":")[3]
        if fleet_region != config.region:
            problems.append(
                (
                    "build.fleet.arn",
                    f"the fleet is in {fleet_region} but this stage deploys to {config.region}; a CodeBuild project "
                    "can only use a fleet of its own region",
                )
            )
    reported: set[str] = set()
    for index, endpoint in enumerate(config.endpoints):
        # Served models include an ensemble's composing models: a TensorRT step is built for this endpoint.
        if not any(model.needs_gpu_build for model in config.served_models(endpoint.models)):
            continue
        try:
            plan = match_build(instance_type(endpoint.instance_type), config.triton_release, fleet)
        except (UnknownInstanceTypeError, BuildMatchError, ValueError):
            continue  # reported by the endpoint's own checks
        problem = gpu_build_region_problem(config.region, plan.compute)
        if problem and plan.compute not in reported:
            reported.add(plan.compute)
            problems.append(("region", f"endpoints[{index}] needs a GPU build: {problem}"))
    return problems
