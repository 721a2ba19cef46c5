"""`python -m model_build key`: the S3 key a model's artifact lives under.

The key is model_build.key's content address, the same one the CDK stacks compute at synth, so a
build can check whether its artifact already exists before doing any work.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

from model_build.app_config import load_model_settings, read_yaml
from model_build.catalogue import UnknownInstanceTypeError, instance_type
from model_build.errors import ModelBuildError
from model_build.key import (
    PORTABLE_TARGET,
    SourceError,
    artifact_digest,
    calibration_fingerprint,
    ensemble_source,
    model_artifact_key,
    source_fingerprint,
)
from model_build.matching import BuildMatchError, match_build
from model_build.settings import ModelSettings
from model_build.source_paths import model_source_problems

NAME = "key"
HELP = "Print the content-addressed S3 key of a model's artifact (same inputs, same key)."

_GPU_TARGET = re.compile(r"^(sm\d{2,3}|ampere\+|portable)$")


@dataclass(frozen=True)
class Fleet:
    arn: str
    gpu: str


def gpu_target_for_instance(settings: ModelSettings, instance_name: str, release: str, fleet: Fleet | None) -> str:
    """GPU target of `settings`' artifact when served on `instance_name`: what the build/serve
    matcher picks (model_build.matching), exactly as the CDK stacks do at synth."""
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
    try:
        return match_build(instance, release, fleet).gpu_target
    except BuildMatchError as error:
        raise ModelBuildError(f"--instance-type: {error}") from None


def _fleet(config_path: Path) -> Fleet | None:
    """`build.fleet` of the app config, which changes how Ampere-or-newer and T4 targets are built."""
    fleet = (read_yaml(config_path).get("build") or {}).get("fleet")
    if not fleet:
        return None
    if not isinstance(fleet, dict) or not {"arn", "gpu"} <= set(fleet):
        raise ModelBuildError(f"{config_path}: build.fleet: needs 'arn' and 'gpu'")
    return Fleet(arn=str(fleet["arn"]), gpu=str(fleet["gpu"]))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="app config file, e.g. config/dev.yaml")
    parser.add_argument("--model", required=True, help="model name under `models:` in --config")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--gpu-target", help="sm86 (exact GPU architecture), ampere+ or portable")
    target.add_argument(
        "--instance-type",
        help="serving instance type, e.g. ml.g5.xlarge: the target follows from it (and from build.fleet) "
        "as the CDK app decides it",
    )
    parser.add_argument(
        "--base-dir",
        type=Path,
        default=Path("."),
        help="the project root: source.path is relative to it and must resolve inside it (symlinks followed). "
        "Default: .",
    )
    parser.add_argument("--json", action="store_true", help="print {key, digest, source, gpu_target} as JSON")


def _digest(args: argparse.Namespace, settings: ModelSettings, release: str) -> tuple[str, str, str]:
    """(digest, source fingerprint, GPU target) of one model; an ensemble's from its composing models' digests."""
    if settings.is_ensemble:
        digests = {}
        for name in settings.composing_models:
            composing, _ = load_model_settings(args.config, name)
            if composing.is_ensemble:
                raise ModelBuildError(f"{args.config}: model {name!r}: nested ensembles are not supported yet")
            digests[name] = _digest(args, composing, release)[0]
        source = ensemble_source(digests)
        digest = artifact_digest(settings, source=source, triton_release=release, gpu_target=PORTABLE_TARGET)
        return digest, source, PORTABLE_TARGET
    if args.gpu_target is not None:
        if not _GPU_TARGET.match(args.gpu_target):
            raise ModelBuildError(
                f"--gpu-target {args.gpu_target!r} is not valid; use an SM tag like sm86, ampere+ or portable"
            )
        gpu_target = args.gpu_target
    else:
        gpu_target = gpu_target_for_instance(settings, args.instance_type, release, _fleet(args.config))
    # The CDK config loader's rule: a local source (symlinks followed) stays inside the project.
    problems = model_source_problems(settings, args.base_dir)
    if problems:
        raise ModelBuildError(
            "\n".join(f"{args.config}: model {settings.name!r}: {field}: {message}" for field, message in problems)
            + f"\n(--base-dir {args.base_dir} is the project root; run from it or pass --base-dir)"
        )
    try:
        source = source_fingerprint(settings.source, args.base_dir)
        calibration = calibration_fingerprint(settings, args.base_dir)  # as stacks/artifact_plan.py
    except (FileNotFoundError, SourceError) as error:
        raise ModelBuildError(f"{args.config}: model {settings.name!r}: {error}") from None
    digest = artifact_digest(
        settings, source=source, triton_release=release, gpu_target=gpu_target, calibration=calibration
    )
    return digest, source, gpu_target if settings.needs_gpu_build else PORTABLE_TARGET


def run(args: argparse.Namespace) -> int:
    settings, release = load_model_settings(args.config, args.model)
    digest, source, effective_target = _digest(args, settings, release)
    key = model_artifact_key(settings.name, digest)
    if args.json:
        print(json.dumps({"key": key, "digest": digest, "source": source, "gpu_target": effective_target}))
    else:
        print(key)
    return 0
