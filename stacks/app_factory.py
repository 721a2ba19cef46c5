"""Build the CDK app for one stage's configuration (shared by app.py and the tests)."""

from __future__ import annotations

import aws_cdk as cdk

from stacks.pipeline_stack import PipelineStack, add_pipeline_stack
from stacks.stage import StageStacks, add_stage_stacks
from triton_cdk.config import AppConfig
from triton_cdk.config.pipeline import PipelineConfig
from triton_cdk.nag import enable_aws_solutions_checks


def create_app(
    config: AppConfig,
    *,
    promotion_source: AppConfig | None = None,
    pipeline: tuple[PipelineConfig, dict[str, AppConfig]] | None = None,
    **app_kwargs,
) -> tuple[cdk.App, StageStacks, PipelineStack | None]:
    """The stage's stacks, plus the pipeline stack when `pipeline` (its config and every stage's) is given."""
    app = cdk.App(**app_kwargs)
    stacks = add_stage_stacks(app, config, promotion_source=promotion_source)
    pipeline_stack = add_pipeline_stack(app, *pipeline) if pipeline else None
    enable_aws_solutions_checks(app)
    return app, stacks, pipeline_stack
