"""`python -m model_build package`: deterministic archives (or folders) of a model repository."""

from __future__ import annotations

import argparse
from pathlib import Path

from model_build.package import LAYOUTS, package_repository

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
        "--workers", type=int, default=None, help="compression threads. Default: the CPU count, at most 8"
    )


def run(args: argparse.Namespace) -> int:
    artifacts = package_repository(
        args.repository, args.out, models=args.models, layout=args.layout, workers=args.workers
    )
    for artifact in artifacts:
        print(f"{artifact.path}  sha256:{artifact.sha256}")
    return 0
