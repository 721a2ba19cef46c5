"""`python -m endpoint_client loadtest`: options, checks and the run (docs/performance.md, "Load tests").

Targets: `--local URL` (a local endpoint's SageMaker API, loopback only, as the local endpoint itself listens),
`--triton URL --model-name NAME` (a Triton's own KServe HTTP port on loopback: what the local endpoint's front
adds is the difference), `--endpoint NAME` (a SageMaker endpoint, through `invoke`'s boto3 transport). Inputs as
`invoke` takes them, or `--model-config` to generate them. The engine is loadtest.py, the figures
loadtest_report.py, SageMaker's own latency loadtest_cloudwatch.py.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import ipaddress
import json
import math
import os
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

from endpoint_client import loadtest as lt
from endpoint_client import loadtest_report as report
from endpoint_client import loadtest_triton_metrics as triton_metrics
from endpoint_client import presets
from endpoint_client.cli import _component_name, _key_value, _positive_int, _target_model, collect_inputs
from endpoint_client.client import EndpointClient
from endpoint_client.codec import Encoding, encode_request, error_message
from endpoint_client.errors import EndpointClientError, EndpointError, InvalidInputError
from endpoint_client.limits import INVOCATION_TIMEOUT_SECONDS, MAX_PAYLOAD_BYTES
from endpoint_client.retry import RetryPolicy
from endpoint_client.transport import LocalTransport, SageMakerTransport
from model_build.atomic import atomic_file

DEFAULT_VARIANT = "AllTraffic"  # triton_cdk.serving.endpoint.DEFAULT_VARIANT_NAME (the stage config's default)
DEFAULT_CLOUDWATCH_DELAY = 120.0


def loopback_url(text: str) -> str:
    """http://HOST:PORT with HOST 127.0.0.0/8, [::1] or localhost: the local endpoint listens on loopback only
    (local_endpoint.bind_address) and a load test has no business elsewhere without --endpoint."""
    try:
        parsed = urllib.parse.urlsplit(text)
        parsed.port  # noqa: B018 - raises ValueError for a port that is not a number or out of range
    except ValueError:
        parsed = None
    if parsed is None or parsed.scheme != "http" or not parsed.hostname or parsed.path not in ("", "/"):
        raise argparse.ArgumentTypeError(f"{text[:200]!r} is not http://HOST:PORT (e.g. http://127.0.0.1:8080)")
    if parsed.query or parsed.fragment or parsed.username or parsed.password:
        raise argparse.ArgumentTypeError(f"{text[:200]!r}: give only http://HOST:PORT")
    if parsed.hostname != "localhost":
        try:
            loopback = ipaddress.ip_address(parsed.hostname).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise argparse.ArgumentTypeError(
                f"{parsed.hostname}: local targets are loopback only (127.0.0.1, [::1] or localhost); "
                "load-test a SageMaker endpoint with --endpoint NAME"
            )
    return text.rstrip("/")


def _bounded_float(low: float, high: float, *, low_open: bool, what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            bound = f"above {low:g}" if low_open else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text[:50]!r} is not {what}: {bound}, at most {high:g}")
        return value

    return parse


def _list(item, *, what: str):
    def parse(text: str) -> list:
        parts = text.split(",")
        if not 1 <= len(parts) <= lt.MAX_LEVELS:
            raise argparse.ArgumentTypeError(f"{text[:100]!r}: give 1-{lt.MAX_LEVELS} {what} separated by commas")
        return [item(part.strip()) for part in parts]

    return parse


def _concurrency(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= lt.MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"{text[:50]!r} is not a concurrency: a whole number 1-{lt.MAX_CONCURRENCY}")
    return int(text)


def _max_requests(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= lt.HARD_MAX_REQUESTS:
        raise argparse.ArgumentTypeError(f"{text[:50]!r} is not a request cap: 1-{lt.HARD_MAX_REQUESTS}")
    return int(text)


def add_loadtest_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "loadtest",
        help="measure throughput and latency per concurrency or request rate (docs/performance.md)",
        description="Closed-loop concurrency sweep or open-loop Poisson rate against a local endpoint or a "
        "SageMaker endpoint; per level: requests, errors by status, throughput, client latency percentiles.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--local", type=loopback_url, metavar="URL", help="a local endpoint (`make local`), loopback")
    where.add_argument("--endpoint", metavar="NAME", help="a SageMaker endpoint (boto3 sagemaker-runtime, SigV4)")
    where.add_argument(
        "--triton",
        type=loopback_url,
        metavar="URL",
        help="a Triton's own KServe HTTP port on loopback (needs "
        "--model-name): to measure what the local endpoint's front adds",
    )
    parser.add_argument("--region", help="AWS region of --endpoint (default: boto3's configuration)")
    parser.add_argument("--variant", help=f"--endpoint's variant, for CloudWatch (default {DEFAULT_VARIANT})")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--target-model", type=_target_model, help="multi-model endpoints: e.g. resnet50.tar.gz")
    target.add_argument("--inference-component", type=_component_name, help="the inference component to invoke")
    parser.add_argument("--model-name", help="the model's name (messages; with --triton, the model to infer)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--concurrency",
        type=_list(_concurrency, what="concurrency levels"),
        metavar="N,N,...",
        help="closed loop: N users, each sending its next request when its reply arrives, per level (default 1)",
    )
    mode.add_argument(
        "--rate",
        type=_list(_bounded_float(0, lt.MAX_RATE, low_open=True, what="a rate"), what="rates"),
        metavar="R,R,...",
        help=f"open loop: Poisson arrivals at R requests/s per level (at most {lt.MAX_RATE:g})",
    )
    parser.add_argument(
        "--duration",
        type=_bounded_float(0, lt.MAX_LEVEL_SECONDS, low_open=True, what="a duration"),
        default=30.0,
        help="seconds measured per level (default 30)",
    )
    parser.add_argument(
        "--warmup",
        type=_bounded_float(0, lt.MAX_WARMUP_SECONDS, low_open=False, what="a warm-up"),
        default=5.0,
        help="seconds of load before each level's measurement starts, not counted (default 5)",
    )
    parser.add_argument(
        "--max-requests",
        type=_max_requests,
        default=lt.DEFAULT_MAX_REQUESTS,
        help=f"requests in all, warm-ups included: the run stops there (default {lt.DEFAULT_MAX_REQUESTS})",
    )
    parser.add_argument(
        "--max-in-flight",
        type=_concurrency,
        default=lt.DEFAULT_MAX_IN_FLIGHT,
        help="open loop: unanswered requests at most; later arrivals are counted as client-in-flight-cap errors",
    )
    parser.add_argument(
        "--timeout",
        type=_bounded_float(0, INVOCATION_TIMEOUT_SECONDS * 10, low_open=True, what="a timeout"),
        default=INVOCATION_TIMEOUT_SECONDS,
        help="seconds per request (default 60, InvokeEndpoint's limit)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the arrivals and generated inputs (default 0)")
    _add_input_options(parser)
    parser.add_argument(
        "--instances",
        type=_positive_int,
        default=1,
        help="instances (or inference component copies) serving during the test: divides the per-instance "
        "figures (default 1, what SageMaker's guidance measures)",
    )
    parser.add_argument(
        "--inferences-per-request",
        type=_positive_int,
        help="inferences in one request (default: --batch-size with --model-config on a batching model, else 1)",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the figures as JSON (versioned schema)")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="latency percentiles vs throughput (matplotlib)")
    parser.add_argument(
        "--slo-p99-ms",
        type=_bounded_float(0, 3_600_000, low_open=True, what="a p99 objective in ms"),
        help="find the highest level whose p99 stays under this with no errors, and print its autoscaling target",
    )
    parser.add_argument(
        "--safety-factor",
        type=_bounded_float(0, 1, low_open=True, what="a safety factor"),
        default=report.DEFAULT_SAFETY_FACTOR,
        help="target = sustained maximum x this (default 0.5, SageMaker's recommended start)",
    )
    parser.add_argument("--no-cloudwatch", action="store_true", help="--endpoint: skip ModelLatency/OverheadLatency")
    parser.add_argument(
        "--cloudwatch-delay",
        type=_bounded_float(0, 900, low_open=False, what="a delay"),
        default=DEFAULT_CLOUDWATCH_DELAY,
        help="--endpoint: seconds to wait after the last level before reading CloudWatch (default 120: SageMaker "
        "publishes its per-minute metrics late)",
    )
    parser.add_argument(
        "--triton-metrics",
        type=triton_metrics.metrics_url,
        metavar="URL",
        help="with --local or --triton: the local Triton's metrics URL (`python -m endpoint_client local` prints "
        "it); adds queue vs compute time per request and level (endpoint_client/loadtest_triton_metrics.py)",
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress line")
    parser.set_defaults(run=run_loadtest)


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    """invoke's input options (cli.py), read by cli.collect_inputs, plus --model-config to generate inputs."""
    parser.add_argument(
        "--encoding", choices=[e.value for e in Encoding], default=Encoding.BINARY.value, help="as invoke"
    )
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy|FILE.npz", help="as invoke")
    parser.add_argument("--tensor", action="append", default=[], metavar="NAME=DTYPE:SHAPE:VALUES", help="as invoke")
    parser.add_argument("--inputs-json", type=Path, metavar="FILE", help="as invoke")
    parser.add_argument("--raw", action="append", default=[], metavar="NAME=FILE", help="as invoke")
    parser.add_argument("--raw-shape", default="1", metavar="SHAPE", help="as invoke")
    parser.add_argument("--preset", choices=presets.PRESETS, help="as invoke")
    parser.add_argument("--image", type=Path, help="as invoke")
    parser.add_argument("--text", help="as invoke")
    parser.add_argument("--rename", action="append", default=[], type=_key_value, metavar="OLD=NEW")
    parser.add_argument("--output", action="append", default=[], metavar="NAME", help="ask for this output only")
    parser.add_argument(
        "--model-config",
        type=Path,
        metavar="PATH",
        help="generate inputs from this config.pbtxt (or model folder): random values, config shapes",
    )
    parser.add_argument(
        "--batch-size", type=_positive_int, default=1, help="--model-config: batch size of a batching model"
    )
    parser.add_argument(
        "--attempts",
        type=_positive_int,
        default=6,
        help="the first request's calls in all while the model is not ready (ModelNotReadyException); default 6",
    )


