"""Issue 25 review items on the build report's model_build side: non-finite outputs, exact integer outputs, the
report's schema on read and publish, the per-model accuracy settings and the report's worst-case time.

Sources: Polygraphy's `CompareFunc.simple` (NVIDIA/TensorRT tools/Polygraphy/polygraphy/comparator/compare.py):
NaN in |a - b| is a mismatch; `infinities_compare_equal` defaults to False (matching infinities give absdiff NaN);
booleans compare by XOR, integers with the tolerances (exact comparison of integers is our stricter rule).
IEEE 754 binary64 holds integers exactly only up to 2**53. CodeBuild's TimeoutInMinutes (build.timeout_minutes)
ends a build that runs longer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from model_build import build_report
from model_build.accuracy import AccuracyError, check, compare_output, tolerance
from model_build.build_report import format_report, parse_report, publish_report, write_report
from model_build.errors import ModelBuildError
from model_build.report_budget import budget_problem, worst_case_seconds
from serving_facts.settings import ModelSettings

TOL = tolerance("fp32")


def test_nan_at_the_same_place_fails_and_is_counted_not_reported_as_error_zero():
    """NaN on both sides is a mismatch (Polygraphy: NaN absdiff); the message counts NaN/inf per side and never
    reads "max abs error 0" for it; an all-NaN output has no finite error and formats without a TypeError."""
    nan = np.array([np.nan, 1.0], np.float32)
    found = compare_output("logits", nan, nan.copy(), TOL)
    assert not found.passed and found.mismatches == 1 and found.engine_nan == found.reference_nan == 1
    only_nan = compare_output("logits", np.full(3, np.nan), np.full(3, np.nan), TOL)
    assert only_nan.max_abs_error is None and only_nan.max_rel_error is None
    with pytest.raises(AccuracyError) as caught:
        check("m", [only_nan], TOL)
    message = str(caught.value)
    assert "output 'logits'" in message and "3 NaN and 0 inf from the engine" in message
    assert "max abs error n/a" in message and "max abs error 0 " not in message


def test_matching_infinities_are_mismatches_as_in_polygraphy():
    """Polygraphy's infinities_compare_equal default False."""
    inf = np.array([np.inf, 2.0])
    found = compare_output("y", inf, inf.copy(), TOL)
    assert not found.passed and found.engine_inf == 1 and found.max_abs_error == 0.0


def test_integer_outputs_compare_exactly_without_tolerance():
    """A class id off by one fails even where rtol * |b| would allow it."""
    found = compare_output("ids", np.array([1000, 7], np.int64), np.array([1001, 7], np.int64), tolerance("int8"))
    assert not found.passed and found.exact and found.mismatches == 1 and found.max_abs_error == 1.0
    same = compare_output("ids", np.array([3], np.int32), np.array([3], np.int64), TOL)
    assert same.passed and same.exact


def test_int64_above_2_53_is_not_rounded_through_float64():
    """2**53 + 1 and 2**53 are the same float64 but different integers."""
    big = np.array([2**53 + 1], np.int64)
    assert not compare_output("n", big, np.array([2**53], np.int64), TOL).passed
    assert not compare_output("n", np.array([2**64 - 1], np.uint64), np.array([-1], np.int64), TOL).passed


def test_booleans_compare_exactly():
    found = compare_output("mask", np.array([True, False]), np.array([True, True]), tolerance("int8"))
    assert not found.passed and found.mismatches == 1


# --- report.json on read and publish ------------------------------------------------------------------------------


def _report(**changes) -> dict:
    report = {
        "schema_version": 1, "model": "resnet50", "artifact_key": None, "created_at": "2026-11-27T08:00:00+00:00",
        "host": {"gpu": "none (CPU)", "driver": None, "tensorrt": None, "triton": "2.51.0", "trtexec_argv": None,
                 "engine": "onnx stand-in (CPU)"},
        "accuracy": {"passed": True, "atol": 1e-5, "rtol": 1e-5, "tolerance_source": "x", "semantics": "y",
                     "input_source": "generated", "inputs": {}, "outputs": []},
        "speed": [], "tuning": None,
    }  # fmt: skip
    return {**report, **changes}


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"accuracy": "x"}, "accuracy"), ({"speed": [1]}, "speed.0"), ({"host": {"gpu": 3}}, "host.gpu")],
)
def test_a_corrupt_report_is_refused_naming_the_field(changes, field):
    with pytest.raises(ModelBuildError, match=f"not a build report of schema 1: {field}"):
        parse_report(json.dumps(_report(**changes)).encode(), "report.json")


def test_deeply_nested_json_is_refused_without_recursion_error():
    data = b'{"schema_version": 1, "tuning": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(ModelBuildError, match=r"report\.json: not a build report"):
        parse_report(data, "report.json")


def test_printed_strings_lose_control_characters():
    """A report's strings must not send terminal escapes."""
    text = format_report(_report(model="m\x1b[2J\r", host={"gpu": "\x1b]0;x\x07", "engine": "e"}))
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text


def test_write_report_refuses_a_dangling_link(tmp_path: Path):
    """A link at the path is never followed nor replaced."""
    (tmp_path / "report.json").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ModelBuildError, match="written once"):
        write_report(tmp_path / "report.json", _report())
    assert not (tmp_path / "elsewhere").exists()


KEY = f"models/resnet50/{'0f' * 32}/model.tar.gz"


