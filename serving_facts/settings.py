"""Typed settings of one model: what `config/<stage>.yaml` says under `models:`.

This module is the single schema shared by the CDK app (validation at synth, artifact keys)
and by `model_build` (config.pbtxt, TensorRT build, packaging). It depends on pydantic only,
so it also imports inside the CodeBuild image.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections import Counter
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    field_validator,
    model_serializer,
    model_validator,
)

# Triton's model name is its repository folder; SageMaker MME addresses it as `<name>.tar.gz`.
# Keep to characters both accept and that survive S3 keys and CloudFormation logical ids.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
EXPORTABLE_MODELS = ("resnet50", "yolov5s", "bert_base")
MAX_DIM = 2**31 - 1
# Triton documents no maximum number of ensemble steps or mapped tensors; these are far above any
# published pipeline (a handful of steps) and keep a hostile config from costing minutes at synth.
MAX_ENSEMBLE_STEPS = 64
MAX_STEP_TENSORS = 256
# Triton tensor names are free text; ours are 1-256 characters (the bound of TensorRT shape input names,
# ShapeRange.input) without whitespace or control characters: a NUL, a newline or a lone space in a name
# breaks the config.pbtxt, the request JSON and every log line that quotes it.
TENSOR_NAME_PATTERN = r"^[^\s\x00-\x1f\x7f]+$"
TensorName = Annotated[str, Field(min_length=1, max_length=256, pattern=TENSOR_NAME_PATTERN)]
# An ensemble's declared interface (`ensemble.inputs` / `ensemble.outputs`): at most every tensor its steps map.
MAX_ENSEMBLE_TENSORS = MAX_ENSEMBLE_STEPS * MAX_STEP_TENSORS
# The packed environment's place in the model folder (brief: `<model folder>/python_env.tar.gz`) and the
# requirements file the build packs it from (`model_build package --environment-python`).
PACKED_ENVIRONMENT_NAME = "python_env.tar.gz"
REQUIREMENTS_NAME = "requirements.txt"

Platform = Literal["tensorrt_plan", "onnxruntime_onnx", "python", "ensemble"]
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
        if self.s3_uri is not None and not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/.+", self.s3_uri):
            raise ValueError(f"s3_uri must look like s3://bucket/key, got {self.s3_uri!r}")
        return self

    @property
    def kind(self) -> str:
        return "path" if self.path is not None else "s3_uri" if self.s3_uri is not None else "export"


class DynamicBatching(StrictModel):
    """Triton's dynamic batcher (config.pbtxt `dynamic_batching`)."""

    enabled: bool = Field(default=True, description="Let Triton combine requests into batches.")
    # Each is <= max_batch_size (checked below); a few sizes is all Triton's scheduler uses.
    preferred_batch_sizes: list[PositiveInt] = Field(
        default_factory=list,
        max_length=32,
        description="Batch sizes the batcher aims for, each at most max_batch_size (at most 32). Default: none, "
        "as large as possible.",
    )
    max_queue_delay_microseconds: int = Field(
        default=100,
        ge=0,
        le=10_000_000,
        description="How long a request may wait for a batch to fill, in microseconds (0-10000000).",
    )


class InstanceGroup(StrictModel):
    # Two instances per GPU was the best measured configuration in the reference benchmark; `tune` (build report)
    # measures the user's model instead.
    # Triton documents no maximum; 128 is one instance per vCPU of the largest CPU type and far more
    # than fit in one GPU's memory.
    count: PositiveInt = Field(default=2, le=128, description="Instances of the model per device, 1-128.")
    kind: InstanceKind = Field(
        default="KIND_GPU", description="Where they run: KIND_GPU, KIND_CPU or KIND_AUTO (Triton's instance kind)."
    )