def _inputs(args: argparse.Namespace) -> tuple[dict, int]:
    given = any((args.input, args.tensor, args.inputs_json, args.raw, args.preset, args.image, args.text))
    if args.model_config and given:
        raise InvalidInputError("give inputs as invoke takes them or --model-config to generate them, not both")
    if args.model_config:
        from endpoint_client.loadtest_inputs import generated_inputs

        tensors, per_request = generated_inputs(args.model_config, batch_size=args.batch_size, seed=args.seed)
        for old, new in args.rename:
            if old not in tensors:
                raise InvalidInputError(f"--rename {old}={new}: there is no input {old!r}")
            tensors[new] = tensors.pop(old)
        return tensors, per_request
    if args.batch_size != 1:
        raise InvalidInputError("--batch-size goes with --model-config")
    if not given:
        raise InvalidInputError(
            "no inputs: give them as invoke takes them (--input, --tensor, --inputs-json, --raw, --preset) or "
            "--model-config PATH to generate them from the model's config.pbtxt"
        )
    return collect_inputs(args), 1


def _check_options(args: argparse.Namespace) -> None:
    if args.triton and not args.model_name:
        raise InvalidInputError("--triton needs --model-name: the model to call on Triton's KServe API")
    if args.triton and (args.target_model or args.inference_component):
        raise InvalidInputError("--target-model and --inference-component are SageMaker routes; --triton has neither")
    if not args.endpoint:
        for option, value in (("--region", args.region), ("--variant", args.variant)):
            if value:
                raise InvalidInputError(f"{option} goes with --endpoint")
    if args.json and args.json.is_dir():
        raise InvalidInputError(f"--json {args.json}: is a folder; give a file name")
    if getattr(args, "triton_metrics", None) and args.endpoint:
        raise InvalidInputError("--triton-metrics reads a local Triton; a SageMaker endpoint's are not reachable")
    if args.plot and args.plot.suffix.lower() != ".png":
        raise InvalidInputError(f"--plot {args.plot}: give a .png file name")


