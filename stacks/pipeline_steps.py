"""The pipeline's steps: synth (tests first), the per-stage smoke test, the approval before a stage."""

from __future__ import annotations

import re
import shlex

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import pipelines

from endpoint_client.smoke_plan import ASYNC_WAIT_SECONDS, EndpointCheck, ModelCheck, SmokePlan
from stacks.pipeline_stage import TritonStage, smoke_role_name
from stacks.stage_plan import StagePlan, plan_stage
from stage_config import AppConfig
from stage_config.async_paths import async_prefixes
from stage_config.endpoint import component_name
from stage_config.loader import PROJECT_ROOT
from stage_config.pipeline import PerformanceSettings, PipelineConfig

# Ubuntu standard:7.0 carries Node 20 (the CDK CLI) and Python 3.12 (runs the project's 3.11 code).
BUILD_IMAGE = codebuild.LinuxBuildImage.STANDARD_7_0
RUNTIME_VERSIONS = {"nodejs": "20", "python": "3.12"}
# The smoke test imports only the invocation client: install just its packages, at the project's pins.
SMOKE_PACKAGES = ("boto3", "numpy", "tritonclient")
SUMMARY_VARIABLE = "SMOKE_SUMMARY"
REPORT_DIR = "smoke-report"
# The load test: the client, aiohttp (loadtest.py's local targets import it) and boto3, at the project's pins.
PERFORMANCE_PACKAGES = ("aiohttp", "boto3", "numpy", "tritonclient")
PERFORMANCE_DIR = "perf-report"
# CodeBuild's credentials come from its container endpoint; a profile that assumes the stage's smoke role from
# them (botocore: credential_source = EcsContainer) gives the load test the role without touching its CLI.
PROFILE_COMMAND = (
    "mkdir -p ~/.aws && printf '[profile stage]\\nrole_arn = %s\\ncredential_source = EcsContainer\\n' "
    '"$SMOKE_ROLE_ARN" > ~/.aws/config'
)


def pinned_requirements(names: tuple[str, ...], requirements: str | None = None) -> list[str]:
    """`name==version` lines of requirements.txt for `names` (extras kept), so CodeBuild installs the same."""
    text = requirements if requirements is not None else (PROJECT_ROOT / "requirements.txt").read_text()
    found = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?==\S+", line.strip())
        if match and match.group(1).lower() in names:
            found[match.group(1).lower()] = match.group(0)
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(f"requirements.txt pins no exact version of {', '.join(missing)}; the smoke step needs them")
    return [found[n] for n in names]


def smoke_plan(config: AppConfig, pipeline: PipelineConfig, *, plan: StagePlan | None = None) -> SmokePlan:
    """`plan`: the stage's plan (its artifacts and keys), as the stage's stacks used it; computed when not given."""
    plan = plan or plan_stage(config, PROJECT_ROOT)
    endpoints = []
    for endpoint in config.endpoints:
        located = plan.endpoint_artifacts(endpoint.name)
        models = [
            ModelCheck(
                name=artifact.model.name,
                artifact_key=artifact.key,
                target_model=f"{artifact.model.name}.tar.gz" if endpoint.mode == "multi_model" else None,
                inference_component=(
                    component_name(config.deployed_endpoint_name(endpoint), artifact.model.name)
                    if endpoint.mode == "inference_components"
                    else None
                ),
                shape_hints={shape.input: list(shape.opt) for shape in artifact.model.tensorrt.shapes},
                raw_inputs=dict(pipeline.smoke.raw_inputs.get(artifact.model.name, {})),
            )
            for artifact in located.models
        ]
        endpoints.append(
            EndpointCheck(
                name=endpoint.name,
                deployed_name=config.deployed_endpoint_name(endpoint),
                max_latency_ms=pipeline.smoke.latency_bound_ms(endpoint.name),
                models=models,
                # issue #26 part 1: an asynchronous endpoint is smoke-tested through InvokeEndpointAsync
                async_input_prefix=(
                    async_prefixes(endpoint.name).input if getattr(endpoint, "async_inference", None) else None
                ),
            )
        )
    return SmokePlan(
        stage=config.stage,
        timed_calls=pipeline.smoke.timed_calls,
        attempts=pipeline.smoke.attempts,
        endpoints=endpoints,
    )


def smoke_role_arn(stage: TritonStage) -> str:
    """The stage's smoke role, named from the pipeline's side (tokens resolve to the pipeline's env)."""
    account = stage.account or cdk.Aws.ACCOUNT_ID
    region = stage.region or cdk.Aws.REGION
    return f"arn:{cdk.Aws.PARTITION}:iam::{account}:role/{smoke_role_name(stage.config.stage, region)}"


