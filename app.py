#!/usr/bin/env python3
"""CDK entry point: `cdk synth -c stage=dev` (the default stage is dev).

The environment is read here only; constructs get everything through props.
"""

import sys

import aws_cdk as cdk

from stacks.app_factory import create_app
from triton_cdk.config import ConfigError, load_stage


def main() -> None:
    stage = cdk.App().node.try_get_context("stage") or "dev"
    try:
        config = load_stage(stage)
    except ConfigError as error:
        # Refused before any stack exists: nothing is written to cdk.out.
        print(f"ERROR: invalid configuration\n{error}", file=sys.stderr)
        sys.exit(1)
    app, _ = create_app(config)
    app.synth()


if __name__ == "__main__":
    main()
