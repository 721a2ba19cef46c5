"""The promotion pipeline's typed configuration: config/pipeline.yaml.

Each stage's artifacts, build and endpoints come from that stage's own config/<stage>.yaml; this
file says where the source lives, which stages run in which order, where approval is needed and
what the smoke tests accept.
"""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field, PositiveInt, ValidationError, field_validator, model_validator

from model_build.app_config import format_validation_error
from model_build.config_yaml import clip
from serving_facts.settings import StrictModel, repeated
from stage_config.api_limits import PIPELINE_NAME
from stage_config.app import ACCOUNT_PATTERN, REGION_PATTERN, STAGE_PATTERN, AppConfig
from stage_config.loader import CONFIG_DIR, PROJECT_ROOT, ConfigError, load_stage, read_document, shown_path
from stage_config.placeholders import placeholder_fields

PIPELINE_CONFIG_PATH = CONFIG_DIR / "pipeline.yaml"
PLACEHOLDER_CONNECTION_MARKER = "REPLACE-ME"
# A smoke sample's path: Linux's PATH_MAX is 4096 bytes; a project-relative path is far shorter.
MAX_SAMPLE_PATH_CHARS = 1024
# git check-ref-format(1): characters no ref name may hold (besides ASCII control characters and DEL).
BRANCH_FORBIDDEN = " ~^:?*[\\"


class SourceSettings(StrictModel):
    """A CodeConnections (CodeStar) connection + repository, or a CodeCommit repository."""

    connection_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:[0-9]{12}:connection/[^\x00-\x20\x7f]+$",
        description="ARN of an authorised CodeConnections (CodeStar) connection, as the console shows it; with "
        "repository.",
    )
    repository: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
        description="owner/repo on the connection's provider (GitHub, GitLab, Bitbucket); with connection_arn.",
    )
    codecommit_repository: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]{1,100}$",
        description="A CodeCommit repository in the pipeline account, instead of connection_arn + repository.",
    )
    branch: str = Field(
        default="main",
        min_length=1,
        max_length=255,
        description="Branch whose pushes run the pipeline: a name git accepts (git check-ref-format --branch: no "
        "control characters, spaces, ~ ^ : ? * [ \\, .., @{, leading -, ...).",
    )

    @field_validator("branch")
    @classmethod
    def _branch(cls, branch: str) -> str:
        problem = branch_name_problem(branch)
        if problem:
            raise ValueError(f"not a git branch name: {problem}")
        return branch

    @model_validator(mode="after")
    def _one_kind(self) -> SourceSettings:
        connection = self.connection_arn is not None or self.repository is not None
        if connection and self.codecommit_repository is not None:
            raise ValueError("give connection_arn + repository, or codecommit_repository, not both")
        if not connection and self.codecommit_repository is None:
            raise ValueError("give connection_arn + repository (GitHub, GitLab, Bitbucket) or codecommit_repository")
        if connection and (self.connection_arn is None or self.repository is None):
            missing = "repository" if self.repository is None else "connection_arn"
            raise ValueError(f"a connection source needs both connection_arn and repository; {missing} is missing")
        return self

    @property
    def is_placeholder(self) -> bool:
        return PLACEHOLDER_CONNECTION_MARKER in (self.connection_arn or "")


class PipelineStageSettings(StrictModel):
    name: str = Field(pattern=f"^{STAGE_PATTERN}$", description="A stage with a config/<name>.yaml.")
    approval: bool = Field(default=False, description="Manual approval before this stage deploys.")
    regions: list[str] = Field(
        default_factory=list,
        max_length=40,  # more than AWS has regions
        description="Deploy this stage to each region in parallel (a wave). Default: the stage's own region.",
    )

    @model_validator(mode="after")
    def _regions(self) -> PipelineStageSettings:
        bad = [r for r in self.regions if not re.fullmatch(REGION_PATTERN, r)]
        if bad:
            raise ValueError(f"regions must be AWS region names like us-east-1, got {bad}")
        if len(set(self.regions)) != len(self.regions):
            raise ValueError(f"regions lists a region twice: {self.regions}")
        return self


