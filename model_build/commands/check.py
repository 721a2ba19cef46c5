"""`python -m model_build check REPO`: validate a Triton model repository before building or uploading.

Prints one line per problem on stdout (`<model>: <field>: <message> [<rule>]`, the message in Triton's
own words) and a one-line summary on stderr; exits 0 when the repository is valid, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model_build.check import check_repository
from model_build.errors import ModelBuildError
from model_build.package import pending_environments
from serving_facts.catalogue import UnknownInstanceTypeError
from serving_facts.releases import UnknownReleaseError
from serving_facts.settings import PACKED_ENVIRONMENT_NAME

NAME = "check"
HELP = (
    "Validate a Triton model repository: config.pbtxt schema, Triton's rules (dims, batching, sequence "
    "controls, instance groups, ensembles) and layout (folder names, version folders, model files)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", type=Path, metavar="REPO", help="the model repository: REPO/<model>/config.pbtxt")
    parser.add_argument(
        "--configs-only",
        action="store_true",
        help="check the configs without the model files (no version folder, model file, label file "
        "or execution environment is required)",
    )
    parser.add_argument(
        "--instance-type",
        metavar="TYPE",
        help="SageMaker instance type the repository will be served on (e.g. ml.g5.xlarge); enables the "
        "rules that depend on its GPUs. Default: GPU-dependent rules are skipped.",
    )
    parser.add_argument(
        "--triton-release",
        metavar="YY.MM",
        help="Triton release that will serve the repository (e.g. 24.09); enables the rules that differ between "
        "releases (TensorRT data types, minimum GPU compute capability). Default: only what holds for every release.",
    )


def run(args: argparse.Namespace) -> int:
    try:
        problems = check_repository(
            args.repo,
            configs_only=args.configs_only,
            instance_type=args.instance_type,
            triton_release=args.triton_release,
        )
    except UnknownInstanceTypeError as error:
        raise ModelBuildError(f"--instance-type: {error}") from None
    except UnknownReleaseError as error:
        raise ModelBuildError(f"--triton-release: {error}") from None
    for problem in problems:
        print(problem)
    if problems:
        count = len(problems)
        print(f"check: {count} problem{'s' if count != 1 else ''} in {args.repo}", file=sys.stderr)
        return 1
    mode = " (configs only)" if args.configs_only else ""
    print(f"check: {args.repo} is a valid model repository{mode}", file=sys.stderr)
    if not args.configs_only:
        _note_pending_environments(args.repo)
    return 0


def _note_pending_environments(repo: Path) -> None:
    """Say which environments are checked by their requirements only: `package` packs them."""
    models = sorted(path.name for path in repo.iterdir() if path.is_dir() and not path.is_symlink())
    for model, requirements in sorted(pending_environments(repo, models).items()):
        print(
            f"note: {model}: {PACKED_ENVIRONMENT_NAME} is not packed yet; its {requirements.name} is locked, and "
            "`model_build package --environment-python PY` packs it into the package",
            file=sys.stderr,
        )
