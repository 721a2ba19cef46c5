"""The requests `recommend` sends: a SageMaker Model as the stage deploys the model, a sample payload, and an
Advanced Inference Recommender job (a load test) over the chosen instance types.

Every API fact here is read from botocore's sagemaker service model in the venv (the tests cite the shapes) or
from the API reference named beside it; every request is checked with botocore's own parameter validation
(`validate_request`) before anything is sent, so `--dry-run` prints exactly what would be sent.

The model is the stage's: the Triton image of the stage's release (triton_cdk.images.triton_image), the endpoint's
container environment (stacks.container_environment) with the default model set as TritonModel sets it, and the
artifact key the stage plan computes for the model on each instance type (stacks.artifact_plan.model_artifact;
the single-model archive `ModelArtifact.key` that the endpoint stack's `model_data_of` serves). A TensorRT engine is
built for one GPU target, so instance types whose target differs need other artifacts: one model and one job per
distinct artifact, and an artifact the stage does not build is refused (the job would fail on a missing object).
"""

from __future__ import annotations

import enum
import gzip
import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from endpoint_client.errors import InvalidInputError

JOB_TYPE = "Advanced"  # RecommendationJobType enum: Default (instance recommendation) | Advanced (load test)
TRAFFIC_TYPE = "PHASES"  # TrafficType enum: PHASES | STAIRS
SINGLE_MODEL = "SingleModel"  # ContainerMode enum
PAYLOAD_FILE = "payload-0"  # .json or .bin
PAYLOAD_ARCHIVE = "payload.tar.gz"  # RecommendationJobPayloadConfig.SamplePayloadUrl: "a single gzip compressed
# tar archive (.tar.gz suffix)" (SageMaker API reference, RecommendationJobPayloadConfig)
DEFAULT_MODEL_NAME = "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"  # triton_cdk.serving.environment.DEFAULT_MODEL_NAME
# Container variables a job may vary per test (EnvironmentParameterRanges): the SageMaker front end's thread
# counts, read by Triton's docker/sagemaker/serve (../shared/README.md, "Container environment"). Their range is
# ContainerSettings' (1-1024, stage_config/container.py).
TUNABLE_VARIABLES = {
    "SAGEMAKER_TRITON_THREAD_COUNT": "container.thread_count",
    "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": "container.buffer_manager_thread_count",
}
MAX_THREADS = 1024


@cache
def service_model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker")


def input_shape(operation: str) -> Any:
    return service_model().operation_model(operation).input_shape


def member(operation: str, *path: str) -> Any:
    """The shape at `path` under an operation's input; a name below a list names a member of its items."""
    shape = input_shape(operation)
    for name in path:
        while shape.type_name == "list":
            shape = shape.member
        shape = shape.members[name]
    return shape


def limit(operation: str, *path: str, key: str) -> Any:
    return member(operation, *path).metadata[key]


def enum_values(operation: str, *path: str) -> list[str]:
    shape = member(operation, *path)
    return list((shape.member if shape.type_name == "list" else shape).enum)


def validate_request(operation: str, params: dict[str, Any]) -> None:
    """botocore's own ParamValidator against the real service model: what boto3 would refuse, refused here."""
    from botocore.exceptions import ParamValidationError
    from botocore.validate import validate_parameters

    try:
        validate_parameters(params, input_shape(operation))
    except ParamValidationError as error:
        raise InvalidInputError(f"{operation} request is not valid for SageMaker: {error.kwargs['report']}") from None


@dataclass(frozen=True)
class TrafficPhase:
    users: int
    spawn_rate: int
    duration_seconds: int


@dataclass(frozen=True)
class JobSettings:
    role_arn: str
    slo_p99_ms: int
    stop_percentile: str
    max_invocations: int
    job_duration_seconds: int
    phase: TrafficPhase
    env_ranges: dict[str, list[str]] = field(default_factory=dict)
    max_parallel_tests: int | None = None


@dataclass(frozen=True)
class Deployment:
    """The model as the stage deploys it on some instance types (one artifact)."""

    model: str
    endpoint: str
    image_uri: str
    model_data_url: str
    artifact_key: str
    gpu_target: str
    environment: dict[str, str]
    network_isolation: bool
    instance_types: list[str]
    subnets: list[str] = field(default_factory=list)
    security_groups: list[str] = field(default_factory=list)


DERIVED_NAME_LIMIT = 40  # "The names of resources (such as the model, endpoint configuration, endpoint, and
# compilation) that are prefixed with the job name are truncated at 40 characters" (CreateInferenceRecommendationsJob,
# JobName): two jobs must differ within their first 40 characters.


def job_name(base: str, suffix: str | None) -> str:
    """RecommendationJobName and ModelName (patterns `[a-zA-Z0-9](-*[a-zA-Z0-9])*`): letters, digits and inner
    hyphens, at most DERIVED_NAME_LIMIT characters so the suffix telling jobs apart survives SageMaker's cut."""
    name = re.sub(r"[^a-zA-Z0-9]+", "-", base).strip("-")
    tail = f"-{suffix}" if suffix else ""
    return name[: DERIVED_NAME_LIMIT - len(tail)].rstrip("-") + tail