class ShapeRange(StrictModel):
    """TensorRT optimisation profile for one input's non-batch dims (dynamic axes)."""

    input: str = Field(min_length=1, max_length=256, description="Name of the model input.")
    # TensorRT: at most 8 dimensions (nvinfer1::Dims::MAX_DIMS) of int32/int64 extent; 2**31-1 keeps
    # every extent valid in both.
    min: list[Annotated[int, Field(ge=1, le=MAX_DIM)]] = Field(
        max_length=8, description="Smallest extent of each non-batch dim (at most 8 dims)."
    )
    opt: list[Annotated[int, Field(ge=1, le=MAX_DIM)]] = Field(
        max_length=8, description="Extent of each non-batch dim TensorRT tunes for, between min and max."
    )
    max: list[Annotated[int, Field(ge=1, le=MAX_DIM)]] = Field(
        max_length=8, description="Largest extent of each non-batch dim."
    )

    @model_validator(mode="after")
    def _ordered(self) -> ShapeRange:
        if not (len(self.min) == len(self.opt) == len(self.max)):
            raise ValueError(f"input {self.input!r}: min, opt and max must have the same rank")
        for lo, mid, hi in zip(self.min, self.opt, self.max, strict=True):
            if not lo <= mid <= hi:
                raise ValueError(f"input {self.input!r}: need min <= opt <= max in every dim")
        return self


# Tolerances of the build report's comparison (model_build.accuracy): elementwise, an output passes where
# |engine - reference| <= atol OR |engine - reference| <= rtol * |reference| (Polygraphy's default check).
MAX_TOLERANCE = 1e6


class AccuracySettings(StrictModel):
    """How far the engine's outputs may be from ONNX Runtime's on the same inputs (the build report)."""

    atol: float | None = Field(
        default=None,
        ge=0,
        le=MAX_TOLERANCE,
        description="Absolute tolerance, 0-1e6. Default: the precision's (fp32 1e-5, Polygraphy's default; fp16 and "
        "best 1e-2, int8 1e-1: ours).",
    )
    rtol: float | None = Field(
        default=None,
        ge=0,
        le=MAX_TOLERANCE,
        description="Relative tolerance (of the ONNX Runtime value), 0-1e6. Default: the precision's (as atol).",
    )
    check: bool = Field(
        default=True,
        description="false: the build skips the comparison (report.json says so) and still measures speed; for a "
        'model whose outputs ONNX Runtime cannot reproduce (docs/build.md, "Build report").',
    )
    samples: str | None = Field(
        default=None,
        min_length=1,
        max_length=1200,
        pattern=r"^[^\x00-\x1f]*\.npz(\?versionId=[^?]+)?$",
        description="The inputs to compare with: an .npz file holding every input by name (as `invoke --input`), a "
        "path in the project (shipped with the build as an asset) or s3:// URI. Default: generated.",
    )
    input_ranges: dict[
        Annotated[str, Field(min_length=1, max_length=256)], Annotated[list[float], Field(min_length=2, max_length=2)]
    ] = Field(
        default_factory=dict,
        max_length=64,
        description="[low, high] of each generated input's values: integers in [low, high], floats in [low, high). "
        "Default: integers 0 or 1, floats [0, 1).",
    )

    @model_validator(mode="after")
    def _ranges_ordered(self) -> AccuracySettings:
        for name, (low, high) in self.input_ranges.items():
            if not (math.isfinite(low) and math.isfinite(high) and low <= high):
                raise ValueError(f"input_ranges.{name}: [low, high] with finite low <= high, not [{low}, {high}]")
        if self.samples is not None and self.input_ranges:
            raise ValueError("input_ranges apply to generated inputs; with samples the file gives every value")
        return self


