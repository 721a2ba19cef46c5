"""The build report (issue 25): after a TensorRT engine is built, serve it beside the same ONNX on ONNX Runtime,
compare their outputs on the same inputs (model_build.accuracy: Polygraphy's semantics, tolerances per precision or
`tensorrt.accuracy`), load-test the engine at a few concurrencies (loadtest.py's engine, in process, against
Triton's own HTTP route), optionally tune (build_tune.py), and write report.json (model_build.build_report).

Outside the tolerance the check raises AccuracyError, naming each output and its error, and writes no report: the
build stops there, before `package` and `upload` (docs/build.md "Build report").

Inputs: the user's samples (`--samples inputs.npz`, as `invoke --input` reads them) or generated from the
model's config.pbtxt at the engine's optimisation shapes (batch: model_build.trt.opt_batch_size; dynamic axes:
`tensorrt.shapes[].opt`), per data type, from a fixed seed (0): floats uniform in [0, 1), integers 0 or 1,
booleans; `tensorrt.accuracy.input_ranges: {name: [low, high]}` gives an input other values (integers in [low, high],
floats in [low, high)). Integers default to 0/1 because an integer input usually indexes something (a Gather on
token, segment or position ids, a mask, a class id): ONNX Runtime refuses an index beyond the indexed table
("indices element out of data bounds") and TensorRT's result there is undefined, so any larger default could fail a
correct model whose smallest table has 2 rows (BERT's token_type_ids); 0 and 1 are valid for every such table and
still differ. Give `input_ranges` or samples (`tensorrt.accuracy.samples`) for realistic values.
With `tensorrt.accuracy.check: false` the comparison is skipped (recorded in the report) and the speed is measured.
The stage config's smoke samples (config/pipeline.yaml smoke.raw_inputs) are raw
bytes for models that decode them (BYTES tensors), which no TensorRT engine takes; they do not apply here.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.build_server import BuildServer, read_model_config, reference_name
from endpoint_client.codec import encode_request
from endpoint_client.errors import EndpointError, InvalidInputError
from endpoint_client.limits import MAX_PAYLOAD_BYTES
from endpoint_client.loadtest import Level, Plan, percentiles, run_plan, triton_target
from endpoint_client.loadtest_inputs import NUMPY_TYPES
from model_build.accuracy import SOURCE, AccuracyError, Tolerance, check, compare_outputs, tolerance
from model_build.build_report import REPORT_SCHEMA_VERSION
from model_build.report_budget import CHECK_CONCURRENCY, CHECK_SECONDS
from model_build.trt import opt_batch_size
from serving_facts.settings import ModelSettings

# Not datetime.UTC (3.11): this module runs in the CodeBuild GPU build on the Triton image's Python 3.10
# (model_build/buildspec.yml; tests/model_build/test_build_image_python.py).
UTC = timezone.utc  # noqa: UP017

SEED = 0
DEFAULT_CONCURRENCY = CHECK_CONCURRENCY  # the build's worst-case time is checked at config load with these
DEFAULT_SECONDS = CHECK_SECONDS
MAX_CHECK_SECONDS = 60.0  # per level: the build pays for every second
# Each generated input at most what one InvokeEndpoint request carries (endpoint_client.limits.MAX_PAYLOAD_BYTES,
# the bound --samples files have too): a wrong opt shape must not allocate gigabytes in the build.
MAX_GENERATED_BYTES = MAX_PAYLOAD_BYTES


def opt_inputs(config: mc.ModelConfig, settings: ModelSettings, *, seed: int = SEED) -> dict[str, np.ndarray]:
    """One request at the engine's optimisation shapes (module docstring), deterministic."""
    rng = np.random.default_rng(seed)
    batch = [opt_batch_size(settings)] if config.max_batch_size > 0 else []
    accuracy = settings.tensorrt.accuracy
    value_ranges = dict(accuracy.input_ranges) if accuracy is not None else {}
    unknown = sorted(set(value_ranges) - {spec.name for spec in config.input})
    if unknown:
        raise InvalidInputError(
            f"tensorrt.accuracy.input_ranges: {', '.join(unknown)} not inputs of model {config.name!r} (its inputs: "
            f"{', '.join(spec.name for spec in config.input)})"
        )
    ranges = {shape.input: list(shape.opt) for shape in settings.tensorrt.shapes}
    tensors = {}
    for spec in config.input:
        type_name = mc.DataType.Name(spec.data_type)
        dtype = NUMPY_TYPES.get(type_name)
        if dtype is None:
            raise InvalidInputError(
                f"model {config.name!r}: input {spec.name!r} is {type_name}; generated inputs cover numeric and "
                "boolean types: give samples (--samples inputs.npz)"
            )
        opt = ranges.get(spec.name)
        dims = [opt[i] if d < 0 and opt and i < len(opt) else (1 if d < 0 else int(d)) for i, d in enumerate(spec.dims)]
        shape = batch + dims
        size = math.prod(shape) * np.dtype(dtype).itemsize
        if size > MAX_GENERATED_BYTES:
            raise InvalidInputError(
                f"model {config.name!r}: input {spec.name!r} at the opt shape {shape} is {size} bytes; generated "
                f"inputs are at most {MAX_GENERATED_BYTES} bytes each (as --samples): lower tensorrt.shapes opt or "
                "tensorrt.opt_batch_size, or give tensorrt.accuracy.samples"
            )
        low, high = value_ranges.get(spec.name, (None, None))
        if dtype is np.bool_:
            tensors[spec.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.floating):
            low, high = (0.0, 1.0) if low is None else (low, high)
            tensors[spec.name] = (low + (high - low) * rng.random(size=shape)).astype(dtype)
        else:
            low, high = (0, 1) if low is None else (int(np.ceil(low)), int(np.floor(high)))
            info = np.iinfo(dtype)
            if low > high or low < info.min or high > info.max:
                raise InvalidInputError(
                    f"tensorrt.accuracy.input_ranges.{spec.name}: {list(value_ranges[spec.name])} holds no "
                    f"{type_name} integer in [{info.min}, {info.max}]"
                )
            tensors[spec.name] = rng.integers(low, high, size=shape, endpoint=True, dtype=np.int64).astype(dtype)
    return tensors


