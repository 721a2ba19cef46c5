"""`python -m endpoint_client recommend`: SageMaker Inference Recommender load tests of a stage's model.

`--config config/<stage>.yaml --model NAME --instance-types ml.g5.xlarge,ml.g5.2xlarge --slo-p99-ms 100
--role-arn ARN` creates the model as the stage deploys it, uploads a sample payload built from the model's
inputs, starts one Advanced job per artifact (endpoint_client/recommend_request.py), waits with progress, prints
a comparison and proposes stage-config lines (endpoint_client/recommend_job.py). `--dry-run` prints the exact
requests and calls nothing. Reference: docs/performance.md, "Inference Recommender".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from endpoint_client.errors import InvalidInputError
from endpoint_client.recommend_request import (
    MAX_THREADS,
    PAYLOAD_ARCHIVE,
    TUNABLE_VARIABLES,
    Deployment,
    JobSettings,
    PayloadEncoding,
    TrafficPhase,
    create_model_request,
    dry_run_document,
    enum_values,
    job_name,
    job_request,
    limit,
    payload_archive,
    read_model_config_inputs,
    s3_location,
)
from serving_facts.vpc import VPC_NETWORK_INTERFACE_ACTIONS

# Load-test traffic limits of a PHASES pattern: botocore's minimums (Phase.InitialNumberOfUsers >= 1, SpawnRate >= 0,
# DurationInSeconds >= 1) narrowed by SageMaker's guide "Run a custom load test": InitialNumberOfUsers 1-3,
# SpawnRate 0-3, DurationInSeconds 120-3600.
USERS = (1, 3)
SPAWN_RATE = (0, 3)
PHASE_SECONDS = (120, 3600)
# JobDurationInSeconds: botocore min 1; "The maximum value is 18,000 seconds" (CreateInferenceRecommendationsJob,
# RecommendationJobInputConfig).
JOB_SECONDS = (1, 18_000)
# ModelLatencyThreshold.Percentile: "Acceptable values are P95 and P99. For custom load tests, specify the value as
# P95." (SageMaker API reference, ModelLatencyThreshold); botocore only bounds its length.
PERCENTILES = ("P95", "P99")
# A real-time invocation must answer within 60 s (SageMaker InvokeEndpoint), so a longer SLO means nothing.
MAX_SLO_MS = 60_000
SAFETY_FACTOR = 0.5  # SageMaker guide "Load testing your auto scaling configuration": 0.5 recommended
PAYLOAD_PREFIX = "inference-recommender/"
# Job names, and so the models, endpoint configs and endpoints Inference Recommender derives from them, start with
# this: the role's policy (docs/performance.md) scopes its SageMaker actions to `ir-*`, away from the stage's own
# endpoints (named `<stage>-<endpoint>`).
JOB_PREFIX = "ir-"
# Default job name: ir-<stage-model, cut to fit>-<UTC time to the second>-<4 random hex digits>. Job names must be
# unique in the account and region, and SageMaker cuts derived names at 40 characters (DERIVED_NAME_LIMIT), so the
# time and the random part are never cut: the stage/model part is shortened instead. Budget: 40 = "ir-" 3 + part +
# "-" 1 + time 14 + "-" 1 + random 4 + a group suffix "-N" of at most 3 (at most 10 endpoint configurations).
NAME_TIME_FORMAT = "%Y%m%d%H%M%S"
NAME_RANDOM_HEX = 4
NAME_PART_MAX = 40 - len(JOB_PREFIX) - 1 - 14 - 1 - NAME_RANDOM_HEX - 3
# A model with a VpcConfig: the EC2 actions its execution role needs (one definition, sourced: serving_facts/vpc.py).
VPC_ROLE_ACTIONS = VPC_NETWORK_INTERFACE_ACTIONS


def _bounded_int(low: int, high: int | None, what: str):
    def parse(text: str) -> int:
        # int() strips fewer characters than str.strip() (e.g. U+001F), so convert what was checked.
        digits = text.strip()
        if not re.fullmatch(r"[0-9]{1,9}", digits) or not (
            low <= int(digits) and (high is None or int(digits) <= high)
        ):
            allowed = f"{low}-{high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"{text[:40]!r}: {what} must be a whole number, {allowed}")
        return int(digits)

    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: the safety factor must be more than 0 and at most 1")
    return value


def _env_range(text: str) -> tuple[str, list[str]]:
    name, sep, values = text.partition("=")
    most = int(
        limit(
            "CreateInferenceRecommendationsJob",
            "InputConfig",
            "EndpointConfigurations",
            "EnvironmentParameterRanges",
            "CategoricalParameterRanges",
            "Value",
            key="max",
        )
    )
    if not sep or name not in TUNABLE_VARIABLES:
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is not VARIABLE=V1,V2: VARIABLE is one of {', '.join(TUNABLE_VARIABLES)}"
        )
    items = values.split(",")
    if (
        not 1 <= len(items) <= most
        or len(set(items)) != len(items)
        or not all(re.fullmatch(r"[0-9]{1,4}", v) and 1 <= int(v) <= MAX_THREADS for v in items)
    ):
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r}: 1-{most} different thread counts, each 1-{MAX_THREADS} (CategoricalParameter.Value)"
        )
    return name, items


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, metavar="FILE", help="the stage's config/<stage>.yaml")
    parser.add_argument("--model", required=True, metavar="NAME", help="the model under `models:` to test")
    parser.add_argument(
        "--instance-types",
        required=True,
        metavar="T1,T2",
        help="instance types to test, comma-separated (catalogue types; at most 10, one endpoint configuration each)",
    )
    parser.add_argument(
        "--slo-p99-ms",
        type=_bounded_int(1, MAX_SLO_MS, "--slo-p99-ms"),
        required=True,
        metavar="MS",
        help="latency objective in ms: the stopping condition's threshold and the comparison's pass mark",
    )
    parser.add_argument(
        "--role-arn",
        required=True,
        metavar="ARN",
        help="IAM role Inference Recommender and the test model use (docs/performance.md lists what it needs)",
    )
    parser.add_argument(
        "--endpoint",
        metavar="NAME",
        help="the stage endpoint whose container settings to use (default: the only endpoint serving the model)",
    )
    parser.add_argument("--region", help="AWS region (default: the config's region; required when it has none)")
    parser.add_argument(
        "--bucket", help="the stage's artifact bucket (default: the config's artifacts.bucket_name; required without)"
    )
    parser.add_argument(
        "--payload-s3-uri",
        metavar="S3URI",
        help=f"where to upload the sample payload (default: s3://<artifact bucket>/{PAYLOAD_PREFIX})",
    )
    payload = parser.add_argument_group(
        "sample payload: generated from the model's config.pbtxt (--model-config; default: config.pbtxt in the "
        "model's source.path), or given as invoke takes inputs"
    )
    payload.add_argument("--model-config", type=Path, metavar="PATH", help="the model's config.pbtxt (or model folder)")
    payload.add_argument(
        "--batch-size", type=_bounded_int(1, None, "--batch-size"), default=1, help="--model-config: batch size"
    )
    payload.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy|FILE.npz", help="as invoke")
    payload.add_argument("--tensor", action="append", default=[], metavar="NAME=DTYPE:SHAPE:VALUES", help="as invoke")
    payload.add_argument("--inputs-json", type=Path, metavar="FILE", help="as invoke")
    payload.add_argument("--raw", action="append", default=[], metavar="NAME=FILE", help="as invoke")
    payload.add_argument("--raw-shape", default="1", metavar="SHAPE", help="as invoke")
    payload.add_argument(
        "--encoding",
        choices=[e.value for e in PayloadEncoding],
        default=PayloadEncoding.JSON.value,
        help="json (default; KServe v2 JSON) or binary (binary+json: needed for bytes that are not UTF-8 text)",
    )
    parser.add_argument("--users", type=_bounded_int(*USERS, "--users"), default=1, help="initial users, 1-3 (1)")
    parser.add_argument(
        "--spawn-rate", type=_bounded_int(*SPAWN_RATE, "--spawn-rate"), default=1, help="users added a minute, 0-3 (1)"
    )
    parser.add_argument(
        "--duration",
        type=_bounded_int(*PHASE_SECONDS, "--duration"),
        default=120,
        metavar="SECONDS",
        help="length of the traffic phase, 120-3600 s (120)",
    )
    parser.add_argument(
        "--max-invocations",
        type=_bounded_int(1, None, "--max-invocations"),
        default=3000,
        help="stopping condition: requests per minute at which a test stops (3000)",
    )
    parser.add_argument(
        "--stop-percentile",
        choices=PERCENTILES,
        default="P95",
        help="percentile of the latency stopping condition (P95: the API reference's value for load tests)",
    )
    parser.add_argument(
        "--job-duration",
        type=_bounded_int(*JOB_SECONDS, "--job-duration"),
        default=7200,
        metavar="SECONDS",
        help="JobDurationInSeconds, 1-18000 (7200)",
    )
    parser.add_argument(
        "--env-range",
        action="append",
        default=[],
        type=_env_range,
        metavar="VARIABLE=V1,V2",
        help="Triton settings each test varies (EnvironmentParameterRanges), e.g. SAGEMAKER_TRITON_THREAD_COUNT=4,8",
    )
    parser.add_argument(
        "--max-parallel-tests",
        type=_bounded_int(1, None, "--max-parallel-tests"),
        help="ResourceLimit.MaxParallelOfTests (default: SageMaker's)",
    )
    parser.add_argument(
        "--job-name",
        metavar="NAME",
        help=f"job name, starting {JOB_PREFIX} (default: {JOB_PREFIX}<stage>-<model, shortened>-<UTC time to the "
        "second>-<4 random hex digits>)",
    )
    parser.add_argument(
        "--safety-factor",
        type=_fraction,
        default=SAFETY_FACTOR,
        help="proposed invocations_per_instance = max invocations x this (0.5, SageMaker's recommendation)",
    )
    parser.add_argument("--poll-seconds", type=_bounded_int(1, 3600, "--poll-seconds"), default=60)
    parser.add_argument(
        "--wait-timeout",
        type=_bounded_int(1, None, "--wait-timeout"),
        metavar="SECONDS",
        help="stop waiting after this long (default: --job-duration plus 30 minutes); the jobs keep running",
    )
    parser.add_argument("--no-wait", action="store_true", help="start the jobs and print their names")
    parser.add_argument("--dry-run", action="store_true", help="print the exact requests (JSON); call nothing")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def _instance_types(text: str, config_file: Path, model: Any, config: Any, endpoint: Any) -> list[Any]:
    from serving_facts.catalogue import UnknownInstanceTypeError, instance_type

    names = [name.strip() for name in text.split(",")]
    most = int(limit("CreateInferenceRecommendationsJob", "InputConfig", "EndpointConfigurations", key="max"))
    if not all(names) or len(names) > most or len(set(names)) != len(names):
        raise InvalidInputError(f"--instance-types {text[:200]!r}: 1-{most} different types, comma-separated")
    offered = set(
        enum_values("CreateInferenceRecommendationsJob", "InputConfig", "EndpointConfigurations", "InstanceType")
    )
    needs_gpu = any(m.uses_gpu or m.needs_gpu_build for m in config.served_models([model.name]))
    types = []
    for name in names:
        try:
            instance = instance_type(name)
        except UnknownInstanceTypeError as error:
            raise InvalidInputError(f"--instance-types: {error}") from None
        if name not in offered:
            raise InvalidInputError(f"--instance-types: {name} is not an instance type Inference Recommender tests")
        if needs_gpu and not instance.has_gpu:
            raise InvalidInputError(
                f"--instance-types: {name} has no GPU, and model {model.name!r} in {config_file} runs on GPUs"
            )
        if endpoint.mode == "multi_model" and instance.gpu_count > 1:
            # The config loader refuses it (multi-model endpoints take single-GPU types), so a result on it could
            # never be deployed to this endpoint: refused before a job is paid for.
            raise InvalidInputError(
                f"--instance-types: {name} has {instance.gpu_count} GPUs, and endpoint {endpoint.name!r} is a "
                "multi-model endpoint (single-GPU instance types only)"
            )
        types.append(instance)
    return types


def _endpoint(args: argparse.Namespace, config: Any, model: str) -> Any:
    serving = [e for e in config.endpoints if model in e.models]
    names = ", ".join(e.name for e in serving)
    if args.endpoint is not None:
        chosen = [e for e in serving if e.name == args.endpoint]
        if not chosen:
            raise InvalidInputError(
                f"--endpoint {args.endpoint[:80]!r}: not an endpoint of {args.config} serving {model!r} "
                f"({names or 'none does'})"
            )
        return chosen[0]
    if not serving:
        raise InvalidInputError(f"{args.config}: endpoints: none serves model {model!r}; the stage deploys it nowhere")
    if len(serving) > 1:
        raise InvalidInputError(f"--endpoint: model {model!r} is served by {names}; name the one to copy settings from")
    return serving[0]


def _bucket(args: argparse.Namespace, config: Any) -> str:
    from stage_config.app import bucket_name_problems

    configured = config.artifacts.bucket_name
    if args.bucket is not None:
        problems = bucket_name_problems(args.bucket)
        if problems:
            raise InvalidInputError(f"--bucket {args.bucket[:80]!r}: not a valid S3 bucket name: it {problems[0]}")
        if configured and args.bucket != configured:
            raise InvalidInputError(
                f"{args.config}: artifacts.bucket_name: the stage's bucket is {configured}, not --bucket "
                f"{args.bucket}; leave out --bucket"
            )
        return args.bucket
    if not configured:
        raise InvalidInputError(
            f"{args.config}: artifacts.bucket_name: not set (CloudFormation names the bucket); give --bucket with the "
            "artifact stack's bucket name"
        )
    return configured


def _payload_inputs(args: argparse.Namespace, model: Any) -> dict[str, Any]:
    from stage_config.loader import PROJECT_ROOT

    given = any((args.input, args.tensor, args.inputs_json, args.raw))
    if given and args.model_config:
        raise InvalidInputError("give inputs as invoke takes them or --model-config to generate them, not both")
    if given:
        if args.batch_size != 1:
            raise InvalidInputError("--batch-size goes with --model-config")
        from endpoint_client.cli import collect_inputs

        return collect_inputs(argparse.Namespace(**vars(args), preset=None, image=None, text=None, rename=[]))
    path = args.model_config
    if path is None:
        folder = model.source.path if model.source is not None else None
        candidate = PROJECT_ROOT / folder / "config.pbtxt" if folder else None
        if candidate is None or not candidate.is_file():
            raise InvalidInputError(
                f"--model-config: model {model.name!r} has no config.pbtxt in its source folder; give the built "
                "model's config.pbtxt (e.g. from its model.tar.gz, or `python -m model_build config`), or the inputs "
                "as invoke takes them (--input, --tensor, --inputs-json, --raw)"
            )
        path = candidate
    return read_model_config_inputs(path, args.batch_size)


def deployments(args: argparse.Namespace, config: Any) -> tuple[list[Deployment], Any]:
    """The model as the stage deploys it, once per distinct artifact among the instance types."""
    from model_build.errors import ModelBuildError
    from serving_facts.errors import ServingFactError
    from stacks.artifact_plan import model_artifact
    from stacks.container_environment import container_environment
    from stacks.stage_plan import plan_stage
    from stage_config.loader import PROJECT_ROOT
    from triton_cdk.errors import TritonCdkError
    from triton_cdk.images import triton_image

    known = {m.name: m for m in config.models}
    if args.model not in known:
        raise InvalidInputError(
            f"--model {args.model[:80]!r}: not a model of {args.config} (models: {', '.join(known)})"
        )
    model = known[args.model]
    endpoint = _endpoint(args, config, model.name)
    instances = _instance_types(args.instance_types, args.config, model, config, endpoint)
    region = _region(args, config)
    bucket = _bucket(args, config)
    built = set(plan_stage(config, PROJECT_ROOT).artifact_keys())
    environment = {**container_environment(endpoint.container), "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": model.name}
    groups: dict[tuple[str, bool], Deployment] = {}
    for instance in instances:
        try:
            artifact = model_artifact(config, model, instance.name, PROJECT_ROOT)
        except (ModelBuildError, ServingFactError) as error:
            raise InvalidInputError(f"--instance-types: {error}") from None
        if artifact.key not in built:
            raise InvalidInputError(
                f"--instance-types: {instance.name} serves {model.name!r} from an artifact built for "
                f"{artifact.build_targets} ({artifact.key}), which stage {config.stage} does not build: the job would "
                "find no model there. Test the types the stage's endpoints use, or add an endpoint (or variant) on "
                f"{instance.family} and deploy the artifact stage first"
            )
        group = (artifact.key, instance.has_gpu)
        if group not in groups:
            try:
                image = triton_image(config.triton_release, region, gpu=instance.has_gpu).uri
            except TritonCdkError as error:
                raise InvalidInputError(f"--region {region}: {error}") from None
            vpc = endpoint.vpc
            groups[group] = Deployment(
                model=model.name,
                endpoint=endpoint.name,
                image_uri=image,
                model_data_url=f"s3://{bucket}/{artifact.key}",
                artifact_key=artifact.key,
                gpu_target=artifact.build_targets,
                environment=environment,
                network_isolation=endpoint.network_isolation,
                instance_types=[],
                subnets=list(vpc.subnet_ids) if vpc else [],
                security_groups=list(vpc.security_group_ids) if vpc else [],
            )
        groups[group].instance_types.append(instance.name)
    return list(groups.values()), model


def _region(args: argparse.Namespace, config: Any) -> str:
    from endpoint_client.cost import _region as stage_region

    return stage_region(args, config)


def _job_settings(args: argparse.Namespace) -> JobSettings:
    ranges = dict(args.env_range)
    if len(ranges) != len(args.env_range):
        raise InvalidInputError("--env-range: each variable once")
    if args.duration > args.job_duration:
        # SageMaker API reference, Phase.DurationInSeconds: "This value should not exceed JobDurationInSeconds."
        raise InvalidInputError(
            f"--duration {args.duration}: the traffic phase must not exceed --job-duration {args.job_duration} "
            "(Phase.DurationInSeconds should not exceed JobDurationInSeconds)"
        )
    role_pattern = limit("CreateInferenceRecommendationsJob", "RoleArn", key="pattern")
    if not re.fullmatch(role_pattern, args.role_arn) or len(args.role_arn) > 2048:
        raise InvalidInputError(
            f"--role-arn {args.role_arn[:100]!r}: not an IAM role ARN (arn:aws:iam::123456789012:role/NAME)"
        )
    return JobSettings(
        role_arn=args.role_arn,
        slo_p99_ms=args.slo_p99_ms,
        stop_percentile=args.stop_percentile,
        max_invocations=args.max_invocations,
        job_duration_seconds=args.job_duration,
        phase=TrafficPhase(args.users, args.spawn_rate, args.duration),
        env_ranges=ranges,
        max_parallel_tests=args.max_parallel_tests,
    )


def plan_requests(args: argparse.Namespace) -> tuple[list[dict[str, Any]], bytes, tuple[str, str], Any]:
    """(per job {CreateModel, SamplePayload, CreateInferenceRecommendationsJob}, payload bytes, (bucket, key),
    the config); everything checked, nothing called."""
    from endpoint_client.cost import _load_config

    settings = _job_settings(args)
    if args.job_name is not None and not (
        re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,39}", args.job_name) and args.job_name.startswith(JOB_PREFIX)
    ):
        raise InvalidInputError(
            f"--job-name {args.job_name[:80]!r}: 1-40 letters, digits and inner hyphens, starting {JOB_PREFIX} "
            "(SageMaker cuts the names of the resources it derives from the job name at 40 characters; the role's "
            f"policy allows only {JOB_PREFIX}* resources)"
        )
    config = _load_config(args.config)
    groups, model = deployments(args, config)
    tensors = _payload_inputs(args, model)
    payload, content_type = payload_archive(tensors, PayloadEncoding(args.encoding))
    base = args.job_name or default_job_name(config.stage, model.name)
    artifact_bucket = groups[0].model_data_url.split("/")[2]
    if args.payload_s3_uri:
        bucket, prefix = s3_location(args.payload_s3_uri, "--payload-s3-uri")
        # The documented role (docs/performance.md, "The role") reads s3:GetObject on the artifact bucket's
        # inference-recommender/* only: a payload elsewhere would fail the job on AccessDenied after it started.
        if bucket != artifact_bucket or not prefix.startswith(PAYLOAD_PREFIX):
            raise InvalidInputError(
                f"--payload-s3-uri {args.payload_s3_uri[:100]}: must be under s3://{artifact_bucket}/{PAYLOAD_PREFIX} "
                "(the role's documented policy reads the payload there only)"
            )
    else:
        bucket, prefix = artifact_bucket, PAYLOAD_PREFIX
    if any(group.subnets for group in groups):
        print(
            f"note: endpoint {groups[0].endpoint} runs in a VPC: the role also needs {', '.join(VPC_ROLE_ACTIONS)} "
            '(docs/performance.md, "The role")',
            file=sys.stderr,
        )
    key = f"{prefix}{job_name(base, None)}/{PAYLOAD_ARCHIVE}"
    url = f"s3://{bucket}/{key}"
    plans = []
    for index, group in enumerate(groups):
        name = job_name(base, str(index + 1) if len(groups) > 1 else None)
        plans.append(
            {
                "CreateModel": create_model_request(group, name=name, role_arn=settings.role_arn),
                "SamplePayload": {
                    "Bucket": bucket,
                    "Key": key,
                    "ContentType": "application/gzip",
                    "Bytes": len(payload),
                    "SHA256": hashlib.sha256(payload).hexdigest(),
                },
                "CreateInferenceRecommendationsJob": job_request(
                    group, name=name, model_name=name, payload_url=url, content_type=content_type, settings=settings
                ),
                "Endpoint": group.endpoint,
            }
        )
    return plans, payload, (bucket, key), config


def default_job_name(stage: str, model: str) -> str:
    """ir-<stage-model, shortened>-<UTC time to the second>-<random>: unique per run, never cut by SageMaker."""
    part = re.sub(r"[^a-zA-Z0-9]+", "-", f"{stage}-{model}").strip("-")[:NAME_PART_MAX].rstrip("-")
    stamp = time.strftime(NAME_TIME_FORMAT, time.gmtime())
    return f"{JOB_PREFIX}{part}-{stamp}-{secrets.token_hex(NAME_RANDOM_HEX // 2)}"


def _clients(region: str) -> tuple[Any, Any]:
    """(sagemaker, s3) boto3 clients; tests replace this with stubbed ones."""
    import boto3

    return boto3.client("sagemaker", region_name=region), boto3.client("s3", region_name=region)


def run(args: argparse.Namespace) -> int:
    from endpoint_client.recommend_job import (
        best_row,
        format_comparison,
        proposed_lines,
        result_rows,
        wait_for_jobs,
    )

    plans, payload, (bucket, key), config = plan_requests(args)
    if args.dry_run:
        print(dry_run_document(plans))
        return 0
    from botocore.exceptions import BotoCoreError, ClientError

    from endpoint_client.recommend_job import RecommendJobError

    region = _region(args, config)
    names: list[str] = []
    step = f"uploading the sample payload to s3://{bucket}/{key}"
    try:
        sagemaker, s3 = _clients(region)
        s3.put_object(Bucket=bucket, Key=key, Body=payload, ContentType="application/gzip")
        for plan in plans:
            name = plan["CreateInferenceRecommendationsJob"]["JobName"]
            step = f"CreateModel {name}"
            sagemaker.create_model(**plan["CreateModel"])
            step = f"CreateInferenceRecommendationsJob {name}"
            sagemaker.create_inference_recommendations_job(**plan["CreateInferenceRecommendationsJob"])
            names.append(name)
        if args.no_wait:
            print("\n".join(names))
            return 0
        step = "DescribeInferenceRecommendationsJob"
        timeout = args.wait_timeout or args.job_duration + 1800
        described = wait_for_jobs(sagemaker, names, poll_seconds=args.poll_seconds, timeout_seconds=timeout)
    except (BotoCoreError, ClientError) as error:
        started = f" (jobs already started: {', '.join(names)})" if names else ""
        raise RecommendJobError(f"{step}: {error}{started}") from None
    rows = result_rows(described)
    best = best_row(rows, args.slo_p99_ms)
    endpoint = plans[0]["Endpoint"]
    mode = next(e.mode for e in config.endpoints if e.name == endpoint)
    proposal = proposed_lines(best, endpoint=endpoint, safety_factor=args.safety_factor, mode=mode) if best else []
    if args.json:
        print(
            json.dumps(
                {
                    "schema_version": 1,
                    "jobs": names,
                    "slo_ms": args.slo_p99_ms,
                    "results": [r.as_json() for r in rows],
                    "proposal": best.as_json() if best else None,
                    "proposed_config_lines": proposal,
                },
                indent=2,
                allow_nan=False,
            )
        )
        return 0
    print(format_comparison(rows, slo_ms=args.slo_p99_ms))
    if best is None:
        print(f"\nno tested configuration met {args.slo_p99_ms} ms; nothing to propose")
        return 0
    print(f"\nproposed for {args.config} (cheapest inference within {args.slo_p99_ms} ms; review before committing):")
    print("\n".join(proposal))
    print(f"\nthe test models ({', '.join(names)}) remain: `aws sagemaker delete-model --model-name NAME` removes one")
    return 0
