"""The performance gate's decisions (endpoint_client/perf_gate.py): pass, p99 SLO miss, throughput miss, failed
requests, regression against the newest load test of another build, and its S3 calls.

S3 calls go through botocore's Stubber, which validates each request against the real s3 service model (the
venv's botocore): PutObject's IfNoneMatch (S3 API Reference, "PutObject": conditional writes, 412 on an
existing key), ListObjectsV2 and GetObject.
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

from endpoint_client import loadtest_report, perf_gate

BUCKET = "triton-models-dev-example"
DIGEST, OLD_DIGEST, OLDER_DIGEST = "a" * 64, "b" * 64, "c" * 64
ARTIFACT_KEY = f"models/resnet50/{DIGEST}/model.tar.gz"
NOW = dt.datetime(2026, 11, 27, 6, 30, tzinfo=dt.UTC)
THRESHOLDS = ["--slo-p99-ms", "500", "--min-inferences-per-second", "10"]


def _document(p99: float | None = 200.0, per_s: float = 50.0, requests: int = 100, ok: int = 100) -> dict:
    latency = None if p99 is None else {"p50": 1, "p90": 1, "p95": 1, "p99": p99, "max": p99, "mean": 1}
    level = {"concurrency": 4, "rate": None, "requests": requests, "ok": ok, "errors": {}, "latency_ms": latency}
    level.update(invocations_per_s=per_s, inferences_per_s=per_s)
    return {"schema": perf_gate.SCHEMA, "schema_version": perf_gate.SCHEMA_VERSION, "levels": [level]}


def _s3():
    return boto3.client("s3", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")


def _args(tmp_path: Path, document: dict, *extra: str) -> list[str]:
    path = tmp_path / "loadtest.json"
    path.write_text(json.dumps(document))
    common = ["check", "--json", str(path), "--bucket", BUCKET, "--artifact-key", ARTIFACT_KEY]
    return [*common, "--stage", "dev", "--endpoint", "triton-mme", *THRESHOLDS, *extra]


def _expect_put(stubber: Stubber) -> None:
    stubber.add_response(
        "put_object",
        {"ETag": '"1"'},
        {"Bucket": BUCKET, "Key": ANY, "Body": ANY, "ContentType": "application/json", "IfNoneMatch": "*"},
    )


def _run(tmp_path: Path, document: dict, *extra: str, stub=None, capsys=None) -> tuple[int, str]:
    s3 = _s3()
    with Stubber(s3) as stubber:
        if stub:
            stub(stubber)
        _expect_put(stubber)
        parser = perf_gate._parser()
        args = parser.parse_args(_args(tmp_path, document, *extra))
        status, line = perf_gate.check(args, s3, now=NOW)
        stubber.assert_no_pending_responses()
    return status, line


def test_schema_constants_match_the_load_test_report() -> None:
    assert (perf_gate.SCHEMA, perf_gate.SCHEMA_VERSION) == (loadtest_report.SCHEMA, loadtest_report.SCHEMA_VERSION)


def test_a_run_within_the_slo_and_above_the_floor_passes_and_is_stored_write_once(tmp_path: Path) -> None:
    status, line = _run(tmp_path, _document())
    assert status == 0 and "passed performance gate" in line
    assert f"s3://{BUCKET}/models/resnet50/{DIGEST}/loadtest/dev-triton-mme-20261127T063000000000Z.json" in line


def test_a_p99_above_the_slo_fails(tmp_path: Path) -> None:
    status, line = _run(tmp_path, _document(p99=750.0))
    assert status == 1 and "p99 750.0 ms > SLO 500 ms" in line


def test_throughput_below_the_floor_fails(tmp_path: Path) -> None:
    status, line = _run(tmp_path, _document(per_s=4.0))
    assert status == 1 and "throughput 4.0/s < floor 10/s" in line


def test_failed_requests_fail_the_slo(tmp_path: Path) -> None:
    status, line = _run(tmp_path, _document(ok=90))
    assert status == 1 and "10 of 100 requests failed" in line
    status, line = _run(tmp_path, _document(p99=None, ok=0, per_s=0))
    assert status == 1 and "100 of 100 requests failed" in line


def _listing(stubber: Stubber, previous: dict | None) -> None:
    """This build's own objects (newest, never compared with); with `previous`, two other builds' load tests:
    the newer one (`previous`) is the one read."""
    contents = [
        {"Key": f"models/resnet50/{DIGEST}/loadtest/dev-triton-mme-1.json", "LastModified": NOW},
        {"Key": f"models/resnet50/{DIGEST}/model.tar.gz", "LastModified": NOW},
    ]
    if previous is not None:
        contents += [
            {"Key": f"models/resnet50/{OLDER_DIGEST}/loadtest/dev-a-0.json", "LastModified": NOW.replace(day=1)},
            {
                "Key": f"models/resnet50/{OLD_DIGEST}/loadtest/dev-triton-mme-0.json",
                "LastModified": NOW.replace(day=20),
            },
            {"Key": f"models/resnet50/{OLDER_DIGEST}/model.tar.gz", "LastModified": NOW.replace(day=25)},
        ]
    stubber.add_response(
        "list_objects_v2",
        {"Contents": contents, "IsTruncated": False},
        {"Bucket": BUCKET, "Prefix": "models/resnet50/"},
    )
    if previous is not None:
        body = json.dumps(previous).encode()
        stubber.add_response(
            "get_object",
            {"Body": StreamingBody(io.BytesIO(body), len(body))},
            {"Bucket": BUCKET, "Key": f"models/resnet50/{OLD_DIGEST}/loadtest/dev-triton-mme-0.json"},
        )


def test_a_drop_beyond_max_regression_percent_against_the_previous_build_fails(tmp_path: Path) -> None:
    status, line = _run(
        tmp_path,
        _document(per_s=30.0),
        "--max-regression-percent",
        "20",
        stub=lambda s: _listing(s, _document(per_s=50.0)),
    )
    assert status == 1 and "throughput 40.0% below the previous build's 50.0/s (limit 20%)" in line
    assert f"compared with s3://{BUCKET}/models/resnet50/{OLD_DIGEST}/loadtest/" in line


def test_a_p99_rise_beyond_the_limit_fails_and_a_small_change_passes(tmp_path: Path) -> None:
    status, line = _run(
        tmp_path, _document(p99=300.0), "--max-regression-percent", "20", stub=lambda s: _listing(s, _document())
    )
    assert status == 1 and "p99 50.0% above the previous build's 200.0 ms" in line
    status, line = _run(
        tmp_path,
        _document(p99=220.0, per_s=45.0),
        "--max-regression-percent",
        "20",
        stub=lambda s: _listing(s, _document()),
    )
    assert status == 0, line


def test_without_an_earlier_build_the_comparison_is_skipped_and_said(tmp_path: Path) -> None:
    status, line = _run(tmp_path, _document(), "--max-regression-percent", "20", stub=lambda s: _listing(s, None))
    assert status == 0 and "no earlier build's load test to compare with" in line


def test_unusable_documents_exit_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    two_levels = _document()
    two_levels["levels"] *= 2
    for document in ({"schema": "other"}, {**_document(), "schema_version": 2}, two_levels):
        assert perf_gate.main(_args(tmp_path, document), s3=_s3()) == 2
        assert capsys.readouterr().err.startswith("performance gate: ")
    with pytest.raises(perf_gate.GateInputError, match="not a key models/<model>/<digest>/<file>"):
        perf_gate.build_prefix("other/key.tar.gz")


def test_inputs_writes_the_first_models_sample_request_as_loadtest_reads_it(
    tmp_path: Path, add_sub_archive: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`perf_gate inputs`: the smoke test's sample request (from the archive's config.pbtxt) as a .npz that
    `loadtest --input FILE.npz` loads (endpoint_client/inputs.py load_array_file), plus the route option."""
    from endpoint_client.inputs import load_array_file
    from endpoint_client.smoke_plan import EndpointCheck, ModelCheck, SmokePlan

    key = f"models/add_sub/{DIGEST}/model.tar.gz"
    model = ModelCheck("add_sub", key, "add_sub.tar.gz")
    plan = SmokePlan(stage="dev", timed_calls=1, attempts=1, endpoints=[EndpointCheck("mme", "dev-mme", 100, [model])])
    body = add_sub_archive.read_bytes()
    s3 = _s3()
    out = tmp_path / "mme.npz"
    argv = ["inputs", "--plan-json", plan.to_json(), "--bucket", BUCKET, "--endpoint", "mme", "--out", str(out)]
    with Stubber(s3) as stubber:
        response = {"Body": StreamingBody(io.BytesIO(body), len(body))}
        stubber.add_response("get_object", response, {"Bucket": BUCKET, "Key": key})
        assert perf_gate.main(argv, s3=s3) == 0
    assert capsys.readouterr().out.strip() == "--target-model add_sub.tar.gz"
    assert sorted(load_array_file(str(out))) == ["INPUT0", "INPUT1"]
    assert perf_gate.main([*argv[:-3], "other", "--out", str(out)], s3=s3) == 2
    assert "'other': not an endpoint of the plan" in capsys.readouterr().err
