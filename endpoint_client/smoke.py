"""Post-deployment smoke test of one stage, run by the pipeline's CodeBuild step after the stage deploys.

For every endpoint and every model of the stage (SmokePlan, written at synth): read the model's
config.pbtxt from its archive in the stage's artifact bucket, build a sample request from its input
shapes and data types, invoke the endpoint through the project's client (endpoint_client:
binary+JSON, `TargetModel` on multi-model endpoints, retries while a model answers
ModelNotReadyException), then check the output names and shapes against the config and time
`timed_calls` further calls against the latency bound. One line per model is printed, a JSON report
and a one-line summary (the approval's comment) are written, and any failure exits 1.

    python -m endpoint_client.smoke --plan-json "$SMOKE_PLAN" --bucket "$ARTIFACT_BUCKET" \
        --role-arn "$SMOKE_ROLE_ARN" --region "$SMOKE_REGION" --report-dir smoke-report
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import triton_to_np_dtype

from endpoint_client import EndpointClient, RetryPolicy, smoke_test
from endpoint_client.limits import MAX_PAYLOAD_BYTES
from endpoint_client.smoke_plan import ASYNC_WAIT_SECONDS, EndpointCheck, ModelCheck, SmokePlan
from endpoint_client.transport import SageMakerTransport
from model_build.atomic import write_atomically
from model_build.errors import ToolError

SUMMARY_LIMIT = 400  # CodePipeline approval comments (CustomData) hold 500 characters
SAMPLE_SEED = 0


class SmokeError(ToolError):
    """The smoke test could not even build a request (no config.pbtxt, an unusable data type)."""


# --- sample payloads from config.pbtxt -----------------------------------------------------------


def read_model_config(archive: IO[bytes], model_name: str, where: str) -> mc.ModelConfig:
    """`<model_name>/config.pbtxt` from a model archive, read as a stream (no seeking, no full download)."""
    wanted = {f"{model_name}/config.pbtxt", f"./{model_name}/config.pbtxt"}
    try:
        with tarfile.open(fileobj=archive, mode="r|*") as tar:
            for member in tar:
                if member.name in wanted and member.isfile():
                    reader = tar.extractfile(member)
                    text = reader.read().decode() if reader else ""
                    break
            else:
                raise SmokeError(f"{where}: the archive holds no {model_name}/config.pbtxt")
    except tarfile.TarError as error:
        raise SmokeError(f"{where}: not a readable model archive ({error})") from error
    try:
        return text_format.Parse(text, mc.ModelConfig())
    except text_format.ParseError as error:
        raise SmokeError(f"{where}: {model_name}/config.pbtxt is not a valid Triton config ({error})") from error


def triton_datatype(data_type: int) -> str:
    """ModelConfig's TYPE_FP32 -> the wire name FP32 (TYPE_STRING travels as BYTES)."""
    name = mc.DataType.Name(data_type).removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def _batch(config: mc.ModelConfig) -> list[int]:
    # With max_batch_size > 0 Triton prepends the batch axis to every input and output.
    return [1] if config.max_batch_size > 0 else []


