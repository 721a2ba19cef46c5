"""The app's one typed configuration: config/<stage>.yaml.

Field checks live on the pydantic models; checks that join several parts of the file (a model an
endpoint names, the instance catalogue, the Triton release) live in `cross_field_problems`, which
reports every problem with its field path instead of stopping at the first.
"""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from model_build import releases
from model_build.catalogue import UnknownInstanceTypeError, instance_type
from model_build.matching import BuildMatchError, match_build
from model_build.settings import ModelSettings, StrictModel
from triton_cdk.config.build import BuildSettings
from triton_cdk.config.endpoint import EndpointSettings
from triton_cdk.images import known_triton_releases, triton_image

EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"


class ArtifactSettings(StrictModel):
    bucket_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description="Explicit bucket name; needed when another stage promotes from this one. "
        "Default: CloudFormation generates one.",
    )
    reader_accounts: list[str] = Field(
        default_factory=list,
        description="Accounts (e.g. prod's) allowed to read the model prefix and decrypt it, for promotion.",
    )
    noncurrent_version_expiration_days: int = Field(default=30, ge=1, le=3650)
    access_log_expiration_days: int = Field(default=365, ge=1, le=3650)

    @model_validator(mode="after")
    def _accounts(self) -> ArtifactSettings:
        bad = [a for a in self.reader_accounts if not re.match(r"^\d{12}$", a)]
        if bad:
            raise ValueError(f"reader_accounts must be 12-digit account ids, got {bad}")
        return self


class NotificationSettings(StrictModel):
    emails: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _emails(self) -> NotificationSettings:
        bad = [e for e in self.emails if not re.match(EMAIL_PATTERN, e)]
        if bad:
            raise ValueError(f"not e-mail addresses: {bad}")
        return self


class AppConfig(StrictModel):
    stage: str = Field(pattern=r"^[a-z][a-z0-9]{0,11}$", description="Short stage name: dev, prod, ...")
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
    triton_release: str
    artifacts: ArtifactSettings = ArtifactSettings()
    notifications: NotificationSettings = NotificationSettings()
    models: list[ModelSettings] = Field(min_length=1)
    endpoints: list[EndpointSettings] = Field(default_factory=list)
    build: BuildSettings = BuildSettings()
    promote_from: str | None = Field(
        default=None,
        description="Stage whose artifacts this stage reuses (copied, never rebuilt), e.g. dev for prod.",
    )

    def model(self, name: str) -> ModelSettings:
        return next(m for m in self.models if m.name == name)

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
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(("models", f"model name {name!r} is used twice; names must be unique"))
    endpoint_names = [e.name for e in config.endpoints]
    for name in sorted({n for n in endpoint_names if endpoint_names.count(n) > 1}):
        problems.append(("endpoints", f"endpoint name {name!r} is used twice; names must be unique"))

    for index, endpoint in enumerate(config.endpoints):
        problems.extend(_endpoint_problems(config, f"endpoints[{index}]", endpoint, set(names), release_known))
    return problems


def _endpoint_problems(
    config: AppConfig, path: str, endpoint: EndpointSettings, model_names: set[str], release_known: bool
) -> list[tuple[str, str]]:
    """Rules for one endpoint; release-dependent ones only once the release is known to be valid."""
    problems: list[tuple[str, str]] = []
    deployed = config.deployed_endpoint_name(endpoint)
    if len(deployed) > 63:
        problems.append(
            (f"{path}.name", f"deployed name {deployed!r} is {len(deployed)} characters; SageMaker allows 63")
        )
    for model in endpoint.models:
        if model not in model_names:
            problems.append(
                (f"{path}.models", f"unknown model {model!r}; configured models: {', '.join(sorted(model_names))}")
            )
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
    served = [config.model(m) for m in endpoint.models if m in model_names]
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
