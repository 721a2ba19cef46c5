"""Load and validate config/<stage>.yaml; every problem is reported with file, field path and line.

Nothing here raises anything but ConfigError for bad input: the file is read by the bounded YAML
reader (model_build.config_yaml: duplicate keys, encodings, alias bombs, tags, depth, size), the
schema is strict and bounded (model_build.settings.StrictModel), and the rules that join several
parts of the file, the local source paths and CloudFormation's per-stack limit come after.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from model_build.app_config import MAX_PROBLEMS, format_validation_error
from model_build.config_yaml import ConfigDocument, ConfigFileError, clip, read_config_document
from model_build.preflight import ensemble_preflight_problems, preflight_problems
from triton_cdk.config.app import AppConfig, cross_field_problems
from triton_cdk.config.source_paths import source_path_problems

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = PROJECT_ROOT / "config"
# One problem line may quote a user's value; keep each readable and the whole message bounded.
MAX_LINE_CHARS = 1_000


class ConfigError(Exception):
    """The configuration cannot be deployed; the message has one line per problem."""


def config_path(stage: str, config_dir: Path = CONFIG_DIR) -> Path:
    return config_dir / f"{stage}.yaml"


def load_config(path: Path, *, source_roots: tuple[Path, ...] = (PROJECT_ROOT,)) -> AppConfig:
    """Parse and validate one stage file. Raises ConfigError naming the file and each field.

    `source_roots`: folders a local model source may resolve into (the project root; tests add
    the shared test-data folder beside it).
    """
    document = _read(path)
    shown = shown_path(path)
    try:
        config = AppConfig.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(str(shown), error, document=document)) from None
    problems = cross_field_problems(config)
    problems += _source_problems(config, source_roots)
    if config.stage != path.stem:
        problems.append(("stage", f"is {config.stage!r} but the file is for stage {clip(path.stem)!r}"))
    if not problems:
        # Only a config that is valid on its own can be built: then find what the build would refuse.
        problems = build_preflight_problems(config, source_roots[0])
    if problems:
        raise ConfigError(format_problems(shown, problems, document))
    return config


def shown_path(path: Path) -> Path:
    """Paths in messages are relative to the project root (where the README's commands run) when inside it."""
    try:
        return Path(path).resolve().relative_to(PROJECT_ROOT)
    except (ValueError, OSError):
        return Path(path)


def build_preflight_problems(config: AppConfig, base_dir: Path) -> list[tuple[str, str]]:
    """What the GPU build would refuse for each model on each instance type serving it (model_build.preflight),
    an ensemble's composing models included, and what Triton would refuse in each ensemble."""
    index = {model.name: i for i, model in enumerate(config.models)}
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for e, endpoint in enumerate(config.endpoints):
        for model in config.served_models(endpoint.models):
            name = model.name
            if (name, endpoint.instance_type) in seen:
                continue
            seen.add((name, endpoint.instance_type))
            found = preflight_problems(
                model,
                instance_type_name=endpoint.instance_type,
                triton_release=config.triton_release,
                base_dir=base_dir,
                fleet=config.build.fleet,
            )
            if model.is_ensemble:
                found += ensemble_preflight_problems(
                    model,
                    {m.name: m for m in config.models if m.name in model.composing_models},
                    instance_type_name=endpoint.instance_type,
                    triton_release=config.triton_release,
                    base_dir=base_dir,
                    fleet=config.build.fleet,
                )
            served = f" (model {name!r} served by endpoints[{e}] on {endpoint.instance_type})"
            problems += [(f"models[{index[name]}].{field}", message + served) for field, message in found]
    return problems


def load_stage(stage: str, config_dir: Path = CONFIG_DIR) -> AppConfig:
    return load_config(config_path(stage, config_dir))


def format_problems(path: Path, problems: list[tuple[str, str]], document: ConfigDocument | None = None) -> str:
    """`<file>: <field>: <message> (line N)`, each line clipped, at most MAX_PROBLEMS of them."""
    lines = []
    for field, message in problems[:MAX_PROBLEMS]:
        line = document.line_of(field_loc(field)) if document is not None else None
        at = f" (line {line})" if line is not None else ""
        lines.append(clip(f"{path}: {field}: {message}", MAX_LINE_CHARS) + at)
    if len(problems) > MAX_PROBLEMS:
        lines.append(f"{path}: ... and {len(problems) - MAX_PROBLEMS} more problems")
    return "\n".join(lines)


def field_loc(field: str) -> tuple:
    """'endpoints[0].autoscaling' -> ('endpoints', 0, 'autoscaling')."""
    return tuple(int(part) if part.isdigit() else part for part in re.findall(r"[^.\[\]]+", field))


def _read(path: Path) -> ConfigDocument:
    try:
        return read_config_document(path)
    except ConfigFileError as error:
        hint = ""
        if "no such config file" in str(error):
            try:
                available = sorted(p.stem for p in path.parent.glob("*.yaml")) if path.parent.is_dir() else []
            except OSError:
                available = []
            hint = f" (stages in {path.parent}: {', '.join(available)})" if available else ""
        raise ConfigError(f"{error}{hint}") from None


def _source_problems(config: AppConfig, roots: tuple[Path, ...]) -> list[tuple[str, str]]:
    """A source passes when it resolves inside any root; report against the first (the project)."""
    results = [dict(source_path_problems(config.models, root)) for root in roots]
    failing = set.intersection(*(set(r) for r in results)) if results else set()
    return [(field, message) for field, message in results[0].items() if field in failing]
