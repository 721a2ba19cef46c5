"""Build the CDK app for one stage's configuration (shared by app.py and the tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk

from stacks.stage import StageStacks, add_stage_stacks
from triton_cdk.cfn_rules import CloudFormationDefaultRules
from triton_cdk.config import AppConfig
from triton_cdk.config.loader import PROJECT_ROOT
from triton_cdk.nag import enable_checks

if TYPE_CHECKING:
    from stacks.pipeline_stack import PipelineStack
    from triton_cdk.config.pipeline import PipelineConfig


def create_pipeline_app(
    pipeline_config: PipelineConfig, stage_configs: dict[str, AppConfig], **app_kwargs
) -> tuple[cdk.App, PipelineStack]:
    """The pipeline stack alone: its stages' stacks are synthesized inside it, as the pipeline deploys them."""
    # Imported here: a stage's synth (app.py's common case) never loads CDK Pipelines or the pipeline's stacks.
    from stacks.pipeline_stack import add_pipeline_stack

    app = cdk.App(**app_kwargs)
    pipeline_stack = add_pipeline_stack(app, pipeline_config, stage_configs)
    enable_checks(app)
    return app, pipeline_stack


def create_app(
    config: AppConfig,
    *,
    promotion_source: AppConfig | None = None,
    default_rules_in_background: bool = True,
    **app_kwargs,
) -> tuple[cdk.App, StageStacks]:
    """The stage's stacks (the pipeline is its own app: create_pipeline_app).

    `default_rules_in_background`: CloudFormation's default rules start first, from the project's node_modules
    (package.json pins aws-cdk-lib), in a process of their own, so their engine starts while the constructs are
    built (triton_cdk/cfn_rules.py). False: aws-cdk-lib's built-in copy, which obeys `cdk synth
    --no-validation` (CDK_VALIDATION=false; app.py passes it).
    """
    node_modules = PROJECT_ROOT / "node_modules"
    default_rules = CloudFormationDefaultRules(node_modules=node_modules) if default_rules_in_background else None
    app = cdk.App(builtin_cloud_formation_validation=default_rules is None, **app_kwargs)
    stacks = add_stage_stacks(app, config, promotion_source=promotion_source)
    enable_checks(app, default_rules=default_rules)
    return app, stacks
