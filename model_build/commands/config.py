"""`python -m model_build config`: write <repository>/<model>/config.pbtxt from an ONNX model."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from pydantic import ValidationError

from model_build import pbtxt
from model_build.app_config import format_validation_error, load_model_settings
from model_build.atomic import atomic_path, write_atomically
from model_build.errors import ModelBuildError
from model_build.onnx_inspect import inspect_model
from model_build.settings import ModelSettings

NAME = "config"
HELP = "Generate a model's Triton config.pbtxt from its ONNX file and settings."


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """--onnx and the model's settings; shared with `trt-command` and `build`."""
    parser.add_argument("--onnx", type=Path, required=True, help="the model's ONNX file")
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_settings_arguments(parser)
    output = parser.add_mutually_exclusive_group(required=True)
    output.add_argument("--repository", type=Path, help="model repository folder; writes <repository>/<name>/")
    output.add_argument("--stdout", action="store_true", help="print config.pbtxt instead of writing it")


def settings_from_args(args: argparse.Namespace) -> ModelSettings:
    if args.config or args.model:
        if not (args.config and args.model):
            raise ModelBuildError("--config and --model go together (or use --name for a model outside the config)")
        if args.name or args.platform or args.max_batch_size is not None or args.instance_kind:
            raise ModelBuildError("--name/--platform/--max-batch-size/--instance-kind cannot be combined with --config")
        settings, _release = load_model_settings(args.config, args.model)
        return settings
    if not args.name:
        raise ModelBuildError("give either --config FILE --model NAME, or --name NAME")
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


def copy_atomically(source: Path, target: Path) -> None:
    with atomic_path(target) as temp:
        shutil.copyfile(source, temp)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    signature = inspect_model(args.onnx)
    text = pbtxt.render(pbtxt.build_model_config(signature, settings), source=args.onnx)
    if args.stdout:
        sys.stdout.write(text)
        return 0
    model_dir = args.repository / settings.name
    if settings.platform == "onnxruntime_onnx":
        # Model first, config last: a folder with a config.pbtxt is a complete model to Triton.
        copy_atomically(args.onnx, model_dir / "1" / "model.onnx")
    write_atomically(model_dir / "config.pbtxt", text.encode())
    print(f"wrote {model_dir / 'config.pbtxt'}", file=sys.stderr)
    if settings.platform == "tensorrt_plan":
        print(f"next: python -m model_build build ... writes {model_dir / '1' / 'model.plan'}", file=sys.stderr)
    return 0
