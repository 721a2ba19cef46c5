"""The smoke test of an asynchronous endpoint (issue #26 part 1): InvokeEndpointAsync, then the output object.

Sources: botocore's sagemaker-runtime service model, operation InvokeEndpointAsync (InputLocation, ContentType;
the reply names OutputLocation and FailureLocation), which botocore's Stubber validates every call against;
SageMaker Developer Guide "Invoke an Asynchronous Endpoint" (the payload is uploaded to S3 first).
"""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from google.protobuf import text_format
from synth_helpers import PROJECT_ROOT, SHIPPED_CONFIG_DIR
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client import smoke
from endpoint_client.errors import EndpointError
from endpoint_client.smoke import client_factory, run_plan
from endpoint_client.smoke_plan import EndpointCheck, ModelCheck, SmokePlan
from stage_config.async_paths import async_prefixes

ADD_SUB = text_format.Parse(
    (PROJECT_ROOT / "examples" / "models" / "add_sub" / "config.pbtxt").read_text(), mc.ModelConfig()
)
BUCKET = "stage-bucket"
PREFIX = async_prefixes("image").input
OUTPUT = f"s3://{BUCKET}/{async_prefixes('image').output}abc.out"
FAILURE = f"s3://{BUCKET}/{async_prefixes('image').failure}abc-error.out"
ANSWER = {
    "model_name": "add_sub",
    "outputs": [
        {"name": name, "datatype": "FP32", "shape": [1, 4], "data": [0.5] * 4} for name in ("OUTPUT0", "OUTPUT1")
    ],
}


def _clients() -> tuple[Any, Any]:
    options = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "y"}
    return boto3.client("sagemaker-runtime", **options), boto3.client("s3", **options)


def _there(s3_stub: Stubber, uri: str) -> None:
    """The object at `uri` is listed under its exact key (the smoke role may list only the answer prefixes)."""
    key = uri.removeprefix(f"s3://{BUCKET}/")
    s3_stub.add_response(
        "list_objects_v2", {"Contents": [{"Key": key}], "KeyCount": 1}, {"Bucket": BUCKET, "Prefix": key, "MaxKeys": 1}
    )


def _plan(prefix: str | None = PREFIX) -> SmokePlan:
    endpoint = EndpointCheck(
        "image", "async-image", 100.0, [ModelCheck("add_sub", "k", None)], async_input_prefix=prefix
    )
    return SmokePlan("async", timed_calls=3, attempts=2, endpoints=[endpoint])


def test_an_async_endpoint_is_called_through_invoke_endpoint_async_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upload under the endpoint's input prefix, InvokeEndpointAsync, wait for the output object; one untimed call
    (an answer's time is queueing and polling, not the model's latency)."""
    monkeypatch.setattr("endpoint_client.async_invoke.time.sleep", lambda _: None)
    runtime, s3 = _clients()
    answer = json.dumps(ANSWER).encode()
    puts: list[dict] = []
    s3.meta.events.register("before-parameter-build.s3.PutObject", lambda params, **_: puts.append(dict(params)))
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        s3_stub.add_response("put_object", {"ETag": '"e"'})
        runtime_stub.add_response(
            "invoke_endpoint_async",
            {"InferenceId": "abc", "OutputLocation": OUTPUT, "FailureLocation": FAILURE},
        )
        _there(s3_stub, OUTPUT)
        s3_stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(answer), len(answer))})
        plan = _plan()
        report = run_plan(
            plan, client_factory(plan, runtime, s3_client=s3, bucket=BUCKET), lambda model: ADD_SUB, echo=lambda _: None
        )
        runtime_stub.assert_no_pending_responses()
    assert report.passed, report.summary()
    assert report.results[0].latencies_ms == []
    assert puts[0]["Bucket"] == BUCKET and puts[0]["Key"].startswith(PREFIX)


def test_a_failure_object_fails_the_smoke_test_with_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("endpoint_client.async_invoke.time.sleep", lambda _: None)
    runtime, s3 = _clients()
    text = b"Received server error (500) from primary: inference failed"
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        s3_stub.add_response("put_object", {"ETag": '"e"'})
        runtime_stub.add_response(
            "invoke_endpoint_async", {"InferenceId": "abc", "OutputLocation": OUTPUT, "FailureLocation": FAILURE}
        )
        s3_stub.add_response("list_objects_v2", {"KeyCount": 0})
        _there(s3_stub, FAILURE)
        s3_stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(text), len(text))})
        plan = _plan()
        report = run_plan(
            plan, client_factory(plan, runtime, s3_client=s3, bucket=BUCKET), lambda model: ADD_SUB, echo=lambda _: None
        )
    assert not report.passed
    assert "inference failed" in report.results[0].problems[0]


def test_without_the_bucket_an_async_endpoint_fails_clearly() -> None:
    runtime, _ = _clients()
    plan = _plan()
    report = run_plan(plan, client_factory(plan, runtime), lambda model: ADD_SUB, echo=lambda _: None)
    assert not report.passed and "needs the stage's bucket" in report.results[0].problems[0]


def test_the_plan_names_the_input_prefix_only_for_async_endpoints() -> None:
    """Real-time endpoints' plans serialise as before (the pipeline template unchanged); async ones round-trip."""
    realtime = _plan(prefix=None)
    assert "async_input_prefix" not in json.loads(realtime.to_json())["endpoints"][0]
    assert SmokePlan.from_json(_plan().to_json()) == _plan()