def cast_to_config(inputs: Mapping[str, np.ndarray], config: mc.ModelConfig) -> dict[str, np.ndarray]:
    """The same values in each input's configured type (an engine's INT32 where ONNX Runtime takes INT64)."""
    types = {spec.name: NUMPY_TYPES.get(mc.DataType.Name(spec.data_type)) for spec in config.input}
    return {name: a.astype(types[name]) if types.get(name) is not None else a for name, a in inputs.items()}


def check_samples(config: mc.ModelConfig, samples: Mapping[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    names = [spec.name for spec in config.input]
    missing, unknown = sorted(set(names) - set(samples)), sorted(set(samples) - set(names))
    if missing or unknown:
        raise InvalidInputError(
            f"{where}: the model's inputs are {', '.join(names)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; not inputs of the model: {', '.join(unknown)}" if unknown else "")
        )
    return {name: np.asarray(samples[name]) for name in names}


def host_facts(nvidia_smi: str = "nvidia-smi") -> tuple[str, str | None]:
    """(GPU name, driver version) from nvidia-smi; ("none (CPU)", None) where there is none."""
    executable = shutil.which(nvidia_smi)
    if executable is None:
        return "none (CPU)", None
    try:
        result = subprocess.run(
            [executable, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "none (nvidia-smi failed)", None
    first = result.stdout.strip().splitlines()[0] if result.returncode == 0 and result.stdout.strip() else ""
    name, _, driver = first.rpartition(",")
    return (name.strip(), driver.strip()) if name else ("none (nvidia-smi listed no GPU)", None)


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    batch_size: int
    seconds: float
    requests: int
    errors: int
    requests_per_second: float
    inferences_per_second: float
    latency_ms: dict[str, float | None]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def speed_sweep(
    url: str, model: str, inputs: Mapping[str, np.ndarray], concurrency: Sequence[int], seconds: float
) -> list[LevelResult]:
    """loadtest's closed-loop levels against Triton's `/v2/models/<model>/infer`, bounded: `seconds` per level after
    a warm-up of min(1 s, seconds)."""
    if not 0 < seconds <= MAX_CHECK_SECONDS:
        raise InvalidInputError(f"--seconds {seconds}: above 0, at most {MAX_CHECK_SECONDS:g}")
    request = encode_request(inputs)
    first = next(iter(inputs.values()))
    batch = int(first.shape[0]) if first.ndim else 1
    plan = Plan(tuple(Level(concurrency=c) for c in concurrency), duration=seconds, warmup=min(1.0, seconds))
    measured = asyncio.run(run_plan(triton_target(url, model, request, timeout=60.0), plan))
    levels = []
    for level in measured:
        ok = len(level.latencies)
        window = max(level.window_seconds, 1e-9)
        levels.append(
            LevelResult(
                concurrency=int(level.level.concurrency or 0),
                batch_size=batch,
                seconds=round(window, 3),
                requests=level.requests,
                errors=sum(level.errors.values()),
                requests_per_second=round(ok / window, 3),
                inferences_per_second=round(ok * batch / window, 3),
                latency_ms=percentiles(level.latencies),
            )
        )
    return levels


@dataclass(frozen=True)
class CheckOptions:
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    seconds: float = DEFAULT_SECONDS
    samples: Mapping[str, np.ndarray] | None = None
    artifact_key: str | None = None
    nvidia_smi: str = "nvidia-smi"


def accuracy_section(
    server: BuildServer, settings: ModelSettings, inputs: Mapping[str, np.ndarray], tol: Tolerance, source: str
) -> tuple[dict[str, Any], list]:
    reference_config = read_model_config(server.repository / reference_name(settings.name))
    try:
        engine = server.infer(
            settings.name, cast_to_config(inputs, read_model_config(server.repository / settings.name))
        )
        reference = server.infer(reference_name(settings.name), cast_to_config(inputs, reference_config))
    except EndpointError as error:
        # e.g. ONNX Runtime's Gather: "indices element out of data bounds" for ids past a table's end.
        raise InvalidInputError(
            f"{error} (inputs: {source}). If the model refuses these values, give realistic ones: "
            "tensorrt.accuracy.input_ranges {input: [low, high]} or tensorrt.accuracy.samples (docs/build.md, "
            '"Build report")'
        ) from None
    comparisons = compare_outputs(engine, reference, tol)
    section = {
        "checked": True,
        "passed": all(c.passed for c in comparisons),
        "atol": tol.atol,
        "rtol": tol.rtol,
        "tolerance_source": tol.source,
        "semantics": SOURCE + ": an element fails when |a-b| > atol AND |a-b| > rtol*|b| (b: ONNX Runtime)",
        "input_source": source,
        "inputs": {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in inputs.items()},
        "outputs": [c.as_dict() for c in comparisons],
    }
    return section, comparisons


def skipped_section(inputs: Mapping[str, np.ndarray], source: str) -> dict[str, Any]:
    """`tensorrt.accuracy.check: false`: no comparison, and the report says so (passed is null, not true)."""
    return {
        "checked": False,
        "passed": None,
        "skipped_because": "tensorrt.accuracy.check: false in the stage config",
        "input_source": source,
        "inputs": {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in inputs.items()},
        "outputs": [],
    }


def build_report(
    server: BuildServer,
    settings: ModelSettings,
    repository: Path,
    options: CheckOptions,
    build_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Compare (AccuracyError outside the tolerance), measure, tune when asked; the report document."""
    config = read_model_config(repository / settings.name)
    if options.samples is not None:
        inputs, source = check_samples(config, options.samples, "--samples"), "samples"
    else:
        inputs, source = opt_inputs(config, settings), "generated"
    accuracy = settings.tensorrt.accuracy
    tol = tolerance(
        settings.tensorrt.precision,
        accuracy.atol if accuracy is not None else None,
        accuracy.rtol if accuracy is not None else None,
    )
    if accuracy is not None and not accuracy.check:
        section = skipped_section(inputs, source)
    else:
        section, comparisons = accuracy_section(server, settings, inputs, tol, source)
        check(settings.name, comparisons, tol)  # AccuracyError: the build stops, nothing is uploaded
    speed = speed_sweep(server.url, settings.name, inputs, options.concurrency, options.seconds)
    tuning = None
    if settings.tune is not None:
        from endpoint_client.build_tune import tune

        tuning = tune(server, settings, inputs)
    gpu, driver = host_facts(options.nvidia_smi)
    info = dict(build_info or {})
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "model": settings.name,
        "artifact_key": options.artifact_key,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {
            "gpu": gpu,
            "driver": driver,
            "tensorrt": info.get("tensorrt_version"),
            "triton": server.version(),
            "trtexec_argv": info.get("argv"),
            "engine": server.engine,
        },
        "accuracy": section,
        "speed": [level.as_dict() for level in speed],
        "tuning": tuning,
    }


__all__ = ["AccuracyError", "CheckOptions", "build_report", "opt_inputs", "speed_sweep"]
