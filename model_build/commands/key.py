"""`python -m model_build key`: the S3 key a model's artifact lives under.

The key is the one the CDK app deploys: this command loads the config with the app's loader (stage_config) and
asks the app's artifact plan (stacks/artifact_plan.py), the function the stage's stacks read their keys from, so
the two cannot drift (issue #23 item 5; tests/contract/test_artifact_key_parity.py compares them over every
shipped config). A build can check whether its artifact already exists before doing any work.

The app is imported inside `run`, not at import time: `model_build` is CDK-free (the build image imports it
without the CDK), and only this developer-side command needs the app; the layering test checks both.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from model_build.config_yaml import clip
from model_build.errors import ModelBuildError
from model_build.key import SourceError
from serving_facts.catalogue import UnknownInstanceTypeError, instance_type
from serving_facts.content_address import PORTABLE_TARGET, model_artifact_key
from serving_facts.matching import BuildMatchError

if TYPE_CHECKING:
    from serving_facts.settings import ModelSettings
    from stage_config import AppConfig

NAME = "key"
HELP = "Print the content-addressed S3 key of a model's artifact (same inputs, same key)."

_GPU_TARGET = re.compile(r"^(sm\d{2,3}|ampere\+|portable)$")


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


def _load_config(args: argparse.Namespace) -> AppConfig:
    """The config as the app loads it (every rule the app applies), its errors as this CLI's."""
    from stage_config.loader import ConfigError, load_config

    try:
        return load_config(args.config, source_roots=(args.base_dir.resolve(),))
    except ConfigError as error:
        raise ModelBuildError(str(error)) from None


def _check_instance_type(name: str, model: ModelSettings) -> None:
    """What the app's config loader refuses for an endpoint, for the instance type given here."""
    try:
        instance = instance_type(name)
    except UnknownInstanceTypeError as error:
        raise ModelBuildError(f"--instance-type: {error}") from None
    if model.needs_gpu_build and instance.gpu is None:
        raise ModelBuildError(
            f"model {model.name!r} is a {model.platform} model and needs a GPU; {name} has none. "
            "Choose a GPU instance type (ml.g4dn, ml.g5, ml.g6, ...)"
        )


def key_of(args: argparse.Namespace) -> dict[str, str]:
    """{key, digest, source, gpu_target} of `--model`, from the app's artifact plan."""
    from stacks.artifact_plan import model_artifact, target_digest

    config = _load_config(args)
    models = {model.name: model for model in config.models}
    if args.model not in models:
        configured = clip(", ".join(models))
        raise ModelBuildError(f"{args.config}: models: no model named {clip(args.model)!r}; configured: {configured}")
    model = models[args.model]
    base_dir = args.base_dir.resolve()
    try:
        if args.gpu_target is not None:
            if not _GPU_TARGET.match(args.gpu_target):
                raise ModelBuildError(
                    f"--gpu-target {args.gpu_target!r} is not valid; use an SM tag like sm86, ampere+ or portable"
                )
            digest, source = target_digest(config, model, args.gpu_target, base_dir)
            gpu_target = args.gpu_target if model.needs_gpu_build else PORTABLE_TARGET
        else:
            _check_instance_type(args.instance_type, model)
            artifact = model_artifact(config, model, args.instance_type, base_dir)
            digest, source, gpu_target = artifact.digest, artifact.source, artifact.gpu_target
    except (UnknownInstanceTypeError, BuildMatchError) as error:
        raise ModelBuildError(f"--instance-type: {error}") from None
    except (FileNotFoundError, SourceError) as error:
        raise ModelBuildError(f"{args.config}: model {model.name!r}: {error}") from None
    return {"key": model_artifact_key(model.name, digest), "digest": digest, "source": source, "gpu_target": gpu_target}


def run(args: argparse.Namespace) -> int:
    found = key_of(args)
    print(json.dumps(found) if args.json else found["key"])
    return 0
