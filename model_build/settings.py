"""Typed settings of one model: what `config/<stage>.yaml` says under `models:`.

This module is the single schema shared by the CDK app (validation at synth, artifact keys)
and by `model_build` (config.pbtxt, TensorRT build, packaging). It depends on pydantic only,
so it also imports inside the CodeBuild image.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

# Triton's model name is its repository folder; SageMaker MME addresses it as `<name>.tar.gz`.
# Keep to characters both accept and that survive S3 keys and CloudFormation logical ids.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
EXPORTABLE_MODELS = ("resnet50", "yolov5s", "bert_base")
MAX_DIM = 2**31 - 1

Platform = Literal["tensorrt_plan", "onnxruntime_onnx", "python"]
Precision = Literal["fp32", "fp16", "int8", "best"]
InstanceKind = Literal["KIND_GPU", "KIND_CPU", "KIND_AUTO"]


def repeated(values: list) -> list:
    """Values that occur more than once, sorted (linear: a Counter, not list.count per item)."""
    return sorted(value for value, count in Counter(values).items() if count > 1)


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo must not silently fall back to a default.

    Strict types: YAML's `true` is not the number 1 and `32.0` is not a count; `.inf` and `.nan`
    are no numbers at all. Every count and size also has an upper bound (AWS's, Triton's or
    TensorRT's own where one exists), so `1e66` is refused at load instead of at deploy.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class ModelSource(StrictModel):
    """Where the model comes from: exactly one of `path`, `s3_uri`, `export`."""

    path: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="Local ONNX file (or, for the Python backend, a folder), relative to the "
        "project root. Shipped as a CDK asset.",
    )
    s3_uri: str | None = Field(
        default=None,
        # S3: bucket names <= 63 characters, object keys <= 1024 bytes.
        max_length=1200,
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
    # Each is <= max_batch_size (checked below); a few sizes is all Triton's scheduler uses.
    preferred_batch_sizes: list[PositiveInt] = Field(default_factory=list, max_length=32)
    max_queue_delay_microseconds: int = Field(default=100, ge=0, le=10_000_000)


class InstanceGroup(StrictModel):
    # Two instances per GPU was the best measured configuration in the reference benchmark.
    # Triton documents no maximum; 128 is one instance per vCPU of the largest CPU type and far more
    # than fit in one GPU's memory.
    count: PositiveInt = Field(default=2, le=128)
    kind: InstanceKind = "KIND_GPU"


class ShapeRange(StrictModel):
    """TensorRT optimisation profile for one input's non-batch dims (dynamic axes)."""

    input: str = Field(min_length=1, max_length=256)
    # TensorRT: at most 8 dimensions (nvinfer1::Dims::MAX_DIMS) of int32/int64 extent; 2**31-1 keeps
    # every extent valid in both.
    min: list[Annotated[int, Field(ge=1, le=MAX_DIM)]] = Field(max_length=8)
    opt: list[Annotated[int, Field(ge=1, le=MAX_DIM)]] = Field(max_length=8)
    max: list[Annotated[int, Field(ge=1, le=MAX_DIM)]] = Field(max_length=8)

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
        default=None,
        min_length=1,
        max_length=1200,
        description="INT8 calibration cache (local path or s3:// URI); required for int8.",
    )
    # The workspace lives in GPU memory: 128 GiB is above every GPU in the instance catalogue (80 GB H100).
    workspace_mib: PositiveInt = Field(default=4096, le=131072)
    # Build for Ampere-and-newer so an A10G-built engine runs on g6/g6e/p4d/p5. Normally set by
    # the build/serve matcher, not by hand.
    hardware_compatibility: Literal["none", "ampere+"] = "none"
    version_compatible: bool = False
    opt_batch_size: PositiveInt | None = Field(
        default=None, le=65536, description="Batch size TensorRT tunes for. Default: the largest preferred batch size."
    )
    shapes: list[ShapeRange] = Field(default_factory=list, max_length=64)

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
    instance_groups: list[InstanceGroup] = Field(default_factory=lambda: [InstanceGroup()], min_length=1, max_length=16)
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
        if self.platform == "tensorrt_plan" and any(group.kind == "KIND_CPU" for group in self.instance_groups):
            # tensorrt_backend src/instance_state.cc: "TensorRT backend supports only GPU device".
            raise ValueError(
                "platform 'tensorrt_plan' runs on GPU instances only (Triton's TensorRT backend refuses KIND_CPU); "
                "use kind KIND_GPU, or platform onnxruntime_onnx for CPU serving"
            )
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
