"""The smoke test's payloads, checks and report, against recorded replies and a real CPU Triton."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from synth_helpers import PROJECT_ROOT
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client import EndpointClient, RetryPolicy, smoke
from endpoint_client.codec import EncodedRequest
from endpoint_client.errors import EndpointError, ModelNotReadyError
from endpoint_client.smoke import (
    SmokeError,
    check_model,
    expected_output_shapes,
    output_problems,
    read_model_config,
    run_plan,
    s3_config_reader,
    sample_inputs,
    write_report,
)
from endpoint_client.smoke_plan import EndpointCheck, ModelCheck, SmokePlan
from endpoint_client.transport import Reply
from model_build.package import write_model_archive

EXAMPLE_MODEL = PROJECT_ROOT / "examples" / "models" / "add_sub"

BERT_LIKE = """
name: "bert_base"
platform: "tensorrt_plan"
max_batch_size: 64
input { name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] }
input { name: "attention_mask" data_type: TYPE_INT32 dims: [ -1 ] }
input { name: "note" data_type: TYPE_STRING dims: [ 1 ] optional: true }
output { name: "logits" data_type: TYPE_FP16 dims: [ -1, 2 ] }
"""
NO_BATCH = """
name: "tabular"
max_batch_size: 0
input { name: "features" data_type: TYPE_FP32 dims: [ 3, 4 ] }
input { name: "tag" data_type: TYPE_STRING dims: [ 2 ] }
output { name: "score" data_type: TYPE_FP32 dims: [ 3 ] }
"""


def _config(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


class _Unseekable(io.RawIOBase):
    """An S3 StreamingBody stand-in: read() only."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


@pytest.fixture(scope="module")
def add_sub_archive(tmp_path_factory) -> Path:
    archive = tmp_path_factory.mktemp("smoke-package") / "add_sub.tar.gz"
    write_model_archive(EXAMPLE_MODEL, archive)
    return archive


# --- payloads and shape checks ---------------------------------------------------------------------


def test_sample_inputs_follow_config_dims_batch_and_types():
    inputs = sample_inputs(_config(BERT_LIKE), {"input_ids": [128], "attention_mask": [128]})
    assert set(inputs) == {"input_ids", "attention_mask"}  # the optional input is left out
    assert inputs["input_ids"].shape == (1, 128) and inputs["input_ids"].dtype == np.int32
    assert not inputs["input_ids"].any()  # zeros: valid token ids for any vocabulary
    unhinted = sample_inputs(_config(BERT_LIKE))
    assert unhinted["attention_mask"].shape == (1, 1)


def test_sample_inputs_without_batching_and_with_bytes():
    inputs = sample_inputs(_config(NO_BATCH))
    assert inputs["features"].shape == (3, 4) and inputs["features"].dtype == np.float32
    assert np.all((inputs["features"] >= 0) & (inputs["features"] < 1))
    assert inputs["tag"].dtype == np.object_ and list(inputs["tag"]) == [b"smoke", b"smoke"]
    np.testing.assert_array_equal(sample_inputs(_config(NO_BATCH))["features"], inputs["features"])  # deterministic


def test_shape_hint_of_wrong_rank_is_refused():
    with pytest.raises(SmokeError, match=r"input 'input_ids': shape hint \[1, 128\] has rank 2, config.pbtxt dims"):
        sample_inputs(_config(BERT_LIKE), {"input_ids": [1, 128]})


def test_config_without_inputs_is_refused():
    with pytest.raises(SmokeError, match="declares no required input"):
        sample_inputs(_config('name: "x" output { name: "y" data_type: TYPE_FP32 dims: [1] }'))


def test_output_shapes_match_with_wildcards_and_report_each_problem():
    expected = expected_output_shapes(_config(BERT_LIKE))
    assert expected == {"logits": [1, -1, 2]}
    assert output_problems({"logits": np.zeros((1, 7, 2))}, expected) == []
    assert output_problems({"logits": np.zeros((1, 7, 3))}, expected) == [
        "output 'logits' has shape [1, 7, 3], config.pbtxt says [1, -1, 2]"
    ]
    assert output_problems({"logits": np.zeros((7, 2))}, expected) == [
        "output 'logits' has shape [7, 2], config.pbtxt says [1, -1, 2]"
    ]
    assert output_problems({"other": np.zeros(1)}, expected) == ["output 'logits' missing (got other)"]


