"""The pipeline's performance gate (docs/pipeline.md, "Performance gate"): `python -m endpoint_client.perf_gate`.

`inputs`: one sample request for an endpoint of the smoke plan, as a .npz (the endpoint's first model, inputs
from its config.pbtxt as the smoke test makes them), for `python -m endpoint_client loadtest --input FILE.npz`.

`check`: reads the load test's JSON (loadtest_report.py, schema version 1, one level), applies the p99 SLO and the
throughput floor, stores the JSON write-once in the artifact bucket under the model's content-addressed prefix
(`models/<model>/<digest>/loadtest/<stage>-<endpoint>-<UTC time>.json`, PutObject with If-None-Match: *), and
with --max-regression-percent compares it with the newest load test of another build of the same model (the
newest object under `models/<model>/*/loadtest/` outside this digest: the last build load-tested, which the
pipeline promoted only if it passed). Prints one summary line; exit 1 on a miss, 2 on an unusable input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = "triton-sagemaker-cdk/loadtest"  # loadtest_report.SCHEMA / SCHEMA_VERSION (not imported: loads numpy)
SCHEMA_VERSION = 1
LOADTEST_FOLDER = "loadtest/"


class GateInputError(Exception):
    """A load-test document or a stored object the gate cannot read; the message names it."""


@dataclass(frozen=True)
class Thresholds:
    slo_p99_ms: float
    min_inferences_per_second: float
    max_regression_percent: float | None = None


@dataclass(frozen=True)
class Figures:
    p99_ms: float | None  # None: nothing succeeded
    inferences_per_s: float
    requests: int
    ok: int

    @classmethod
    def of(cls, document: Any, where: str) -> Figures:
        if not isinstance(document, dict) or document.get("schema") != SCHEMA:
            raise GateInputError(f"{where}: not a load-test JSON (schema {SCHEMA!r})")
        if document.get("schema_version") != SCHEMA_VERSION:
            raise GateInputError(f"{where}: schema_version {document.get('schema_version')!r}, expected 1")
        levels = document.get("levels")
        if not isinstance(levels, list) or len(levels) != 1:
            raise GateInputError(f"{where}: expected exactly one level (one --concurrency), got {levels!r:.80}")
        level = levels[0]
        try:
            latency = level["latency_ms"]
            p99 = None if latency is None else float(latency["p99"])
            return cls(p99, float(level["inferences_per_s"]), int(level["requests"]), int(level["ok"]))
        except (KeyError, TypeError, ValueError) as error:
            raise GateInputError(f"{where}: levels[0] lacks a field of schema version 1 ({error})") from None


def decide(current: Figures, thresholds: Thresholds, previous: Figures | None = None) -> list[str]:
    """What the run missed (empty: it passed). Errors count: a level with failed requests misses the SLO."""
    misses = []
    if current.p99_ms is None or current.ok < current.requests:
        misses.append(f"{current.requests - current.ok} of {current.requests} requests failed")
    elif current.p99_ms > thresholds.slo_p99_ms:
        misses.append(f"p99 {current.p99_ms:.1f} ms > SLO {thresholds.slo_p99_ms:g} ms")
    if current.inferences_per_s < thresholds.min_inferences_per_second:
        misses.append(f"throughput {current.inferences_per_s:.1f}/s < floor {thresholds.min_inferences_per_second:g}/s")
    limit = thresholds.max_regression_percent
    if limit is not None and previous is not None:
        if previous.inferences_per_s > 0:
            drop = 100 * (previous.inferences_per_s - current.inferences_per_s) / previous.inferences_per_s
            if drop > limit:
                misses.append(
                    f"throughput {drop:.1f}% below the previous build's {previous.inferences_per_s:.1f}/s "
                    f"(limit {limit:g}%)"
                )
        if previous.p99_ms and current.p99_ms is not None:
            rise = 100 * (current.p99_ms - previous.p99_ms) / previous.p99_ms
            if rise > limit:
                misses.append(f"p99 {rise:.1f}% above the previous build's {previous.p99_ms:.1f} ms (limit {limit:g}%)")
    return misses


def build_prefix(artifact_key: str) -> str:
    """`models/<model>/<digest>/` of an artifact key `models/<model>/<digest>/<file>` (model_build/key.py)."""
    parts = artifact_key.split("/")
    if len(parts) < 4 or parts[0] != "models" or not all(parts[:3]):
        raise GateInputError(f"{artifact_key!r} is not a key models/<model>/<digest>/<file>")
    return "/".join(parts[:3]) + "/"


def result_key(artifact_key: str, stage: str, endpoint: str, now: dt.datetime) -> str:
    """A new object per run (write-once): the UTC time to the microsecond names it."""
    return f"{build_prefix(artifact_key)}{LOADTEST_FOLDER}{stage}-{endpoint}-{now.strftime('%Y%m%dT%H%M%S%fZ')}.json"


def previous_key(s3: Any, bucket: str, artifact_key: str) -> str | None:
    """The newest load-test JSON under `models/<model>/*/loadtest/` outside this build's digest."""
    own = build_prefix(artifact_key)
    model_prefix = "/".join(own.split("/")[:2]) + "/"
    newest: tuple[dt.datetime, str] | None = None
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=model_prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            rest = key[len(model_prefix) :].split("/")
            if key.startswith(own) or len(rest) != 3 or rest[1] + "/" != LOADTEST_FOLDER or not key.endswith(".json"):
                continue
            if newest is None or item["LastModified"] > newest[0]:
                newest = (item["LastModified"], key)
    return newest[1] if newest else None


