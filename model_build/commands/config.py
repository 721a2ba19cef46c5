"""`python -m model_build config`: write <repository>/<model>/config.pbtxt.

- ONNX models (tensorrt_plan, onnxruntime_onnx): generated from --onnx and the settings;
- ensembles (`--config C --model <ensemble> --repository REPO`): generated from the steps and
  REPO/<composing>/config.pbtxt (model_build.ensemble_config), with an empty version folder 1/;
- python models with `environment:`: EXECUTION_ENV_PATH added to (or verified in) REPO/<name>/config.pbtxt
  (model_build.execution_env); the folder itself is the user's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from model_build import pbtxt
from model_build.app_config import format_validation_error, load_model_settings
from model_build.ensemble_config import write_ensemble
from model_build.errors import ModelBuildError
from model_build.execution_env import ensure_execution_env
from model_build.onnx_inspect import inspect_model
from model_build.stage_repository import write_onnx_model
from serving_facts.releases import UnknownReleaseError, release
from serving_facts.settings import ModelSettings

NAME = "config"
HELP = (
    "Generate a model's Triton config.pbtxt from its ONNX file and settings; an ensemble's from its steps and "
    "composing configs; a python model's EXECUTION_ENV_PATH for its environment."
)


def add_settings_arguments(parser: argparse.ArgumentParser, *, onnx_required: bool = True) -> None:
    """--onnx and the model's settings; shared with `trt-command` and `build`."""
    parser.add_argument(
        "--onnx",
        type=Path,
        required=onnx_required,
        help="the model's ONNX file" + ("" if onnx_required else " (not for ensembles and python models)"),
    )
    source = parser.add_argument_group("settings: either --config and --model, or --name with options")
    source.add_argument("--config", type=Path, help="app config file, e.g. config/dev.yaml")
    source.add_argument("--model", help="model name under `models:` in --config")
    source.add_argument("--name", help="model name, for a model that is not in an app config")
    source.add_argument(
        "--platform", choices=sorted(pbtxt.PLATFORM_FIELDS), default=None, help="default: tensorrt_plan"
    )
    source.add_argument("--max-batch-size", type=int, default=None, help="0 disables batching (default: 16)")
    source.add_argument(
        "--instance-kind", choices=["KIND_GPU", "KIND_CPU", "KIND_AUTO"], default=None, help="default: KIND_GPU"
    )
    source.add_argument(
        "--triton-release",
        metavar="YY.MM",
        help="Triton release that serves the model (with --config: the file's triton_release). A TensorRT "
        "model's data types depend on it (TensorRT 8.6 in 23.12-24.03 turns INT64 into INT32)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_settings_arguments(parser, onnx_required=False)
    output = parser.add_mutually_exclusive_group(required=True)
    output.add_argument("--repository", type=Path, help="model repository folder; writes <repository>/<name>/")
    output.add_argument("--stdout", action="store_true", help="print config.pbtxt instead of writing it")


def settings_from_args(args: argparse.Namespace) -> ModelSettings:
    return settings_and_release(args)[0]


def settings_and_release(args: argparse.Namespace) -> tuple[ModelSettings, str | None]:
    """The model's settings and the serving Triton release (None: not given on the command line)."""
    if args.config or args.model:
        if not (args.config and args.model):
            raise ModelBuildError("--config and --model go together (or use --name for a model outside the config)")
        if args.name or args.platform or args.max_batch_size is not None or args.instance_kind or args.triton_release:
            raise ModelBuildError(
                "--name/--platform/--max-batch-size/--instance-kind/--triton-release cannot be combined with --config"
            )
        settings, triton_release = load_model_settings(args.config, args.model)
        _known_release(triton_release, f"{args.config}: triton_release")
        return settings, triton_release
    if args.triton_release:
        _known_release(args.triton_release, "--triton-release")
    return _settings_from_options(args), args.triton_release


def _known_release(name: str, where: str) -> None:
    try:
        release(name)
    except UnknownReleaseError as error:
        raise ModelBuildError(f"{where}: {error}") from None


def _settings_from_options(args: argparse.Namespace) -> ModelSettings:
    if not args.name:
        raise ModelBuildError("give either --config FILE --model NAME, or --name NAME")
    if args.onnx is None:
        raise ModelBuildError("--onnx FILE is required with --name (ensembles and python models need --config)")
    fields: dict = {"name": args.name, "source": {"path": str(args.onnx)}}
    if args.platform:
        fields["platform"] = args.platform
    if args.max_batch_size is not None:
        fields["max_batch_size"] = args.max_batch_size
        if args.max_batch_size == 0:
            fields["dynamic_batching"] = {"enabled": False}
    if args.instance_kind:
        fields["instance_groups"] = [{"kind": args.instance_kind}]
    try:
        return ModelSettings.model_validate(fields)
    except ValidationError as error:
        raise ModelBuildError(format_validation_error("command line", error)) from error


def _check_repository_folder(repository: Path) -> None:
    """--repository is a folder, or does not exist yet (it is created); a file there is a mistake."""
    if repository.exists() and not repository.is_dir():
        raise ModelBuildError(f"--repository {repository}: not a folder; give the model repository folder")


def _run_without_onnx(args: argparse.Namespace, settings: ModelSettings) -> int:
    """Ensembles and python models: from the repository, not from an ONNX file."""
    if args.onnx is not None:
        raise ModelBuildError(f"--onnx does not apply to platform {settings.platform!r} (model {settings.name!r})")
    if settings.platform == "ensemble":
        if args.stdout:
            raise ModelBuildError("an ensemble's config needs --repository REPO (its composing models' configs)")
        _check_repository_folder(args.repository)
        written = write_ensemble(args.repository, settings)
        print(f"wrote {written} and {written.parent / '1'}/", file=sys.stderr)
        return 0
    if args.stdout:
        raise ModelBuildError("a python model's config is its own: give --repository REPO holding REPO/<name>/")
    done = ensure_execution_env(args.repository / settings.name, settings)
    print(done or f"model {settings.name!r}: python model without environment:, nothing to write", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    settings, triton_release = settings_and_release(args)
    if settings.platform in ("ensemble", "python"):
        return _run_without_onnx(args, settings)
    if args.onnx is None:
        raise ModelBuildError(f"--onnx FILE is required for platform {settings.platform!r}")
    if args.stdout:
        # generate() refuses a config that `check` would refuse.
        sys.stdout.write(pbtxt.generate(inspect_model(args.onnx), settings, triton_release))
        return 0
    _check_repository_folder(args.repository)
    # An ONNX Runtime model serves its ONNX file; a TensorRT model's engine is written by `build`.
    with_onnx = settings.platform == "onnxruntime_onnx"
    written = write_onnx_model(args.repository, settings, args.onnx, triton_release, with_onnx=with_onnx)
    print(f"wrote {written}", file=sys.stderr)
    if settings.platform == "tensorrt_plan":
        print(f"next: python -m model_build build ... writes {written.parent / '1' / 'model.plan'}", file=sys.stderr)
    return 0