class SmokeSettings(StrictModel):
    # InvokeEndpoint: containers must answer within 60 seconds; a longer bound could never fail.
    max_latency_ms: float = Field(
        default=2000,
        gt=0,
        le=60_000,
        description="Bound on each timed call's client round trip (warm model), in milliseconds (0-60000].",
    )
    timed_calls: PositiveInt = Field(
        default=3, le=100, description="Timed calls per model after the first, untimed one (which may load it), 1-100."
    )
    attempts: PositiveInt = Field(
        default=10, le=50, description="Calls per model while it answers ModelNotReadyException, 1-50."
    )
    endpoint_max_latency_ms: dict[str, float] = Field(
        default_factory=dict,
        description="Per-endpoint bound in milliseconds (0-60000], keyed by the endpoint name as in "
        "config/<stage>.yaml. Default: max_latency_ms for every endpoint.",
    )
    raw_inputs: dict[str, dict[str, Annotated[str, Field(min_length=1, max_length=MAX_SAMPLE_PATH_CHARS)]]] = Field(
        default_factory=dict,
        max_length=64,
        description="Sample files a model is smoke-tested with, by model name then input name, e.g. "
        "{image_classifier: {image: examples/images/cat.jpg}}: each file's bytes are sent as a one-element BYTES "
        "tensor (as `endpoint_client invoke --raw`), for models that refuse generated bytes (an image decoder). "
        "Paths relative to the project root and inside it, each file at most 6 MiB (InvokeEndpoint's payload). "
        "Default: every input is generated from its config.pbtxt.",
    )

    @model_validator(mode="after")
    def _positive(self) -> SmokeSettings:
        bad = {name: bound for name, bound in self.endpoint_max_latency_ms.items() if not 0 < bound <= 60_000}
        if bad:
            raise ValueError(f"endpoint_max_latency_ms must be > 0 and <= 60000 (InvokeEndpoint's limit), got {bad}")
        return self

    def latency_bound_ms(self, endpoint_name: str) -> float:
        return self.endpoint_max_latency_ms.get(endpoint_name, self.max_latency_ms)


# endpoint_client/loadtest.py MAX_CONCURRENCY and MAX_LEVEL_SECONDS: what `loadtest` accepts (checked by a test;
# not imported: that module loads numpy, the config schema must not).
MAX_LOADTEST_CONCURRENCY = 1024
MAX_LOADTEST_SECONDS = 3600.0


class PerformanceSettings(StrictModel):
    """The optional load test after a stage's smoke test (docs/pipeline.md, "Performance gate")."""

    stage: str = Field(
        pattern=f"^{STAGE_PATTERN}$", description="The stage whose endpoints are load-tested (one of stages)."
    )
    concurrency: PositiveInt = Field(
        le=MAX_LOADTEST_CONCURRENCY,
        description=f"Closed-loop users of the load test, 1-{MAX_LOADTEST_CONCURRENCY} (loadtest --concurrency).",
    )
    duration_seconds: float = Field(
        gt=0, le=MAX_LOADTEST_SECONDS, description="Seconds measured per endpoint, (0-3600] (loadtest --duration)."
    )
    # InvokeEndpoint: containers must answer within 60 seconds; a longer objective could never fail.
    slo_p99_ms: float = Field(gt=0, le=60_000, description="p99 client latency objective in ms, (0-60000].")
    min_inferences_per_second: float = Field(
        gt=0, le=1_000_000, description="Throughput floor in inferences per second, (0-1000000]."
    )
    max_regression_percent: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="Fail when throughput drops, or p99 rises, by more than this percent against the newest "
        "load test of another build of the same model, (0-100]. Default: no comparison.",
    )


class PipelineConfig(StrictModel):
    name: str = Field(
        default="triton-promotion",
        min_length=int(PIPELINE_NAME.minimum or 1),
        max_length=PIPELINE_NAME.maximum,
        pattern=f"^(?:{PIPELINE_NAME.pattern})$",
        description=f"The CodePipeline's name ({PIPELINE_NAME.minimum}-{PIPELINE_NAME.maximum} letters, digits or "
        ".@_-; botocore codepipeline PipelineName).",
    )
    account: str | None = Field(
        default=None,
        pattern=f"^{ACCOUNT_PATTERN}$",
        description="12-digit account of the pipeline itself (the tooling account); required, with region, once a "
        "stage sets an account or region. Default: none, an environment-agnostic synth.",
    )
    region: str | None = Field(
        default=None,
        pattern=f"^{REGION_PATTERN}$",
        description="Region of the pipeline itself; set with account. Default: none, an environment-agnostic synth.",
    )
    source: SourceSettings = Field(
        description="Where the source comes from: a connection + repository, or a CodeCommit repository."
    )
    stages: list[PipelineStageSettings] = Field(
        min_length=1,
        max_length=20,
        description="The stages in promotion order (1-20), each once, each with its own config/<name>.yaml.",
    )
    smoke: SmokeSettings = Field(
        default=SmokeSettings(), description="What the smoke test after each stage's deployment accepts."
    )
    performance: PerformanceSettings | None = Field(
        default=None,
        description="A load test of one stage's endpoints after its smoke test, failing the promotion on a missed "
        "SLO or throughput floor. Default: none (no step).",
    )

    @field_validator("stages")
    @classmethod
    def _unique(cls, stages: list[PipelineStageSettings]) -> list[PipelineStageSettings]:
        names = [stage.name for stage in stages]
        twice = repeated(names)
        if twice:
            raise ValueError(f"{twice} listed twice; each stage deploys once")
        return stages

    @model_validator(mode="after")
    def _performance_stage(self) -> PipelineConfig:
        names = [stage.name for stage in self.stages]
        if self.performance is not None and self.performance.stage not in names:
            raise ValueError(f"performance.stage {self.performance.stage!r} is not one of stages ({', '.join(names)})")
        return self

    def stage(self, name: str) -> PipelineStageSettings:
        return next(s for s in self.stages if s.name == name)


