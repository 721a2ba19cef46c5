"""The build report's accuracy rule, tolerances, report.json (schema, place, write-once) and `model_build report`.

Sources: the comparison is Polygraphy's `CompareFunc.simple` with check_error_stat "elemwise" (NVIDIA/TensorRT
tools/Polygraphy/polygraphy/comparator/compare.py, commit 1637a26e): a mismatch exceeds both atol and rtol*|b|,
NaN always mismatches, zeros of the reference get epsilon 2.220446049250313e-16; defaults atol = rtol = 1e-5.
The fp16 / best / int8 defaults are ours (model_build/accuracy.py says so). Keys: model_build.key (the report sits
beside `model.tar.gz` under the same content-addressed prefix).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from cli_runner import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from synth_helpers import SHIPPED_CONFIG_DIR

from model_build import build_report
from model_build.accuracy import DEFAULTS, AccuracyError, check, compare_output, compare_outputs, tolerance
from model_build.build_report import REPORT_SCHEMA_VERSION, publish_report, report_key, write_report
from model_build.errors import ModelBuildError
from serving_facts.settings import ModelSettings

DEV = SHIPPED_CONFIG_DIR / "dev.yaml"  # as shipped (its bucket `triton-models-dev-replace-me`), whatever the user set


def _tol(atol: float, rtol: float):
    return tolerance("fp32", atol, rtol)


@pytest.mark.parametrize(
    ("engine", "reference", "passed"),
    [
        ([1.05], [1.0], True),  # abs 0.05 > atol 0.01, but rel 0.05 <= rtol 0.1: passes (OR)
        ([100.5], [100.0], True),  # abs 0.5 > atol, rel 0.005 <= rtol
        ([0.005], [0.0], True),  # rel is huge against the epsilon, but abs 0.005 <= atol
        ([2.0], [1.0], False),  # abs 1 > 0.01 and rel 1 > 0.1: exceeds both
        ([float("nan")], [1.0], False),  # NaN is always a mismatch
    ],
)
def test_an_element_fails_only_when_it_exceeds_both_tolerances(engine, reference, passed):
    """Polygraphy elemwise: mismatch = (absdiff > atol | NaN) & (reldiff > rtol | NaN), reldiff = absdiff/|b|."""
    result = compare_output("y", np.array(engine, np.float32), np.array(reference, np.float32), _tol(0.01, 0.1))
    assert result.passed is passed


finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(finite, finite), min_size=1, max_size=20),
    st.floats(0, 1, allow_nan=False),
    st.floats(0, 1, allow_nan=False),
)
def test_every_element_passes_exactly_when_within_atol_or_rtol(pairs, atol, rtol):
    """The rule written out per element (Polygraphy elemwise): |a-b| <= atol or |a-b| <= rtol * max(|b|, eps)."""
    engine = np.array([a for a, _ in pairs], np.float32)
    reference = np.array([b for _, b in pairs], np.float32)
    result = compare_output("y", engine, reference, _tol(atol, rtol))
    within = [
        abs(float(a) - float(b)) <= atol or abs(float(a) - float(b)) <= rtol * (abs(float(b)) or 2.220446049250313e-16)
        for a, b in zip(engine, reference, strict=True)
    ]
    assert result.mismatches == within.count(False) and result.passed is all(within)


def test_errors_are_measured_against_the_reference_with_polygraphys_epsilon_for_zeros():
    """reldiff divides by |reference|, a zero replaced by 2.220446049250313e-16 (Polygraphy's EPSILON)."""
    result = compare_output("y", np.array([1.0, 3.0]), np.array([0.0, 2.0]), _tol(0, 0))
    assert result.max_abs_error == 1.0
    assert result.max_rel_error == pytest.approx(1.0 / 2.220446049250313e-16)
    assert result.mismatches == 2


def test_default_tolerances_per_precision_say_where_they_come_from():
    """fp32 is Polygraphy's default 1e-5 / 1e-5 (cited); fp16, best and int8 are looser and marked as ours."""
    assert tolerance("fp32").atol == tolerance("fp32").rtol == 1e-5
    assert "Polygraphy" in tolerance("fp32").source
    for precision in ("fp16", "best", "int8"):
        assert tolerance(precision).atol > 1e-5 and "ours" in tolerance(precision).source
    assert set(DEFAULTS) == {"fp32", "fp16", "best", "int8"}  # every TensorRTSettings precision


def test_the_stage_configs_accuracy_overrides_what_it_gives():
    """`tensorrt.accuracy: {atol}` alone keeps the precision's rtol and says so."""
    tol = tolerance("fp16", 0.5, None)
    assert (tol.atol, tol.rtol) == (0.5, DEFAULTS["fp16"][1])
    assert tol.source.startswith("tensorrt.accuracy")


def test_classifier_outputs_report_argmax_agreement():
    """[batch, classes] outputs get the share of rows whose arg-max agrees (reported, not a failure by itself)."""
    reference = np.array([[0.1, 0.9], [0.8, 0.2]], np.float32)
    engine = np.array([[0.1, 0.9], [0.2, 0.8]], np.float32)
    assert compare_output("probs", engine, reference, _tol(1, 1)).argmax_agreement == 0.5


def test_outside_the_tolerance_the_error_names_the_output_and_how_far():
    """The build stops with the output's name, its element count outside and its max abs / rel error."""
    reference = {"OUTPUT0": np.zeros((2, 2), np.float32), "OUTPUT1": np.ones((2, 2), np.float32)}
    engine = {"OUTPUT0": np.full((2, 2), 0.5, np.float32), "OUTPUT1": np.ones((2, 2), np.float32)}
    comparisons = compare_outputs(engine, reference, tolerance("fp32"))
    with pytest.raises(AccuracyError) as caught:
        check("add_sub", comparisons, tolerance("fp32"))
    message = str(caught.value)
    assert "output 'OUTPUT0': 4 of 4 elements outside" in message and "max abs error 0.5" in message
    assert "OUTPUT1" not in message and "Nothing was uploaded" in message


def test_a_shape_mismatch_or_missing_output_fails():
    reference = {"a": np.zeros((2, 2)), "b": np.zeros(3)}
    found = compare_outputs({"a": np.zeros((2, 3))}, reference, tolerance("fp32"))
    assert [c.passed for c in found] == [False, False]
    assert "shape [2, 3]" in found[0].problem and found[1].problem == "not returned"


# --- stage config -----------------------------------------------------------------------------------------------

BASE = {"name": "m", "source": {"export": "resnet50"}, "max_batch_size": 8}


def test_accuracy_and_tune_are_settings_but_not_part_of_the_key():
    """They decide what the build measures, not the artifact's bytes: build_fingerprint (the key's input) is the same
    with or without them, and a dump without them is what it was (omitted when absent)."""
    plain = ModelSettings.model_validate(BASE)
    tuned = ModelSettings.model_validate(
        {**BASE, "tensorrt": {"accuracy": {"atol": 0.1, "rtol": 0.01}}, "tune": {"slo_p99_ms": 50}}
    )
    assert plain.build_fingerprint() == tuned.build_fingerprint()
    assert "tune" not in plain.model_dump() and "accuracy" not in plain.model_dump()["tensorrt"]
    assert ModelSettings.model_validate(tuned.model_dump(mode="json")) == tuned


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"tune": {"slo_p99_ms": 50}, "platform": "onnxruntime_onnx", "instance_groups": [{"kind": "KIND_CPU"}]},
         "applies to platform 'tensorrt_plan'"),
        ({"tune": {"slo_p99_ms": 50, "candidates": {"max_queue_delay_microseconds": [0, 100, 1000]}}},
         "9 combinations"),
        ({"tune": {"slo_p99_ms": 50, "candidates": {"instance_counts": [1, 2, 3, 4]}}}, "at most 3"),
        ({"tune": {"slo_p99_ms": 50, "candidates": {"preferred_batch_sizes": [[16]]}}}, "exceed max_batch_size 8"),
        ({"tune": {"slo_p99_ms": 0}}, "greater than 0"),
        ({"tensorrt": {"accuracy": {"atol": -1}}}, "greater than or equal to 0"),
    ],
)  # fmt: skip
def test_tune_and_accuracy_are_bounded(extra, message):
    """The grid is at most 12 combinations of instance counts 1-3 (issue 25: a bounded grid); tolerances >= 0."""
    if "9 combinations" in message:  # 3 counts x 3 delays = 9 is allowed; x 2 preferred sets = 18 is not
        ModelSettings.model_validate({**BASE, **extra})
        extra["tune"]["candidates"]["preferred_batch_sizes"] = [[4], [8]]
        message = "18 combinations"
    with pytest.raises(ValidationError, match=message):
        ModelSettings.model_validate({**BASE, **extra})


