"""The app's typed configuration (one YAML file per stage under config/).

The names below load on first use (PEP 562): the schema imports the construct library (and so aws_cdk, about a
second of imports), which `make deploy`'s preflight and other light helpers that read only
`stage_config.placeholders` must not pay for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stage_config.app import AppConfig
    from stage_config.loader import ConfigError, load_config, load_stage

__all__ = ["AppConfig", "ConfigError", "load_config", "load_stage"]
_HOMES = {"AppConfig": "stage_config.app", "ConfigError": "stage_config.loader", "load_config": "stage_config.loader",
          "load_stage": "stage_config.loader"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'stage_config' has no attribute {name!r}")