def read_raw_input(path: str, limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """A sample file's bytes (config/pipeline.yaml smoke.raw_inputs), refused past one request's payload."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise SmokeError(f"smoke sample {path}: cannot be read ({error.strerror or error})") from error
    if len(data) > limit:
        raise SmokeError(f"smoke sample {path}: larger than one request's {limit} bytes")
    return data


def raw_tensor(config: mc.ModelConfig, name: str, data: bytes) -> np.ndarray:
    """`data` as the one element of BYTES input `name` (as `invoke --raw` sends a file)."""
    spec = next((s for s in config.input if s.name == name), None)
    if spec is None:
        inputs = [s.name for s in config.input]
        raise SmokeError(f"model {config.name!r} has no input {name!r} for its smoke sample (inputs: {inputs})")
    if triton_datatype(spec.data_type) != "BYTES" or any(d not in (-1, 1) for d in spec.dims):
        raise SmokeError(
            f"model {config.name!r} input {name!r} is {triton_datatype(spec.data_type)} {list(spec.dims)}: a smoke "
            "sample file is sent as one BYTES element, so the input must be BYTES with room for one element"
        )
    return np.full(_batch(config) + [1] * len(spec.dims), data, dtype=np.object_)


def sample_inputs(
    config: mc.ModelConfig, shape_hints: dict[str, list[int]] | None = None, raw: dict[str, bytes] | None = None
) -> dict[str, np.ndarray]:
    """One request with batch 1: `raw` files as given, other dynamic dims from `shape_hints`, else 1;
    deterministic values.

    Integers (token ids, masks) are zeros, which every embedding accepts; floats are uniform in
    [0, 1) from a fixed seed, so a model that turns them into NaN or Inf is caught.
    """
    hints = shape_hints or {}
    rng = np.random.default_rng(SAMPLE_SEED)
    tensors: dict[str, np.ndarray] = {name: raw_tensor(config, name, data) for name, data in (raw or {}).items()}
    for spec in config.input:
        if spec.optional or spec.name in tensors:
            continue
        hint = hints.get(spec.name)
        if hint is not None and len(hint) != len(spec.dims):
            raise SmokeError(
                f"model {config.name!r} input {spec.name!r}: shape hint {hint} has rank {len(hint)}, "
                f"config.pbtxt dims {list(spec.dims)} have rank {len(spec.dims)}"
            )
        dims = [d if d >= 0 else (hint[i] if hint else 1) for i, d in enumerate(spec.dims)]
        shape = _batch(config) + dims
        datatype = triton_datatype(spec.data_type)
        if datatype in ("INVALID", "BF16"):
            raise SmokeError(f"model {config.name!r} input {spec.name!r}: no sample for data type {datatype}")
        dtype = np.dtype(triton_to_np_dtype(datatype))
        if dtype == np.object_:
            tensors[spec.name] = np.full(shape, b"smoke", dtype=np.object_)
        elif np.issubdtype(dtype, np.floating):
            tensors[spec.name] = rng.random(shape).astype(dtype)
        else:
            tensors[spec.name] = np.zeros(shape, dtype=dtype)
    if not tensors:
        raise SmokeError(f"model {config.name!r}: config.pbtxt declares no required input")
    return tensors


def expected_output_shapes(config: mc.ModelConfig) -> dict[str, list[int]]:
    """Each output's shape as the client receives it (`dims`, after any reshape); -1 matches any size."""
    return {spec.name: _batch(config) + list(spec.dims) for spec in config.output}


def output_problems(outputs: dict[str, np.ndarray], expected: dict[str, list[int]]) -> list[str]:
    problems = []
    for name, shape in expected.items():
        if name not in outputs:
            problems.append(f"output {name!r} missing (got {', '.join(outputs) or 'none'})")
            continue
        actual = list(outputs[name].shape)
        if len(actual) != len(shape) or any(e >= 0 and e != a for e, a in zip(shape, actual, strict=False)):
            problems.append(f"output {name!r} has shape {actual}, config.pbtxt says {shape}")
    return problems


# --- running the checks ----------------------------------------------------------------------------


@dataclass
class ModelResult:
    endpoint: str
    model: str
    target_model: str | None
    passed: bool = False
    latencies_ms: list[float] = field(default_factory=list)
    max_latency_ms: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def worst_ms(self) -> float | None:
        return max(self.latencies_ms) if self.latencies_ms else None

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        timing = (
            f"p50 {statistics.median(self.latencies_ms):.0f} ms, max {self.worst_ms:.0f} ms "
            f"(bound {self.max_latency_ms:.0f} ms)"
            if self.latencies_ms
            else "not timed"
        )
        detail = f": {'; '.join(self.problems)}" if self.problems else ""
        return f"{verdict} {self.endpoint} {self.model}: {timing}{detail}"


@dataclass
class SmokeReport:
    stage: str
    results: list[ModelResult]

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    def summary(self) -> str:
        """One line for the approval comment: verdict, counts, worst latency, first failures."""
        ok = sum(r.passed for r in self.results)
        endpoints = len({r.endpoint for r in self.results})
        worst = max((r.worst_ms for r in self.results if r.worst_ms is not None), default=None)
        text = (
            f"{self.stage} smoke {'PASSED' if self.passed else 'FAILED'}: {ok}/{len(self.results)} models on "
            f"{endpoints} endpoint(s)" + (f", slowest call {worst:.0f} ms" if worst is not None else "")
        )
        failures = [f"{r.endpoint}/{r.model}: {r.problems[0]}" for r in self.results if r.problems]
        if failures:
            text += "; " + "; ".join(failures)
        return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 3] + "..."

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "passed": self.passed,
            "summary": self.summary(),
            "results": [{**asdict(r), "worst_ms": r.worst_ms} for r in self.results],
        }


