"""`python -m model_build package`: deterministic archives (or folders) of a model repository."""

from __future__ import annotations

import argparse
from pathlib import Path

from model_build.package import LAYOUTS, package_repository

# More threads than this only queue for the same cores and memory.
MAX_WORKERS = 64


def worker_count(text: str) -> int:
    """--workers: a whole number from 1 to MAX_WORKERS; anything else is a usage error (exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_WORKERS}")
    return value


NAME = "package"
HELP = "Package a Triton model repository for SageMaker: byte-identical archives for identical files."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repository", type=Path, metavar="REPO", help="model repository: a folder of model folders")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (outside REPO)")
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        metavar="NAME",
        help="package only this model folder (repeatable). Default: every model folder in REPO",
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="single",
        help="single: DIR/model.tar.gz with the model folders at its root (single-model endpoint); "
        "multi: DIR/<model>.tar.gz per model (multi-model endpoint prefix); "
        "uncompressed: DIR/<model>/... folders (SageMaker uncompressed model data). Default: single",
    )
    parser.add_argument(
        "--default-model",
        metavar="NAME",
        help="single layout with several model folders (an ensemble and its steps): the folder SageMaker "
        "loads, which the endpoint must name in SAGEMAKER_TRITON_DEFAULT_MODEL_NAME. Required then: "
        "SageMaker's Triton start-up exits on several model folders without it",
    )
    parser.add_argument(
        "--workers",
        type=worker_count,
        default=None,
        help=f"compression threads, 1 to {MAX_WORKERS}. Default: the CPU count, at most 8",
    )


def run(args: argparse.Namespace) -> int:
    artifacts = package_repository(
        args.repository,
        args.out,
        models=args.models,
        layout=args.layout,
        workers=args.workers,
        default_model=args.default_model,
    )
    for artifact in artifacts:
        print(f"{artifact.path}  sha256:{artifact.sha256}")
    return 0
