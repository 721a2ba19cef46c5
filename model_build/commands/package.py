"""`python -m model_build package`: deterministic archives (or folders) of a model repository."""

from __future__ import annotations

import argparse
from pathlib import Path

from model_build.package import LAYOUTS, EnvironmentOptions, package_repository

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
        help="package only this model folder (repeatable); an ensemble brings every model its steps name. "
        "Default: every model folder in REPO",
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
        help="single layout with several model folders: the folder SageMaker loads, which the endpoint must "
        "name in SAGEMAKER_TRITON_DEFAULT_MODEL_NAME. Default: the one --model given when it is an ensemble; "
        "required otherwise, as SageMaker's Triton start-up exits on several model folders without it",
    )
    environment = parser.add_argument_group(
        "python execution environments (EXECUTION_ENV_PATH = $$TRITON_MODEL_DIRECTORY/python_env.tar.gz)"
    )
    environment.add_argument(
        "--environment-python",
        metavar="PY",
        help="pack each such environment from its model folder's locked requirements.txt with this interpreter "
        "(the serving image's python3: same Python ABI and glibc as the backend stub) into the package",
    )
    environment.add_argument(
        "--environment-cache",
        type=Path,
        metavar="DIR",
        help="packed environments are cached here by the sha256 of the requirements and the interpreter "
        "(default: build/python-envs)",
    )
    environment.add_argument(
        "--find-links",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="pip --find-links for packing: a folder of wheels (repeatable)",
    )
    environment.add_argument(
        "--no-index", action="store_true", help="pip --no-index for packing: only --find-links folders"
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
        environments=EnvironmentOptions(
            args.environment_python, args.environment_cache, tuple(args.find_links), args.no_index
        ),
    )
    for artifact in artifacts:
        print(f"{artifact.path}  sha256:{artifact.sha256}")
    return 0