ClientFactory = Callable[[EndpointCheck, ModelCheck], EndpointClient]
ConfigReader = Callable[[ModelCheck], mc.ModelConfig]


def check_model(
    client: EndpointClient,
    endpoint: EndpointCheck,
    model: ModelCheck,
    model_config: mc.ModelConfig,
    *,
    timed_calls: int,
    clock: Callable[[], float] = time.perf_counter,
) -> ModelResult:
    """One untimed call (a multi-model endpoint may load the model first), then `timed_calls` timed ones."""
    result = ModelResult(endpoint.name, model.name, model.target_model, max_latency_ms=endpoint.max_latency_ms)
    expected = expected_output_shapes(model_config)
    try:
        raw = {name: read_raw_input(path) for name, path in model.raw_inputs.items()}
        inputs = sample_inputs(model_config, model.shape_hints, raw)
        component = model.inference_component
        first = smoke_test(client, [(model.target_model, inputs)], inference_component=component)[0]
        result.problems.extend(output_problems(first.outputs, expected))
        for _ in range(timed_calls if not result.problems else 0):
            start = clock()
            client.invoke(inputs, target_model=model.target_model, inference_component=component)
            result.latencies_ms.append((clock() - start) * 1000)
    except ToolError as error:  # EndpointError, ModelNotReadyError after all retries, bad reply
        result.problems.append(str(error))
    worst = result.worst_ms
    if worst is not None and worst > endpoint.max_latency_ms:
        result.problems.append(f"slowest call took {worst:.0f} ms, above the {endpoint.max_latency_ms:.0f} ms bound")
    result.passed = not result.problems
    return result


def _check_one(
    plan: SmokePlan,
    endpoint: EndpointCheck,
    model: ModelCheck,
    client_for: ClientFactory,
    read_config: ConfigReader,
    clock: Callable[[], float],
) -> ModelResult:
    try:
        model_config = read_config(model)
        return check_model(
            client_for(endpoint, model),
            endpoint,
            model,
            model_config,
            # An asynchronous answer's time is queueing and S3 polling, not the model's latency: one call
            # checks it end to end (InvokeEndpointAsync, then the output object), untimed.
            timed_calls=0 if endpoint.async_input_prefix is not None else plan.timed_calls,
            clock=clock,
        )
    except ToolError as error:
        result = ModelResult(endpoint.name, model.name, model.target_model, max_latency_ms=endpoint.max_latency_ms)
        result.problems.append(str(error))
        return result


def run_plan(
    plan: SmokePlan,
    client_for: ClientFactory,
    read_config: ConfigReader,
    *,
    echo: Callable[[str], None] = print,
    clock: Callable[[], float] = time.perf_counter,
) -> SmokeReport:
    """Every model of every endpoint; a failure is recorded and the run goes on, so the report is whole.

    Asynchronous models are checked together, in threads started first (each submits its request at once and
    then waits up to ASYNC_WAIT_SECONDS; an endpoint scaled to zero starts cold), while the real-time models are
    checked one after the other; so the step waits about one asynchronous wait in all, not one per model
    (stacks/pipeline_steps.py sizes its timeout on that). Results keep the plan's order."""
    pairs = [(endpoint, model) for endpoint in plan.endpoints for model in endpoint.models]
    waiting = [(i, e, m) for i, (e, m) in enumerate(pairs) if e.async_input_prefix is not None]
    results: list[ModelResult | None] = [None] * len(pairs)
    with ThreadPoolExecutor(max_workers=max(len(waiting), 1), thread_name_prefix="smoke-async") as pool:
        futures = {i: pool.submit(_check_one, plan, e, m, client_for, read_config, clock) for i, e, m in waiting}
        for i, (endpoint, model) in enumerate(pairs):
            if i not in futures:
                results[i] = _check_one(plan, endpoint, model, client_for, read_config, clock)
                echo(results[i].line())
        for i, future in futures.items():
            results[i] = future.result()
            echo(results[i].line())
    return SmokeReport(plan.stage, [r for r in results if r is not None])


