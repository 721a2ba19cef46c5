"""`python -m model_build package`: deterministic archives (or folders) of a model repository.

`package REPO`: the model folders of REPO. `package --config C --model M`: model M as the stage config C
describes it (an ensemble with the models its steps name), assembled from its local sources as the build
would (model_build.stage_repository), to try it on the local endpoint: a TensorRT model ships the ONNX file
its engine is built from, which `endpoint_client local` runs on ONNX Runtime.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from model_build.errors import ModelBuildError
from model_build.package import LAYOUTS, EnvironmentOptions, PackagedArtifact, package_repository
from model_build.stage_repository import assemble_repository

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
    parser.add_argument(
        "repository",
        type=Path,
        nargs="?",
        metavar="REPO",
        help="model repository: a folder of model folders (or give --config)",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (outside REPO)")
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        metavar="NAME",
        help="package only this model folder (repeatable); an ensemble brings every model its steps name. "
        "Default: every model folder in REPO",
    )
    stage = parser.add_argument_group(
        "a stage config's model instead of REPO, to try it locally (endpoint_client local / make local)"
    )
    stage.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="stage config, e.g. examples/config/ensemble.yaml: package each --model as the build assembles it "
        "from its local source.path (configs generated as `config` does; a tensorrt_plan model ships the ONNX "
        "its engine is built from as 1/model.onnx, no engine)",
    )
    stage.add_argument(
        "--base-dir",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="with --config: the project root, which source paths are relative to and stay inside. Default: .",
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
    if (args.repository is None) == (args.config is None):
        raise ModelBuildError("give a model repository REPO, or --config FILE with --model NAME (not both)")
    if args.config is None:
        artifacts = _package(args, args.repository)
    else:
        if not args.models or len(args.models) > 1:
            raise ModelBuildError(
                f"--config {args.config}: name one model to package with --model NAME (an ensemble brings its steps)"
            )
        with tempfile.TemporaryDirectory(prefix="stage-repository-") as work:
            repository = Path(work) / "repository"
            assembled = assemble_repository(args.config, args.models[0], repository, base_dir=args.base_dir)
            artifacts = _package(args, repository, assembled.engines_from_onnx, assembled.requirements)
        for model in assembled.engines_from_onnx:
            print(
                f"note: {model} is a tensorrt_plan model in {args.config}; no engine is built here (TensorRT builds "
                f"it on the serving GPU): the package holds {model}/1/model.onnx, the ONNX its engine is built from, "
                "which `endpoint_client local` runs on ONNX Runtime. To deploy, use the stage (make deploy): its "
                "build ships the engine",
                file=sys.stderr,
            )
    for artifact in artifacts:
        print(f"{artifact.path}  sha256:{artifact.sha256}")
    return 0


def _package(
    args: argparse.Namespace,
    repository: Path,
    engines_from_onnx: tuple[str, ...] = (),
    requirements: tuple[tuple[str, str], ...] = (),
) -> list[PackagedArtifact]:
    return package_repository(
        repository,
        args.out,
        models=args.models,
        layout=args.layout,
        workers=args.workers,
        default_model=args.default_model,
        environments=EnvironmentOptions(
            args.environment_python, args.environment_cache, tuple(args.find_links), args.no_index, requirements
        ),
        engines_from_onnx=engines_from_onnx,
    )