def pipeline_problems(
    pipeline: PipelineConfig, stages: dict[str, AppConfig], readers: list[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """(field path, message) for rules joining config/pipeline.yaml and the stage files. With `readers`, the
    cross-account read grants a promotion needs go there instead (a pipeline not set up yet only warns of them)."""
    problems: list[tuple[str, str]] = []
    order = [s.name for s in pipeline.stages]
    for index, name in enumerate(order):
        config = stages[name]
        path = f"stages[{index}]"
        if config.promote_from is not None:
            if config.promote_from not in order[:index]:
                problems.append(
                    (
                        path,
                        f"stage {name!r} promotes from {config.promote_from!r}, which must be an earlier stage "
                        f"of the pipeline (stages in order: {', '.join(order)})",
                    )
                )
            elif stages[config.promote_from].artifacts.bucket_name is None:
                problems.append(
                    (
                        path,
                        f"stage {name!r} copies artifacts from stage {config.promote_from!r}, so "
                        f"config/{config.promote_from}.yaml must set artifacts.bucket_name",
                    )
                )
            else:
                found = _reader_problems(path, pipeline, config, stages[config.promote_from])
                (problems if readers is None else readers).extend(found)
    problems.extend(_bucket_name_problems(order, stages))
    for index, stage in enumerate(pipeline.stages):
        if stage.approval:
            problems.extend(_guarded_rollout_problems(f"stages[{index}]", stages[stage.name]))
    placed = [s.name for s in pipeline.stages if s.regions or stages[s.name].account or stages[s.name].region]
    if placed and not (pipeline.account and pipeline.region):
        problems.append(
            (
                "account",
                f"stages {placed} set an account or region, so the pipeline needs its own: set account and region "
                "in config/pipeline.yaml (cross-environment deployments start from a known pipeline environment)",
            )
        )
    endpoint_names = {e.name for config in stages.values() for e in config.endpoints}
    for endpoint in sorted(set(pipeline.smoke.endpoint_max_latency_ms) - endpoint_names):
        problems.append(
            (
                "smoke.endpoint_max_latency_ms",
                f"unknown endpoint {endpoint!r}; endpoints of the stages: {', '.join(sorted(endpoint_names))}",
            )
        )
    problems.extend(_raw_input_problems(pipeline.smoke.raw_inputs, stages))
    return problems


def _bucket_name_problems(order: list[str], stages: dict[str, AppConfig]) -> list[tuple[str, str]]:
    """Two stages cannot name the same artifact bucket: S3 bucket names are unique within a partition, across
    accounts and regions (S3 User Guide, "Bucket naming rules"), so the second stage's artifact stack would fail
    to create it."""
    first: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for index, name in enumerate(order):
        bucket = stages[name].artifacts.bucket_name
        if bucket is None:
            continue
        if bucket in first:
            problems.append(
                (
                    f"stages[{index}]",
                    f"config/{name}.yaml artifacts.bucket_name {bucket!r} is also config/{first[bucket]}.yaml "
                    "artifacts.bucket_name; S3 bucket names are unique per partition, so give each stage its own",
                )
            )
        else:
            first[bucket] = name
    return problems


def _raw_input_problems(
    raw_inputs: dict[str, dict[str, str]], stages: dict[str, AppConfig], root: Path = PROJECT_ROOT
) -> list[tuple[str, str]]:
    """Each sample names a model an endpoint of a stage serves (and, for an ensemble, one of its inputs) and is
    a regular file inside the project that fits one InvokeEndpoint request."""
    if not raw_inputs:
        return []
    from endpoint_client.limits import MAX_PAYLOAD_BYTES  # only when used: the package loads numpy

    served = {name: config.model(name) for config in stages.values() for e in config.endpoints for name in e.models}
    problems = []
    for model_name, files in raw_inputs.items():
        field = f"smoke.raw_inputs.{model_name}"
        model = served.get(model_name)
        if model is None:
            problems.append((field, f"no endpoint of the stages serves a model {model_name!r}"))
            continue
        inputs = model.ensemble.inputs if model.ensemble is not None else None
        for input_name, value in files.items():
            where = f"{field}.{input_name}"
            if inputs is not None and input_name not in inputs:
                problems.append((where, f"ensemble {model_name!r} has no input {input_name!r} (inputs: {inputs})"))
            problem = _sample_file_problem(value, root, MAX_PAYLOAD_BYTES)
            if problem:
                problems.append((where, problem))
    return problems


def _sample_file_problem(value: str, root: Path, max_bytes: int) -> str | None:
    """A smoke sample is a regular file inside the project of at most `max_bytes`. Never raises: a path the OS
    refuses (too long, a symlink loop, unreadable) is a problem like any other."""
    shown = repr(clip(value, 80))
    try:
        resolved = (root / value).resolve()
        if not resolved.is_relative_to(root) or resolved == root:
            return f"{shown} is not a file inside the project (paths are relative to {root})"
        info = resolved.stat()
    except FileNotFoundError:
        return f"{shown} does not exist (paths are relative to {root})"
    except RuntimeError:  # Path.resolve: "Symlink loop" (Python 3.11)
        return f"{shown} is a loop of symbolic links"
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        return f"{shown} cannot be read: {clip(reason, 80)}"
    if not stat.S_ISREG(info.st_mode):
        return f"{shown} is not a regular file"
    if info.st_size > max_bytes:
        return (
            f"{shown} holds {info.st_size} bytes; one request carries at most {max_bytes} (InvokeEndpoint's payload "
            "limit)"
        )
    return None


def branch_name_problem(name: str) -> str | None:
    """What `git check-ref-format --branch` refuses in `name` (git-check-ref-format(1), rules 1 and 3-10, and
    the --branch rules: no leading '-', not HEAD); None for a valid branch name. CodePipeline triggers on the
    branch's pushes, so a name git refuses can never trigger it."""
    control = [c for c in name if ord(c) < 0x20 or ord(c) == 0x7F]
    if control:
        return f"holds the control character {control[0]!a} (ASCII control characters and DEL are not allowed)"
    forbidden = sorted({c for c in name if c in BRANCH_FORBIDDEN})
    if forbidden:
        return f"holds {', '.join(map(repr, forbidden))} (space ~ ^ : ? * [ \\ are not allowed)"
    checks = [
        (".." in name, "holds '..'"),
        ("@{" in name, "holds '@{'"),
        (name == "@", "is '@'"),
        (name == "HEAD", "is HEAD"),
        (name.startswith("-"), "starts with '-'"),
        (name.startswith("/") or name.endswith("/") or "//" in name, "starts or ends with '/' or holds '//'"),
        (name.endswith("."), "ends with '.'"),
    ]
    for failed, why in checks:
        if failed:
            return why
    for part in name.split("/"):
        if part.startswith(".") or part.endswith(".lock"):
            return f"its part {part!r} starts with '.' or ends with '.lock'"
    return None


def _guarded_rollout_problems(path: str, config: AppConfig) -> list[tuple[str, str]]:
    """A stage behind an approval (prod) shifts traffic gradually and rolls back on its alarms."""
    problems = []
    for endpoint in config.endpoints:
        deployment = endpoint.deployment
        gradual = deployment.strategy == "rolling" or deployment.traffic in ("canary", "linear")
        if not gradual or not deployment.rollback_alarms:
            now = (
                f"strategy {deployment.strategy}, traffic {deployment.traffic}, "
                f"rollback_alarms {list(deployment.rollback_alarms)}"
            )
            problems.append(
                (
                    path,
                    f"stage {config.stage!r} is approved before it deploys, so endpoint {endpoint.name!r} must "
                    "roll out gradually with auto-rollback: set deployment.traffic canary or linear (or strategy "
                    f"rolling) and rollback_alarms in config/{config.stage}.yaml (now: {now})",
                )
            )
    return problems


def _reader_problems(
    path: str, pipeline: PipelineConfig, target: AppConfig, source: AppConfig
) -> list[tuple[str, str]]:
    """The target stage's account must be allowed to read the source stage's model prefix."""
    target_account = target.account or pipeline.account
    source_account = source.account or pipeline.account
    if target_account is None or target_account == source_account or target_account in source.artifacts.reader_accounts:
        return []
    return [
        (
            path,
            f"stage {target.stage!r} (account {target_account}) copies from stage {source.stage!r} "
            f"(account {source_account or 'of the pipeline'}); add {target_account} to "
            f"config/{source.stage}.yaml artifacts.reader_accounts",
        )
    ]


def load_pipeline_config(path: Path = PIPELINE_CONFIG_PATH) -> PipelineConfig:
    """Parse and validate config/pipeline.yaml. Raises ConfigError naming the file and each field."""
    document = read_document(path)
    try:
        return PipelineConfig.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(str(shown_path(path)), error, document=document)) from None


def _with_stage_environment(
    pipeline: PipelineConfig, stages: dict[str, AppConfig], shown: object, unconfigured: list[str]
) -> PipelineConfig:
    """A pipeline without account/region whose stages set one deploys from the first such stage's environment.

    CDK Pipelines needs the pipeline's own environment once a stage names one (cross-environment actions start
    from a known account and region); a user who set dev's account to deploy dev alone should not have to
    configure the pipeline too (issue #27 item 2). Only where the stages name at most one account: across
    accounts, which one is the tooling account is the user's choice (refused by `pipeline_problems`). Said once
    on stderr, never silently; with an account and region in config/pipeline.yaml, those are used as they are.
    A pipeline not set up yet (a placeholder left, so `make deploy-pipeline` refuses it) across accounts is
    synthesized from the first stage's environment for checking only, so that `make test` passes for a user of
    the stages alone; once it is set up, the tooling account is theirs to name. `unconfigured`: the pipeline's
    placeholder fields (`placeholder_fields`, computed once by `load_pipeline`).
    """
    if pipeline.account and pipeline.region:
        return pipeline
    accounts = {stages[s.name].account for s in pipeline.stages if s.name in stages and stages[s.name].account}
    if len(accounts) > 1 and not unconfigured:  # cross-account: the tooling account is the user's choice
        return pipeline
    for stage in pipeline.stages:
        config = stages.get(stage.name)
        if config is not None and config.account and config.region:
            account = pipeline.account or config.account
            region = pipeline.region or config.region
            if len(accounts) > 1:
                print(
                    f"WARNING: {shown}: not set up yet (placeholder: {', '.join(unconfigured)}) and its stages use "
                    f"{len(accounts)} accounts: synthesized from the environment of stage {stage.name!r} "
                    f"({account}, {region}) for checking only; set the pipeline's own account and region there before "
                    "`make deploy-pipeline` (which refuses the placeholder)",
                    file=sys.stderr,
                )
            else:
                print(
                    f"WARNING: {shown}: account/region not set: the pipeline deploys from the environment of stage "
                    f"{stage.name!r} ({account}, {region}); set account and region there to choose another",
                    file=sys.stderr,
                )
            return pipeline.model_copy(update={"account": account, "region": region})
    return pipeline


def load_pipeline(
    path: Path = PIPELINE_CONFIG_PATH, config_dir: Path | None = None
) -> tuple[PipelineConfig, dict[str, AppConfig]]:
    """config/pipeline.yaml and the config of every stage it lists, checked together."""
    pipeline = load_pipeline_config(path)
    config_dir = config_dir or path.parent
    stages: dict[str, AppConfig] = {}
    errors = []
    for stage in pipeline.stages:
        try:
            stages[stage.name] = load_stage(stage.name, config_dir)
        except ConfigError as error:
            errors.append(str(error))
    if errors:
        raise ConfigError("\n".join(errors))
    shown = shown_path(path)
    # Once, before the stage environment is copied in (an account or region is never a placeholder: both are
    # validated), for both uses below.
    unconfigured = placeholder_fields(pipeline.model_dump(mode="json"))
    pipeline = _with_stage_environment(pipeline, stages, shown, unconfigured)
    # Not set up yet: `make deploy-pipeline` refuses it, so a stage user's cross-account setup only warns.
    readers: list[tuple[str, str]] | None = [] if unconfigured else None
    problems = pipeline_problems(pipeline, stages, readers)
    if problems:
        raise ConfigError("\n".join(f"{shown}: {field}: {message}" for field, message in problems))
    for field, message in readers or []:
        print(f"WARNING: {shown}: {field}: {message} (before `make deploy-pipeline`)", file=sys.stderr)
    return pipeline, stages
