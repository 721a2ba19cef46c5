"""`loadtest --endpoint`: InvokeEndpoint through invoke's transport and CloudWatch's latency figures, with
botocore Stubbers, which check every request and reply against the real sagemaker-runtime and cloudwatch service
models in the venv.

Sources: ModelLatency / OverheadLatency in AWS/SageMaker, microseconds, dimensions EndpointName + VariantName, or
InferenceComponentName for a component (../shared/README.md "Metrics"; triton_cdk/serving/inference_components.py);
SageMaker's load-testing guidance for the target (invocations per copy per minute for a component).
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from endpoint_client import loadtest_cli
from endpoint_client.cli import main
from endpoint_client.codec import encode_request
from endpoint_client.loadtest_cloudwatch import METRICS, STATS, minute_window, queries

REPLY = json.dumps({"outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}]}).encode()
TENSOR = ["--tensor", "INPUT0=FP32:1x4:1,2,3,4"]
CREDENTIALS = {"region_name": "us-east-1", "aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}


def _ok() -> dict:
    return {"Body": StreamingBody(io.BytesIO(REPLY), len(REPLY)), "ContentType": "application/json"}


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch):
    runtime = boto3.client("sagemaker-runtime", **CREDENTIALS)
    cloudwatch = boto3.client("cloudwatch", **CREDENTIALS)
    with Stubber(runtime) as runtime_stub, Stubber(cloudwatch) as cloudwatch_stub:
        monkeypatch.setattr(loadtest_cli, "_runtime_client", lambda region, connections, timeout: runtime)
        monkeypatch.setattr(loadtest_cli, "_cloudwatch_client", lambda region: cloudwatch)
        yield runtime_stub, cloudwatch_stub
        runtime_stub.assert_no_pending_responses()
        cloudwatch_stub.assert_no_pending_responses()


def test_component_load_test_counts_statuses_and_reads_cloudwatch(stubbed, tmp_path: Path, capsys) -> None:
    runtime, cloudwatch = stubbed
    body = encode_request({"INPUT0": __import__("numpy").array([[1, 2, 3, 4]], "float32")}).body
    expected = {"EndpointName": "ep", "InferenceComponentName": "ic-1", "Body": body, "ContentType": ANY}
    runtime.add_response("invoke_endpoint", _ok(), expected)  # invoke's own first request
    runtime.add_response("invoke_endpoint", _ok(), expected)
    runtime.add_client_error("invoke_endpoint", "ThrottlingException", "Rate exceeded", 429, expected_params=expected)
    runtime.add_response("invoke_endpoint", _ok(), expected)
    runtime.add_response("invoke_endpoint", _ok(), expected)
    dims = [{"Name": "InferenceComponentName", "Value": "ic-1"}]
    results = [
        {
            "Id": q["Id"],
            "Label": q["Id"],
            "Timestamps": [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)],
            "Values": [12_500.0 if q["Id"].endswith("_p99") else 2.0],
            "StatusCode": "Complete",
        }
        for q in queries(dims, 60)
    ]
    cloudwatch.add_response(
        "get_metric_data",
        {"MetricDataResults": results},
        {"MetricDataQueries": queries(dims, 60), "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampAscending"},
    )
    out_file = tmp_path / "sm.json"
    code = main(
        [
            "loadtest",
            "--endpoint",
            "ep",
            "--region",
            "us-east-1",
            "--inference-component",
            "ic-1",
            *TENSOR,
            "--duration",
            "20",
            "--warmup",
            "0",
            "--max-requests",
            "4",
            "--cloudwatch-delay",
            "0",
            "--quiet",
            "--slo-p99-ms",
            "60000",
            "--json",
            str(out_file),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 1 and "no level kept p99 under 60000 ms without errors" in err  # the 429 at the only level
    document = json.loads(out_file.read_text())  # written all the same
    assert document["target"] == {
        "kind": "sagemaker",
        "endpoint": "ep",
        "region": "us-east-1",
        "variant": "AllTraffic",
        "target_model": None,
        "inference_component": "ic-1",
    }
    level = document["levels"][0]
    assert (level["requests"], level["ok"], level["errors"]) == (4, 3, {"429": 1})
    figures = level["cloudwatch"]
    assert figures["ModelLatency"]["p99"] == 12.5 and figures["OverheadLatency"]["p99"] == 12.5  # us -> ms
    assert figures["ModelLatency"]["samples"] == 2.0
    start, end = (dt.datetime.fromisoformat(t) for t in figures["window"])
    assert start.second == end.second == 0 and (end - start).total_seconds() % 60 == 0
    assert "CloudWatch (ms): ModelLatency avg 0.002" in out
    assert document["slo"]["level"] is None and document["sustainable"] is None


def test_variant_dimensions_and_a_cloudwatch_refusal_keeps_the_client_figures(stubbed, tmp_path: Path, capsys):
    runtime, cloudwatch = stubbed
    expected = {"EndpointName": "mme", "TargetModel": "a.tar.gz", "Body": ANY, "ContentType": ANY}
    for _ in range(4):
        runtime.add_response("invoke_endpoint", _ok(), expected)
    dims = [{"Name": "EndpointName", "Value": "mme"}, {"Name": "VariantName", "Value": "blue"}]
    cloudwatch.add_client_error(
        "get_metric_data",
        "AccessDenied",
        "not authorized to perform cloudwatch:GetMetricData",
        403,
        expected_params={
            "MetricDataQueries": queries(dims, ANY),
            "StartTime": ANY,
            "EndTime": ANY,
            "ScanBy": "TimestampAscending",
        },
    )
    out_file = tmp_path / "mme.json"
    code = main(
        [
            "loadtest",
            "--endpoint",
            "mme",
            "--region",
            "us-east-1",
            "--variant",
            "blue",
            "--target-model",
            "a.tar.gz",
            *TENSOR,
            "--duration",
            "20",
            "--warmup",
            "0",
            "--max-requests",
            "3",
            "--cloudwatch-delay",
            "0",
            "--quiet",
            "--slo-p99-ms",
            "60000",
            "--json",
            str(out_file),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    document = json.loads(out_file.read_text())
    level = document["levels"][0]
    assert level["ok"] == 3 and "GetMetricData failed" in level["cloudwatch"]["error"]
    assert "autoscaling:\n      invocations_per_instance:" in out


def test_queries_are_valid_for_the_cloudwatch_service_model() -> None:
    """Every query id matches ^[a-z][a-zA-Z0-9_]*$ and every Stat is one CloudWatch accepts: validated by
    botocore against the service model (the Stubber above validates the same)."""
    from botocore.validate import ParamValidator

    session = boto3.session.Session()._session
    shape = session.get_service_model("cloudwatch").operation_model("GetMetricData").input_shape
    start, end = minute_window(1_700_000_030.0, 61.0)
    assert (end - start).total_seconds() == 120
    params = {
        "MetricDataQueries": queries([{"Name": "EndpointName", "Value": "e"}], 120),
        "StartTime": start,
        "EndTime": end,
    }
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()
    assert len(params["MetricDataQueries"]) == len(METRICS) * len(STATS)


def test_no_credentials_is_a_clean_error(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # boto3.client() uses boto3's default session, which an earlier test may have created with credentials.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    code = main(["loadtest", "--endpoint", "ep", "--region", "us-east-1", *TENSOR, "--quiet", "--attempts", "1"])
    err = capsys.readouterr().err
    assert code == 1 and "credentials" in err.lower() and "Traceback" not in err


@pytest.mark.parametrize(
    ("raised", "key"),
    [
        (None, None),
        ("status", "424"),
        ("code", "ModelNotReadyException"),
        ("Read timeout on endpoint URL: ...", "timeout"),
        ("Could not connect to the endpoint URL: ...", "unreachable"),
    ],
)
def test_sagemaker_errors_are_keyed_by_status_code_or_kind(raised: str | None, key: str | None) -> None:
    from endpoint_client.errors import EndpointError
    from endpoint_client.loadtest import SageMakerTarget

    class Transport:
        def send(self, request, **route):
            if raised == "status":
                raise EndpointError("m", "boom", status=424, code="ModelError")
            if raised == "code":
                raise EndpointError("m", "loading", code="ModelNotReadyException")
            if raised:
                raise EndpointError("m", raised)

    target = SageMakerTarget(lambda connections: Transport(), encode_request({"x": __import__("numpy").ones(1)}))
    target._transport = Transport()
    assert target._send() == key
