"""The app's typed configuration (one YAML file per stage under config/)."""

from triton_cdk.config.app import AppConfig
from triton_cdk.config.loader import ConfigError, load_config, load_stage

__all__ = ["AppConfig", "ConfigError", "load_config", "load_stage"]
