"""report.json schema 1 as a pydantic model (model_build.build_report's docstring describes it): a report is
validated when read (`model_build report`) and before it is published, so a corrupt or hand-edited file is refused
with the field that is wrong instead of a traceback in the reader, and never uploaded beside an artifact.

Also the artifact key a report may be published beside: `models/<model>/<64 hex digits>/model.tar.gz`
(model_build.key.artifact_key: MODEL_PREFIX, the model's name, the SHA-256 digest).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from model_build.errors import ModelBuildError
from serving_facts.content_address import MODEL_PREFIX
from serving_facts.settings import MODEL_NAME_PATTERN

ARTIFACT_KEY = re.compile(re.escape(MODEL_PREFIX) + MODEL_NAME_PATTERN[1:-1] + r"/[0-9a-f]{64}/model\.tar\.gz")
Text = str  # control characters are stripped when printed (build_report.printable)
Number = float | None


class Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Host(Schema):
    gpu: Text
    driver: Text | None = None
    tensorrt: Text | None = None
    triton: Text | None = None
    trtexec_argv: list[Text] | None = Field(default=None, max_length=1000)
    engine: Text


class InputShape(Schema):
    shape: list[int] = Field(max_length=64)
    dtype: Text


class Output(Schema):
    name: Text
    shape: list[int] = Field(max_length=64)
    max_abs_error: Number = None
    max_rel_error: Number = None
    mismatches: int
    elements: int
    passed: bool
    argmax_agreement: Number = None
    problem: Text | None = None
    exact: bool = False
    engine_nan: int = 0
    engine_inf: int = 0
    reference_nan: int = 0
    reference_inf: int = 0


class Accuracy(Schema):
    checked: bool = True
    passed: bool | None
    atol: float | None = None
    rtol: float | None = None
    tolerance_source: Text | None = None
    semantics: Text | None = None
    skipped_because: Text | None = None
    input_source: Literal["samples", "generated"]
    inputs: dict[Text, InputShape] = Field(max_length=1000)
    outputs: list[Output] = Field(max_length=1000)


class Latency(Schema):
    p50: Number = None
    p90: Number = None
    p95: Number = None
    p99: Number = None
    max: Number = None
    mean: Number = None


class Level(Schema):
    concurrency: int
    batch_size: int
    seconds: float
    requests: int
    errors: int
    requests_per_second: float
    inferences_per_second: float
    latency_ms: Latency


class Candidate(Schema):
    instance_count: int
    max_queue_delay_microseconds: int | None
    preferred_batch_sizes: list[int] = Field(max_length=64)
    levels: list[Level] = Field(max_length=64)
    failed: Text | None = None


class Best(Schema):
    instance_count: int
    max_queue_delay_microseconds: int | None
    preferred_batch_sizes: list[int] = Field(max_length=64)
    concurrency: int
    inferences_per_second: float
    p99_ms: Number = None


class Tuning(Schema):
    slo_p99_ms: float
    candidates: list[Candidate] = Field(max_length=64)
    best: Best | None
    config_lines: Text


class Report(Schema):
    schema_version: Literal[1]
    model: Text
    artifact_key: Text | None
    created_at: Text
    host: Host
    accuracy: Accuracy
    speed: list[Level] = Field(max_length=64)
    tuning: Tuning | None = None


def validate_report(report: Any, where: str) -> dict[str, Any]:
    """The report as read (a dict), or ModelBuildError naming the first fields that are wrong."""
    try:
        Report.model_validate(report)
    except ValidationError as error:
        problems = [
            f"{'.'.join(str(part) for part in item['loc']) or '(top)'}: {item['msg']}" for item in error.errors()[:5]
        ]
        raise ModelBuildError(f"{where}: not a build report of schema 1: {'; '.join(problems)}") from None
    return report


def check_artifact_key(key: str, model: str) -> None:
    """`--artifact-key` is a content-addressed key of `model` (no `..`, no other prefix)."""
    if not ARTIFACT_KEY.fullmatch(key) or key.split("/")[1] != model:
        raise ModelBuildError(
            f"--artifact-key {key!r}: not the content-addressed key of model {model!r} "
            f"({MODEL_PREFIX}{model}/<64 hex digits>/model.tar.gz, as `python -m model_build key` prints)"
        )
