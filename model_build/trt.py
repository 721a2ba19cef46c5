"""TensorRT engine builds: the exact trtexec command for a model, and the runner behind `build`.

Flag spellings are TensorRT 10's trtexec (its `--help`; the 8.x -> 10.x migration guide replaced
`--workspace=N` with `--memPoolSize=workspace:N`). `workspace:N` without a unit suffix is MiB in
both TensorRT 8.6 and 10.x (10.x also accepts `4096M`), so the plain form serves every release in
serving_facts.releases. Engines are tied to the TensorRT version and GPU architecture that built them
(TensorRT support matrix, ../shared/README.md), hence the GPU/TensorRT checks before a build.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import onnx

from model_build import pbtxt
from model_build.atomic import atomic_path, write_atomically
from model_build.errors import InvalidModelError, MissingToolError, ModelBuildError
from model_build.key import file_sha256
from model_build.onnx_inspect import DYNAMIC, ModelSignature
from serving_facts.releases import same_tensorrt
from serving_facts.settings import ModelSettings

# Not datetime.UTC (3.11): this module runs in the CodeBuild GPU build on the Triton image's Python 3.10
# (model_build/buildspec.yml; tests/model_build/test_build_image_python.py).
UTC = timezone.utc  # noqa: UP017

DEFAULT_TRTEXEC = "/usr/src/tensorrt/bin/trtexec"  # where NVIDIA's TensorRT and Triton images keep it


@dataclass(frozen=True)
class ShapeProfile:
    input: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


def opt_batch_size(settings: ModelSettings) -> int:
    """The batch TensorRT tunes for: tensorrt.opt_batch_size, else the largest preferred size, else max."""
    preferred = settings.dynamic_batching.preferred_batch_sizes if settings.dynamic_batching.enabled else []
    return settings.tensorrt.opt_batch_size or (max(preferred) if preferred else settings.max_batch_size)


def shape_profiles(signature: ModelSignature, settings: ModelSettings) -> list[ShapeProfile]:
    """One optimisation profile entry per input that has a dynamic axis (batch included)."""
    source = signature.path
    pbtxt.check_shape_ranges(signature, settings)
    batch = settings.max_batch_size
    profiles = []
    for spec in signature.inputs:
        dims = pbtxt.config_dims(spec, batch, source, "input")
        if DYNAMIC not in spec.dims:
            continue  # static inputs take no shape flags (trtexec reads them from the model)
        shape = next((s for s in settings.tensorrt.shapes if s.input == spec.name), None)
        if DYNAMIC in dims and shape is None:
            axes = [axis + (1 if batch else 0) for axis, dim in enumerate(dims) if dim == DYNAMIC]
            # With max_batch_size 0 there is no batch axis to speak of.
            which = "besides the batch axis" if batch else "(max_batch_size 0: no batch axis)"
            raise InvalidModelError(
                f"{source}: input {spec.name!r} (shape {list(spec.dims)}) has dynamic axes {axes} {which}; "
                f"TensorRT needs their range: add tensorrt.shapes: [{{input: {spec.name}, min: [...], "
                f"opt: [...], max: [...]}}] with {len(dims)} value(s) each"
            )
        lo = list(shape.min) if shape else list(dims)
        mid = list(shape.opt) if shape else list(dims)
        hi = list(shape.max) if shape else list(dims)
        if batch:
            lo, mid, hi = [1, *lo], [opt_batch_size(settings), *mid], [batch, *hi]
        profiles.append(ShapeProfile(spec.name, tuple(lo), tuple(mid), tuple(hi)))
    _check_shared_dims(source, profiles)
    for profile in profiles:
        _check_trtexec_name(source, profile.input)
    return profiles


def _dim_params(path: Path) -> dict[str, tuple[str, ...]]:
    """Input name -> its ONNX dim_param per axis ("" where the axis has none)."""
    # The graph only (external weights stay on disk); onnx_inspect has already validated the file.
    graph = onnx.load(str(path), load_external_data=False).graph
    return {vi.name: tuple(dim.dim_param for dim in vi.type.tensor_type.shape.dim) for vi in graph.input}


def _check_shared_dims(source: Path, profiles: list[ShapeProfile]) -> None:
    """Axes that share an ONNX dim_param ("seq") are one dimension to TensorRT: one min/opt/max for all.

    TensorRT's ONNX parser names every input dimension after its dim_param (onnx-tensorrt 8.6-GA
    ModelImporter.cpp `setDimensionNames` -> `ITensor::setDimensionName`), and NvInfer.h says of that call:
    "Dimensions with the same non-empty name must be equal at runtime" (release/8.6 and main). A
    profile that lets `input_ids` and `attention_mask` differ on a shared `seq` axis contradicts it.
    """
    params = _dim_params(source)
    seen: dict[str, tuple[str, int, tuple[int, int, int]]] = {}
    for profile in profiles:
        for axis, param in enumerate(params.get(profile.input, ())):
            if not param:
                continue
            extent = (profile.min[axis], profile.opt[axis], profile.max[axis])
            first = seen.setdefault(param, (profile.input, axis, extent))
            if first[2] != extent:
                raise InvalidModelError(
                    f"{source}: inputs {first[0]!r} (axis {first[1]}) and {profile.input!r} (axis {axis}) share the "
                    f"ONNX dimension {param!r}, so TensorRT needs one range for both, but min/opt/max are "
                    f"{'/'.join(map(str, first[2]))} and {'/'.join(map(str, extent))}; give both inputs the same "
                    "values in tensorrt.shapes"
                )


def _check_trtexec_name(source: Path, name: str) -> None:
    """trtexec cannot take every input name in --minShapes/--optShapes/--maxShapes.

    TensorRT samples/common/sampleOptions.cpp (release/8.6 and main): `getShapesBuild` splits the flag on
    ',' before anything else, and `splitNameAndValue` accepts exactly two single quotes around a name;
    a name with ':' is fine (the value is what follows the last ':').
    """
    if "," in name or "'" in name:
        raise InvalidModelError(
            f"{source}: input {name!r} has a dynamic shape, and trtexec cannot parse a shape flag for a name that "
            "contains ',' or \"'\" (it splits the flag on ',' before it reads quotes); rename the input when "
            "exporting the model (e.g. torch.onnx.export input_names=[...])"
        )


def _shape_flag(profiles: list[ShapeProfile], which: str) -> str:
    # Names are written as they are: ',' and "'" were refused above; ':' needs no quoting.
    return ",".join(f"{p.input}:{'x'.join(str(d) for d in getattr(p, which))}" for p in profiles)


def trtexec_argv(
    signature: ModelSignature,
    settings: ModelSettings,
    *,
    engine_path: Path,
    timing_cache: Path,
    trtexec: str = DEFAULT_TRTEXEC,
    calibration_cache: Path | None = None,
) -> list[str]:
    """The trtexec command that builds `settings`' engine from the inspected ONNX model."""
    if settings.platform != "tensorrt_plan":
        raise ModelBuildError(
            f"model {settings.name!r} has platform {settings.platform!r}; only tensorrt_plan models are built "
            "with TensorRT (use `config` alone for onnxruntime_onnx)"
        )
    trt = settings.tensorrt
    argv = [trtexec, f"--onnx={signature.path}", f"--saveEngine={engine_path}"]
    if trt.precision == "fp16":
        argv.append("--fp16")
    elif trt.precision == "best":
        argv.append("--best")
    elif trt.precision == "int8":
        cache = calibration_cache or trt.calibration_cache
        if str(cache).startswith("s3://"):
            raise ModelBuildError(
                f"tensorrt.calibration_cache {cache} is in S3; download it and pass --calibration-cache LOCAL_FILE"
            )
        argv += ["--int8", f"--calib={cache}"]
    profiles = shape_profiles(signature, settings)
    if profiles:
        argv += [f"--{which}Shapes={_shape_flag(profiles, which)}" for which in ("min", "opt", "max")]
    argv.append(f"--memPoolSize=workspace:{trt.workspace_mib}")
    argv.append(f"--timingCacheFile={timing_cache}")
    if trt.hardware_compatibility == "ampere+":
        argv.append("--hardwareCompatibilityLevel=ampere+")
    if trt.version_compatible:
        argv.append("--versionCompatible")
    argv.append("--skipInference")  # build only; serving performance is measured on the endpoint
    return argv