class TensorRTSettings(StrictModel):
    """How `trtexec` builds the engine of a `tensorrt_plan` model."""

    precision: Precision = Field(
        default="fp16", description="fp32, fp16, int8 (needs calibration_cache) or best (trtexec --best)."
    )
    calibration_cache: str | None = Field(
        default=None,
        min_length=1,
        max_length=1200,
        description="INT8 calibration cache (local path or s3:// URI); required for int8.",
    )
    # The workspace lives in GPU memory: 128 GiB is above every GPU in the instance catalogue (80 GB H100).
    workspace_mib: PositiveInt = Field(
        default=4096,
        le=131072,
        description="Builder workspace in MiB, 1-131072 (trtexec --memPoolSize=workspace).",
    )
    # Build for Ampere-and-newer so an A10G-built engine runs on g6/g6e/p4d/p5. Normally set by
    # the build/serve matcher, not by hand.
    hardware_compatibility: Literal["none", "ampere+"] = Field(
        default="none",
        description="ampere+: an engine every Ampere-or-newer GPU runs (trtexec --hardwareCompatibilityLevel); none: "
        "only the building GPU's architecture. Normally set by the build/serve matcher.",
    )
    version_compatible: bool = Field(
        default=False,
        description="Build a version-compatible engine (trtexec --versionCompatible); the server then needs "
        "--backend-config=tensorrt,version-compatible=true.",
    )
    opt_batch_size: PositiveInt | None = Field(
        default=None, le=65536, description="Batch size TensorRT tunes for. Default: the largest preferred batch size."
    )
    shapes: list[ShapeRange] = Field(
        default_factory=list,
        max_length=64,
        description="Optimisation profile (min/opt/max) of each input with dynamic non-batch dims, at most 64.",
    )

    accuracy: AccuracySettings | None = Field(
        default=None,
        description="Tolerances of the build report's engine-vs-ONNX Runtime comparison ({atol, rtol}); the build "
        'fails before upload outside them. Default: the precision\'s (docs/build.md, "Build report"). Not part of '
        "the artifact's key.",
    )

    @model_serializer(mode="wrap")
    def _omit_absent_accuracy(self, handler):
        """`accuracy` is left out when absent: dumps (build documents, build-info.json) stay what they were."""
        data = handler(self)
        if isinstance(data, dict) and data.get("accuracy", 0) is None:
            del data["accuracy"]
        return data

    @model_validator(mode="after")
    def _int8_needs_calibration(self) -> TensorRTSettings:
        if self.precision == "int8" and not self.calibration_cache:
            raise ValueError("precision 'int8' needs 'calibration_cache'")
        return self


# The build's tuning grid (docs/build.md "Tuning"): instance counts 1-3 per the issue, a few delays and preferred
# batch-size sets; each candidate is loaded and load-tested on the build GPU, so the grid stays small.
MAX_TUNE_CANDIDATES = 12
MAX_TUNE_LEVEL_SECONDS = 60


class TuneCandidates(StrictModel):
    """The config variants the build loads and load-tests (every combination; at most 12)."""

    instance_counts: list[Annotated[int, Field(ge=1, le=3)]] = Field(
        default_factory=lambda: [1, 2, 3],
        min_length=1,
        max_length=3,
        description="Instances per GPU to try, each 1-3. Default: [1, 2, 3].",
    )
    max_queue_delay_microseconds: list[Annotated[int, Field(ge=0, le=10_000_000)]] = Field(
        default_factory=list,
        max_length=4,
        description="Batcher delays to try, each 0-10000000. Default: the model's dynamic_batching value.",
    )
    preferred_batch_sizes: list[list[PositiveInt]] = Field(
        default_factory=list,
        max_length=4,
        description="Preferred batch-size sets to try, each size at most max_batch_size. Default: the model's.",
    )


class TuneSettings(StrictModel):
    """Opt-in tuning on the build GPU: the best throughput under a p99 latency bound, reported as config lines."""

    slo_p99_ms: float = Field(
        gt=0, le=60_000, description="p99 latency bound in milliseconds, (0-60000] (InvokeEndpoint's 60 s)."
    )
    candidates: TuneCandidates = Field(
        default=TuneCandidates(),
        description="The grid: instance_counts x max_queue_delay_microseconds x "
        "preferred_batch_sizes, at most 12 combinations.",
    )
    concurrency: list[Annotated[int, Field(ge=1, le=256)]] = Field(
        default_factory=lambda: [1, 4, 16],
        min_length=1,
        max_length=8,
        description="Concurrent clients each candidate is load-tested with, each 1-256. Default: [1, 4, 16].",
    )
    seconds: float = Field(
        default=5,
        gt=0,
        le=MAX_TUNE_LEVEL_SECONDS,
        description="Measured seconds per candidate and concurrency, (0-60]. Default: 5.",
    )

    @model_validator(mode="after")
    def _bounded(self) -> TuneSettings:
        c = self.candidates
        size = (
            len(c.instance_counts) * max(len(c.max_queue_delay_microseconds), 1) * max(len(c.preferred_batch_sizes), 1)
        )
        if size > MAX_TUNE_CANDIDATES:
            raise ValueError(
                f"candidates make {size} combinations; at most {MAX_TUNE_CANDIDATES} (each is loaded and load-tested "
                "in the build)"
            )
        return self


