"""`python -m endpoint_client`: `invoke` an endpoint, or serve a packaged model as a `local` endpoint.

The only place that catches: known errors print `ERROR: ...` to stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from endpoint_client import cost as cost_command
from endpoint_client import inputs as input_files
from endpoint_client import presets
from endpoint_client import recommend as recommend_command
from endpoint_client.client import EndpointClient
from endpoint_client.codec import Encoding
from endpoint_client.errors import InvalidInputError
from endpoint_client.retry import RetryPolicy
from endpoint_client.transport import INFERENCE_COMPONENT_NAME
from endpoint_client.triton_install import DEFAULT_TRITON_ENV
from model_build.atomic import atomic_file
from model_build.cli import run_cli

PRINTED_VALUES = 64  # larger outputs print their first values only; --save-dir keeps them whole


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0-65535; 0 picks a free one)")
    return int(text)


def _target_model(text: str) -> str:
    """InvokeEndpoint's TargetModel rule (botocore sagemaker-runtime model, TargetModelHeader:
    1-1024 characters, pattern \\A\\S[\\p{Print}]*\\z): no line breaks that could forge a header."""
    if not 1 <= len(text) <= 1024 or text[0].isspace() or not text.isprintable():
        raise argparse.ArgumentTypeError(
            f"{text[:100]!r} is not a target model: 1-1024 printable characters, not starting with a space"
        )
    return text


def _component_name(text: str) -> str:
    if not INFERENCE_COMPONENT_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an inference component name (1-63 letters, digits and inner hyphens)"
        )
    return text


def add_request_arguments(parser: argparse.ArgumentParser) -> None:
    """The request's inputs, encoding, outputs and --save-dir: `invoke` and `invoke-async` take the same."""
    parser.add_argument(
        "--encoding",
        choices=[e.value for e in Encoding],
        default=Encoding.BINARY.value,
        help="binary+json (default, fast) or plain KServe v2 JSON",
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy|FILE.npz",
        help="a tensor from a .npy file, or every array of a .npz (repeatable)",
    )
    parser.add_argument(
        "--tensor",
        action="append",
        default=[],
        metavar="NAME=DTYPE:SHAPE:VALUES",
        help="an inline tensor, e.g. INPUT0=FP32:1x4:1,2,3,4 (repeatable)",
    )
    parser.add_argument(
        "--inputs-json",
        type=Path,
        metavar="FILE",
        help='a KServe v2 request: {"inputs": [{"name", "datatype", "shape", "data"}]}',
    )
    parser.add_argument(
        "--raw",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a file's bytes as a one-element BYTES tensor, e.g. image=cat.jpg (repeatable)",
    )
    parser.add_argument(
        "--raw-shape",
        default="1",
        metavar="SHAPE",
        help="shape of each --raw tensor, one element in all (default 1; 1x1 for a batching model with dims [1])",
    )
    parser.add_argument("--preset", choices=presets.PRESETS, help="build inputs for a default model")
    parser.add_argument(
        "--image", type=Path, help="image for --preset resnet50/yolov5s (PPM, .npy, or any format with Pillow)"
    )
    parser.add_argument("--text", help="text for --preset bert_base")
    parser.add_argument(
        "--rename",
        action="append",
        default=[],
        type=_key_value,
        metavar="OLD=NEW",
        help="rename an input (e.g. a preset's default name to your model's)",
    )
    parser.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="NAME",
        help="ask for this output only (repeatable; default: all)",
    )
    parser.add_argument("--save-dir", type=Path, help="write every output to DIR/<name>.npy")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m endpoint_client",
        description="Invoke Triton models on SageMaker endpoints, or serve a model.tar.gz locally as SageMaker would.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    invoke = commands.add_parser("invoke", help="send one inference request and print the outputs")
    where = invoke.add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint-name", help="SageMaker endpoint (boto3 sagemaker-runtime invoke_endpoint)")
    where.add_argument("--url", help="a local endpoint: the http://127.0.0.1:PORT `make local` (or `local`) prints")
    invoke.add_argument("--region", help="AWS region of the endpoint (default: boto3's configuration)")
    target = invoke.add_mutually_exclusive_group()
    target.add_argument(
        "--target-model", type=_target_model, help="multi-model endpoints: the model archive, e.g. resnet50.tar.gz"
    )
    target.add_argument(
        "--inference-component",
        type=_component_name,
        help="endpoints hosting inference components: the component (InvokeEndpoint's InferenceComponentName)",
    )
    invoke.add_argument("--model-name", help="single-model endpoints: the model's name, used in error messages")
    add_request_arguments(invoke)
    invoke.add_argument(
        "--attempts",
        type=_positive_int,
        default=6,
        help="calls in all while the model is not ready (ModelNotReadyException); default 6",
    )
    invoke.set_defaults(run=run_invoke)

    local = commands.add_parser("local", help="serve a model.tar.gz with a real Triton on 127.0.0.1, like SageMaker")
    local.add_argument("archive", type=Path, nargs="?", help="model.tar.gz from `python -m model_build package`")
    local.add_argument(
        "--model-name", help="SAGEMAKER_TRITON_DEFAULT_MODEL_NAME (default: the archive's only model folder)"
    )
    local.add_argument(
        "--multi-model",
        action="store_true",
        help="start as a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true); load archives with --load",
    )
    local.add_argument(
        "--load",
        action="append",
        default=[],
        type=_key_value,
        metavar="TARGET=ARCHIVE",
        help="multi-model: load ARCHIVE as TARGET (e.g. add_sub.tar.gz=build/add_sub.tar.gz)",
    )
    local.add_argument("--port", type=_port, default=8080, help="loopback port (default 8080; 0 picks a free one)")
    local.add_argument(
        "--inference-component",
        type=_component_name,
        help="play this inference component: requests may name it (invoke --inference-component) as on SageMaker",
    )
    local.add_argument(
        "--host",
        default="127.0.0.1",
        help="loopback address to listen on (default 127.0.0.1; ::1 or localhost); others are refused",
    )
    local.add_argument(
        "--env",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="container environment, e.g. SAGEMAKER_TRITON_LOG_VERBOSE=false (repeatable)",
    )
    local.add_argument(
        "--triton-env",
        type=Path,
        default=DEFAULT_TRITON_ENV,
        help="venv with nvidia-pytriton (default .venv-triton, made by `make .venv-triton/.stamp`)",
    )
    local.add_argument("--startup-timeout", type=float, default=120.0, help="seconds to wait for /ping (default 120)")
    local.add_argument(
        "--stage-config",
        type=Path,
        help="the stage config the archive was packaged from (model_build package --config): its TensorRT "
        "models' shape ranges are enforced as their engines would (default: Triton's own checks only)",
    )
    local.set_defaults(run=run_local)

    cost = commands.add_parser("cost", help="what a stage's endpoints and GPU builds cost (docs/performance.md)")
    cost_command.add_arguments(cost)
    cost.set_defaults(run=cost_command.run)
    recommend = commands.add_parser("recommend", help="Inference Recommender load tests (docs/performance.md)")
    recommend_command.add_arguments(recommend)
    recommend.set_defaults(run=recommend_command.run)
    from endpoint_client import build_check_cli  # the build check (docs/build.md "Build report"); the same options

    report = commands.add_parser("build-report", help="prove and measure a built TensorRT engine (docs/build.md)")
    build_check_cli.add_arguments(report)
    report.set_defaults(run=build_check_cli.run)
    from endpoint_client.loadtest_cli import add_loadtest_parser  # imports this module: registered once it is loaded

    add_loadtest_parser(commands)
    from endpoint_client.async_cli import add_async_parsers  # imports this module too: registered once loaded

    add_async_parsers(commands)
    return parser