# --- report.json ------------------------------------------------------------------------------------------------


def _report(model: str = "resnet50") -> dict:
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "model": model,
        "artifact_key": None,
        "created_at": "2026-11-27T08:00:00+00:00",
        "host": {"gpu": "none (CPU)", "driver": None, "tensorrt": None, "triton": "2.51.0", "trtexec_argv": None,
                 "engine": "onnx stand-in (CPU)"},
        "accuracy": {"passed": True, "atol": 1e-5, "rtol": 1e-5, "tolerance_source": "x", "semantics": "y",
                     "input_source": "generated", "inputs": {}, "outputs": []},
        "speed": [{"concurrency": 1, "batch_size": 4, "seconds": 1.0, "requests": 10, "errors": 0,
                   "requests_per_second": 10.0, "inferences_per_second": 40.0,
                   "latency_ms": {"p50": 1.0, "p90": 1.0, "p95": 1.0, "p99": 2.0, "max": 2.0, "mean": 1.0}}],
        "tuning": None,
    }  # fmt: skip


def test_the_report_sits_beside_the_archive_under_its_content_address():
    assert report_key("models/resnet50/abc123/model.tar.gz") == "models/resnet50/abc123/report.json"
    with pytest.raises(ModelBuildError):
        report_key("models/resnet50/abc123/")