def create_model_request(deployment: Deployment, *, name: str, role_arn: str) -> dict[str, Any]:
    """CreateModel as TritonModel (triton_cdk/serving/triton_model.py) renders the stage's model."""
    request: dict[str, Any] = {
        "ModelName": name,
        "PrimaryContainer": {
            "Image": deployment.image_uri,
            "Mode": SINGLE_MODEL,
            "ModelDataUrl": deployment.model_data_url,
            "Environment": dict(sorted(deployment.environment.items())),
        },
        "ExecutionRoleArn": role_arn,
        "EnableNetworkIsolation": deployment.network_isolation,
        "Tags": [{"Key": "triton-cdk:recommend", "Value": deployment.model}],
    }
    if deployment.subnets:
        request["VpcConfig"] = {"Subnets": deployment.subnets, "SecurityGroupIds": deployment.security_groups}
    validate_request("CreateModel", request)
    return request


def job_request(
    deployment: Deployment,
    *,
    name: str,
    model_name: str,
    payload_url: str,
    content_type: str,
    settings: JobSettings,
) -> dict[str, Any]:
    endpoint_configurations = []
    for instance in deployment.instance_types:
        configuration: dict[str, Any] = {"InstanceType": instance}
        if settings.env_ranges:
            configuration["EnvironmentParameterRanges"] = {
                "CategoricalParameterRanges": [
                    {"Name": variable, "Value": values} for variable, values in settings.env_ranges.items()
                ]
            }
        endpoint_configurations.append(configuration)
    input_config: dict[str, Any] = {
        "ModelName": model_name,
        "JobDurationInSeconds": settings.job_duration_seconds,
        "TrafficPattern": {
            "TrafficType": TRAFFIC_TYPE,
            "Phases": [
                {
                    "InitialNumberOfUsers": settings.phase.users,
                    "SpawnRate": settings.phase.spawn_rate,
                    "DurationInSeconds": settings.phase.duration_seconds,
                }
            ],
        },
        "EndpointConfigurations": endpoint_configurations,
        "ContainerConfig": {
            "PayloadConfig": {"SamplePayloadUrl": payload_url, "SupportedContentTypes": [content_type]},
        },
    }
    if settings.max_parallel_tests is not None:
        input_config["ResourceLimit"] = {"MaxParallelOfTests": settings.max_parallel_tests}
    if deployment.subnets:
        input_config["VpcConfig"] = {"Subnets": deployment.subnets, "SecurityGroupIds": deployment.security_groups}
    request = {
        "JobName": name,
        "JobType": JOB_TYPE,
        "RoleArn": settings.role_arn,
        "InputConfig": input_config,
        "JobDescription": f"{deployment.model} on {', '.join(deployment.instance_types)} (endpoint "
        f"{deployment.endpoint}, {deployment.gpu_target})"[
            : int(limit("CreateInferenceRecommendationsJob", "JobDescription", key="max"))
        ],
        "StoppingConditions": {
            "MaxInvocations": settings.max_invocations,
            "ModelLatencyThresholds": [
                {"Percentile": settings.stop_percentile, "ValueInMilliseconds": settings.slo_p99_ms}
            ],
        },
        "Tags": [{"Key": "triton-cdk:recommend", "Value": deployment.model}],
    }
    validate_request("CreateInferenceRecommendationsJob", request)
    return request


class PayloadEncoding(enum.StrEnum):
    JSON = "json"
    BINARY = "binary"


def payload_archive(tensors: dict[str, np.ndarray], encoding: PayloadEncoding) -> tuple[bytes, str]:
    """(the sample payload, its content type): one request body in a gzip tar, the only file at the archive's root.
    Deterministic bytes (fixed mtime, owner and mode), so a dry run and the real run describe the same object.
    One body, so binary+json's `json-header-size=N` is the same for every request the job replays."""
    from endpoint_client.codec import Encoding, encode_request

    binary = encoding is PayloadEncoding.BINARY
    encoded = encode_request(tensors, encoding=Encoding.BINARY if binary else Encoding.JSON)
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo(PAYLOAD_FILE + (".bin" if binary else ".json"))
        info.size = len(encoded.body)
        info.mode = 0o644
        info.mtime = 0
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        archive.addfile(info, io.BytesIO(encoded.body))
    # tarfile's "w:gz" writes the current time into the gzip header (RFC 1952 MTIME): gzip with mtime=0 and no
    # file name instead, so the same inputs give the same bytes at any time.
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed:
        compressed.write(tar.getvalue())
    return raw.getvalue(), encoded.content_type


def s3_location(text: str, option: str) -> tuple[str, str]:
    """(bucket, key prefix ending in '/') of an s3://bucket/prefix/ option."""
    match = re.fullmatch(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/[^\s]*)?", text)
    if not match:
        raise InvalidInputError(f"{option} {text[:100]!r}: not an S3 location s3://BUCKET/PREFIX/")
    prefix = (match.group(2) or "/").lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return match.group(1), prefix


def dry_run_document(plans: list[dict[str, Any]]) -> str:
    return json.dumps({"schema_version": 1, "dry_run": True, "jobs": plans}, indent=2)


def read_model_config_inputs(path: Path, batch_size: int) -> dict[str, np.ndarray]:
    from endpoint_client.loadtest_inputs import generated_inputs

    tensors, _ = generated_inputs(path, batch_size=batch_size)
    return tensors