# ---------------------------------------------------------------------------------------------
# The build host: GPU and TensorRT detection


@dataclass(frozen=True)
class GpuInfo:
    name: str
    compute_capability: str


def detect_gpus(nvidia_smi: str = "nvidia-smi") -> list[GpuInfo]:
    """GPUs as nvidia-smi lists them; MissingToolError when there is none."""
    executable = shutil.which(nvidia_smi)
    if executable is None:
        raise MissingToolError(
            "no NVIDIA GPU here (nvidia-smi not found). TensorRT engines must be built on a GPU of the serving "
            "architecture: run `build` in the CodeBuild GPU project or on a GPU instance, or use `trt-command` "
            "to print the command"
        )
    try:
        result = subprocess.run(
            [executable, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise MissingToolError(f"nvidia-smi failed to run ({error}); is the NVIDIA driver installed?") from error
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise MissingToolError(
            f"nvidia-smi failed (exit {result.returncode}: {detail[0] if detail else 'no output'}); "
            "no usable NVIDIA GPU here"
        )
    gpus = []
    for line in result.stdout.strip().splitlines():
        name, _, cc = line.rpartition(",")
        if name and re.fullmatch(r"\d+\.\d+", cc.strip()):
            gpus.append(GpuInfo(name.strip(), cc.strip()))
    if not gpus:
        raise MissingToolError(f"nvidia-smi listed no GPU (output: {result.stdout.strip()!r})")
    return gpus


def _decode_trt_version(number: int) -> str:
    # NV_TENSORRT_VERSION: major*1000+minor*100+patch up to 8.x, major*10000+minor*100+patch from 9.x.
    if number >= 10000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def tensorrt_version_from_banner(text: str) -> str | None:
    """ "&&&& RUNNING TensorRT.trtexec [TensorRT v100400] ..." -> "10.4.0"."""
    match = re.search(r"\[TensorRT v(\d+)\]", text)
    return _decode_trt_version(int(match.group(1))) if match else None


def resolve_trtexec(trtexec: str) -> str:
    found = shutil.which(trtexec)
    if found is None:
        raise MissingToolError(
            f"TensorRT's trtexec not found at {trtexec!r}. Build inside NVIDIA's TensorRT image of the serving "
            "release (nvcr.io/nvidia/tensorrt:<YY.MM>-py3) or the tritonserver image, or pass --trtexec PATH. "
            "(PyPI `tensorrt` wheels carry no trtexec.)"
        )
    return found


def detect_tensorrt(trtexec: str) -> str:
    """TensorRT version of `trtexec` from the banner it prints when run without a model."""
    executable = resolve_trtexec(trtexec)
    try:
        result = subprocess.run([executable], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise MissingToolError(f"{executable} failed to run: {error}") from error
    version = tensorrt_version_from_banner(result.stdout + result.stderr)
    if version is None:
        raise MissingToolError(f"{executable} printed no '[TensorRT vNNNN]' banner; is it TensorRT's trtexec?")
    return version


def check_expectations(
    gpu: GpuInfo, tensorrt: str, *, expect_tensorrt: str | None, expect_compute_capability: str | None
) -> None:
    """Refuse a build whose engine could not load where it is meant to be served."""
    if expect_tensorrt and not same_tensorrt(tensorrt, expect_tensorrt):
        raise ModelBuildError(
            f"this build host has TensorRT {tensorrt}, but the serving Triton release needs TensorRT "
            f"{expect_tensorrt}; an engine only loads on the TensorRT that built it. Build in "
            "nvcr.io/nvidia/tensorrt:<release>-py3 of the serving release"
        )
    if expect_compute_capability and gpu.compute_capability != expect_compute_capability:
        raise ModelBuildError(
            f"this build host's GPU is {gpu.name} (compute capability {gpu.compute_capability}), but the serving "
            f"instance needs {expect_compute_capability}; engines are not portable across GPU architectures. "
            "Build on the serving GPU type, or set tensorrt.hardware_compatibility: ampere+ (Ampere or newer only)"
        )


def _check_calibration_file(settings: ModelSettings, calibration_cache: Path | None) -> None:
    """An INT8 build reads its calibration cache from this host (trtexec `--calib=<file>`, "Read INT8 calibration
    cache file", TensorRT samples/common/sampleOptions.cpp): it must be here, a non-empty regular file."""
    if settings.tensorrt.precision != "int8":
        return
    cache = Path(calibration_cache or settings.tensorrt.calibration_cache or "")
    where = "--calibration-cache" if calibration_cache else "tensorrt.calibration_cache"
    if not cache.is_file() or cache.stat().st_size == 0:
        state = "is empty" if cache.is_file() else "is not a file on this build host"
        raise ModelBuildError(
            f"{where} {cache}: {state}; an INT8 engine needs its calibration cache (in the CodeBuild build, "
            "`python -m model_build calibration` fetches it first); pass --calibration-cache FILE"
        )


@dataclass(frozen=True)
class BuildResult:
    engine: Path
    info_file: Path
    info: dict


def build_engine(
    signature: ModelSignature,
    settings: ModelSettings,
    *,
    repository: Path,
    timing_cache: Path,
    trtexec: str = DEFAULT_TRTEXEC,
    nvidia_smi: str = "nvidia-smi",
    expect_tensorrt: str | None = None,
    expect_compute_capability: str | None = None,
    calibration_cache: Path | None = None,
) -> BuildResult:
    """Build <repository>/<model>/1/model.plan and build-info.json; nothing is left half-written."""
    model_dir = repository / settings.name
    engine = model_dir / "1" / "model.plan"
    # Validate the model and settings (cheap, user errors) before looking for tools.
    trtexec_argv(
        signature, settings, engine_path=engine, timing_cache=timing_cache, calibration_cache=calibration_cache
    )

    _check_calibration_file(settings, calibration_cache)
    gpu = detect_gpus(nvidia_smi)[0]
    tensorrt = detect_tensorrt(trtexec)
    check_expectations(
        gpu, tensorrt, expect_tensorrt=expect_tensorrt, expect_compute_capability=expect_compute_capability
    )
    if settings.tensorrt.hardware_compatibility == "ampere+" and float(gpu.compute_capability) < 8.0:
        raise ModelBuildError(
            f"hardware_compatibility ampere+ needs an Ampere-or-newer build GPU; this host has {gpu.name} "
            f"(compute capability {gpu.compute_capability})"
        )

    timing_cache.parent.mkdir(parents=True, exist_ok=True)
    info_file = model_dir / "build-info.json"
    with atomic_path(engine) as temp_engine:
        argv = trtexec_argv(
            signature,
            settings,
            engine_path=temp_engine,
            timing_cache=timing_cache,
            trtexec=resolve_trtexec(trtexec),
            calibration_cache=calibration_cache,
        )
        started = time.monotonic()
        temp_engine.unlink()  # trtexec writes it; an empty leftover must not pass for an engine
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        duration = round(time.monotonic() - started, 3)
        if result.returncode != 0 or not temp_engine.is_file() or temp_engine.stat().st_size == 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise ModelBuildError(
                f"trtexec failed for model {settings.name!r} (exit {result.returncode}); no engine written. "
                f"Last lines:\n{tail}"
            )
        info = {
            "model": settings.name,
            "tensorrt_version": tensorrt,
            "gpu_name": gpu.name,
            "compute_capability": gpu.compute_capability,
            "hostname": socket.gethostname(),
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "duration_s": duration,
            "source": {"path": str(signature.path), "sha256": file_sha256(signature.path)},
            "engine_sha256": file_sha256(temp_engine),
            "options": {
                "max_batch_size": settings.max_batch_size,
                "tensorrt": settings.tensorrt.model_dump(mode="json"),
            },
            "shape_profiles": [asdict(p) for p in shape_profiles(signature, settings)],
            "argv": [arg.replace(str(temp_engine), str(engine)) for arg in argv],
        }
        # A stale record must never describe a new engine: drop it before the engine is swapped in
        # (when this block ends), then write the new record (each step atomic). A crash in between
        # leaves an engine without a record, which `package` can refuse, never a record that lies.
        info_file.unlink(missing_ok=True)
    write_atomically(info_file, (json.dumps(info, indent=2) + "\n").encode())
    return BuildResult(engine=engine, info_file=info_file, info=info)
