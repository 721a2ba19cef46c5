"""Read one model's settings from the app's `config/<stage>.yaml` without the CDK.

The CDK app validates the whole file (triton_cdk.config); the build image only needs the
`models:` entry and the Triton release, so this reads just those, with the same schema.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from model_build.errors import ModelBuildError
from model_build.settings import ModelSettings


def format_validation_error(source: str, error: ValidationError, prefix: str = "") -> str:
    """One line per problem: `<file>: <field.path>: <message> (got <value>)`."""
    lines = []
    for item in error.errors():
        path = _field_path(item["loc"])
        where = f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}" if prefix and path else prefix or path
        where = where or "<root>"
        got = "" if item["type"] in {"missing", "extra_forbidden"} else f" (got {item.get('input')!r})"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key; check the spelling against the configuration reference in README.md"
        lines.append(f"{source}: {where}: {message}{got}")
    return "\n".join(lines)


def _field_path(loc: tuple) -> str:
    """('endpoints', 0, 'autoscaling') -> 'endpoints[0].autoscaling'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def read_yaml(path: Path) -> dict:
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError as error:
        raise ModelBuildError(f"{path}: no such config file") from error
    except yaml.YAMLError as error:
        raise ModelBuildError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(document, dict):
        raise ModelBuildError(f"{path}: expected a mapping at the top level")
    return document


def load_model_settings(config_path: Path, model_name: str) -> tuple[ModelSettings, str]:
    """Return (settings of `model_name`, Triton release) from an app config file."""
    document = read_yaml(config_path)
    models = document.get("models") or []
    names = [entry.get("name") for entry in models if isinstance(entry, dict)]
    if model_name not in names:
        raise ModelBuildError(
            f"{config_path}: models: no model named {model_name!r}; configured: {', '.join(map(str, names)) or 'none'}"
        )
    index = names.index(model_name)
    try:
        settings = ModelSettings.model_validate(models[index])
    except ValidationError as error:
        raise ModelBuildError(format_validation_error(str(config_path), error, f"models[{index}]")) from error
    release = str(document.get("triton_release", ""))
    if not release:
        raise ModelBuildError(f"{config_path}: triton_release: missing")
    return settings, release