def _runtime_client(region: str | None, connections: int, timeout: float) -> Any:
    """boto3's sagemaker-runtime client with a connection pool as wide as the level and no retries."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError

    config = Config(
        max_pool_connections=connections,
        retries={"mode": "standard", "total_max_attempts": 1},
        read_timeout=timeout,
        connect_timeout=min(timeout, 10.0),
    )
    try:
        return boto3.client("sagemaker-runtime", region_name=region, config=config)
    except BotoCoreError as error:
        raise EndpointClientError(f"--endpoint: {error} (give --region or set AWS_REGION)") from error


def _cloudwatch_client(region: str | None) -> Any:
    import boto3

    return boto3.client("cloudwatch", region_name=region)


def _target(args: argparse.Namespace, tensors: dict, encoding: Encoding) -> tuple[lt.Target, dict[str, Any]]:
    """The load target, after one request through invoke's own path whose reply must decode."""
    request = encode_request(tensors, outputs=args.output, encoding=encoding)
    if len(request.body) > MAX_PAYLOAD_BYTES:
        raise InvalidInputError(
            f"the request is {len(request.body)} bytes; SageMaker accepts at most {MAX_PAYLOAD_BYTES}: send less"
        )
    route = {"target_model": args.target_model, "inference_component": args.inference_component}
    retry = RetryPolicy(attempts=args.attempts)
    if args.triton:
        described = {"kind": "triton", "url": args.triton, "model": args.model_name}
        target = lt.triton_target(args.triton, args.model_name, request, timeout=args.timeout)
        _triton_first_request(args, target)
        return target, described
    if args.local:
        transport = LocalTransport(args.local, timeout=args.timeout, model_name=args.model_name)
        client = EndpointClient(transport, encoding=encoding, retry=retry)
        client.invoke(tensors, outputs=args.output, **route)
        described = {"kind": "local", "url": args.local, **route}
        return lt.local_target(args.local, request, timeout=args.timeout, **route), described

    def transport(connections: int) -> SageMakerTransport:
        client = _runtime_client(args.region, connections, args.timeout)
        return SageMakerTransport(args.endpoint, client=client, model_name=args.model_name)

    EndpointClient(transport(1), encoding=encoding, retry=retry).invoke(tensors, outputs=args.output, **route)
    described = {
        "kind": "sagemaker",
        "endpoint": args.endpoint,
        "region": args.region,
        "variant": args.variant or DEFAULT_VARIANT,
        **route,
    }
    return lt.SageMakerTarget(transport, request, **route), described


