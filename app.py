#!/usr/bin/env python3
"""CDK entry point: `cdk synth -c stage=dev` (the default stage is dev) synthesizes that stage's stacks;
`cdk synth -c pipeline=true` synthesizes the promotion pipeline (config/pipeline.yaml) and, inside it,
every stage it deploys. A stage never reads the pipeline's file, so a stage deploys without one.

The environment is read here only; constructs get everything through props. Run without the CDK CLI
(`python app.py`), it reads cdk.json's context itself, so the feature flags are the same as `cdk synth`'s.
"""

import json
import os
import re
import sys
from pathlib import Path

import aws_cdk as cdk

from serving_facts.errors import ServingFactError
from stacks.app_factory import create_app
from stacks.deploy_preflight import make_command, stage_files, warn_placeholders
from stacks.promotion import PromotionError
from stacks.resource_limit import too_many_resources_message
from stacks.role_policy_size import assembly_refusals
from stage_config import ConfigError, load_stage
from stage_config.loader import CONFIG_DIR
from triton_cdk.errors import TritonCdkError

CDK_JSON = Path(__file__).resolve().with_name("cdk.json")


def cli_context() -> dict:
    """cdk.json's context unless the CDK CLI passed it (it does, in CDK_CONTEXT_JSON, with any -c values)."""
    return {} if "CDK_CONTEXT_JSON" in os.environ else json.loads(CDK_JSON.read_text())["context"]


def validation_failure(error: RuntimeError) -> str:
    """What to print of a failed `app.synth()`'s validation error; re-raises any other RuntimeError.

    aws-cdk-lib (core/lib/private/synthesis-validation.js, synthesis.js) raises three shapes: after the validation
    plugins (cdk-nag, Guard) either "Validation failed. A copy of this report can be found in: <file>" with the
    report printed above (printed as is: one line), or the whole report in the message; a construct's own
    validation (`node.add_validation`) "Validation failed with the following errors:" and one line per error. Only
    the first points at a report already printed; the others are printed whole (without the jsii traceback)."""
    message = str(error).strip()
    if not message.startswith("ValidationFailed"):
        raise error
    first = message.splitlines()[0]
    return first if "A copy of this report can be found in:" in first else message


def main() -> None:
    defaults = cli_context()
    context = cdk.App(context=defaults).node
    stage = context.try_get_context("stage") or "dev"
    config_dir = context.try_get_context("config_dir") or CONFIG_DIR
    try:
        if not isinstance(stage, str) or not re.fullmatch(r"[a-z][a-z0-9]{0,11}", stage):
            raise ConfigError(f"-c stage={str(stage)[:64]!r}: a stage name like dev or prod ([a-z][a-z0-9]{{0,11}})")
        if not isinstance(config_dir, str | Path):
            raise ConfigError(f"-c config_dir={str(config_dir)[:64]!r}: expected a folder path")
        config_dir = Path(config_dir)
        if str(context.try_get_context("pipeline") or "false").lower() == "true":
            # Imported only here: a stage's synth (the common case) never loads the pipeline's modules.
            from stacks.app_factory import create_pipeline_app
            from stage_config.pipeline import load_pipeline

            app, _ = create_pipeline_app(*load_pipeline(config_dir / "pipeline.yaml", config_dir), context=defaults)
            # Its stages' files are warned about by their own synth (`make synth` runs both: each warning once).
            warn_placeholders([config_dir / "pipeline.yaml"], refused_by="make deploy-pipeline")
        else:
            config = load_stage(stage, config_dir)
            source = load_stage(config.promote_from, config_dir) if config.promote_from else None
            app, _ = create_app(config, promotion_source=source, context=defaults)
            warn_placeholders(stage_files(stage, config_dir), refused_by=make_command("deploy", stage, config_dir))
    except (ConfigError, PromotionError) as error:
        # Refused before anything is synthesized: nothing is written to cdk.out.
        print(f"ERROR: invalid configuration\n{error}", file=sys.stderr)
        sys.exit(1)
    except TritonCdkError as error:
        # A construct refused the props the config mapped to (a rule the config schema does not state yet).
        print(f"ERROR: the stage's constructs refused their settings\n{error}", file=sys.stderr)
        sys.exit(1)
    except ServingFactError as error:
        # A shared fact (instance catalogue, Triton release, host driver) refused a value the schema let through.
        print(f"ERROR: {error}", file=sys.stderr)
        sys.exit(1)
    try:
        assembly = app.synth()
    except RuntimeError as error:
        # A stack over CloudFormation's 500 resources, refused by aws-cdk-lib while it writes the template.
        too_many = too_many_resources_message(error)
        if too_many is not None:
            print(f"ERROR: {too_many}", file=sys.stderr)
            sys.exit(1)
        print(f"ERROR: {validation_failure(error)}", file=sys.stderr)
        sys.exit(1)
    # IAM's policy-size quotas of a role, summed over every stack of the stage (stacks/role_policy_size.py).
    refusals = assembly_refusals(assembly.directory)
    for refusal in refusals:
        print(f"ERROR: {refusal}", file=sys.stderr)
    if refusals:
        sys.exit(1)


if __name__ == "__main__":
    main()
