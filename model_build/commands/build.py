"""`python -m model_build build`: build a model's TensorRT engine on this GPU host.

Needs an NVIDIA GPU (nvidia-smi) and TensorRT's trtexec; refuses to build when either is missing
or differs from what the serving side needs (--expect-tensorrt, --expect-compute-capability).
"""

from __future__ import annotations

import argparse
import sys

from model_build.calibration import fetch_calibration
from model_build.commands.config import settings_from_args
from model_build.commands.trt_command import add_build_arguments, default_timing_cache
from model_build.onnx_inspect import inspect_model
from model_build.trt import build_engine

NAME = "build"
HELP = "Build <repository>/<model>/1/model.plan with TensorRT on this GPU host, plus build-info.json."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_build_arguments(parser)
    parser.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi executable (default: from PATH)")
    parser.add_argument(
        "--expect-tensorrt", metavar="VERSION", help="refuse unless trtexec is this TensorRT (e.g. 10.4.0.26 or 10.4)"
    )
    parser.add_argument(
        "--expect-compute-capability", metavar="X.Y", help="refuse unless the build GPU has this compute capability"
    )


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    timing_cache = args.timing_cache or default_timing_cache(settings.name)
    calibration_cache = args.calibration_cache
    if calibration_cache is None:
        # INT8 in CodeBuild: CALIBRATION_URI or an s3:// calibration_cache is fetched (model_build.calibration).
        where = f"{args.config}: model {settings.name!r}" if args.config else f"model {settings.name!r}"
        calibration_cache = fetch_calibration(settings, timing_cache.with_name(f"{settings.name}.calibration"), where)
    result = build_engine(
        inspect_model(args.onnx),
        settings,
        repository=args.repository,
        timing_cache=timing_cache,
        trtexec=args.trtexec,
        nvidia_smi=args.nvidia_smi,
        expect_tensorrt=args.expect_tensorrt,
        expect_compute_capability=args.expect_compute_capability,
        calibration_cache=calibration_cache,
    )
    info = result.info
    print(
        f"built {result.engine} with TensorRT {info['tensorrt_version']} on {info['gpu_name']} "
        f"(compute capability {info['compute_capability']}) in {info['duration_s']} s; record: {result.info_file}",
        file=sys.stderr,
    )
    return 0
