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
from triton_cdk.config.pipeline import load_pipeline
from triton_cdk.promotion import PromotionError


def main() -> None:
    context = cdk.App().node
    stage = context.try_get_context("stage") or "dev"
    config_dir = Path(context.try_get_context("config_dir") or CONFIG_DIR)
    try:
        config = load_stage(stage, config_dir)
        source = load_stage(config.promote_from, config_dir) if config.promote_from else None
        pipeline = None
        if (config_dir / "pipeline.yaml").is_file():
            pipeline_config, stage_configs = load_pipeline(config_dir / "pipeline.yaml", config_dir)
            # The pipeline stack lives in the first stage's app: it synthesizes that stage and self-mutates.
            if stage == pipeline_config.stages[0].name:
                pipeline = (pipeline_config, stage_configs)
        app, _, _ = create_app(config, promotion_source=source, pipeline=pipeline)
    except (ConfigError, PromotionError) as error:
        # Refused before anything is synthesized: nothing is written to cdk.out.
        print(f"ERROR: invalid configuration\n{error}", file=sys.stderr)
        sys.exit(1)
    app.synth()


if __name__ == "__main__":
    main()