def collect_inputs(args: argparse.Namespace) -> dict[str, np.ndarray]:
    groups = [input_files.load_array_file(spec) for spec in args.input]
    groups += [dict([input_files.parse_tensor_spec(spec)]) for spec in args.tensor]
    if args.raw:
        shape = input_files.parse_shape(args.raw_shape, "--raw-shape")
        groups += [input_files.load_raw_file(spec, shape) for spec in args.raw]
    if args.inputs_json:
        groups.append(input_files.load_v2_json_file(args.inputs_json))
    if args.preset:
        groups.append(_preset_inputs(args))
    elif args.image or args.text:
        raise InvalidInputError("--image and --text go with --preset (resnet50, yolov5s or bert_base)")
    tensors = input_files.merge(*groups)
    for old, new in args.rename:
        if old not in tensors:
            raise InvalidInputError(f"--rename {old}={new}: there is no input {old!r} (inputs: {', '.join(tensors)})")
        tensors[new] = tensors.pop(old)
    return tensors


def _preset_inputs(args: argparse.Namespace) -> dict[str, np.ndarray]:
    if args.preset in presets.IMAGE_PRESETS:
        if not args.image or args.text:
            raise InvalidInputError(f"--preset {args.preset} takes --image (and no --text)")
        return presets.IMAGE_PRESETS[args.preset](presets.load_image(args.image))
    if not args.text or args.image:
        raise InvalidInputError(f"--preset {args.preset} takes --text (and no --image)")
    tensors, tokenizer = presets.bert_base_inputs(args.text)
    if tokenizer == "fallback":
        print(
            "note: transformers' bert-base-uncased tokenizer is not available here; using the deterministic "
            "fallback tokenizer (valid shapes, meaningless ids)",
            file=sys.stderr,
        )
    return tensors


def describe_output(array: np.ndarray) -> dict[str, object]:
    flat = array.reshape(-1)
    values = [v.decode(errors="replace") if isinstance(v, bytes) else v for v in flat[:PRINTED_VALUES].tolist()]
    described: dict[str, object] = {"dtype": str(array.dtype), "shape": list(array.shape)}
    described["data" if flat.size <= PRINTED_VALUES else f"first_{PRINTED_VALUES}"] = values
    return described


