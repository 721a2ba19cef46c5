"""`python -m model_build trt-command`: print the exact trtexec command `build` would run."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from model_build.commands.config import add_settings_arguments, settings_from_args
from model_build.onnx_inspect import inspect_model
from model_build.trt import DEFAULT_TRTEXEC, trtexec_argv

NAME = "trt-command"
HELP = "Print the trtexec command that builds a model's TensorRT engine (shell-quoted)."


def default_timing_cache(model_name: str) -> Path:
    # Outside the model repository: the timing cache speeds up rebuilds but must not be packaged.
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "model_build" / f"{model_name}.timing.cache"


def add_build_arguments(parser: argparse.ArgumentParser) -> None:
    add_settings_arguments(parser)
    parser.add_argument("--repository", type=Path, required=True, help="model repository; engine goes to <name>/1/")
    parser.add_argument("--trtexec", default=DEFAULT_TRTEXEC, help=f"trtexec executable (default: {DEFAULT_TRTEXEC})")
    parser.add_argument(
        "--timing-cache", type=Path, default=None, help="TensorRT timing cache file (default: ~/.cache/model_build/)"
    )
    parser.add_argument(
        "--calibration-cache", type=Path, default=None, help="local INT8 calibration cache (overrides the settings)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_build_arguments(parser)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    argv = trtexec_argv(
        inspect_model(args.onnx),
        settings,
        engine_path=args.repository / settings.name / "1" / "model.plan",
        timing_cache=args.timing_cache or default_timing_cache(settings.name),
        trtexec=args.trtexec,
        calibration_cache=args.calibration_cache,
    )
    print(shlex.join(argv))
    return 0