def test_a_report_is_written_once(tmp_path: Path):
    path = write_report(tmp_path / "report.json", _report())
    assert json.loads(path.read_text())["schema_version"] == REPORT_SCHEMA_VERSION
    with pytest.raises(ModelBuildError, match="written once"):
        write_report(path, _report())


def test_another_schema_version_is_refused(tmp_path: Path):
    (tmp_path / "report.json").write_text(json.dumps({**_report(), "schema_version": 99}))
    result = run_cli("report", "--config", str(DEV), "--model", "resnet50", "--local", str(tmp_path))
    assert result.returncode == 1 and "schema_version 99" in result.stderr


def test_report_prints_a_local_build(tmp_path: Path):
    write_report(tmp_path / "report.json", _report())
    result = run_cli("report", "--config", str(DEV), "--model", "resnet50", "--local", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "accuracy PASSED" in result.stdout and "concurrency" in result.stdout and "none (CPU)" in result.stdout


def test_report_reads_s3_beside_the_key_the_app_deploys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """No --instance-type: the one instance type of the endpoints serving the model (dev: ml.g5.xlarge), so the key
    is `model_build key --instance-type ml.g5.xlarge`'s; the object is read from the config's artifact bucket."""
    key = run_cli("key", "--config", str(DEV), "--model", "resnet50", "--instance-type", "ml.g5.xlarge").stdout.strip()
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    body = json.dumps(_report()).encode()
    with Stubber(client) as stub:
        stub.add_response(
            "get_object",
            {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentLength": len(body)},
            {"Bucket": "triton-models-dev-replace-me", "Key": report_key(key)},
        )
        monkeypatch.setattr("model_build.commands.report.make_s3_client", lambda **_: client)
        result = run_cli("report", "--config", str(DEV), "--model", "resnet50", "--json")
        stub.assert_no_pending_responses()
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"] == "resnet50"


def test_a_missing_report_says_what_writes_it(monkeypatch: pytest.MonkeyPatch):
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_client_error("get_object", "NoSuchKey", http_status_code=404)
        monkeypatch.setattr("model_build.commands.report.make_s3_client", lambda **_: client)
        result = run_cli("report", "--config", str(DEV), "--model", "resnet50", "--gpu-target", "sm86")
    assert result.returncode == 1 and "no build report" in result.stderr


@pytest.mark.moto
def test_publishing_never_replaces_a_report(tmp_path: Path, moto_server_url: str):
    """model_build.upload's conditional write: the first report under a key stays; a later build's is kept out."""
    client = boto3.client(
        "s3", endpoint_url=moto_server_url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    client.create_bucket(Bucket="reports")
    artifact = f"models/resnet50/{'ab' * 32}/model.tar.gz"
    first, second = write_report(tmp_path / "a.json", {**_report(), "artifact_key": artifact}), tmp_path / "b.json"
    write_report(second, {**_report(), "artifact_key": artifact, "created_at": "later"})
    assert "uploaded" in publish_report(first, "reports", artifact, client=client)
    assert "kept" in publish_report(second, "reports", artifact, client=client)
    stored = client.get_object(Bucket="reports", Key=report_key(artifact))["Body"].read()
    assert json.loads(stored)["created_at"] == _report()["created_at"]
    assert build_report.parse_report(stored, "s3")["model"] == "resnet50"
