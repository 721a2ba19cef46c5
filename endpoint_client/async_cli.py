"""`invoke-async` and `local-async`: asynchronous endpoints (issue #26 part 1), on SageMaker and on loopback.

    python -m endpoint_client invoke-async --config config/async.yaml --endpoint NAME --input INPUT0=big.npy
    python -m endpoint_client invoke-async --endpoint-name E --input-location s3://bucket/prefix/ --tensor ...
    python -m endpoint_client local-async --input-dir D --output-dir O --url http://127.0.0.1:PORT
    python -m endpoint_client invoke-async --local-input-dir D --local-output-dir O --tensor ...

`local-async` is its own command, not a flag on `local`: `local` runs the server (its front is the real-time
API), while the watcher plays SageMaker's queue *in front of* a container, so it can serve any local endpoint
(`make local`, Triton's container by hand) and stop or restart without touching the server.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
from pathlib import Path
from typing import Any

from endpoint_client import async_body
from endpoint_client.async_invoke import AsyncInvoker, S3Location, check_invocation_timeout, check_ttl, parse_s3_uri
from endpoint_client.codec import Encoding, decode_response, encode_request
from endpoint_client.errors import EndpointClientError, EndpointError, InvalidInputError

DEFAULT_WAIT_SECONDS = 3600.0  # InvocationTimeoutSeconds' maximum (botocore sagemaker-runtime model: max 3600)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, 86400]")
    return value


def _whole(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds")
    return int(text)


def add_async_parsers(commands: Any) -> None:
    from endpoint_client.cli import add_request_arguments

    invoke = commands.add_parser(
        "invoke-async",
        help="send one request to an asynchronous endpoint through S3 and wait for the answer",
        description="Upload the request (streamed) under the endpoint's input prefix, call InvokeEndpointAsync, "
        "wait for the output or failure object and print the outputs as `invoke` does.",
    )
    where = invoke.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", type=Path, help="the stage config (config/<stage>.yaml); with --endpoint")
    where.add_argument(
        "--input-location", help="an S3 prefix for the request (s3://bucket/prefix/); with --endpoint-name"
    )
    where.add_argument(
        "--local-input-dir", type=Path, help="loopback: the folder a `local-async` watcher reads (no AWS)"
    )
    invoke.add_argument("--endpoint", help="with --config: the endpoint's name in the config (endpoints[].name)")
    invoke.add_argument("--endpoint-name", help="with --input-location: the SageMaker endpoint's name")
    invoke.add_argument("--bucket", help="with --config: the artifact bucket, when the config does not name it")
    invoke.add_argument("--local-output-dir", type=Path, help="with --local-input-dir: where the answers appear")
    invoke.add_argument("--region", help="AWS region (default: boto3's configuration)")
    invoke.add_argument("--model-name", help="the model's name, used in messages")
    add_request_arguments(invoke)
    invoke.add_argument(
        "--body",
        type=Path,
        metavar="FILE",
        help="a request body already encoded, sent as it is (streamed, up to 1 GB); with --content-type",
    )
    invoke.add_argument("--content-type", help="the --body's Content-Type")
    invoke.add_argument(
        "--ttl", type=_whole, help="RequestTTLSeconds: 60-21600 s a request may wait in the queue (default 6 h)"
    )
    invoke.add_argument(
        "--invocation-timeout",
        type=_whole,
        help="InvocationTimeoutSeconds: 1-3600 s the model may take (default 900)",
    )
    invoke.add_argument(
        "--wait-timeout",
        type=_seconds,
        default=DEFAULT_WAIT_SECONDS,
        help=f"seconds to wait for the answer (default {DEFAULT_WAIT_SECONDS:.0f}); the request stays queued after",
    )
    invoke.add_argument(
        "--dry-run",
        action="store_true",
        help="print the upload and the InvokeEndpointAsync request it would make; call nothing (no AWS needed)",
    )
    invoke.set_defaults(run=run_invoke_async)

    local = commands.add_parser(
        "local-async",
        help="play SageMaker's async queue on loopback: input folder -> local endpoint -> output folder",
    )
    local.add_argument("--input-dir", type=Path, required=True, help="request files: <id>.json or <id>.bin")
    local.add_argument("--output-dir", type=Path, required=True, help="answers: <id>.out, failures: <id>.error")
    local.add_argument("--url", required=True, help="the local endpoint (`make local` prints it)")
    local.add_argument("--once", action="store_true", help="answer the requests there now, then exit")
    local.add_argument("--poll-interval", type=_seconds, default=0.5, help="seconds between scans (default 0.5)")
    local.set_defaults(run=run_local_async)


def request_body(args: argparse.Namespace) -> async_body.StreamedBody:
    """The body `invoke` would send for these arguments; .npy inputs and --body streamed from their files."""
    given = any((args.input, args.tensor, args.inputs_json, args.raw, args.preset))
    if args.body is not None:
        if given:
            raise InvalidInputError("give --body or tensor inputs (--input, --tensor, ...), not both")
        if not args.content_type:
            raise InvalidInputError("--body needs --content-type (e.g. application/json)")
        if args.output:
            raise InvalidInputError("--output goes with tensor inputs; a --body names its outputs itself")
        return async_body.file_body(args.body, args.content_type)
    if args.content_type:
        raise InvalidInputError("--content-type goes with --body")
    from endpoint_client.cli import collect_inputs

    if Encoding(args.encoding) is Encoding.JSON:  # JSON numbers are text: built in memory, as `invoke` does
        return async_body.encoded_body(
            encode_request(collect_inputs(args), outputs=args.output, encoding=Encoding.JSON)
        )
    streamed, rest = async_body.split_npy_specs(args.input)
    if args.raw:  # files (a camera photo) may pass the real-time 6 MB: streamed, not read
        from endpoint_client.inputs import parse_shape

        shape = parse_shape(args.raw_shape, "--raw-shape")
        streamed += [async_body.open_raw(spec, shape) for spec in args.raw]
    names = {array.name for array in streamed}
    renamed = {old: new for old, new in args.rename if old in names}
    streamed = [dataclasses.replace(a, name=renamed.get(a.name, a.name)) for a in streamed]
    # Everything else as `invoke` builds it (its checks and messages; --rename of any other input there)
    others = argparse.Namespace(
        **{**vars(args), "input": rest, "raw": [], "rename": [(o, n) for o, n in args.rename if o not in names]}
    )
    return async_body.binary_body(streamed, collect_inputs(others), args.output)


def _check_targets(args: argparse.Namespace) -> None:
    check_ttl(args.ttl)
    check_invocation_timeout(args.invocation_timeout)
    if args.local_input_dir is not None:
        if args.local_output_dir is None:
            raise InvalidInputError("--local-input-dir needs --local-output-dir (where the watcher writes answers)")
        unused = [f for f in ("endpoint", "endpoint_name", "bucket", "ttl", "invocation_timeout") if getattr(args, f)]
        if unused:
            raise InvalidInputError(f"--{unused[0].replace('_', '-')} is for SageMaker, not --local-input-dir")
        return
    if args.local_output_dir is not None:
        raise InvalidInputError("--local-output-dir goes with --local-input-dir")
    if args.config is not None and (not args.endpoint or args.endpoint_name):
        raise InvalidInputError("--config takes --endpoint NAME (the config's endpoints[].name), not --endpoint-name")
    if args.input_location is not None and (not args.endpoint_name or args.endpoint or args.bucket):
        raise InvalidInputError(
            "--input-location takes --endpoint-name (the SageMaker endpoint), not --endpoint/--bucket"
        )


def check_input_prefix(location: S3Location, given: str) -> None:
    """SageMaker reads each request as the endpoint's execution role, which may read only under
    `async-inference/<endpoint>/input/` of the stage's artifact bucket (stage_config/async_paths.py;
    triton_cdk/serving/async_inference.py grant_read_inputs): a request put anywhere else would fail to download
    (RequestDownloadFailures), so it is refused before the upload."""
    from stage_config.async_paths import ASYNC_ROOT

    parts = location.key.split("/")
    if len(parts) < 4 or parts[0] != ASYNC_ROOT or not parts[1] or parts[2] != "input":
        raise InvalidInputError(
            f"--input-location {given[:200]!r}: must lie under {ASYNC_ROOT}/<endpoint>/input/ of the stage's "
            "artifact bucket (<endpoint>: endpoints[].name in the stage config), the only place the endpoint's "
            "execution role reads requests from"
        )


def endpoint_and_prefix(args: argparse.Namespace) -> tuple[str, S3Location]:
    """(deployed endpoint name, input prefix) from --config/--endpoint, or --endpoint-name/--input-location."""
    if args.input_location is not None:
        from endpoint_client.transport import INFERENCE_COMPONENT_NAME  # SageMaker's endpoint name rule too

        if not INFERENCE_COMPONENT_NAME.fullmatch(args.endpoint_name):
            raise InvalidInputError(
                f"--endpoint-name {args.endpoint_name[:80]!r}: 1-63 letters, digits and inner hyphens "
                "(InvokeEndpointAsync EndpointName, botocore sagemaker-runtime model)"
            )
        location = parse_s3_uri(args.input_location, "--input-location")
        check_input_prefix(location, args.input_location)
        return args.endpoint_name, location
    from stage_config import ConfigError, load_config
    from stage_config.async_paths import async_prefixes

    try:
        config = load_config(args.config)
    except ConfigError as error:
        raise InvalidInputError(str(error)) from None
    chosen = [e for e in config.endpoints if e.name == args.endpoint]
    if not chosen:
        names = ", ".join(e.name for e in config.endpoints) or "none"
        raise InvalidInputError(f"{args.config}: endpoints: no endpoint {args.endpoint[:80]!r} (endpoints: {names})")
    endpoint = chosen[0]
    if getattr(endpoint, "async_inference", None) is None:
        raise InvalidInputError(
            f"{args.config}: endpoints[{config.endpoints.index(endpoint)}].async_inference: not set; endpoint "
            f"{endpoint.name!r} is real-time: use `invoke --endpoint-name {config.deployed_endpoint_name(endpoint)}`"
        )
    bucket = _bucket(args, config)
    return config.deployed_endpoint_name(endpoint), S3Location(bucket, async_prefixes(endpoint.name).input)


def _bucket(args: argparse.Namespace, config: Any) -> str:
    from stage_config.app import bucket_name_problems

    configured = config.artifacts.bucket_name
    if args.bucket is not None:
        problems = bucket_name_problems(args.bucket)
        if problems:
            raise InvalidInputError(f"--bucket {args.bucket[:80]!r}: not a valid S3 bucket name: it {problems[0]}")
        if configured and args.bucket != configured:
            raise InvalidInputError(
                f"{args.config}: artifacts.bucket_name: the stage's bucket is {configured}, not --bucket {args.bucket}"
            )
        return args.bucket
    if not configured:
        raise InvalidInputError(
            f"{args.config}: artifacts.bucket_name: not set (CloudFormation names the bucket); give --bucket with "
            "the artifact stack's ArtifactBucketName output"
        )
    return configured


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _aws_clients(region: str | None, endpoint: str) -> tuple[Any, Any]:
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.Session(region_name=region)
        return session.client("sagemaker-runtime"), session.client("s3")
    except BotoCoreError as error:
        raise EndpointClientError(f"endpoint {endpoint}: {error} (give --region or set AWS_DEFAULT_REGION)") from error


def run_invoke_async(args: argparse.Namespace, *, clients: tuple[Any, Any] | None = None) -> int:
    from endpoint_client.cli import format_report, prepare_save_dir, save_outputs

    _check_targets(args)
    if args.save_dir:
        prepare_save_dir(args.save_dir)
    if args.local_input_dir is None:
        endpoint_name, prefix = endpoint_and_prefix(args)
    body = request_body(args)
    if args.dry_run:
        if args.local_input_dir is not None:
            raise InvalidInputError("--dry-run shows SageMaker's requests: not with --local-input-dir")
        print(json.dumps(dry_run(endpoint_name, prefix, body, args), indent=2))
        return 0
    if args.local_input_dir is not None:
        from endpoint_client.local_async import LocalAsyncInvoker

        local = LocalAsyncInvoker(args.local_input_dir, args.local_output_dir, progress=_progress)
        name = local.submit(body)
        reply = local.wait(name, timeout=args.wait_timeout)
        described = f"local async request {name}"
    else:
        runtime, s3 = clients or _aws_clients(args.region, endpoint_name)
        invoker = AsyncInvoker(endpoint_name, prefix, runtime=runtime, s3=s3, progress=_progress)
        submission = invoker.submit(body, ttl=args.ttl, invocation_timeout=args.invocation_timeout)
        reply = invoker.wait(submission, timeout=args.wait_timeout)
        described = f"{args.model_name} on endpoint {endpoint_name}" if args.model_name else f"endpoint {endpoint_name}"
    try:
        outputs = decode_response(reply.body, reply.content_type)
    except Exception as error:  # tritonclient raises assorted errors on a reply it cannot read
        raise EndpointError(
            described, f"unreadable answer ({reply.content_type}, {len(reply.body)} bytes): {error}"
        ) from error
    if args.save_dir:
        save_outputs(outputs, args.save_dir)
    print(format_report(described, outputs))
    return 0


def dry_run(endpoint_name: str, prefix: S3Location, body: async_body.StreamedBody, args: argparse.Namespace) -> dict:
    """What `invoke-async` would do: the upload (its key is a fresh uuid per request) and InvokeEndpointAsync."""
    location = f"s3://{prefix.bucket}/{prefix.key}<uuid>"
    request: dict[str, Any] = {
        "EndpointName": endpoint_name,
        "InputLocation": location,
        "ContentType": body.content_type,
    }
    if args.ttl is not None:
        request["RequestTTLSeconds"] = args.ttl
    if args.invocation_timeout is not None:
        request["InvocationTimeoutSeconds"] = args.invocation_timeout
    return {
        "upload": {
            "Bucket": prefix.bucket,
            "Key": f"{prefix.key}<uuid>",
            "ContentType": body.content_type,
            "bytes": body.size,
        },
        "InvokeEndpointAsync": request,
        "wait_timeout_seconds": args.wait_timeout,
    }


def run_local_async(args: argparse.Namespace) -> int:
    from endpoint_client.local_async import watch

    if not args.once:
        _progress(f"answering requests in {args.input_dir} into {args.output_dir} via {args.url}; Ctrl-C stops")
    # Ctrl-C stops the watcher even when it was started with SIGINT ignored (a background job of a script, nohup),
    # as `local` does (cli.run_local): Python leaves an inherited SIG_IGN in place, and the watcher would not stop.
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread (a test calling main()): signals cannot be handled there
        previous = None
    try:
        watch(
            args.input_dir,
            args.output_dir,
            args.url,
            once=args.once,
            poll_seconds=args.poll_interval,
            echo=lambda line: print(line, flush=True),
        )
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM (run_cli's Terminated): how a watcher is stopped, as `local`
        if args.once:
            raise
        _progress(f"stopping ({'SIGTERM' if type(stop).__name__ == 'Terminated' else 'interrupted'})")
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return 0