def smoke_step(
    stage: TritonStage, pipeline: PipelineConfig, source: pipelines.IFileSetProducer
) -> pipelines.CodeBuildStep:
    """CodeBuild after the stage deploys: every endpoint and model invoked; any failure fails the stage.

    Its role may only assume the stage's smoke role (SmokeAccessStack), which may only invoke that
    stage's endpoints and read its model archives.
    """
    return _stage_access_step(
        "SmokeTest",
        stage,
        pipeline,
        source,
        packages=SMOKE_PACKAGES,
        commands=[
            'python -m endpoint_client.smoke --plan-json "$SMOKE_PLAN" --bucket "$ARTIFACT_BUCKET" '
            f'--role-arn "$SMOKE_ROLE_ARN" --region "$SMOKE_REGION" --report-dir {REPORT_DIR}',
            f'export {SUMMARY_VARIABLE}="$(cat {REPORT_DIR}/summary.txt)"',
        ],
        output_directory=REPORT_DIR,
        timeout=cdk.Duration.minutes(smoke_timeout_minutes(stage.config)),
    )


# The smoke step's time without asynchronous endpoints, and what their answers add: smoke.py waits for all of
# them together (run_plan) up to ASYNC_WAIT_SECONDS (InvokeEndpointAsync's default InvocationTimeoutSeconds, 900 s,
# plus a cold start from zero instances), rounded up to whole minutes.
SMOKE_MINUTES = 30
ASYNC_SMOKE_MINUTES = -(-int(ASYNC_WAIT_SECONDS) // 60)


def smoke_timeout_minutes(config: AppConfig) -> int:
    """SMOKE_MINUTES, plus ASYNC_SMOKE_MINUTES when the stage has an asynchronous endpoint, within CodeBuild's
    build timeout (botocore codebuild model, BuildTimeOut: timeoutInMinutes)."""
    low, high = codebuild_timeout_limits()
    asynchronous = any(e.async_inference is not None for e in config.endpoints)
    return max(low, min(high, SMOKE_MINUTES + (ASYNC_SMOKE_MINUTES if asynchronous else 0)))


def codebuild_timeout_limits() -> tuple[int, int]:
    """CreateProject timeoutInMinutes (shape BuildTimeOut) min and max, from botocore's codebuild model."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("codebuild")
    shape = model.operation_model("CreateProject").input_shape.members["timeoutInMinutes"]
    return shape.metadata["min"], shape.metadata["max"]


def _stage_access_step(
    step_id: str,
    stage: TritonStage,
    pipeline: PipelineConfig,
    source: pipelines.IFileSetProducer,
    *,
    packages: tuple[str, ...],
    commands: list[str],
    output_directory: str,
    timeout: cdk.Duration,
) -> pipelines.CodeBuildStep:
    """A CodeBuild step that works on a deployed stage through its smoke role: the smoke plan, the stage's bucket
    and region in its environment, `packages` installed at requirements.txt's pins, and a role that may only
    assume the stage's smoke role (the smoke test and the performance gate)."""
    role_arn = smoke_role_arn(stage)
    return pipelines.CodeBuildStep(
        step_id,
        input=source,
        install_commands=[
            "python -m pip install --quiet " + " ".join(shlex.quote(p) for p in pinned_requirements(packages))
        ],
        commands=commands,
        env={
            "SMOKE_PLAN": smoke_plan(stage.config, pipeline, plan=stage.stacks.plan).to_json(),
            "SMOKE_ROLE_ARN": role_arn,
            "SMOKE_REGION": stage.region or cdk.Aws.REGION,
        },
        env_from_cfn_outputs={"ARTIFACT_BUCKET": stage.artifact_bucket_output},
        role_policy_statements=[
            iam.PolicyStatement(sid="AssumeStageSmokeRole", actions=["sts:AssumeRole"], resources=[role_arn])
        ],
        build_environment=codebuild.BuildEnvironment(build_image=BUILD_IMAGE, compute_type=codebuild.ComputeType.SMALL),
        partial_build_spec=codebuild.BuildSpec.from_object(
            {"phases": {"install": {"runtime-versions": RUNTIME_VERSIONS}}}
        ),
        primary_output_directory=output_directory,
        timeout=timeout,
    )


def performance_commands(stage: TritonStage, performance: PerformanceSettings) -> list[str]:
    """Per endpoint: its sample request, `loadtest` at the configured concurrency, then the gate (perf_gate.py).

    Each endpoint's first model is the one measured (its archive key names the result's prefix)."""
    commands = [PROFILE_COMMAND, "export AWS_PROFILE=stage", f"mkdir -p {PERFORMANCE_DIR}"]
    region = '--region "$SMOKE_REGION"'
    for endpoint in stage.config.endpoints:
        located = stage.stacks.plan.endpoint_artifacts(endpoint.name)
        key = located.models[0].key
        name = shlex.quote(endpoint.name)
        out = f"{PERFORMANCE_DIR}/{endpoint.name}"
        deployed = shlex.quote(stage.config.deployed_endpoint_name(endpoint))
        regression = (
            f" --max-regression-percent {performance.max_regression_percent:g}"
            if performance.max_regression_percent is not None
            else ""
        )
        commands += [
            'ROUTE="$(python -m endpoint_client.perf_gate inputs --plan-json "$SMOKE_PLAN" '
            '--bucket "$ARTIFACT_BUCKET" '
            f'--endpoint {name} --out {shlex.quote(out + ".npz")} {region})"',
            f"python -m endpoint_client loadtest --endpoint {deployed} "
            f"{region} $ROUTE --input {shlex.quote(out + '.npz')} --concurrency {performance.concurrency} "
            f"--duration {performance.duration_seconds:g} --no-cloudwatch --quiet --json {shlex.quote(out + '.json')}",
            f"python -m endpoint_client.perf_gate check --json {shlex.quote(out + '.json')} "
            f'--bucket "$ARTIFACT_BUCKET" {region} --artifact-key {shlex.quote(key)} '
            f"--stage {shlex.quote(stage.config.stage)} --endpoint {name} --slo-p99-ms {performance.slo_p99_ms:g} "
            f"--min-inferences-per-second {performance.min_inferences_per_second:g}{regression}",
        ]
    return commands


def performance_step(
    stage: TritonStage, pipeline: PipelineConfig, source: pipelines.IFileSetProducer
) -> pipelines.CodeBuildStep:
    """CodeBuild after the stage's smoke test: load-test each endpoint; a missed SLO, throughput floor or
    regression fails the stage (docs/pipeline.md, "Performance gate"). Like the smoke step, its role may only
    assume the stage's smoke role, which SmokeAccessStack extends with the load-test prefix."""
    performance = pipeline.performance
    if performance is None:
        raise ValueError("performance_step: config/pipeline.yaml has no performance section")
    minutes = int(performance.duration_seconds // 60) + 1
    return _stage_access_step(
        "PerformanceGate",
        stage,
        pipeline,
        source,
        packages=PERFORMANCE_PACKAGES,
        commands=performance_commands(stage, performance),
        output_directory=PERFORMANCE_DIR,
        # Per endpoint: warm-up (5 s), the measured duration, the first request's retries; 8 hours is CodeBuild's
        # maximum build timeout.
        timeout=cdk.Duration.minutes(min(480, 30 + len(stage.config.endpoints) * (2 + minutes))),
    )


def approval_step(
    stage_name: str, pipeline: PipelineConfig, previous: list[pipelines.CodeBuildStep], previous_stage: str | None
) -> pipelines.ManualApprovalStep:
    """Manual approval; its comment carries the previous stage's smoke summary (a CodePipeline variable)."""
    summaries = " | ".join(step.exported_variable(SUMMARY_VARIABLE) for step in previous)
    comment = f"Promote to {stage_name}." + (f" {previous_stage} smoke test: {summaries}" if summaries else "")
    region = pipeline.region or cdk.Aws.REGION
    review_url = (
        f"https://{region}.console.aws.amazon.com/codesuite/codepipeline/pipelines/{pipeline.name}/view?region={region}"
    )
    return pipelines.ManualApprovalStep(f"Approve-{stage_name}", comment=comment, review_url=review_url)


# `make synth` writes to the Makefile's OUTDIR; naming it here keeps the pipeline independent of the
# Makefile's per-stage default folder.
SYNTH_OUTDIR = "cdk.out-pipeline"


def synth_step(source: pipelines.IFileSetProducer) -> pipelines.CodeBuildStep:
    """`make test` first (lint, unit tests, cfn-lint of every template): a red test never deploys.

    `make synth-pipeline` writes the pipeline app (app.py -c pipeline=true): the pipeline stack with
    every stage's stacks inside it, the cloud assembly the pipeline deploys and self-mutates from.
    """
    return pipelines.CodeBuildStep(
        "Synth",
        input=source,
        commands=["make test", f"make synth-pipeline PIPELINE_OUTDIR={SYNTH_OUTDIR}"],
        primary_output_directory=SYNTH_OUTDIR,
        build_environment=codebuild.BuildEnvironment(build_image=BUILD_IMAGE, compute_type=codebuild.ComputeType.LARGE),
        partial_build_spec=codebuild.BuildSpec.from_object(
            {"phases": {"install": {"runtime-versions": RUNTIME_VERSIONS}}}
        ),
        timeout=cdk.Duration.minutes(60),
    )
