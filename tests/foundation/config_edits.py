"""Small helpers for config tests: a shipped config as data, edited, written where the loader reads it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from synth_helpers import shipped_path

from stage_config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]


def shipped(relative: str = "config/dev.yaml") -> dict:
    """A deep copy of a shipped config's data (config/... as shipped, tests/shipped_config/: not the user's)."""
    return copy.deepcopy(yaml.safe_load(shipped_path(relative).read_text()))


def set_path(document: dict, dotted: str, value: object) -> dict:
    """Set `endpoints.0.container.extra_environment` style paths (digits index lists); returns the document."""
    *parents, leaf = dotted.split(".")
    node = document
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[int(leaf) if leaf.isdigit() else leaf] = value
    return document


def write(folder: Path, document: dict, stage: str | None = None) -> Path:
    """Write `document` as `<stage>.yaml` in `folder` (the stage named in it by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stage or document['stage']}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    return path


def refusal(path: Path, **kwargs) -> str:
    """The loader's ConfigError message for `path` (fails the test when the file is accepted)."""
    with pytest.raises(ConfigError) as refused:
        load_config(path, **kwargs)
    return str(refused.value)