def test_config_is_streamed_from_a_packaged_archive(add_sub_archive):
    config = read_model_config(_Unseekable(add_sub_archive.read_bytes()), "add_sub", "archive")
    assert config.name == "add_sub" and [i.name for i in config.input] == ["INPUT0", "INPUT1"]
    with pytest.raises(SmokeError, match=r"s3://b/k: the archive holds no resnet50/config.pbtxt"):
        read_model_config(_Unseekable(add_sub_archive.read_bytes()), "resnet50", "s3://b/k")
    with pytest.raises(SmokeError, match=r"s3://b/k: not a readable model archive"):
        read_model_config(_Unseekable(b"not a tar"), "add_sub", "s3://b/k")


def test_config_is_read_from_the_stage_bucket(add_sub_archive):
    import boto3
    from moto import mock_aws

    model = ModelCheck("add_sub", "models/add_sub/abc/model.tar.gz", None)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="stage-bucket")
        s3.put_object(Bucket="stage-bucket", Key=model.artifact_key, Body=add_sub_archive.read_bytes())
        assert s3_config_reader(s3, "stage-bucket")(model).name == "add_sub"
        missing = ModelCheck("add_sub", "models/add_sub/def/model.tar.gz", None)
        with pytest.raises(SmokeError, match=r"s3://stage-bucket/models/add_sub/def/model.tar.gz: cannot read"):
            s3_config_reader(s3, "stage-bucket")(missing)


# --- pass/fail logic against recorded replies ------------------------------------------------------

ADD_SUB = _config((EXAMPLE_MODEL / "config.pbtxt").read_text())


def _reply(outputs: dict[str, list[int]]) -> Reply:
    """A KServe v2 JSON reply as Triton writes it."""
    body = {
        "model_name": "add_sub",
        "outputs": [
            {"name": n, "datatype": "FP32", "shape": s, "data": [0.5] * int(np.prod(s))} for n, s in outputs.items()
        ],
    }
    return Reply(json.dumps(body).encode(), "application/json")


class RecordedTransport:
    """Plays back replies (or raises errors) in order; records what was sent."""

    def __init__(self, *replies) -> None:
        self.replies = list(replies)
        self.sent: list[tuple[EncodedRequest, str | None]] = []

    def send(self, request: EncodedRequest, *, target_model: str | None = None) -> Reply:
        self.sent.append((request, target_model))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def describe(self, target_model: str | None) -> str:
        return target_model or "endpoint e"


def _client(transport) -> EndpointClient:
    return EndpointClient(transport, retry=RetryPolicy(attempts=3, sleep=lambda _: None))


ENDPOINT = EndpointCheck("triton-mme", "dev-triton-mme", 100.0, [ModelCheck("add_sub", "k", "add_sub.tar.gz")])
GOOD = _reply({"OUTPUT0": [1, 4], "OUTPUT1": [1, 4]})


def _clock(*seconds: float):
    ticks = iter(seconds)
    return lambda: next(ticks)


def test_passes_after_model_not_ready_and_times_each_call():
    not_ready = ModelNotReadyError("add_sub.tar.gz", "loading", status=429, code="ModelNotReadyException")
    transport = RecordedTransport(not_ready, GOOD, GOOD, GOOD)
    result = check_model(
        _client(transport), ENDPOINT, ENDPOINT.models[0], ADD_SUB, timed_calls=2, clock=_clock(0, 0.02, 1, 1.05)
    )
    assert result.passed and result.problems == []
    assert result.latencies_ms == pytest.approx([20, 50])
    assert [target for _, target in transport.sent] == ["add_sub.tar.gz"] * 4
    assert result.line() == "PASS triton-mme add_sub: p50 35 ms, max 50 ms (bound 100 ms)"


def test_fails_on_a_latency_above_the_bound():
    result = check_model(
        _client(RecordedTransport(GOOD, GOOD)),
        ENDPOINT,
        ENDPOINT.models[0],
        ADD_SUB,
        timed_calls=1,
        clock=_clock(0, 0.25),
    )
    assert not result.passed
    assert result.problems == ["slowest call took 250 ms, above the 100 ms bound"]


