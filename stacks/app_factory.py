"""Build the CDK app for one stage's configuration (shared by app.py and the tests)."""

from __future__ import annotations

import aws_cdk as cdk

from stacks.stage import StageStacks, add_stage_stacks
from triton_cdk.config import AppConfig
from triton_cdk.nag import enable_aws_solutions_checks


def create_app(config: AppConfig, **app_kwargs) -> tuple[cdk.App, StageStacks]:
    app = cdk.App(**app_kwargs)
    stacks = add_stage_stacks(app, config)
    enable_aws_solutions_checks(app)
    return app, stacks