def _triton_first_request(args: argparse.Namespace, target: lt.HttpTarget) -> None:
    """One request to Triton's KServe route; its reply's JSON length is in Inference-Header-Content-Length."""
    import tritonclient.http as triton_http

    from endpoint_client.triton_backend import TritonHTTP

    where = f"{args.model_name} at {args.triton}"
    port = urllib.parse.urlsplit(args.triton).port or 80
    path = urllib.parse.urlsplit(target.url).path
    try:
        status, body, headers = TritonHTTP(port).request(
            "POST", path, target.body, target.headers, timeout=args.timeout, max_reply_bytes=MAX_PAYLOAD_BYTES
        )
    except OSError as error:
        raise EndpointError(where, f"cannot reach {args.triton}: {error}") from None
    if status != 200:
        raise EndpointError(where, error_message(body), status=status)
    size = headers.get("inference-header-content-length")
    try:
        triton_http.InferenceServerClient.parse_response_body(body, header_length=int(size) if size else None)
    except Exception as error:  # tritonclient raises assorted errors on a reply it cannot read
        raise EndpointError(where, f"unreadable reply ({len(body)} bytes): {error}") from None


def run_loadtest(args: argparse.Namespace) -> int:
    _check_options(args)
    if args.json:
        _writable(args.json, "--json")
    if args.plot:
        _writable(args.plot, "--plot")
    tensors, generated_per_request = _inputs(args)
    per_request = args.inferences_per_request or generated_per_request
    levels = (
        tuple(lt.Level(rate=r) for r in args.rate)
        if args.rate
        else tuple(lt.Level(concurrency=c) for c in (args.concurrency or [1]))
    )
    plan = lt.Plan(
        levels,
        args.duration,
        args.warmup,
        max_requests=args.max_requests,
        max_in_flight=args.max_in_flight,
        seed=args.seed,
    )
    problems = plan.problems()
    if problems:
        raise InvalidInputError("load test plan refused: " + "; ".join(problems))
    encoding = Encoding(args.encoding)
    target, described = _target(args, tensors, encoding)
    started_at = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    progress = None if args.quiet else lt.progress_printer()
    if getattr(args, "triton_metrics", None):  # issue #26 part 3: queue vs compute per level
        target = triton_metrics.ScrapingTarget(target, args.triton_metrics)
    measured = asyncio.run(lt.run_plan(target, plan, progress))
    levels_doc = [
        report.level_document(m, instances=args.instances, inferences_per_request=per_request) for m in measured
    ]
    if isinstance(target, triton_metrics.ScrapingTarget):
        for level, figures in zip(levels_doc, target.per_level(), strict=False):
            level["triton_metrics"] = figures
    if args.endpoint and not args.no_cloudwatch:
        _add_cloudwatch(args, described, measured, levels_doc)
    slo = None
    if args.slo_p99_ms is not None:
        slo = report.find_slo(levels_doc, args.slo_p99_ms, args.safety_factor, args.instances)
    document = {
        "schema": report.SCHEMA,
        "schema_version": report.SCHEMA_VERSION,
        "started_at": started_at,
        "target": described,
        "mode": "rate" if args.rate else "concurrency",
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "instances": args.instances,
        "inferences_per_request": per_request,
        "request_bytes": len(encode_request(tensors, outputs=args.output, encoding=encoding).body),
        "encoding": encoding.value,
        "levels": levels_doc,
        "sustainable": report.sustainable(levels_doc, slo),
        "slo": report.slo_document(slo),
    }
    print(report.table(levels_doc))
    if any("triton_metrics" in level for level in levels_doc):
        print(triton_metrics.table(levels_doc))
    if args.json:
        try:
            with atomic_file(args.json) as stream:
                stream.write((json.dumps(document, indent=2) + "\n").encode())
        except OSError as error:
            raise EndpointClientError(f"--json {args.json}: cannot write it ({error.strerror})") from None
    if args.plot:
        report.write_plot(document, args.plot)
    if any(m.stopped_by for m in measured):
        print(f"note: stopped after --max-requests {args.max_requests} requests", file=sys.stderr)
    if slo is not None:
        text = report.slo_text(slo, levels_doc, instances=args.instances, component=bool(args.inference_component))
        if slo.level is None:
            raise EndpointClientError(text)
        print(text)
    return 0


def _add_cloudwatch(args: argparse.Namespace, described: dict, measured: list, levels_doc: list) -> None:
    from endpoint_client.loadtest_cloudwatch import cloudwatch_figures

    if args.cloudwatch_delay:
        print(f"waiting {args.cloudwatch_delay:g} s for CloudWatch to publish the last minute...", file=sys.stderr)
        time.sleep(args.cloudwatch_delay)
    windows = [(m.window_start, m.window_seconds) for m in measured]
    figures = cloudwatch_figures(
        lambda: _cloudwatch_client(args.region),
        windows,
        endpoint=args.endpoint,
        variant=described["variant"],
        component=args.inference_component,
    )
    for level, figure in zip(levels_doc, figures, strict=True):
        level["cloudwatch"] = figure


def _writable(path: Path, option: str) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidInputError(f"{option} {path}: folder {folder} does not exist")
    if path.is_dir():
        raise InvalidInputError(f"{option} {path}: is a folder; give a file name")
    if not os.access(folder, os.W_OK | os.X_OK):  # refused before the run, not after it
        raise InvalidInputError(f"{option} {path}: folder {folder} is not writable")