def test_the_async_example_stage_is_smoke_tested_asynchronously() -> None:
    """examples/config/async.yaml: its endpoint's check carries the input prefix of stage_config/async_paths.py."""
    from stacks.pipeline_steps import smoke_plan
    from stage_config import load_stage
    from stage_config.pipeline import PipelineConfig

    config = load_stage("async", PROJECT_ROOT / "examples" / "config")
    pipeline = PipelineConfig.model_validate(
        {"name": "p", "source": {"codecommit_repository": "r"}, "stages": [{"name": "async"}]}
    )
    plan = smoke_plan(config, pipeline)
    prefixes = {e.name: e.async_input_prefix for e in plan.endpoints}
    assert prefixes == {e.name: async_prefixes(e.name).input for e in config.endpoints if e.async_inference}
    assert smoke.ASYNC_WAIT_SECONDS >= 900  # InvokeEndpointAsync's default InvocationTimeoutSeconds


class _WaitsForTheOthers:
    """A client whose call returns only once `barrier.parties` calls are in flight (BrokenBarrierError otherwise)."""

    def __init__(self, barrier: threading.Barrier, calls: list[str], name: str) -> None:
        self.barrier, self.calls, self.name = barrier, calls, name
        self.transport = self

    def describe(self, target_model: str | None) -> str:
        return f"endpoint {self.name}"

    def invoke(self, inputs, *, target_model=None, inference_component=None):
        self.calls.append(self.name)
        self.barrier.wait(timeout=20)
        raise EndpointError(self.describe(None), "answered in the test")


def test_async_requests_are_all_in_flight_before_any_answer_is_awaited() -> None:
    """An asynchronous answer may take InvokeEndpointAsync's default InvocationTimeoutSeconds (900 s, botocore
    sagemaker-runtime model) plus a cold start from zero instances ("Autoscale an asynchronous endpoint"), so the
    smoke test submits every asynchronous request before waiting and waits for them together: two async endpoints
    are both in flight at once (a sequential run would break the barrier); results keep the plan's order."""
    barrier, calls = threading.Barrier(2), []
    endpoints = [
        EndpointCheck(name, f"async-{name}", 100.0, [ModelCheck("add_sub", "k", None)], async_input_prefix=PREFIX)
        for name in ("one", "two")
    ]
    plan = SmokePlan("async", timed_calls=3, attempts=1, endpoints=endpoints)
    report = run_plan(
        plan,
        lambda endpoint, model: _WaitsForTheOthers(barrier, calls, endpoint.name),
        lambda model: ADD_SUB,
        echo=lambda _: None,
    )
    assert sorted(calls) == ["one", "two"]
    assert [r.endpoint for r in report.results] == ["one", "two"]
    assert all("answered in the test" in r.problems[0] for r in report.results)


def test_the_smoke_step_timeout_covers_the_async_wait_within_codebuilds_limit() -> None:
    """botocore codebuild model, CreateProject timeoutInMinutes (shape BuildTimeOut): the limits the step's timeout
    is kept within; a stage with an asynchronous endpoint gets its 30 minutes plus ASYNC_WAIT_SECONDS in whole
    minutes (the answers are awaited together, so once), one without keeps 30 (pipeline template unchanged)."""
    import botocore.session

    from stacks import pipeline_steps
    from stage_config import load_stage

    shape = botocore.session.get_session().get_service_model("codebuild").shape_for("BuildTimeOut")
    assert pipeline_steps.codebuild_timeout_limits() == (shape.metadata["min"], shape.metadata["max"])
    asynchronous = load_stage("async", PROJECT_ROOT / "examples" / "config")
    realtime = load_stage("dev", SHIPPED_CONFIG_DIR)  # as shipped: no asynchronous endpoint
    minutes = pipeline_steps.smoke_timeout_minutes(asynchronous)
    assert minutes * 60 >= pipeline_steps.SMOKE_MINUTES * 60 + smoke.ASYNC_WAIT_SECONDS
    assert minutes <= shape.metadata["max"]
    assert pipeline_steps.smoke_timeout_minutes(realtime) == pipeline_steps.SMOKE_MINUTES == 30


ASYNC_PROBE = """
import json, sys
before = set(sys.modules)
import endpoint_client.async_invoke, endpoint_client.async_body  # noqa: F401
print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))
"""


def test_the_async_path_imports_only_what_the_smoke_step_installs() -> None:
    """The smoke step installs boto3, numpy and tritonclient only (tests/pipeline/test_smoke_imports.py): the async
    client the smoke program loads for an asynchronous endpoint needs nothing more (no config schema, no CDK)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", ASYNC_PROBE], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = set(json.loads(result.stdout))
    assert not loaded & {"aws_cdk", "jsii", "pydantic", "yaml", "stage_config", "stacks", "triton_cdk"}, loaded
