"""`recommend` against stubbed AWS: upload, create, wait with progress, comparison, proposal; a failed job and a
timeout end in one ERROR line.

botocore's Stubber checks each call's parameters against the real service model (client-side validation runs
before the stub answers) and each canned response against the operation's output shape
(DescribeInferenceRecommendationsJob: RecommendationJobStatus, InferenceRecommendations[].Metrics CostPerHour /
CostPerInference / MaxInvocations / ModelLatency, EndpointConfiguration.InstanceType,
ModelConfiguration.EnvironmentParameters). The proposal's invocations_per_instance = MaxInvocations x 0.5 follows
SageMaker's "Load testing your auto scaling configuration" (safety factor 0.5).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber
from test_recommend_request import CONFIG_PBTXT, argv

from endpoint_client import recommend, recommend_job
from endpoint_client.cli import main

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture
def model_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.pbtxt"
    path.write_text(CONFIG_PBTXT)
    return path


@pytest.fixture
def stubs(monkeypatch):
    """(sagemaker Stubber, s3 Stubber), installed as recommend's clients; every queued answer must be used."""
    keys = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}
    sagemaker, s3 = boto3.client("sagemaker", **keys), boto3.client("s3", **keys)
    monkeypatch.setattr(recommend, "_clients", lambda region: (sagemaker, s3))
    clock = {"now": 0.0}
    monkeypatch.setattr(recommend_job, "_clock", lambda: clock["now"])
    monkeypatch.setattr(recommend_job, "_sleep", lambda seconds: clock.__setitem__("now", clock["now"] + seconds))
    with Stubber(sagemaker) as sm, Stubber(s3) as s3_stub:
        yield sm, s3_stub
        sm.assert_no_pending_responses()
        s3_stub.assert_no_pending_responses()


def described(status: str, **extra) -> dict:
    return {
        "JobName": "ir-dev-bert",
        "JobType": "Advanced",
        "JobArn": "arn:aws:sagemaker:us-east-1:123456789012:inference-recommendations-job/ir-dev-bert",
        "RoleArn": "arn:aws:iam::123456789012:role/recommender",
        "Status": status,
        "CreationTime": NOW,
        "LastModifiedTime": NOW,
        "InputConfig": {"ModelName": "ir-dev-bert"},
        **extra,
    }


def recommendation(instance: str, *, cost_hour: float, cost_inference: float, invocations: int, latency: int, threads):
    return {
        "Metrics": {
            "CostPerHour": cost_hour,
            "CostPerInference": cost_inference,
            "MaxInvocations": invocations,
            "ModelLatency": latency,
        },
        "EndpointConfiguration": {
            "EndpointName": f"ir-{instance}",
            "VariantName": "AllTraffic",
            "InstanceType": instance,
            "InitialInstanceCount": 1,
        },
        "ModelConfiguration": {
            "EnvironmentParameters": [{"Key": "SAGEMAKER_TRITON_THREAD_COUNT", "ValueType": "String", "Value": threads}]
        },
    }


def queue_start(sm: Stubber, s3: Stubber) -> None:
    s3.add_response(
        "put_object",
        {},
        {
            "Bucket": "triton-models-dev-replace-me",
            "Key": "inference-recommender/ir-dev-bert/payload.tar.gz",
            "Body": ANY,
            "ContentType": "application/gzip",
        },
    )
    sm.add_response(
        "create_model", {"ModelArn": "arn:aws:sagemaker:us-east-1:123456789012:model/ir-dev-bert"}, ANY_MODEL
    )
    sm.add_response(
        "create_inference_recommendations_job",
        {"JobArn": "arn:aws:sagemaker:us-east-1:123456789012:inference-recommendations-job/ir-dev-bert"},
        ANY_JOB,
    )


ANY_MODEL = {
    "ModelName": "ir-dev-bert",
    "PrimaryContainer": ANY,
    "ExecutionRoleArn": ANY,
    "EnableNetworkIsolation": ANY,
    "Tags": ANY,
}
ANY_JOB = {
    "JobName": "ir-dev-bert",
    "JobType": "Advanced",
    "RoleArn": ANY,
    "InputConfig": ANY,
    "JobDescription": ANY,
    "StoppingConditions": ANY,
    "Tags": ANY,
}


