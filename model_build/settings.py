"""Typed settings of one model: what `config/<stage>.yaml` says under `models:`.

This module is the single schema shared by the CDK app (validation at synth, artifact keys)
and by `model_build` (config.pbtxt, TensorRT build, packaging). It depends on pydantic only,
so it also imports inside the CodeBuild image.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

# Triton's model name is its repository folder; SageMaker MME addresses it as `<name>.tar.gz`.
# Keep to characters both accept and that survive S3 keys and CloudFormation logical ids.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
EXPORTABLE_MODELS = ("resnet50", "yolov5s", "bert_base")

Platform = Literal["tensorrt_plan", "onnxruntime_onnx", "python"]
Precision = Literal["fp32", "fp16", "int8", "best"]
InstanceKind = Literal["KIND_GPU", "KIND_CPU", "KIND_AUTO"]


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSource(StrictModel):
    """Where the model comes from: exactly one of `path`, `s3_uri`, `export`."""

    path: str | None = Field(
        default=None,
        description="Local ONNX file (or, for the Python backend, a folder), relative to the "
        "project root. Shipped as a CDK asset.",
    )
    s3_uri: str | None = Field(
        default=None,
        description="s3://bucket/key of an ONNX file. Add ?versionId=... to pin the bytes.",
    )
    export: Literal["resnet50", "yolov5s", "bert_base"] | None = Field(
        default=None,
        description="Export a reference model inside the build (`model_build export`).",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> ModelSource:
        given = [k for k in ("path", "s3_uri", "export") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of 'path', 's3_uri' or 'export' (got {', '.join(given) if given else 'none'})"
            )
        if self.s3_uri is not None and not re.match(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/.+", self.s3_uri):
            raise ValueError(f"s3_uri must look like s3://bucket/key, got {self.s3_uri!r}")
        return self

    @property
    def kind(self) -> str:
        return "path" if self.path is not None else "s3_uri" if self.s3_uri is not None else "export"


class DynamicBatching(StrictModel):
    enabled: bool = True
    preferred_batch_sizes: list[PositiveInt] = Field(default_factory=list)
    max_queue_delay_microseconds: int = Field(default=100, ge=0, le=10_000_000)


class InstanceGroup(StrictModel):
    # Two instances per GPU was the best measured configuration in the reference benchmark.
    count: PositiveInt = 2
    kind: InstanceKind = "KIND_GPU"


class ShapeRange(StrictModel):
    """TensorRT optimisation profile for one input's non-batch dims (dynamic axes)."""

    input: str
    min: list[PositiveInt]
    opt: list[PositiveInt]
    max: list[PositiveInt]

    @model_validator(mode="after")
    def _ordered(self) -> ShapeRange:
        if not (len(self.min) == len(self.opt) == len(self.max)):
            raise ValueError(f"input {self.input!r}: min, opt and max must have the same rank")
        for lo, mid, hi in zip(self.min, self.opt, self.max, strict=True):
            if not lo <= mid <= hi:
                raise ValueError(f"input {self.input!r}: need min <= opt <= max in every dim")
        return self


class TensorRTSettings(StrictModel):
    precision: Precision = "fp16"
    calibration_cache: str | None = Field(
        default=None, description="INT8 calibration cache (local path or s3:// URI); required for int8."
    )
    workspace_mib: PositiveInt = 4096
    # Build for Ampere-and-newer so an A10G-built engine runs on g6/g6e/p4d/p5. Normally set by
    # the build/serve matcher, not by hand.
    hardware_compatibility: Literal["none", "ampere+"] = "none"
    version_compatible: bool = False
    opt_batch_size: PositiveInt | None = Field(
        default=None, description="Batch size TensorRT tunes for. Default: the largest preferred batch size."
    )
    shapes: list[ShapeRange] = Field(default_factory=list)

    @model_validator(mode="after")
    def _int8_needs_calibration(self) -> TensorRTSettings:
        if self.precision == "int8" and not self.calibration_cache:
            raise ValueError("precision 'int8' needs 'calibration_cache'")
        return self


class ModelSettings(StrictModel):
    name: str = Field(pattern=MODEL_NAME_PATTERN)
    source: ModelSource
    platform: Platform = "tensorrt_plan"
    max_batch_size: int = Field(default=16, ge=0, le=65536, description="0 disables batching.")
    dynamic_batching: DynamicBatching = DynamicBatching()
    instance_groups: list[InstanceGroup] = Field(default_factory=lambda: [InstanceGroup()], min_length=1)
    tensorrt: TensorRTSettings = TensorRTSettings()
    warmup: bool = False
    response_cache: bool = False

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value.lower() in {"model", "config"}:
            raise ValueError(f"model name {value!r} is reserved")
        return value

    @model_validator(mode="after")
    def _batching_consistent(self) -> ModelSettings:
        batching = self.dynamic_batching
        if batching.enabled and self.max_batch_size == 0:
            raise ValueError("dynamic_batching needs max_batch_size >= 1 (or set dynamic_batching.enabled: false)")
        too_big = [b for b in batching.preferred_batch_sizes if b > self.max_batch_size]
        if too_big:
            raise ValueError(
                f"dynamic_batching.preferred_batch_sizes {too_big} exceed max_batch_size {self.max_batch_size}"
            )
        opt = self.tensorrt.opt_batch_size
        if opt is not None and self.max_batch_size and opt > self.max_batch_size:
            raise ValueError(f"tensorrt.opt_batch_size {opt} exceeds max_batch_size {self.max_batch_size}")
        if self.platform == "python" and self.source.kind != "path":
            raise ValueError("platform 'python' needs source.path: a folder holding model.py")
        return self

    @property
    def uses_gpu(self) -> bool:
        return any(group.kind == "KIND_GPU" for group in self.instance_groups)

    @property
    def needs_gpu_build(self) -> bool:
        return self.platform == "tensorrt_plan"

    def build_fingerprint(self) -> dict:
        """Everything that changes the artifact's bytes except the source (digested apart)."""
        return self.model_dump(mode="json", exclude={"source"})
