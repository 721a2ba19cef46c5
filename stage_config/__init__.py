"""The app's typed configuration (one YAML file per stage under config/)."""

from stage_config.app import AppConfig
from stage_config.loader import ConfigError, load_config, load_stage

__all__ = ["AppConfig", "ConfigError", "load_config", "load_stage"]
