"""`python -m endpoint_client.build_check_cli`: the build report of a built TensorRT model (build_check.py), written
once to --out; the build then packages and uploads, and `python -m model_build report --publish` puts report.json
beside the artifact. Exit 1 (nothing written) when the engine is outside the tolerance."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from endpoint_client import inputs as input_files
from endpoint_client.build_check import (
    DEFAULT_CONCURRENCY,
    DEFAULT_SECONDS,
    MAX_CHECK_SECONDS,
    CheckOptions,
    build_report,
)
from endpoint_client.build_server import BuildServer, prepare_repository, reference_name
from endpoint_client.errors import InvalidInputError
from model_build.app_config import load_model_settings
from model_build.build_report import format_report, write_report
from model_build.cli import run_cli
from model_build.errors import ModelBuildError

DEFAULT_TRITONSERVER = Path("/opt/tritonserver/bin/tritonserver")  # where NVIDIA's Triton images keep it


def _concurrency(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated whole numbers, e.g. 1,2,4") from None
    if not values or any(not 1 <= value <= 256 for value in values) or len(values) > 8:
        raise argparse.ArgumentTypeError(f"{text!r}: 1-8 levels, each 1-256")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="app config file (the build's config.yaml)")
    parser.add_argument("--model", required=True, help="model name under `models:` (platform tensorrt_plan)")
    parser.add_argument("--repository", type=Path, required=True, help="the build's repository (<model>/1/model.plan)")
    parser.add_argument("--onnx", type=Path, required=True, help="the ONNX file the engine was built from")
    parser.add_argument("--out", type=Path, required=True, help="report.json to write (refused if it exists)")
    parser.add_argument("--samples", help="inputs.npz: the inputs to compare with (default: generated, opt shapes)")
    parser.add_argument(
        "--concurrency", type=_concurrency, default=DEFAULT_CONCURRENCY, help="load-test levels (default 1,2,4)"
    )
    parser.add_argument(
        "--seconds", type=float, default=DEFAULT_SECONDS, help=f"seconds per level, 0-60 (default {DEFAULT_SECONDS:g})"
    )
    parser.add_argument("--artifact-key", help="the artifact's key (recorded in the report)")
    server = parser.add_mutually_exclusive_group()
    server.add_argument(
        "--tritonserver", type=Path, help=f"the serving image's tritonserver (default {DEFAULT_TRITONSERVER})"
    )
    server.add_argument(
        "--triton-env", type=Path, help="a CPU Triton venv (.venv-triton): both models on the ONNX Runtime stand-in"
    )
    parser.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to load both models")


def run(args: argparse.Namespace) -> int:
    settings, _ = load_model_settings(args.config, args.model)
    if settings.platform != "tensorrt_plan":
        raise ModelBuildError(f"{args.config}: model {args.model!r}: build reports are for tensorrt_plan models")
    if args.out.exists():
        raise ModelBuildError(f"{args.out} already exists; a build report is written once")
    if args.out.resolve().is_relative_to(args.repository.resolve()):
        raise ModelBuildError(
            f"--out {args.out} lies inside --repository {args.repository}: the report would be packaged into the "
            "archive, whose key names its bytes; write it beside the archive (e.g. the build's out folder)"
        )
    if args.samples is not None and not args.samples.endswith(".npz"):
        raise InvalidInputError(f"--samples {args.samples}: an .npz file holding every input by name")
    if not 0 < args.seconds <= MAX_CHECK_SECONDS:
        raise InvalidInputError(f"--seconds {args.seconds}: above 0, at most {MAX_CHECK_SECONDS:g}")
    accuracy = settings.tensorrt.accuracy
    if accuracy is not None and accuracy.samples is not None and args.samples is None:
        raise InvalidInputError(
            f"{args.config}: model {args.model!r}: tensorrt.accuracy.samples is {accuracy.samples!r}: pass that file "
            "as --samples (the CodeBuild build passes SAMPLES_URI's copy)"
        )
    check_files(args)
    samples = input_files.load_array_file(args.samples) if args.samples else None
    if samples is not None:
        numeric_samples(samples, args.samples)
    build_info = read_build_info(args.repository / settings.name / "build-info.json")
    options = CheckOptions(args.concurrency, args.seconds, samples, args.artifact_key)
    with tempfile.TemporaryDirectory(prefix="build-report-") as work:
        repository = Path(work) / "repository"
        prepare_repository(args.repository, settings.name, args.onnx, repository)
        models = [settings.name, reference_name(settings.name)]
        if settings.tune is not None:
            from endpoint_client.build_tune import prepare_variants

            prepare_variants(repository, settings)
        tritonserver = None if args.triton_env else (args.tritonserver or DEFAULT_TRITONSERVER)
        with BuildServer(
            repository,
            models,
            tritonserver=tritonserver,
            triton_env=args.triton_env,
            startup_timeout=args.startup_timeout,
        ) as server:
            report = build_report(server, settings, repository, options, build_info)
    write_report(args.out, report)
    print(format_report(report))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def check_files(args: argparse.Namespace) -> None:
    """What the measurement needs, refused up front with the argument's name (not a traceback after minutes)."""
    if not args.onnx.is_file():
        raise InvalidInputError(f"--onnx {args.onnx}: no such file (the ONNX the engine was built from)")
    if args.triton_env is None:
        server = args.tritonserver or DEFAULT_TRITONSERVER
        if not (server.is_file() and os.access(server, os.X_OK)):
            raise InvalidInputError(f"--tritonserver {server}: not an executable file")
    parent = args.out.parent
    if parent.exists() and not parent.is_dir():
        raise InvalidInputError(f"--out {args.out}: {parent} is not a folder")
    if os.path.lexists(args.out):
        raise ModelBuildError(f"{args.out} already exists (a file or link); a build report is written once")
    # Whether --out can be created at all (/proc, a read-only folder), before minutes of measuring: created
    # exclusively (O_EXCL: never through a link) and removed again; write_report writes it at the end.
    try:
        parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(args.out)
    except OSError as error:
        raise InvalidInputError(f"--out {args.out}: cannot create it ({error.strerror or error})") from None


def numeric_samples(samples: dict, where: str) -> None:
    """Engines take numbers and booleans: a string or complex array is refused by name."""
    for name, array in samples.items():
        kind = getattr(array, "dtype", None)
        if kind is None or kind.kind not in "biuf":
            raise InvalidInputError(
                f"--samples {where}: input {name!r} is {kind}; the build check compares numeric or boolean inputs"
            )


def read_build_info(path: Path) -> dict | None:
    """`model_build build`'s build-info.json (TensorRT version, trtexec argv), or None where there is none."""
    if not path.is_file():
        return None
    try:
        info = json.loads(path.read_bytes()[: 1024 * 1024])
    except (OSError, ValueError) as error:
        raise ModelBuildError(f"{path}: not a build-info.json ({error})") from None
    if not isinstance(info, dict):
        raise ModelBuildError(f"{path}: not a build-info.json (a JSON object)")
    argv, version = info.get("argv"), info.get("tensorrt_version")
    if argv is not None and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise ModelBuildError(f"{path}: argv: a list of strings")
    if version is not None and not isinstance(version, str):
        raise ModelBuildError(f"{path}: tensorrt_version: a string")
    return info


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m endpoint_client.build_check_cli",
        description="Compare a built TensorRT engine with ONNX Runtime, load-test it, tune it; write report.json.",
    )
    add_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