def write_report(report: SmokeReport, directory: Path) -> None:
    """report.json and summary.txt, each written whole."""
    for name, text in (("report.json", json.dumps(report.to_dict(), indent=2)), ("summary.txt", report.summary())):
        write_atomically(directory / name, (text + "\n").encode())


# --- AWS wiring (CodeBuild) -------------------------------------------------------------------------


def aws_session(role_arn: str | None, region: str | None, stage: str):
    import boto3

    session = boto3.Session(region_name=region)
    if not role_arn:
        return session
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        credentials = session.client("sts").assume_role(RoleArn=role_arn, RoleSessionName=f"triton-smoke-{stage}")[
            "Credentials"
        ]
    except (BotoCoreError, ClientError) as error:
        raise SmokeError(
            f"cannot assume {role_arn} ({error}); is the stage's SmokeAccess stack deployed, and does it trust "
            "the pipeline's account?"
        ) from error
    return boto3.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        region_name=region,
    )


def client_factory(
    plan: SmokePlan,
    runtime_client,
    retry: RetryPolicy | None = None,
    *,
    s3_client=None,
    bucket: str | None = None,
    async_wait_seconds: float = ASYNC_WAIT_SECONDS,
) -> ClientFactory:
    """Clients on a `sagemaker-runtime` boto3 client, retrying ModelNotReadyException `plan.attempts` times.

    Asynchronous endpoints (`async_input_prefix`) are called through InvokeEndpointAsync: the request is uploaded
    to that prefix of `bucket` with `s3_client`, and the output object awaited (endpoint_client.async_invoke)."""
    retry = retry or RetryPolicy(attempts=plan.attempts, base_delay=2.0, max_delay=30.0)

    def client_for(endpoint: EndpointCheck, model: ModelCheck) -> EndpointClient:
        if endpoint.async_input_prefix is not None:
            if s3_client is None or not bucket:
                raise SmokeError(f"endpoint {endpoint.name} is asynchronous: the smoke test needs the stage's bucket")
            from endpoint_client.async_invoke import AsyncInvoker, AsyncSageMakerTransport, S3Location

            invoker = AsyncInvoker(
                endpoint.deployed_name,
                S3Location(bucket, endpoint.async_input_prefix),
                runtime=runtime_client,
                s3=s3_client,
                progress=lambda line: print(f"  {endpoint.name}: {line}", flush=True),
            )
            transport = AsyncSageMakerTransport(invoker, wait_timeout=async_wait_seconds, model_name=model.name)
            return EndpointClient(transport, retry=retry)
        transport = SageMakerTransport(endpoint.deployed_name, client=runtime_client, model_name=model.name)
        return EndpointClient(transport, retry=retry)

    return client_for


def s3_config_reader(s3_client, bucket: str) -> ConfigReader:
    """Each model's config.pbtxt, streamed from its archive in the stage's artifact bucket."""

    def read_config(model: ModelCheck) -> mc.ModelConfig:
        where = f"s3://{bucket}/{model.artifact_key}"
        try:
            body = s3_client.get_object(Bucket=bucket, Key=model.artifact_key)["Body"]
        except Exception as error:  # botocore ClientError / BotoCoreError: no such key, access denied
            raise SmokeError(f"{where}: cannot read the model archive ({error})") from error
        with body:
            return read_model_config(body, model.name, where)

    return read_config


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m endpoint_client.smoke", description=__doc__.split("\n")[0])
    parser.add_argument("--plan-json", required=True, help="the SmokePlan JSON (the step's SMOKE_PLAN)")
    parser.add_argument("--bucket", required=True, help="the stage's artifact bucket (holds each config.pbtxt)")
    parser.add_argument("--role-arn", help="role in the stage's account that may invoke its endpoints")
    parser.add_argument("--region", help="the stage's region (default: the environment's)")
    parser.add_argument("--report-dir", type=Path, default=Path("smoke-report"))
    args = parser.parse_args(argv)
    try:
        plan = SmokePlan.from_json(args.plan_json)
        session = aws_session(args.role_arn, args.region or None, plan.stage)
        s3 = session.client("s3")
        client_for = client_factory(plan, session.client("sagemaker-runtime"), s3_client=s3, bucket=args.bucket)
        report = run_plan(plan, client_for, s3_config_reader(s3, args.bucket))
        write_report(report, args.report_dir)
    except (ToolError, ValueError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    print(report.summary())
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
