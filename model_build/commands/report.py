"""`python -m model_build report`: print a TensorRT model's build report (report.json beside its artifact)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import urllib.parse
from pathlib import Path

from model_build.app_config import load_model_settings, read_yaml
from model_build.build_report import (
    format_report,
    publish_report,
    read_local_report,
    read_s3_report,
    report_key,
)
from model_build.commands import key as key_command
from model_build.errors import ModelBuildError
from model_build.upload import make_s3_client

NAME = "report"
HELP = "Print a model's build report (accuracy against ONNX Runtime, speed, host) from S3 or a local build."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="app config file, e.g. config/dev.yaml")
    parser.add_argument("--model", required=True, help="model name under `models:` in --config")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--local", type=Path, help="a local build's report.json (or the folder holding it)")
    where.add_argument("--bucket", help="artifact bucket. Default: the config's artifacts.bucket_name")
    parser.add_argument(
        "--publish",
        type=Path,
        metavar="REPORT_JSON",
        help="the build: upload this report.json beside --artifact-key in --bucket (an existing report is kept)",
    )
    parser.add_argument("--artifact-key", help="with --publish: the artifact key, models/<name>/<digest>/model.tar.gz")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--gpu-target", help="sm86, ampere+ ... (as `key`)")
    target.add_argument(
        "--instance-type", help="serving instance type. Default: the one instance type of the endpoints serving it"
    )
    parser.add_argument("--base-dir", type=Path, default=Path("."), help="the project root (as `key`). Default: .")
    parser.add_argument("--region", default=None, help="AWS region. Default: from the AWS environment/profile")
    parser.add_argument("--endpoint-url", default=None, help="S3 endpoint (e.g. a local moto_server). Default: AWS")
    parser.add_argument("--json", action="store_true", help="print report.json as it is stored")


def serving_instance_type(config: Path, model: str) -> str:
    """The instance type of the endpoints that serve `model`; refused when they differ or none serves it."""
    endpoints = read_yaml(config).get("endpoints") or []
    types = sorted(
        {
            str(endpoint.get("instance_type"))
            for endpoint in endpoints
            if isinstance(endpoint, dict) and model in (endpoint.get("models") or []) and endpoint.get("instance_type")
        }
    )
    if len(types) != 1:
        found = f"its endpoints use {', '.join(types)}" if types else "no endpoint serves it"
        raise ModelBuildError(
            f"{config}: model {model!r}: {found}; pass --instance-type or --gpu-target to choose the artifact"
        )
    return types[0]


def artifact_key_for(args: argparse.Namespace) -> str:
    settings, _ = load_model_settings(args.config, args.model)
    if not settings.needs_gpu_build:
        raise ModelBuildError(
            f"{args.config}: model {args.model!r} is a {settings.platform} model; build reports are made for "
            "tensorrt_plan models (their GPU build)"
        )
    if args.gpu_target is None and args.instance_type is None:
        args.instance_type = serving_instance_type(args.config, args.model)
    # Exactly what `python -m model_build key` prints for these arguments (the key the app deploys).
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        key_command.run(argparse.Namespace(**{**vars(args), "json": False}))
    return printed.getvalue().strip()


def s3_client(args: argparse.Namespace):
    """The S3 client; a malformed --endpoint-url or --region is one ERROR line, not botocore's traceback."""
    if args.endpoint_url is not None:
        parsed = urllib.parse.urlparse(args.endpoint_url)
        if parsed.scheme not in {"http", "https"} or not parsed.netloc:
            raise ModelBuildError(f"--endpoint-url {args.endpoint_url!r}: an http:// or https:// URL")
    try:
        return make_s3_client(endpoint_url=args.endpoint_url, region=args.region)
    except ValueError as error:  # botocore: "Invalid endpoint", "Provided region_name ... doesn't match"
        raise ModelBuildError(f"--endpoint-url / --region: {error}") from None


def publish(args: argparse.Namespace) -> int:
    if not (args.bucket and args.artifact_key) or args.local is not None:
        raise ModelBuildError("--publish needs --bucket and --artifact-key (and no --local)")
    report = read_local_report(args.publish)
    if report.get("model") != args.model:
        raise ModelBuildError(f"{args.publish}: the report is of model {report.get('model')!r}, not {args.model!r}")
    client = s3_client(args)
    print(publish_report(args.publish, args.bucket, args.artifact_key, client=client))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.publish is not None:
        return publish(args)
    if args.local is not None:
        report = read_local_report(args.local)
        if report.get("model") != args.model:
            raise ModelBuildError(f"{args.local}: the report is of model {report.get('model')!r}, not {args.model!r}")
    else:
        bucket = args.bucket or (read_yaml(args.config).get("artifacts") or {}).get("bucket_name")
        if not bucket:
            raise ModelBuildError(f"{args.config}: artifacts.bucket_name: not set; pass --bucket")
        key = report_key(artifact_key_for(args))
        report = read_s3_report(s3_client(args), bucket, key)
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else format_report(report))
    return 0