def test_fails_on_a_wrong_output_shape_without_timing():
    wrong = _reply({"OUTPUT0": [1, 3], "OUTPUT1": [1, 4]})
    transport = RecordedTransport(wrong)
    result = check_model(_client(transport), ENDPOINT, ENDPOINT.models[0], ADD_SUB, timed_calls=3)
    assert result.problems == ["output 'OUTPUT0' has shape [1, 3], config.pbtxt says [1, 4]"]
    assert len(transport.sent) == 1 and result.latencies_ms == []


def test_fails_on_an_endpoint_error_and_on_non_finite_outputs():
    error = EndpointError("add_sub.tar.gz", "model failed", status=424, code="ModelError")
    result = check_model(_client(RecordedTransport(error)), ENDPOINT, ENDPOINT.models[0], ADD_SUB, timed_calls=1)
    assert result.problems == ["model 'add_sub.tar.gz': HTTP 424: model failed"]
    body = json.loads(GOOD.body)
    body["outputs"][0]["data"][0] = None  # Triton's JSON writes NaN as null
    nan = Reply(json.dumps(body).encode(), "application/json")
    result = check_model(_client(RecordedTransport(nan)), ENDPOINT, ENDPOINT.models[0], ADD_SUB, timed_calls=1)
    assert result.problems == ["model 'add_sub.tar.gz': output 'OUTPUT0' has NaN or Inf values"]


def test_run_plan_keeps_going_and_summarises(tmp_path):
    second = EndpointCheck("triton-single", "dev-triton-single", 100.0, [ModelCheck("add_sub", "k2", None)])
    plan = SmokePlan("dev", timed_calls=1, attempts=3, endpoints=[ENDPOINT, second])
    transports = {"triton-mme": RecordedTransport(GOOD, GOOD), "triton-single": RecordedTransport(GOOD)}

    def read_config(model):
        if model.artifact_key == "k2":
            raise SmokeError("s3://b/k2: cannot read the model archive (AccessDenied)")
        return ADD_SUB

    lines = []
    report = run_plan(
        plan, lambda e, m: _client(transports[e.name]), read_config, echo=lines.append, clock=_clock(0, 0.01)
    )
    assert not report.passed
    assert lines[0].startswith("PASS triton-mme add_sub")
    assert lines[1] == "FAIL triton-single add_sub: not timed: s3://b/k2: cannot read the model archive (AccessDenied)"
    assert report.summary() == (
        "dev smoke FAILED: 1/2 models on 2 endpoint(s), slowest call 10 ms; "
        "triton-single/add_sub: s3://b/k2: cannot read the model archive (AccessDenied)"
    )
    write_report(report, tmp_path / "smoke-report")
    assert (tmp_path / "smoke-report" / "summary.txt").read_text() == report.summary() + "\n"
    written = json.loads((tmp_path / "smoke-report" / "report.json").read_text())
    assert written["passed"] is False and [r["passed"] for r in written["results"]] == [True, False]
    assert sorted(p.name for p in (tmp_path / "smoke-report").iterdir()) == ["report.json", "summary.txt"]


def test_summary_fits_an_approval_comment():
    results = [smoke.ModelResult("e", f"m{i}", None, problems=["x" * 100]) for i in range(10)]
    summary = smoke.SmokeReport("dev", results).summary()
    assert len(summary) == smoke.SUMMARY_LIMIT and summary.endswith("...")
    assert not smoke.SmokeReport("dev", []).passed  # nothing checked is not a pass


def test_plan_round_trips_and_bad_plan_exits_1(capsys):
    plan = SmokePlan("dev", 3, 10, [ENDPOINT])
    assert SmokePlan.from_json(plan.to_json()) == plan
    assert smoke.main(["--plan-json", "{}", "--bucket", "b"]) == 1
    assert "ERROR: not a smoke plan" in capsys.readouterr().err


def test_unassumable_role_exits_1_naming_the_role(capsys, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_STS_REGIONAL_ENDPOINTS", "regional")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9")  # nothing listens: fails fast, offline
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    plan = SmokePlan("dev", 3, 10, [ENDPOINT]).to_json()
    role = "arn:aws:iam::222222222222:role/triton-dev-smoke-us-east-1"
    code = smoke.main(["--plan-json", plan, "--bucket", "b", "--role-arn", role, "--region", "us-east-1"])
    assert code == 1
    assert f"ERROR: cannot assume {role}" in capsys.readouterr().err


