"""The app's one typed configuration: config/<stage>.yaml.

Field checks live on the pydantic models; checks that join several parts of the file (a model an
endpoint names, the instance catalogue, the Triton release) live in `cross_field_problems`, which
reports every problem with its field path instead of stopping at the first.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from serving_facts import releases
from serving_facts.catalogue import UnknownInstanceTypeError, instance_type
from serving_facts.matching import BuildMatchError, match_build
from serving_facts.settings import ModelSettings, StrictModel, repeated
from stage_config.api_limits import (
    ENDPOINT_NAME,
    ENVIRONMENT,
    INFERENCE_COMPONENT_NAME,
    MAX_ENDPOINT_NAME_LENGTH,
    MAX_ENVIRONMENT_TOTAL_BYTES,
    MAX_ENVIRONMENT_VARIABLES,
    MAX_INFERENCE_COMPONENT_NAME_LENGTH,
)
from stage_config.build import BuildSettings, build_region_problems
from stage_config.container import environment_size, typed_environment
from stage_config.endpoint import EndpointSettings, component_name, endpoint_driver_problems
from stage_config.shadow import shadow_cross_field_problems
from triton_cdk.images import known_triton_releases, triton_image
from triton_cdk.serving.environment import DEFAULT_MODEL_NAME

# Whole-value patterns (re.fullmatch, ASCII classes: `$` would accept a trailing newline and `\d` any script's
# digits).
EMAIL_PATTERN = r"[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+\.[^@\s\x00-\x1f\x7f]+"
STAGE_PATTERN = r"[a-z][a-z0-9]{0,11}"
ACCOUNT_PATTERN = r"[0-9]{12}"
REGION_PATTERN = r"[a-z]{2}(-gov)?-[a-z]+-[0-9]"

# S3: "Bucket policies are limited to 20 KB in size" (S3 User Guide, "Bucket policies and user
# policies"). Measured on the synthesized artifact stack with every name at its longest
# (tests/foundation/test_config_file_refusals.py): the policy is at most 2.3 KB without reader accounts and each
# reader account adds 586 bytes (two statements). 2 KB stays free for statements other stacks add.
BUCKET_POLICY_LIMIT_BYTES = 20_000
BUCKET_POLICY_BASE_BYTES = 2_300
BUCKET_POLICY_HEADROOM_BYTES = 2_048
BUCKET_POLICY_BYTES_PER_READER = 586
MAX_READER_ACCOUNTS = (
    BUCKET_POLICY_LIMIT_BYTES - BUCKET_POLICY_BASE_BYTES - BUCKET_POLICY_HEADROOM_BYTES
) // BUCKET_POLICY_BYTES_PER_READER
# CloudWatch PutMetricAlarm: Period x EvaluationPeriods <= 7 days, and <= 1 day for periods under an hour.
MAX_ALARM_WINDOW_SECONDS = 604_800
MAX_ALARM_WINDOW_SECONDS_SHORT_PERIOD = 86_400


# S3 User Guide, "General purpose bucket naming rules": reserved prefixes and suffixes (access point aliases,
# Object Lambda, Multi-Region Access Points, directory buckets, table buckets, S3's own and its examples').
BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name_problems(name: str) -> list[str]:
    """What S3's general purpose bucket naming rules (S3 User Guide, "General purpose bucket naming rules") and
    aws-cdk-lib's `Bucket.validateBucketName` (aws-s3/lib/bucket.ts: no dash next to a period; it throws a jsii
    error at synth) refuse in `name`; empty when it is a valid bucket name."""
    problems = []
    if not 3 <= len(name) <= 63:
        problems.append(f"has {len(name)} characters; S3 allows 3 to 63")
    if not re.fullmatch(r"[a-z0-9.-]*", name):
        problems.append("may hold only lowercase letters, digits, '.' and '-'")
    elif name and not (re.fullmatch(r"[a-z0-9]", name[0]) and re.fullmatch(r"[a-z0-9]", name[-1])):
        problems.append("must begin and end with a lowercase letter or digit")
    if ".." in name:
        problems.append("must not hold two adjacent periods")
    if ".-" in name or "-." in name:
        problems.append("must not hold a dash next to a period (aws-cdk-lib refuses it)")
    if re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", name):
        problems.append("must not look like an IP address")
    problems += [f"must not start with {p!r} (reserved by S3)" for p in BUCKET_RESERVED_PREFIXES if name.startswith(p)]
    problems += [f"must not end with {x!r} (reserved by S3)" for x in BUCKET_RESERVED_SUFFIXES if name.endswith(x)]
    return problems


class ArtifactSettings(StrictModel):
    bucket_name: str | None = Field(
        default=None,
        description="Explicit bucket name (S3's bucket naming rules: 3-63 lowercase letters, digits, . and -, no "
        "reserved prefix or suffix); needed when another stage promotes from this one. Choose it before the first "
        "deploy: a changed name replaces the bucket (S3 BucketName: update requires replacement), which the "
        "stage's other stacks block while they import its name (README, Before the first deploy). Default: "
        "CloudFormation generates one.",
    )
    reader_accounts: list[str] = Field(
        default_factory=list,
        max_length=MAX_READER_ACCOUNTS,
        description="Accounts (e.g. prod's) allowed to read the model prefix and decrypt it, for promotion. "
        f"At most {MAX_READER_ACCOUNTS}: each adds 586 bytes to the bucket policy, which S3 limits to 20 KB.",
    )
    noncurrent_version_expiration_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="Old (noncurrent) object versions are deleted after this many days, 1-3650.",
    )
    access_log_expiration_days: int = Field(
        default=365, ge=1, le=3650, description="Access logs are deleted after this many days, 1-3650."
    )

    @field_validator("bucket_name")
    @classmethod
    def _bucket_name(cls, name: str | None) -> str | None:
        problems = bucket_name_problems(name) if name is not None else []
        if problems:
            raise ValueError("not a valid S3 bucket name: it " + "; it ".join(problems))
        return name

    @model_validator(mode="after")
    def _accounts(self) -> ArtifactSettings:
        bad = [a for a in self.reader_accounts if not re.fullmatch(ACCOUNT_PATTERN, a)]
        if bad:
            raise ValueError(f"reader_accounts must be 12-digit account ids, got {bad}")
        twice = repeated(self.reader_accounts)
        if twice:
            # Each account names two bucket-policy statements by Sid; S3 refuses a repeated Sid.
            raise ValueError(f"reader_accounts lists {twice} twice")
        return self


class NotificationSettings(StrictModel):
    # Each address is one AWS::SNS::Subscription in every endpoint and build stack: the real bound is
    # CloudFormation's 500 resources per stack, which aws-cdk-lib refuses at synth (stacks/resource_limit.py).
    emails: list[Annotated[str, Field(max_length=254)]] = Field(
        default_factory=list,
        max_length=400,
        description="E-mail subscriptions of the alarm and build-failure topics, each address once (one resource in "
        "every endpoint and build stack; CloudFormation allows 500 per stack).",
    )

    @model_validator(mode="after")
    def _emails(self) -> NotificationSettings:
        bad = [e for e in self.emails if not re.fullmatch(EMAIL_PATTERN, e)]
        if bad:
            raise ValueError(f"not e-mail addresses: {bad}")
        twice = repeated(self.emails)
        if twice:
            raise ValueError(f"emails lists {twice} twice (one subscription per address)")
        return self


class AppConfig(StrictModel):
    stage: str = Field(
        pattern=f"^{STAGE_PATTERN}$",
        description="Short stage name (dev, prod, ...): equals the file name; prefixes stack and endpoint names.",
    )
    account: str | None = Field(
        default=None,
        pattern=f"^{ACCOUNT_PATTERN}$",
        description="12-digit account to deploy to; set with region. Default: none, an environment-agnostic synth.",
    )
    region: str | None = Field(
        default=None,
        pattern=f"^{REGION_PATTERN}$",
        description="Region to deploy to; set with account. Default: none, an environment-agnostic synth (the "
        "Triton image is then looked up per region at deploy time).",
    )
    triton_release: str = Field(
        max_length=16, description="YY.MM of a SageMaker Triton image the SageMaker SDK knows, e.g. 24.09."
    )
    artifacts: ArtifactSettings = Field(
        default=ArtifactSettings(), description="The artifact bucket: name, reader accounts and lifecycle."
    )
    notifications: NotificationSettings = Field(
        default=NotificationSettings(), description="Who the alarm and build-failure topics notify. Default: nobody."
    )
    # Each model is at least one artifact resource in the build stack and each endpoint a stack of its
    # own; aws-cdk-lib holds each stack to CloudFormation's 500 resources at synth (stacks/resource_limit.py).
    models: list[ModelSettings] = Field(
        min_length=1, max_length=200, description="The models to build and serve, 1-200, each name once."
    )
    endpoints: list[EndpointSettings] = Field(
        default_factory=list,
        max_length=100,
        description="The SageMaker endpoints, one stack each (at most 100), each name once.",
    )
    build: BuildSettings = Field(
        default=BuildSettings(),
        description="The model build (CodeBuild): timeouts, concurrency, log retention and a reserved fleet.",
    )
    promote_from: str | None = Field(
        default=None,
        pattern=f"^{STAGE_PATTERN}$",
        description="Stage whose artifacts this stage reuses (copied, never rebuilt), e.g. dev for prod; not the "
        "stage itself, and no cycle (the first stage of a chain builds).",
    )

    def model(self, name: str) -> ModelSettings:
        return next(m for m in self.models if m.name == name)

    def served_models(self, names: list[str]) -> list[ModelSettings]:
        """The named models and, for each ensemble among them, the models its steps name: what an endpoint
        serving `names` loads (composing models ship in the ensemble's archive). Each once; unknown names
        are left out (reported by cross_field_problems)."""
        known = {model.name: model for model in self.models}
        served: dict[str, ModelSettings] = {}
        for name in names:
            if name not in known:
                continue
            served.setdefault(name, known[name])
            for composing in known[name].composing_models:
                if composing in known:
                    served.setdefault(composing, known[composing])
        return list(served.values())

    def deployed_endpoint_name(self, endpoint: EndpointSettings) -> str:
        """Endpoints are named per stage so dev and prod can share an account."""
        return f"{self.stage}-{endpoint.name}"


def cross_field_problems(config: AppConfig) -> list[tuple[str, str]]:
    """(field path, message) for every rule that spans several parts of the config."""
    problems: list[tuple[str, str]] = []
    known = known_triton_releases()
    release_known = config.triton_release in known
    if not release_known:
        problems.append(
            (
                "triton_release",
                f"{config.triton_release!r} is not a release the SageMaker SDK knows; use one of {', '.join(known)}",
            )
        )
    elif config.region:
        try:
            triton_image(config.triton_release, config.region, gpu=True)
        except ValueError as error:
            problems.append(("region", str(error)))

    names = [m.name for m in config.models]
    for name in repeated(names):
        problems.append(("models", f"model name {name!r} is used twice; names must be unique"))
    # SageMaker names are unique per account and region ignoring case: CreateEndpoint refuses "Dev-A" next to
    # "dev-a" ("Cannot create already existing endpoint"); the endpoint stacks would both deploy.
    for name in repeated([e.name.lower() for e in config.endpoints]):
        spelled = [e.name for e in config.endpoints if e.name.lower() == name]
        if len(set(spelled)) == 1:
            problems.append(("endpoints", f"endpoint name {spelled[0]!r} is used twice; names must be unique"))
        else:
            problems.append(
                ("endpoints", f"endpoint names {spelled} are one name to SageMaker, which ignores case; use one")
            )
    problems.extend(component_name_problems(config))

    problems.extend(ensemble_problems(config))
    for index, endpoint in enumerate(config.endpoints):
        problems.extend(_endpoint_problems(config, f"endpoints[{index}]", endpoint, set(names), release_known))
        problems.extend(_alarm_window_problems(f"endpoints[{index}].alarms", endpoint))
        problems.extend(_environment_problems(f"endpoints[{index}].container.extra_environment", endpoint))
        problems.extend(shadow_cross_field_problems(config, f"endpoints[{index}]", endpoint))
    if release_known:
        problems.extend(build_region_problems(config))  # GPU CodeBuild regions (artifact_build/gpu_regions.py)
    return problems


def ensemble_problems(config: AppConfig) -> list[tuple[str, str]]:
    """Each ensemble step names a configured model that is neither the ensemble itself nor another ensemble.

    Triton loads an ensemble only once every step's model is available and refuses circular dependencies
    (core model_repository_manager.cc: "ensemble ... contains models that are not available",
    "circular dependency between ensembles"); nested ensembles, which Triton does allow, are refused for
    now: their composing artifacts would themselves carry composing models.
    """
    known = {model.name: model for model in config.models}
    problems: list[tuple[str, str]] = []
    for index, model in enumerate(config.models):
        if model.ensemble is None:
            continue
        for step_index, step in enumerate(model.ensemble.steps):
            path = f"models[{index}].ensemble.steps[{step_index}].model"
            target = known.get(step.model)
            if step.model == model.name:
                problems.append((path, f"ensemble {model.name!r} names itself; a step must name another model"))
            elif target is None:
                problems.append((path, f"unknown model {step.model!r}; configured models: {', '.join(sorted(known))}"))
            elif target.is_ensemble:
                problems.append(
                    (
                        path,
                        f"{step.model!r} is an ensemble: nested ensembles are not supported yet; list its steps in "
                        f"{model.name!r} instead",
                    )
                )
    return problems


def _environment_problems(path: str, endpoint: EndpointSettings) -> list[tuple[str, str]]:
    """The whole container environment (the typed fields' variables, extra_environment and the default model the
    endpoint stack adds) within SageMaker's ContainerDefinition.Environment: at most MAX_ENVIRONMENT_VARIABLES
    variables (botocore sagemaker, shape EnvironmentMap) and "The maximum length of all keys and values in the
    map, combined, is 32 KB" (the member's documentation). Per key and value: ContainerSettings."""
    environment = {**typed_environment(endpoint.container), **endpoint.container.extra_environment}
    # Single-model endpoints and each inference component name their model; multi-model endpoints do not.
    default_models = [] if endpoint.mode == "multi_model" else endpoint.models
    longest = max(default_models, key=len, default=None)
    if longest is not None:
        environment[DEFAULT_MODEL_NAME] = longest
    problems = []
    owned = len(environment) - len(endpoint.container.extra_environment)
    if len(environment) > MAX_ENVIRONMENT_VARIABLES:
        problems.append(
            (
                path,
                f"the container would get {len(environment)} variables ({owned} set by the typed container "
                f"fields and the endpoint's mode); SageMaker allows {MAX_ENVIRONMENT_VARIABLES} ({ENVIRONMENT.source})",
            )
        )
    total = environment_size(environment)
    if total > MAX_ENVIRONMENT_TOTAL_BYTES:
        problems.append(
            (
                path,
                f"the container's variables total {total} bytes (keys and values, the typed container fields' "
                f"included); SageMaker allows {MAX_ENVIRONMENT_TOTAL_BYTES} per container",
            )
        )
    return problems


def component_name_problems(config: AppConfig) -> list[tuple[str, str]]:
    """Inference component names (`<stage>-<endpoint>-<model>`, `_` written as `-`) must be valid
    InferenceComponentNames (botocore sagemaker: pattern and length) and unique in the stage ignoring case:
    models `a_b` and `a-b`, or endpoint `x` with model `y-z` next to endpoint `x-y` with model `z`, would name
    one component twice."""
    problems: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for index, endpoint in enumerate(config.endpoints):
        if endpoint.mode != "inference_components":
            continue
        deployed = config.deployed_endpoint_name(endpoint)
        for model in endpoint.models:
            name = component_name(deployed, model)
            where = f"endpoints[{index}].models"
            if len(name) > MAX_INFERENCE_COMPONENT_NAME_LENGTH:
                problems.append(
                    (
                        where,
                        f"component name {name!r} of model {model!r} has {len(name)} characters; SageMaker allows "
                        f"{MAX_INFERENCE_COMPONENT_NAME_LENGTH} (shorten the endpoint or model name)",
                    )
                )
            elif not INFERENCE_COMPONENT_NAME.fullmatch(name):
                problems.append(
                    (
                        where,
                        f"component name {name!r} of model {model!r} is not a valid InferenceComponentName "
                        f"({INFERENCE_COMPONENT_NAME.pattern}, {INFERENCE_COMPONENT_NAME.source}): a model name may "
                        "not end with '_' or '-' here",
                    )
                )
            first = seen.setdefault(name.lower(), f"endpoints[{index}] model {model!r}")
            if first != f"endpoints[{index}] model {model!r}":
                problems.append(
                    (
                        where,
                        f"model {model!r} would be component {name!r}, which {first} already names (components "
                        "are named <stage>-<endpoint>-<model> with '_' as '-', and SageMaker ignores case); "
                        "rename one",
                    )
                )
    return problems


def _alarm_window_problems(path: str, endpoint: EndpointSettings) -> list[tuple[str, str]]:
    """CloudWatch PutMetricAlarm: "Period multiplied by EvaluationPeriods can't be more than 604,800
    seconds. For alarms with a period of less than one hour, [it] can't be longer than one day"."""
    alarms = endpoint.alarms
    window = alarms.period_seconds * alarms.evaluation_periods
    limit = MAX_ALARM_WINDOW_SECONDS if alarms.period_seconds >= 3600 else MAX_ALARM_WINDOW_SECONDS_SHORT_PERIOD
    if window <= limit:
        return []
    return [
        (
            f"{path}.evaluation_periods",
            f"period_seconds {alarms.period_seconds} x evaluation_periods {alarms.evaluation_periods} = {window} s; "
            f"CloudWatch allows at most {limit} s for this period (use at most {limit // alarms.period_seconds} "
            "evaluation periods)",
        )
    ]


def _shared_composing_problems(
    config: AppConfig, path: str, endpoint: EndpointSettings, model_names: set[str]
) -> list[tuple[str, str]]:
    """On a multi-model endpoint each `TargetModel` archive is registered as a repository of its own
    (Triton's src/sagemaker_server.cc, SageMakerMMELoadModel), so a composing model shipped in two archives
    (two ensembles, or an ensemble and its own target) would be two models of one name on one server. Until
    that is proven on a real Triton, refused."""
    if endpoint.mode != "multi_model":
        return []
    shipped_in: dict[str, list[str]] = {}
    for target in (m for m in endpoint.models if m in model_names):
        for name in {target, *config.model(target).composing_models}:
            shipped_in.setdefault(name, []).append(target)
    return [
        (
            f"{path}.models",
            f"model {name!r} would ship in the archives of {', '.join(sorted(targets))}; on a multi_model endpoint "
            "each model may ship in one target's archive only (serve the other ensemble on its own endpoint)",
        )
        for name, targets in sorted(shipped_in.items())
        if len(targets) > 1
    ]


def _traffic_problems(path: str, endpoint: EndpointSettings) -> list[tuple[str, str]]:
    """Some variant must receive traffic, and enabled data capture must capture something.

    CreateEndpointConfig: InitialVariantWeight 0 on every variant routes no request anywhere (the endpoint
    construct refuses it too: "at least one variant needs an initial_weight above 0", triton_cdk/serving/
    endpoint.py). DataCaptureConfig.CaptureOptions is a list of at least one of Input/Output (botocore sagemaker
    CaptureOptionList min 1): capture_request and capture_response both false leave it empty.
    """
    problems: list[tuple[str, str]] = []
    if endpoint.initial_weight == 0 and all(v.initial_weight == 0 for v in endpoint.extra_variants):
        some = " and every extra_variants[].initial_weight is 0 too" if endpoint.extra_variants else ""
        problems.append(
            (
                f"{path}.initial_weight",
                f"is 0{some}: no variant would receive traffic; at least one variant needs an initial_weight above 0 "
                "(0-1000, InitialVariantWeight)",
            )
        )
    capture = endpoint.data_capture
    if capture.enabled and not (capture.capture_request or capture.capture_response):
        problems.append(
            (
                f"{path}.data_capture",
                "capture_request and capture_response are both false: enabled data capture needs at least one "
                "(CaptureOptions holds at least one of Input, Output)",
            )
        )
    return problems


def _endpoint_problems(
    config: AppConfig, path: str, endpoint: EndpointSettings, model_names: set[str], release_known: bool
) -> list[tuple[str, str]]:
    """Rules for one endpoint; release-dependent ones only once the release is known to be valid."""
    problems: list[tuple[str, str]] = []
    deployed = config.deployed_endpoint_name(endpoint)
    if len(deployed) > MAX_ENDPOINT_NAME_LENGTH:
        problems.append(
            (
                f"{path}.name",
                f"deployed name {deployed!r} is {len(deployed)} characters; SageMaker allows "
                f"{MAX_ENDPOINT_NAME_LENGTH} ({ENDPOINT_NAME.source})",
            )
        )
    problems.extend(_traffic_problems(path, endpoint))
    # Component names: component_name_problems.
    for model in endpoint.models:
        if model not in model_names:
            problems.append(
                (f"{path}.models", f"unknown model {model!r}; configured models: {', '.join(sorted(model_names))}")
            )
        elif endpoint.mode == "inference_components" and config.model(model).is_ensemble:
            problems.append(
                (
                    f"{path}.models",
                    f"{model!r} is an ensemble: ensembles on inference_components endpoints are not supported yet "
                    "(each component is one model archive); serve it on a single_model or multi_model endpoint",
                )
            )
        elif endpoint.uncompressed_model_data and config.model(model).is_ensemble:
            # An ensemble's version folder `1/` is empty, and an S3 prefix holds no empty folder: Triton then
            # refuses it ("at least one version must be available", core model_config_utils).
            problems.append(
                (
                    f"{path}.uncompressed_model_data",
                    f"{model!r} is an ensemble, whose empty version folder cannot be stored as uncompressed model "
                    "data in S3; leave uncompressed_model_data out (the archive keeps the folder)",
                )
            )
    problems.extend(_shared_composing_problems(config, path, endpoint, model_names))
    try:
        instance = instance_type(endpoint.instance_type)
    except UnknownInstanceTypeError as error:
        problems.append((f"{path}.instance_type", str(error)))
        return problems

    if endpoint.mode == "multi_model" and instance.gpu_count > 1:
        problems.append(
            (
                f"{path}.instance_type",
                f"multi-model endpoints need a single-GPU instance; {instance.name} has {instance.gpu_count} GPUs "
                f"(use e.g. {instance.family}.xlarge .. {instance.family}.16xlarge with 1 GPU)",
            )
        )
    gpu_supported = instance.has_gpu and (
        not release_known
        or releases.supports_compute_capability(config.triton_release, instance.gpu.compute_capability)
    )
    if instance.has_gpu and not gpu_supported:
        problems.append(
            (
                f"{path}.instance_type",
                f"Triton {config.triton_release} does not support {instance.gpu.model} (compute capability "
                f"{instance.gpu.compute_capability}); pick a newer GPU or an older triton_release",
            )
        )
    if release_known and gpu_supported:  # the GPU host's driver (serving_facts/drivers.py)
        drivers = endpoint_driver_problems(endpoint, config.triton_release)
        problems += [(f"{path}.{field}", message) for field, message in drivers]
    # An ensemble's composing models run on this endpoint's instances too.
    served = config.served_models([m for m in endpoint.models if m in model_names])
    if release_known and gpu_supported and any(model.needs_gpu_build for model in served):
        try:
            match_build(instance, config.triton_release, config.build.fleet)
        except (BuildMatchError, ValueError) as error:
            problems.append((f"{path}.instance_type", str(error)))
    if not instance.has_gpu:
        for model in served:
            if model.platform == "tensorrt_plan":
                problems.append(
                    (
                        f"{path}.instance_type",
                        f"model {model.name!r} is a TensorRT plan and needs a GPU instance; {instance.name} has none "
                        "(use ml.g5/g6/... or platform onnxruntime_onnx)",
                    )
                )
            elif model.uses_gpu:
                problems.append(
                    (
                        f"{path}.instance_type",
                        f"model {model.name!r} has KIND_GPU instance groups but {instance.name} has no GPU "
                        "(set instance_groups kind KIND_CPU)",
                    )
                )
        if endpoint.autoscaling and endpoint.autoscaling.gpu_utilization_percent is not None:
            problems.append(
                (
                    f"{path}.autoscaling.gpu_utilization_percent",
                    f"GPU scaling needs a GPU instance; {instance.name} has none (use invocations_per_instance)",
                )
            )
    return problems