def test_waits_then_compares_and_proposes(stubs, model_config, capsys) -> None:
    sm, s3 = stubs
    queue_start(sm, s3)
    sm.add_response("describe_inference_recommendations_job", described("IN_PROGRESS"), {"JobName": "ir-dev-bert"})
    done = described(
        "COMPLETED",
        InferenceRecommendations=[
            recommendation(
                "ml.g5.xlarge", cost_hour=1.41, cost_inference=0.0000065, invocations=3600, latency=38, threads="8"
            ),
            recommendation(
                "ml.g5.2xlarge", cost_hour=1.69, cost_inference=0.0000071, invocations=3900, latency=35, threads="4"
            ),
            recommendation(
                "ml.g5.xlarge", cost_hour=1.41, cost_inference=0.0000040, invocations=5800, latency=140, threads="4"
            ),
        ],
    )
    sm.add_response("describe_inference_recommendations_job", done, {"JobName": "ir-dev-bert"})
    assert main([*argv(model_config), "--poll-seconds", "30"]) == 0
    captured = capsys.readouterr()
    assert "dev-bert: IN_PROGRESS" in captured.err and "dev-bert: COMPLETED" in captured.err
    table = captured.out.split("\n\n")[0].splitlines()
    assert table[0].split()[:3] == ["instance", "environment", "cost/hour"]
    # cheapest inference first; the 140 ms row is over the 100 ms objective and is not proposed
    assert table[1].split() == ["ml.g5.xlarge", "THREAD_COUNT=4", "$1.410", "$0.00000400", "5800", "140", "over"]
    assert table[2].split()[-1] == "ok"
    assert "invocations_per_instance: 1800" in captured.out  # 3600/min x 0.5
    assert "    instance_type: ml.g5.xlarge" in captured.out
    assert "      thread_count: 8" in captured.out
    assert "  - name: triton-bert" in captured.out


def test_json_results(stubs, model_config, capsys) -> None:
    sm, s3 = stubs
    queue_start(sm, s3)
    done = described(
        "COMPLETED",
        InferenceRecommendations=[
            recommendation(
                "ml.g5.xlarge", cost_hour=1.41, cost_inference=0.0000065, invocations=3600, latency=38, threads="8"
            )
        ],
    )
    sm.add_response("describe_inference_recommendations_job", done, {"JobName": "ir-dev-bert"})
    assert main([*argv(model_config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["jobs"] == ["ir-dev-bert"] and report["slo_ms"] == 100
    assert report["proposal"]["instance_type"] == "ml.g5.xlarge"
    assert "      invocations_per_instance: 1800" in report["proposed_config_lines"]


def test_failed_job_is_one_error_line(stubs, model_config, capsys) -> None:
    sm, s3 = stubs
    queue_start(sm, s3)
    failed = described("FAILED", FailureReason="Model container failed the ping health check")
    sm.add_response("describe_inference_recommendations_job", failed, {"JobName": "ir-dev-bert"})
    assert main(argv(model_config)) == 1
    err = capsys.readouterr().err
    assert "ERROR: Inference Recommender job ir-dev-bert is FAILED: Model container failed the ping health check" in err
    assert "Traceback" not in err


def test_timeout_says_the_job_keeps_running(stubs, model_config, capsys) -> None:
    sm, s3 = stubs
    queue_start(sm, s3)
    for _ in range(3):  # polls at 0, 60, 120 s; the next would pass the 150 s limit
        sm.add_response("describe_inference_recommendations_job", described("IN_PROGRESS"), {"JobName": "ir-dev-bert"})
    assert main([*argv(model_config), "--wait-timeout", "150"]) == 1
    err = capsys.readouterr().err
    assert "ERROR: --wait-timeout 150 s passed and ir-dev-bert (IN_PROGRESS) has not finished" in err
    assert "stop-inference-recommendations-job" in err and "Traceback" not in err


def test_aws_refusal_names_the_step(stubs, model_config, capsys) -> None:
    sm, s3 = stubs
    s3.add_response("put_object", {}, None)
    sm.add_client_error("create_model", "AccessDeniedException", "not authorized to perform iam:PassRole")
    assert main(argv(model_config)) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: CreateModel ir-dev-bert: ") and "iam:PassRole" in err


def test_no_wait_prints_job_names(stubs, model_config, capsys) -> None:
    sm, s3 = stubs
    queue_start(sm, s3)
    assert main([*argv(model_config), "--no-wait"]) == 0
    assert capsys.readouterr().out.split() == ["ir-dev-bert"]