class ComponentTransport(RecordedTransport):
    def send(self, request, *, target_model=None, inference_component=None):
        self.components = [*getattr(self, "components", []), inference_component]
        return super().send(request, target_model=target_model)


def test_an_inference_component_is_addressed_by_its_name():
    """InvokeEndpoint's InferenceComponentName picks the component (SageMaker Runtime API reference)."""
    model = ModelCheck("add_sub", "k", None, inference_component="dev-triton-components-add-sub")
    endpoint = EndpointCheck("triton-components", "dev-triton-components", 100.0, [model])
    transport = ComponentTransport(GOOD, GOOD)
    result = check_model(_client(transport), endpoint, model, ADD_SUB, timed_calls=1, clock=_clock(0, 0.01))
    assert result.passed
    assert transport.components == ["dev-triton-components-add-sub"] * 2


def test_the_plan_of_a_component_endpoint_names_each_component():
    from stacks.pipeline_steps import smoke_plan
    from stage_config import load_stage
    from stage_config.pipeline import PipelineConfig

    config = load_stage("components", PROJECT_ROOT / "examples" / "config")
    pipeline = PipelineConfig.model_validate(
        {"name": "p", "source": {"codecommit_repository": "r"}, "stages": [{"name": "components"}]}
    )
    plan = smoke_plan(config, pipeline)
    components = {m.inference_component for e in plan.endpoints for m in e.models}
    assert components and None not in components
    assert all(c.startswith("components-") for c in components)


IMAGE_LIKE = """
name: "classifier"
max_batch_size: 0
input { name: "image" data_type: TYPE_STRING dims: [ 1 ] }
input { name: "scale" data_type: TYPE_FP32 dims: [ 1 ] }
output { name: "labels" data_type: TYPE_STRING dims: [ 5 ] }
"""


def test_a_sample_file_is_sent_as_one_bytes_element(tmp_path):
    """config/pipeline.yaml smoke.raw_inputs: a model that decodes images refuses generated bytes (review finding:
    the image pipeline's smoke test could never pass), so its input takes a real file, as `invoke --raw` does."""
    sample = tmp_path / "cat.jpg"
    sample.write_bytes(b"\xff\xd8 not really a jpeg")
    inputs = sample_inputs(_config(IMAGE_LIKE), raw={"image": smoke.read_raw_input(str(sample))})
    assert inputs["image"].shape == (1,) and inputs["image"][0] == sample.read_bytes()
    assert inputs["scale"].dtype == np.float32  # the others are generated as before
    batched = sample_inputs(
        _config(
            BERT_LIKE.replace(
                'name: "note" data_type: TYPE_STRING dims: [ 1 ]', 'name: "note" data_type: TYPE_STRING dims: [ -1 ]'
            )
        ),
        raw={"note": b"x"},
    )
    assert batched["note"].shape == (1, 1)


@pytest.mark.parametrize(
    "name,message",
    [("scale", r"input 'scale' is FP32 \[1\]: a smoke sample file is sent as one BYTES element"),
     ("missing", r"has no input 'missing' for its smoke sample \(inputs: \['image', 'scale'\]\)")],
)  # fmt: skip
def test_a_sample_for_an_input_that_cannot_take_it_is_refused(name, message):
    with pytest.raises(smoke.SmokeError, match=message):
        sample_inputs(_config(IMAGE_LIKE), raw={name: b"x"})


def test_a_sample_file_is_bounded_by_one_request(tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 11)
    with pytest.raises(smoke.SmokeError, match="larger than one request's 10 bytes"):
        smoke.read_raw_input(str(big), limit=10)
    with pytest.raises(smoke.SmokeError, match="cannot be read"):
        smoke.read_raw_input(str(tmp_path / "absent.jpg"))


def test_a_plan_without_samples_serialises_as_before_and_with_them_round_trips():
    plain = ModelCheck(name="m", artifact_key="models/m/x/model.tar.gz", target_model=None)
    with_sample = ModelCheck(name="m", artifact_key="k", target_model=None, raw_inputs={"image": "cat.jpg"})
    plan = SmokePlan("dev", 1, 1, [EndpointCheck("e", "dev-e", 100.0, [plain, with_sample])])
    document = json.loads(plan.to_json())
    assert "raw_inputs" not in document["endpoints"][0]["models"][0]
    assert SmokePlan.from_json(plan.to_json()) == plan
