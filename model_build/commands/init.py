"""`python -m model_build init`: start a `models:` entry from an ONNX file (print it, or append it to a stage)."""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from model_build.app_config import load_model_settings, read_yaml
from model_build.atomic import write_atomically
from model_build.errors import ModelBuildError
from model_build.proposal import Proposal, propose_model
from serving_facts.settings import MODEL_NAME_PATTERN

NAME = "init"
HELP = "Propose a models: entry for an ONNX file (inputs, batching, TensorRT shapes), checked like the build."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--onnx", type=Path, required=True, help="the model's ONNX file, inside the project")
    parser.add_argument("--name", help="model name (default: the file name without .onnx)")
    parser.add_argument(
        "--instance-type", help="serving instance type, e.g. ml.g5.xlarge (CPU types get ONNX Runtime, not TensorRT)"
    )
    parser.add_argument("--append", type=Path, metavar="CONFIG", help="add the entry to this stage file's models:")
    parser.add_argument(
        "--triton-release", metavar="YY.MM", help="serving Triton release (default with --append: the file's)"
    )


def _project_relative(path: Path) -> str:
    """Config paths are relative to the project root, where the CLI runs (README, "Bring your own model")."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        raise ModelBuildError(
            f"{path}: the ONNX file must be inside the project ({Path.cwd()}): copy it there first, e.g. to models/"
        ) from None


def render(proposal: Proposal, indent: str = "") -> str:
    """The entry as YAML list item, with the reasons and the values to confirm as comments."""
    lines = [f"# {note}" for note in proposal.notes]
    lines += [f"# ADJUST {item}" for item in proposal.adjust]
    body = yaml.safe_dump([proposal.entry], sort_keys=False, default_flow_style=None, width=120)
    text = "\n".join(lines) + "\n" + body
    return "".join(f"{indent}{line}\n" if line else "\n" for line in text.splitlines())


def _insert_into_models(config_text: str, block: str, config: Path) -> str:
    """`config_text` with `block` added at the end of its top-level `models:` list."""
    lines = config_text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"^models:\s*(#.*)?$", line)), None)
    if start is None:
        raise ModelBuildError(f"{config}: models: no top-level block list 'models:' to append to")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^[^\s#]", lines[i])), len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # keep the blank lines before the next key after the new entry
    if lines and not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    return "".join(lines[:end]) + block + "".join(lines[end:])


def append_entry(config: Path, proposal: Proposal) -> None:
    """Append to the stage file; the result must load as a valid model entry, or the file is left as it was."""
    name = proposal.entry["name"]
    document = read_yaml(config)
    existing = [m.get("name") for m in document.get("models") or [] if isinstance(m, dict)]
    if name in existing:
        raise ModelBuildError(f"{config}: models: a model named {name!r} exists already; choose another --name")
    new_text = _insert_into_models(config.read_text(encoding="utf-8"), render(proposal, indent="  "), config)
    with tempfile.TemporaryDirectory(prefix="model-build-init-") as folder:
        trial = Path(folder) / config.name
        trial.write_text(new_text, encoding="utf-8")
        load_model_settings(trial, name)  # the same loader the app and the build use
    write_atomically(config, new_text.encode("utf-8"))


@dataclass(frozen=True)
class _Fleet:
    """The stage file's build.fleet, as serving_facts.matching reads it (the app validates the rest at synth)."""

    arn: str
    gpu: str


def _stage_fleet(config: Path) -> _Fleet | None:
    """The stage's build.fleet (arn and gpu), when it sets one: with it TensorRT can target e.g. ml.g4dn's T4."""
    build = read_yaml(config).get("build")
    fleet = build.get("fleet") if isinstance(build, dict) else None
    if not isinstance(fleet, dict):
        return None
    arn, gpu = fleet.get("arn"), fleet.get("gpu")
    if not isinstance(arn, str) or not isinstance(gpu, str):
        raise ModelBuildError(f"{config}: build.fleet: needs arn and gpu (strings), e.g. gpu: T4")
    return _Fleet(arn, gpu)


def run(args: argparse.Namespace) -> int:
    name = args.name or args.onnx.stem
    if not re.match(MODEL_NAME_PATTERN, name):
        raise ModelBuildError(
            f"--name: {name!r} is not a valid model name ({MODEL_NAME_PATTERN}); pass one with --name"
        )
    if not args.onnx.is_file():
        raise ModelBuildError(f"{args.onnx}: no such ONNX file")
    relative = Path(_project_relative(args.onnx))
    release = args.triton_release
    if release is None and args.append:
        release = read_yaml(args.append).get("triton_release")
        release = release if isinstance(release, str) else None
    proposal = propose_model(
        relative,
        name,
        instance_type_name=args.instance_type,
        triton_release=release,
        fleet=_stage_fleet(args.append) if args.append else None,
    )
    if args.append:
        append_entry(args.append, proposal)
        print(f"added model {name!r} to {args.append}; list it in an endpoint's models: to serve it", file=sys.stderr)
        for item in proposal.adjust:
            print(f"ADJUST {item}", file=sys.stderr)
        return 0
    sys.stdout.write(render(proposal))
    return 0