@pytest.mark.parametrize(
    ("key", "recorded", "message"),
    [
        ("models/resnet50/../other/model.tar.gz", "models/resnet50/../other/model.tar.gz", "content-addressed"),
        (KEY.replace("resnet50", "other"), KEY.replace("resnet50", "other"), "content-addressed key of model"),
        (KEY, KEY.replace("0f", "aa", 1), "the report is of artifact"),
    ],
)
def test_publish_checks_the_key_and_the_reports_key(tmp_path: Path, key, recorded, message):
    """Only a content-addressed key of the report's model (model_build.key.artifact_key), the one it records."""
    path = write_report(tmp_path / "r.json", _report(artifact_key=recorded))
    with pytest.raises(ModelBuildError, match=message):
        publish_report(path, "bucket", key, client=None)


def test_publish_refuses_a_corrupt_report(tmp_path: Path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_report(artifact_key=KEY, speed=[1])))
    with pytest.raises(ModelBuildError, match=r"speed\.0"):
        build_report.publish_report(path, "bucket", KEY, client=None)


# --- settings -------------------------------------------------------------------------------------------------------

BASE = {"name": "m", "source": {"export": "resnet50"}, "max_batch_size": 8}


def test_accuracy_check_samples_and_ranges_are_not_part_of_the_key():
    """They change what the build measures, not the archive's bytes: the key stays the key."""
    plain = ModelSettings.model_validate(BASE)
    given = ModelSettings.model_validate(
        {**BASE, "tensorrt": {"accuracy": {"check": False, "input_ranges": {"token_type_ids": [0, 1]}}}}
    )
    sampled = ModelSettings.model_validate({**BASE, "tensorrt": {"accuracy": {"samples": "data/in.npz"}}})
    assert plain.build_fingerprint() == given.build_fingerprint() == sampled.build_fingerprint()
    assert ModelSettings.model_validate(given.model_dump(mode="json")) == given


@pytest.mark.parametrize(
    ("accuracy", "message"),
    [
        ({"input_ranges": {"x": [2, 1]}}, "finite low <= high"),
        ({"input_ranges": {"x": [0]}}, "at least 2"),
        ({"samples": "in.json"}, "pattern"),
        ({"samples": "in.npz", "input_ranges": {"x": [0, 1]}}, "apply to generated inputs"),
    ],
)
def test_accuracy_settings_are_checked(accuracy, message):
    with pytest.raises(ValidationError, match=message):
        ModelSettings.model_validate({**BASE, "tensorrt": {"accuracy": accuracy}})


# --- worst-case time ------------------------------------------------------------------------------------------------


def test_the_build_reports_worst_case_time_must_fit_the_build_timeout():
    """candidates x levels x (seconds + warm-up) + the check (startup + levels) must fit build.timeout_minutes."""
    tuned = ModelSettings.model_validate(
        {**BASE, "tune": {"slo_p99_ms": 50, "concurrency": [1, 2, 4, 8], "seconds": 60,
                          "candidates": {"max_queue_delay_microseconds": [0, 100, 1000, 5000]}}}
    )  # fmt: skip
    check_seconds, tune_seconds = worst_case_seconds(tuned)
    assert tune_seconds == 12 * 4 * 61 and check_seconds == 300 + 3 * 6
    assert budget_problem(tuned, 60) is None
    message = budget_problem(tuned, 30)
    assert message and "12 candidates x 4 levels x (60 + 1) s = 2928 s" in message and "1800 s" in message
    assert budget_problem(ModelSettings.model_validate(BASE), 5) is not None  # the check alone: 318 s > 300 s
    cpu = {**BASE, "platform": "onnxruntime_onnx", "instance_groups": [{"kind": "KIND_CPU"}]}
    assert budget_problem(ModelSettings.model_validate(cpu), 5) is None


def test_a_stage_whose_build_report_cannot_fit_the_build_timeout_is_refused_at_load(tmp_path: Path):
    """stage_config.loader: the numbers, naming the model's tune field; CodeBuild ends a build at TimeoutInMinutes."""
    import yaml
    from synth_helpers import PROJECT_ROOT

    from stage_config.loader import ConfigError, load_config

    document = yaml.safe_load((PROJECT_ROOT / "config" / "dev.yaml").read_text())
    model = next(m for m in document["models"] if m.get("platform") == "tensorrt_plan")
    model["tune"] = {"slo_p99_ms": 50, "concurrency": [1, 2, 4, 8], "seconds": 60}
    document["build"] = {**(document.get("build") or {}), "timeout_minutes": 10}
    (tmp_path / "dev.yaml").write_text(yaml.safe_dump(document))
    with pytest.raises(ConfigError, match=r"tune: the build report takes up to .* more than build.timeout_minutes 10"):
        load_config(tmp_path / "dev.yaml")


def test_report_cli_gives_one_error_line_for_corrupt_reports_and_bad_endpoints(tmp_path: Path):
    """`model_build report`: accuracy "x" and a malformed --endpoint-url are ERROR lines (exit 1), no traceback."""
    from cli_runner import run_cli
    from synth_helpers import PROJECT_ROOT

    dev = PROJECT_ROOT / "config" / "dev.yaml"
    (tmp_path / "report.json").write_text(json.dumps(_report(accuracy="x")))
    result = run_cli("report", "--config", str(dev), "--model", "resnet50", "--local", str(tmp_path))
    assert result.returncode == 1 and "accuracy" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("report", "--config", str(dev), "--model", "resnet50", "--gpu-target", "sm86",
                     "--endpoint-url", "not a url")  # fmt: skip
    assert result.returncode == 1 and "--endpoint-url 'not a url'" in result.stderr
    assert "Traceback" not in result.stderr