def read_figures(s3: Any, bucket: str, key: str) -> Figures:
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    try:
        document = json.loads(body)
    except ValueError as error:
        raise GateInputError(f"s3://{bucket}/{key}: not JSON ({error})") from None
    return Figures.of(document, f"s3://{bucket}/{key}")


def check(args: argparse.Namespace, s3: Any, now: dt.datetime | None = None) -> tuple[int, str]:
    """(exit status, summary line) of one endpoint's load test."""
    where = str(args.json)
    try:
        text = Path(args.json).read_text()
        document = json.loads(text)
    except (OSError, ValueError) as error:
        raise GateInputError(f"{where}: cannot read the load-test JSON ({error})") from None
    current = Figures.of(document, where)
    thresholds = Thresholds(args.slo_p99_ms, args.min_inferences_per_second, args.max_regression_percent)
    previous, compared = None, ""
    if thresholds.max_regression_percent is not None:
        found = previous_key(s3, args.bucket, args.artifact_key)
        if found:
            previous, compared = read_figures(s3, args.bucket, found), f"; compared with s3://{args.bucket}/{found}"
        else:
            compared = "; no earlier build's load test to compare with"
    key = result_key(args.artifact_key, args.stage, args.endpoint, now or dt.datetime.now(dt.UTC))
    # Write-once: If-None-Match: * makes S3 refuse (412) an object that already exists (S3 conditional writes).
    s3.put_object(Bucket=args.bucket, Key=key, Body=text.encode(), ContentType="application/json", IfNoneMatch="*")
    misses = decide(current, thresholds, previous)
    p99 = f"{current.p99_ms:.1f} ms" if current.p99_ms is not None else "none"
    figures = f"p99 {p99}, {current.inferences_per_s:.1f} inferences/s, stored s3://{args.bucket}/{key}{compared}"
    if misses:
        return 1, f"{args.stage}/{args.endpoint}: FAILED performance gate: {'; '.join(misses)} ({figures})"
    return 0, f"{args.stage}/{args.endpoint}: passed performance gate ({figures})"


def write_inputs(args: argparse.Namespace, s3: Any) -> str:
    """The endpoint's first model's sample request as .npz; returns the loadtest options that route to it."""
    import numpy as np

    from endpoint_client.smoke import s3_config_reader, sample_inputs
    from endpoint_client.smoke_plan import SmokePlan

    plan = SmokePlan.from_json(args.plan_json)
    endpoint = next((e for e in plan.endpoints if e.name == args.endpoint), None)
    if endpoint is None or not endpoint.models:
        raise GateInputError(f"--endpoint {args.endpoint!r}: not an endpoint of the plan with a model")
    model = endpoint.models[0]
    tensors = sample_inputs(s3_config_reader(s3, args.bucket)(model), model.shape_hints)
    if any(array.dtype == np.object_ for array in tensors.values()):
        raise GateInputError(
            f"model {model.name!r}: BYTES inputs cannot travel in a .npz (no pickles); load-test it by hand"
        )
    buffer = io.BytesIO()
    np.savez(buffer, **tensors)
    Path(args.out).write_bytes(buffer.getvalue())
    if model.target_model:
        return f"--target-model {model.target_model}"
    if model.inference_component:
        return f"--inference-component {model.inference_component}"
    return ""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m endpoint_client.perf_gate", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    inputs = commands.add_parser("inputs", help="write an endpoint's sample request as .npz")
    inputs.add_argument("--plan-json", required=True, help="the smoke plan JSON (the step's SMOKE_PLAN)")
    inputs.add_argument("--bucket", required=True)
    inputs.add_argument("--endpoint", required=True, help="the endpoint's name in config/<stage>.yaml")
    inputs.add_argument("--out", required=True, type=Path)
    inputs.add_argument("--region", help="the bucket's region (default: the environment's)")
    gate = commands.add_parser("check", help="apply the thresholds to a load test's JSON and store it")
    gate.add_argument("--json", required=True, type=Path, help="`loadtest --json` output (one level)")
    gate.add_argument("--bucket", required=True, help="the stage's artifact bucket")
    gate.add_argument("--artifact-key", required=True, help="the served model's archive key (models/<m>/<d>/...)")
    gate.add_argument("--stage", required=True)
    gate.add_argument("--endpoint", required=True)
    gate.add_argument("--slo-p99-ms", required=True, type=float)
    gate.add_argument("--min-inferences-per-second", required=True, type=float)
    gate.add_argument("--max-regression-percent", type=float)
    gate.add_argument("--region", help="the bucket's region (default: the environment's)")
    return parser


def main(argv: Sequence[str] | None = None, s3: Any = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if s3 is None:
            import boto3

            s3 = boto3.client("s3", region_name=args.region)
        if args.command == "inputs":
            print(write_inputs(args, s3))
            return 0
        status, line = check(args, s3)
    except Exception as error:  # GateInputError, botocore's ClientError, smoke.SmokeError: a message, no traceback
        print(f"performance gate: {error}", file=sys.stderr)
        return 2
    print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
