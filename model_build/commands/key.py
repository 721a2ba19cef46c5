"""`python -m model_build key`: the S3 key a model's artifact lives under.

The key is model_build.key's content address, the same one the CDK stacks compute at synth, so a
build can check whether its artifact already exists before doing any work.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from model_build.app_config import load_model_settings
from model_build.catalogue import UnknownInstanceTypeError, instance_type
from model_build.errors import ModelBuildError
from model_build.key import PORTABLE_TARGET, artifact_digest, model_artifact_key, source_fingerprint
from model_build.settings import ModelSettings

NAME = "key"
HELP = "Print the content-addressed S3 key of a model's artifact (same inputs, same key)."

AMPERE_PLUS_TARGET = "ampere+"
_GPU_TARGET = re.compile(r"^(sm\d{2,3}|ampere\+|portable)$")
HARDWARE_COMPATIBILITY = ("none", "ampere+")


def gpu_target_for_instance(settings: ModelSettings, instance_name: str, hardware_compatibility: str | None) -> str:
    """GPU target of `settings`' artifact when served on `instance_name`.

    TensorRT engines only run on the GPU architecture that built them (../shared/README.md), so
    the target is the serving GPU's SM ("sm86" for ml.g5), or "ampere+" for hardware-compatible
    engines, which run on any Ampere-or-newer GPU but never on T4 or V100.
    """
    try:
        instance = instance_type(instance_name)
    except UnknownInstanceTypeError as error:
        raise ModelBuildError(f"--instance-type: {error}") from None
    if not settings.needs_gpu_build:
        return PORTABLE_TARGET
    if instance.gpu is None:
        raise ModelBuildError(
            f"model {settings.name!r} is a {settings.platform} model and needs a GPU; {instance_name} has none. "
            "Choose a GPU instance type (ml.g4dn, ml.g5, ml.g6, ...)"
        )
    compatibility = hardware_compatibility or settings.tensorrt.hardware_compatibility
    if compatibility == AMPERE_PLUS_TARGET:
        if not instance.gpu.is_ampere_or_newer:
            raise ModelBuildError(
                f"hardware compatibility ampere+ engines do not run on {instance_name} ({instance.gpu.model}, compute "
                f"capability {instance.gpu.compute_capability}); use --hardware-compatibility none"
            )
        return AMPERE_PLUS_TARGET
    return instance.gpu.sm


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="app config file, e.g. config/dev.yaml")
    parser.add_argument("--model", required=True, help="model name under `models:` in --config")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--gpu-target", help="sm86 (exact GPU architecture), ampere+ or portable")
    target.add_argument("--instance-type", help="serving instance type, e.g. ml.g5.xlarge: the target follows from it")
    parser.add_argument(
        "--hardware-compatibility",
        choices=HARDWARE_COMPATIBILITY,
        default=None,
        help="with --instance-type: TensorRT hardware compatibility. "
        "Default: the model's tensorrt.hardware_compatibility",
    )
    parser.add_argument(
        "--base-dir", type=Path, default=Path("."), help="folder that source.path is relative to. Default: ."
    )
    parser.add_argument("--json", action="store_true", help="print {key, digest, source, gpu_target} as JSON")


def run(args: argparse.Namespace) -> int:
    settings, release = load_model_settings(args.config, args.model)
    if args.gpu_target is not None:
        if args.hardware_compatibility is not None:
            raise ModelBuildError("--hardware-compatibility goes with --instance-type, not --gpu-target")
        if not _GPU_TARGET.match(args.gpu_target):
            raise ModelBuildError(
                f"--gpu-target {args.gpu_target!r} is not valid; use an SM tag like sm86, ampere+ or portable"
            )
        gpu_target = args.gpu_target
    else:
        gpu_target = gpu_target_for_instance(settings, args.instance_type, args.hardware_compatibility)
    try:
        source = source_fingerprint(settings.source, args.base_dir)
    except FileNotFoundError as error:
        raise ModelBuildError(f"{args.config}: model {args.model!r}: {error}") from None
    digest = artifact_digest(settings, source=source, triton_release=release, gpu_target=gpu_target)
    key = model_artifact_key(settings.name, digest)
    if args.json:
        effective_target = gpu_target if settings.needs_gpu_build else PORTABLE_TARGET
        print(json.dumps({"key": key, "digest": digest, "source": source, "gpu_target": effective_target}))
    else:
        print(key)
    return 0
