#!/usr/bin/env python3
"""CDK entry point: `cdk synth -c stage=dev` (the default stage is dev).

The environment is read here only; constructs get everything through props.
"""

import sys
from pathlib import Path

import aws_cdk as cdk

from stacks.app_factory import create_app
from triton_cdk.config import ConfigError, load_stage
from triton_cdk.config.loader import CONFIG_DIR


def main() -> None:
    context = cdk.App().node
    stage = context.try_get_context("stage") or "dev"
    config_dir = Path(context.try_get_context("config_dir") or CONFIG_DIR)
    try:
        config = load_stage(stage, config_dir)
    except ConfigError as error:
        # Refused before any stack exists: nothing is written to cdk.out.
        print(f"ERROR: invalid configuration\n{error}", file=sys.stderr)
        sys.exit(1)
    app, _ = create_app(config)
    app.synth()


if __name__ == "__main__":
    main()