class EnsembleStep(StrictModel):
    """One step of an ensemble: `ModelEnsembling.Step` of Triton's model_config.proto.

    `input_map`: composing model's input name -> ensemble tensor; `output_map`: composing model's output
    name -> ensemble tensor (model_config.proto: "map<string, string> input_map", "output_map").
    Triton refuses a step without either ("must specify 'input_map' in step N", model_config_utils.cc).
    """

    model: str = Field(pattern=MODEL_NAME_PATTERN, description="A configured model (not an ensemble).")
    input_map: dict[TensorName, TensorName] = Field(
        min_length=1,
        max_length=MAX_STEP_TENSORS,
        description="The step model's input name -> the ensemble tensor it reads (1-256 entries).",
    )
    output_map: dict[TensorName, TensorName] = Field(
        min_length=1,
        max_length=MAX_STEP_TENSORS,
        description="The step model's output name -> the ensemble tensor it writes (1-256 entries).",
    )


class EnsembleSettings(StrictModel):
    """The steps of a `platform: ensemble` model, and optionally its interface.

    The ensemble's inputs are derived as the tensors a step reads and no step writes, its outputs as the tensors a
    step writes and none reads. `inputs` / `outputs`, when given, declare them: the derived ones must be exactly
    those (so a misspelt tensor in a map cannot silently become a new input or output), and they set the order of
    the config's `input` / `output`. Without them, a derived input whose name is near the name of a tensor a step
    writes (see `near_names`) is refused as a likely typo.
    """

    model_config = ConfigDict(populate_by_name=True)

    steps: list[EnsembleStep] = Field(
        min_length=1,
        max_length=MAX_ENSEMBLE_STEPS,
        description="The steps (1-64), each naming a configured non-ensemble model; each tensor written once.",
    )
    declared_inputs: list[TensorName] | None = Field(
        default=None,
        alias="inputs",
        min_length=1,
        max_length=MAX_ENSEMBLE_TENSORS,
        description="The ensemble's inputs, in order: exactly the tensors a step reads and none writes. Default: "
        "derived from the steps.",
    )
    declared_outputs: list[TensorName] | None = Field(
        default=None,
        alias="outputs",
        min_length=1,
        max_length=MAX_ENSEMBLE_TENSORS,
        description="The ensemble's outputs, in order: exactly the tensors a step writes and none reads. Default: "
        "derived from the steps.",
    )

    @model_validator(mode="after")
    def _each_tensor_written_once(self) -> EnsembleSettings:
        # core model_config_utils.cc BuildEnsembleGraph: "ensemble tensor '<t>' can appear in an output map
        # only once".
        written = [tensor for step in self.steps for tensor in step.output_map.values()]
        twice = repeated(written)
        if twice:
            raise ValueError(f"ensemble tensors {twice} are written by several steps' output_map; write each once")
        return self

    @model_validator(mode="after")
    def _interface(self) -> EnsembleSettings:
        for role, declared, derived in (
            ("inputs", self.declared_inputs, self.derived_inputs),
            ("outputs", self.declared_outputs, self.derived_outputs),
        ):
            if declared is None:
                continue
            twice = repeated(declared)
            if twice:
                raise ValueError(f"ensemble.{role} lists {twice} more than once")
            missing = [t for t in derived if t not in set(declared)]
            extra = [t for t in declared if t not in set(derived)]
            if missing or extra:
                what = (
                    "read by a step and written by none" if role == "inputs" else "written by a step and read by none"
                )
                parts = []
                if missing:
                    parts.append(f"the steps also make {_listed(missing)} an ensemble {role[:-1]}")
                if extra:
                    parts.append(f"{_listed(extra)} {'is' if len(extra) == 1 else 'are'} not")
                raise ValueError(
                    f"ensemble.{role} {_listed(declared)} must be exactly the tensors {what}: {'; '.join(parts)} "
                    f"(derived from the steps: {_listed(derived)}); fix the step maps or the declaration"
                )
        if self.declared_inputs is None:
            written = {t: i for i, step in enumerate(self.steps) for t in step.output_map.values()}
            for tensor in self.derived_inputs:
                close = [name for name in written if near_names(tensor, name)]
                if close:
                    reader = next(i for i, step in enumerate(self.steps) if tensor in step.input_map.values())
                    raise ValueError(
                        f"steps[{reader}].input_map reads {tensor!r}, which no step writes, so it would become an "
                        f"ensemble input; steps[{written[close[0]]}] writes {close[0]!r}. If that is the tensor meant, "
                        f"fix the map; if {tensor!r} is an input on purpose, declare the interface with "
                        "ensemble.inputs and ensemble.outputs"
                    )
        return self

    @model_serializer(mode="wrap")
    def _declared_as_written(self, handler):
        """Dumped under the keys a stage config uses, and left out when not declared (an ensemble without them
        dumps as before: same build document, same artifact digest)."""
        data = handler(self)
        if isinstance(data, dict):
            for field, key in (("declared_inputs", "inputs"), ("declared_outputs", "outputs")):
                value = data.pop(field, None)
                if value is not None:
                    data[key] = value
        return data

    @property
    def derived_inputs(self) -> list[str]:
        """Ensemble tensors read by a step and written by none, in order of first use."""
        written = {tensor for step in self.steps for tensor in step.output_map.values()}
        return _unique(t for step in self.steps for t in step.input_map.values() if t not in written)

    @property
    def derived_outputs(self) -> list[str]:
        """Ensemble tensors written by a step and read by none, in step order."""
        read = {tensor for step in self.steps for tensor in step.input_map.values()}
        return _unique(t for step in self.steps for t in step.output_map.values() if t not in read)

    @property
    def inputs(self) -> list[str]:
        """The ensemble's inputs, in config order: as declared, else as derived."""
        return list(self.declared_inputs) if self.declared_inputs is not None else self.derived_inputs

    @property
    def outputs(self) -> list[str]:
        """The ensemble's outputs, in config order: as declared, else as derived."""
        return list(self.declared_outputs) if self.declared_outputs is not None else self.derived_outputs