def format_report(model: str, outputs: dict[str, np.ndarray]) -> str:
    """JSON, one line per output so that a small answer reads at a glance."""
    lines = [f"    {json.dumps(name)}: {json.dumps(describe_output(array))}" for name, array in outputs.items()]
    return "{\n" + f'  "model": {json.dumps(model)},\n  "outputs": {{\n' + ",\n".join(lines) + "\n  }\n}"


def prepare_save_dir(directory: Path) -> None:
    """Create --save-dir and check it is writable before the request is sent, not after the inference."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InvalidInputError(f"--save-dir {directory}: cannot create it ({error.strerror})") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InvalidInputError(f"--save-dir {directory}: not writable")


def _output_file_name(name: str) -> str:
    """The reply names the outputs: a name must stay one file in --save-dir (no '/', '..', absolute)."""
    if not name or name in (".", "..") or any(c in name for c in "/\\\x00") or len(name) > 200:
        raise InvalidInputError(
            f"the reply has an output named {name[:100]!r}, which is not a plain file name; nothing was saved"
        )
    return f"{name}.npy"


def save_outputs(outputs: dict[str, np.ndarray], directory: Path) -> None:
    files = {name: _output_file_name(name) for name in outputs}  # every name checked before any write
    prepare_save_dir(directory)
    for name, array in outputs.items():
        with atomic_file(directory / files[name]) as stream:
            np.save(stream, array, allow_pickle=array.dtype == np.object_)


def run_invoke(args: argparse.Namespace) -> int:
    if args.save_dir:
        prepare_save_dir(args.save_dir)
    tensors = collect_inputs(args)
    options = {"encoding": Encoding(args.encoding), "retry": RetryPolicy(attempts=args.attempts)}
    if args.url:
        client = EndpointClient.for_url(args.url, model_name=args.model_name, **options)
    else:
        client = EndpointClient.for_endpoint(
            args.endpoint_name, region=args.region, model_name=args.model_name, **options
        )
    outputs = client.invoke(
        tensors, target_model=args.target_model, inference_component=args.inference_component, outputs=args.output
    )
    if args.save_dir:
        save_outputs(outputs, args.save_dir)
    print(format_report(client.transport.describe(args.target_model or args.inference_component), outputs))
    return 0


class _Stop(Exception):
    pass


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def run_local(args: argparse.Namespace) -> int:
    # the invoke path needs none of this
    from endpoint_client.local_endpoint import LocalEndpoint, bind_address
    from endpoint_client.onnx_standin import substitution_notice

    if args.multi_model == (args.archive is not None):
        raise InvalidInputError("give an ARCHIVE, or --multi-model (with --load TARGET=ARCHIVE) instead")
    if args.load and not args.multi_model:
        raise InvalidInputError("--load is for --multi-model endpoints")
    if args.inference_component and args.multi_model:
        raise InvalidInputError("--inference-component is for single-model endpoints (SageMaker's are)")
    bind_address(args.host)  # refused before anything is extracted or started
    environment = dict(args.env)
    if args.model_name:
        environment["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] = args.model_name
    endpoint = LocalEndpoint(
        args.archive,
        environment=environment,
        multi_model=args.multi_model,
        port=args.port,
        host=args.host,
        inference_component=args.inference_component,
        triton_env=args.triton_env,
        startup_timeout=args.startup_timeout,
        stage_config=args.stage_config,
    )
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        endpoint.start()
        for target, archive in args.load:
            endpoint.load_model(target, Path(archive))
        if args.multi_model:
            served = f"multi-model: {', '.join(t for t, _ in args.load) or 'no model loaded yet'}"
        else:
            served = endpoint.plan.default_model if endpoint.plan else "?"
            steps = endpoint.ensemble_steps(served)
            if steps:
                served += f" (an ensemble of {', '.join(steps)})"
        notice = substitution_notice(endpoint.substitutions)
        if notice:
            print(notice, file=sys.stderr)
        print(f"serving {served} (log: {endpoint.log_path}); Ctrl-C stops", file=sys.stderr)
        if endpoint.metrics_url:  # Triton's Prometheus metrics, loopback only (issue #26 part 3)
            print(f"Triton metrics: {endpoint.metrics_url}", file=sys.stderr)
        print(endpoint.url, flush=True)
        while endpoint.process is not None and endpoint.process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):  # still serving
                endpoint.process.wait(timeout=1)
        code = endpoint.process.returncode if endpoint.process is not None else 0
        print(f"ERROR: tritonserver exited with code {code}; log ends:\n{endpoint.log_tail()}", file=sys.stderr)
        return 1
    except _Stop as stop:
        print(f"stopping ({stop})", file=sys.stderr)
        return 0
    finally:
        endpoint.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(build_parser(), argv)
