"""Load and validate config/<stage>.yaml; every problem is reported with file and field path."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from model_build.app_config import format_validation_error, read_yaml
from model_build.errors import ModelBuildError
from triton_cdk.config.app import AppConfig, cross_field_problems

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = PROJECT_ROOT / "config"


class ConfigError(Exception):
    """The configuration cannot be deployed; the message has one line per problem."""


def config_path(stage: str, config_dir: Path = CONFIG_DIR) -> Path:
    return config_dir / f"{stage}.yaml"


def load_config(path: Path) -> AppConfig:
    """Parse and validate one stage file. Raises ConfigError naming the file and each field."""
    try:
        document = read_yaml(path)
    except ModelBuildError as error:
        available = sorted(p.stem for p in path.parent.glob("*.yaml")) if path.parent.is_dir() else []
        hint = f" (stages in {path.parent}: {', '.join(available)})" if available else ""
        raise ConfigError(f"{error}{hint}") from None
    try:
        config = AppConfig.model_validate(document)
    except ValidationError as error:
        raise ConfigError(format_validation_error(str(path), error)) from None
    problems = cross_field_problems(config)
    if problems:
        raise ConfigError("\n".join(f"{path}: {field}: {message}" for field, message in problems))
    if config.stage != path.stem:
        raise ConfigError(f"{path}: stage: is {config.stage!r} but the file is for stage {path.stem!r}")
    return config


def load_stage(stage: str, config_dir: Path = CONFIG_DIR) -> AppConfig:
    return load_config(config_path(stage, config_dir))