def near_names(a: str, b: str) -> bool:
    """Whether two different tensor names look like one misspelt: equal but for case, `_` and `-`, or (both at
    least 3 characters) one character inserted, removed, replaced or two neighbours swapped, where a digit
    replaced by another digit does not count (`input0` and `input1` are a series, not a typo)."""
    if a == b:
        return False
    fold = str.maketrans("", "", "_-")
    if a.lower().translate(fold) == b.lower().translate(fold):
        return True
    if min(len(a), len(b)) < 3 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            i = diff[0]
            return not (a[i].isdigit() and b[i].isdigit())
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long[i]:
        i += 1
    return short[i:] == long[i + 1 :]


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:10])
    return f"[{shown}{', ...' if len(names) > 10 else ''}]"


def _unique(values) -> list[str]:
    return list(dict.fromkeys(values))


class PythonEnvironment(StrictModel):
    """A Python-backend model's own execution environment (python_backend README, "Creating Custom
    Execution Environments"; `parameters: EXECUTION_ENV_PATH`): exactly one of

    - `requirements`: a locked requirements file (`name==version` on every line, `--hash` allowed),
      packed by the build (`model_build package --environment-python`) into `python_env.tar.gz`;
    - `archive`: a prebuilt environment (.tar.gz with bin/activate), shipped as it is.

    Both lie inside the model's source folder, so they ship and are fingerprinted with it.
    """

    requirements: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="Locked requirements file, relative to the project root: the source folder's top-level "
        "requirements.txt.",
    )
    archive: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="Prebuilt environment archive (.tar.gz holding bin/activate), relative to the project root, "
        "inside the source folder.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> PythonEnvironment:
        given = [k for k in ("requirements", "archive") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'requirements' or 'archive' (got {', '.join(given) or 'none'})")
        if self.archive is not None and not self.archive.endswith(".tar.gz"):
            raise ValueError(f"environment.archive {self.archive!r} must be a .tar.gz file (conda-pack's format)")
        return self

    @property
    def path(self) -> str:
        return self.requirements if self.requirements is not None else self.archive  # type: ignore[return-value]


def path_within(folder: str, path: str) -> str | None:
    """`path` relative to `folder` when it lies inside it (lexically, both project-relative), else None."""
    base = posixpath.normpath(folder.replace("\\", "/"))
    target = posixpath.normpath(path.replace("\\", "/"))
    if base in (".", "") or not target.startswith(base + "/"):
        return None
    return target[len(base) + 1 :]


# Fields that mean nothing for an ensemble (model_config_utils.cc ValidateEnsembleSchedulingConfig: "instance
# group should not be specified for ensemble", "model_warmup can not be specified for ensemble"; dynamic_batching
# and ensemble_scheduling are the same `oneof scheduling_choice` in model_config.proto; no TensorRT engine).
ENSEMBLE_REFUSED_FIELDS = ("source", "instance_groups", "dynamic_batching", "tensorrt", "warmup", "environment", "tune")


class ModelSettings(StrictModel):
    """One model of `models:`: its source, Triton settings and TensorRT build."""

    name: str = Field(
        pattern=MODEL_NAME_PATTERN,
        description="Triton model name (its folder) and the multi-model TargetModel (<name>.tar.gz); 1-63 letters, "
        "digits, _ or -, not model or config.",
    )
    source: ModelSource | None = Field(
        default=None, description="Where the model comes from; required for every platform but ensemble."
    )
    platform: Platform = Field(
        default="tensorrt_plan",
        description="Triton backend: tensorrt_plan (built into a TensorRT engine), onnxruntime_onnx, python or "
        "ensemble.",
    )
    max_batch_size: int = Field(
        default=16,
        ge=0,
        le=65536,
        description="Largest batch Triton forms, 0-65536; 0: the model has no batch axis (then set "
        "dynamic_batching.enabled false).",
    )
    dynamic_batching: DynamicBatching = Field(default=DynamicBatching(), description="Triton's dynamic batcher.")
    instance_groups: list[InstanceGroup] = Field(
        default_factory=lambda: [InstanceGroup()],
        min_length=1,
        max_length=16,
        description="Model instances Triton runs (1-16 groups). Default: two per GPU, the best measured "
        "configuration of the reference benchmark; a TensorRT model's `tune` measures the best for the model on its "
        "build GPU instead (docs/build.md, Tuning).",
    )
    tensorrt: TensorRTSettings = Field(
        default=TensorRTSettings(), description="How the TensorRT engine is built (platform tensorrt_plan)."
    )
    tune: TuneSettings | None = Field(
        default=None,
        description="Tuning in the build (tensorrt_plan only): load-test config variants on the build GPU and report "
        "the best under slo_p99_ms as config lines; never changes this file. Not part of the artifact's key.",
    )
    warmup: bool = Field(default=False, description="Triton model warm-up before the model serves.")
    response_cache: bool = Field(default=False, description="Triton's response cache for this model.")
    ensemble: EnsembleSettings | None = Field(default=None, description="Steps of a `platform: ensemble` model.")
    environment: PythonEnvironment | None = Field(
        default=None, description="Python execution environment of a `platform: python` model."
    )

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value.lower() in {"model", "config"}:
            raise ValueError(f"model name {value!r} is reserved")
        return value

    @model_validator(mode="after")
    def _platform_fields(self) -> ModelSettings:
        if self.platform == "ensemble":
            # Compared with the defaults, not "given": a dump of the settings (the build's document) loads back.
            fields = type(self).model_fields
            given = [
                name
                for name in ENSEMBLE_REFUSED_FIELDS
                if getattr(self, name) != fields[name].get_default(call_default_factory=True)
            ]
            if given:
                raise ValueError(
                    f"platform 'ensemble' takes no {', '.join(repr(g) for g in given)}: an ensemble has no model file, "
                    "instances, batcher, warm-up or environment of its own (Triton's model_config_utils.cc); set them "
                    "on its composing models"
                )
            if self.ensemble is None:
                raise ValueError("platform 'ensemble' needs 'ensemble: {steps: [...]}'")
            return self
        if self.ensemble is not None:
            raise ValueError(f"'ensemble' applies to platform 'ensemble' only, not {self.platform!r}")
        if self.source is None:
            raise ValueError(f"platform {self.platform!r} needs 'source' (one of path, s3_uri, export)")
        if self.environment is not None:
            if self.platform != "python":
                raise ValueError(f"'environment' applies to platform 'python' only, not {self.platform!r}")
            self._check_environment_place(self.environment)
        return self

    def _check_environment_place(self, environment: PythonEnvironment) -> None:
        """The file lies inside the source folder (so it ships with the model and is part of its digest)."""
        folder = self.source.path if self.source is not None else None
        if folder is None:
            return  # platform python without source.path is refused below
        inside = path_within(folder, environment.path)
        field = "environment.requirements" if environment.requirements is not None else "environment.archive"
        if inside is None:
            raise ValueError(
                f"{field} {environment.path!r} must lie inside the model's source folder {folder!r}, which is what "
                "ships and is fingerprinted"
            )
        if environment.requirements is not None and inside != REQUIREMENTS_NAME:
            raise ValueError(
                f"{field} {environment.path!r}: the build packs the source folder's top-level {REQUIREMENTS_NAME}; "
                f"name it {posixpath.join(posixpath.normpath(folder), REQUIREMENTS_NAME)!r}"
            )
        if environment.archive is not None and inside.startswith("1/"):
            raise ValueError(f"{field} {environment.path!r}: keep it out of the version folder 1/")

    @model_validator(mode="after")
    def _batching_consistent(self) -> ModelSettings:
        if self.platform == "ensemble":
            return self
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
        self._check_tune()
        if self.platform == "python" and self.source is not None and self.source.kind != "path":
            raise ValueError("platform 'python' needs source.path: a folder holding model.py")
        if self.platform == "tensorrt_plan" and any(group.kind == "KIND_CPU" for group in self.instance_groups):
            # tensorrt_backend src/instance_state.cc: "TensorRT backend supports only GPU device".
            raise ValueError(
                "platform 'tensorrt_plan' runs on GPU instances only (Triton's TensorRT backend refuses KIND_CPU); "
                "use kind KIND_GPU, or platform onnxruntime_onnx for CPU serving"
            )
        return self

    def _check_tune(self) -> None:
        """`tune` is measured by the TensorRT build's report (docs/build.md "Tuning")."""
        if self.tune is None:
            return
        if self.platform != "tensorrt_plan":
            raise ValueError(
                f"'tune' applies to platform 'tensorrt_plan' (tuned in its GPU build), not {self.platform!r}"
            )
        sets = self.tune.candidates.preferred_batch_sizes
        too_big = sorted({b for sizes in sets for b in sizes if b > self.max_batch_size})
        if too_big:
            raise ValueError(
                f"tune.candidates.preferred_batch_sizes {too_big} exceed max_batch_size {self.max_batch_size}"
            )
        if (sets or self.tune.candidates.max_queue_delay_microseconds) and not self.dynamic_batching.enabled:
            raise ValueError("tune.candidates: batcher settings need dynamic_batching enabled")

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler):
        """`source` (ensembles), `ensemble` and `environment` are left out when absent: dumps of models without
        them stay what they were (artifact digests and build documents unchanged), and a dump loads back."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("source", "ensemble", "environment", "tune"):
                if data.get(name, 0) is None:
                    del data[name]
            if self.platform == "ensemble":
                for name in ENSEMBLE_REFUSED_FIELDS:
                    data.pop(name, None)
        return data

    @property
    def uses_gpu(self) -> bool:
        if self.platform == "ensemble":
            return False  # its composing models say where they run
        if self.platform == "python" and "instance_groups" not in self.model_fields_set:
            # Its folder's config.pbtxt says where it runs, not the schema's default (checked for each endpoint's
            # instance type at synth by model_build.preflight).
            return False
        return any(group.kind == "KIND_GPU" for group in self.instance_groups)

    @property
    def needs_gpu_build(self) -> bool:
        return self.platform == "tensorrt_plan"

    @property
    def is_ensemble(self) -> bool:
        return self.platform == "ensemble"

    @property
    def composing_models(self) -> list[str]:
        """The models an ensemble's steps name, each once, in step order (empty for other platforms)."""
        return _unique(step.model for step in self.ensemble.steps) if self.ensemble is not None else []

    def build_fingerprint(self) -> dict:
        """Everything that changes the artifact's bytes except the source (digested apart)."""
        # The build report's tolerances and the tuning grid decide what the build measures, not its bytes.
        return self.model_dump(mode="json", exclude={"source": True, "tune": True, "tensorrt": {"accuracy"}})
