"""Read one model's settings from the app's `config/<stage>.yaml` without the CDK.

The CDK app validates the whole file (stage_config); the build image only needs the
`models:` entry and the Triton release, so this reads just those, with the same schema.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from model_build.config_yaml import ConfigDocument, clip, read_config_document
from model_build.errors import ModelBuildError
from serving_facts.settings import ModelSettings

# A hostile file can fail every field of a long list; list the first problems, count the rest.
MAX_PROBLEMS = 50


def format_validation_error(
    source: str, error: ValidationError, prefix: str = "", document: ConfigDocument | None = None
) -> str:
    """One line per problem: `<file>: <field.path>: <message> (got <value>) (line N)`.

    The echoed value is clipped (an expanded alias could be megabytes) and at most
    MAX_PROBLEMS lines are listed, so a hostile file cannot produce a huge message.
    """
    lines = []
    items = error.errors()
    for item in items[:MAX_PROBLEMS]:
        path = _field_path(item["loc"])
        where = f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}" if prefix and path else prefix or path
        where = where or "<root>"
        got = "" if item["type"] in {"missing", "extra_forbidden"} else f" (got {clip(repr(item.get('input')))})"
        message = clip(item["msg"].removeprefix("Value error, "), 600)
        if item["type"] == "extra_forbidden":
            message = "unknown key; check the spelling against the configuration reference in README.md"
        line = document.line_of(item["loc"]) if document is not None else None
        at = f" (line {line})" if line is not None else ""
        lines.append(f"{source}: {where}: {message}{got}{at}")
    if len(items) > MAX_PROBLEMS:
        lines.append(f"{source}: ... and {len(items) - MAX_PROBLEMS} more problems")
    return "\n".join(lines)


def _field_path(loc: tuple) -> str:
    """('endpoints', 0, 'autoscaling') -> 'endpoints[0].autoscaling'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def read_yaml(path: Path) -> dict:
    """The top-level mapping of a config file (hostile input refused: see model_build.config_yaml)."""
    return read_config_document(path).data


def load_model_settings(config_path: Path, model_name: str) -> tuple[ModelSettings, str]:
    """Return (settings of `model_name`, Triton release) from an app config file."""
    document = read_config_document(config_path)
    models = document.data.get("models") or []
    if not isinstance(models, list):
        raise ModelBuildError(f"{config_path}: models: expected a list of models, got a {type(models).__name__}")
    names = [entry.get("name") for entry in models if isinstance(entry, dict)]
    if model_name not in names:
        configured = clip(", ".join(map(str, names))) or "none"
        raise ModelBuildError(f"{config_path}: models: no model named {model_name!r}; configured: {configured}")
    index = next(i for i, e in enumerate(models) if isinstance(e, dict) and e.get("name") == model_name)
    entry = models[index]
    try:
        settings = ModelSettings.model_validate(entry)
    except ValidationError as error:
        raise ModelBuildError(format_validation_error(str(config_path), error, f"models[{index}]")) from error
    release = document.data.get("triton_release", "")
    if not isinstance(release, str) or not release:
        raise ModelBuildError(f"{config_path}: triton_release: missing or not a string like '24.09'")
    return settings, release
