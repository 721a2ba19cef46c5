"""Build the CDK app for one stage's configuration (shared by app.py and the tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk

from stacks.api_constraint_hints import config_field_hint
from stacks.stage import StageStacks, add_stage_stacks
from stage_config import AppConfig
from triton_cdk.api_constraints import ApiConstraintsCheck
from triton_cdk.nag import enable_checks

if TYPE_CHECKING:
    from stacks.pipeline_stack import PipelineStack
    from stage_config.pipeline import PipelineConfig


def create_pipeline_app(
    pipeline_config: PipelineConfig, stage_configs: dict[str, AppConfig], *, checks: bool = True, **app_kwargs
) -> tuple[cdk.App, PipelineStack]:
    """The pipeline stack alone: its stages' stacks are synthesized inside it, as the pipeline deploys them.
    `checks`: as in `create_app`."""
    # Imported here: a stage's synth (app.py's common case) never loads CDK Pipelines or the pipeline's stacks.
    from stacks.pipeline_stack import add_pipeline_stack

    app = cdk.App(**_app_kwargs(checks, app_kwargs))
    pipeline_stack = add_pipeline_stack(app, pipeline_config, stage_configs)
    _register_checks(app, checks)
    return app, pipeline_stack


def create_app(
    config: AppConfig, *, promotion_source: AppConfig | None = None, checks: bool = True, **app_kwargs
) -> tuple[cdk.App, StageStacks]:
    """The stage's stacks (the pipeline is its own app: create_pipeline_app), with the checks of `enable_checks`,
    the API-constraint gate and aws-cdk-lib's own CloudFormation default rules (which obey `cdk synth
    --no-validation`). app.py always has them; `checks=False` builds the same templates without them, for a test
    that asserts on the templates of an app the test run also synthesizes with every check (the contract tests'
    shipped assemblies), since the checks are most of a synth's time."""
    app = cdk.App(**_app_kwargs(checks, app_kwargs))
    stacks = add_stage_stacks(app, config, promotion_source=promotion_source)
    _register_checks(app, checks)
    return app, stacks


def _app_kwargs(checks: bool, app_kwargs: dict) -> dict:
    if checks:
        return app_kwargs
    context = {**app_kwargs.get("context", {}), "@aws-cdk/core:validateAgainstDefaultRules": False}
    return {**app_kwargs, "context": context}


def _register_checks(app: cdk.App, checks: bool) -> None:
    if checks:
        add_api_constraints(app)
        enable_checks(app)


def add_api_constraints(app: cdk.App) -> None:
    """The API-constraint gate (triton_cdk/api_constraints): every literal property of the SageMaker, Application
    Auto Scaling, CloudWatch, CodeBuild, SNS and S3 resources of every template (the pipeline's nested stage
    assemblies included) against botocore's service models; a violation fails the synth and names the config
    field behind it (stacks/api_constraint_hints.py)."""
    cdk.Validations.of(app).add_plugins(ApiConstraintsCheck(config_field_hint=config_field_hint))
