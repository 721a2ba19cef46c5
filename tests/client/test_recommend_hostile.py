"""Hostile input to `recommend`: one ERROR line naming the field (exit 1), or argparse's usage error naming the
option (exit 2); never a traceback, never an AWS call (every case is a --dry-run or fails before one).

Ranges: ModelLatencyThreshold.ValueInMilliseconds is an Integer (botocore); an SLO over 60 s means nothing for a
real-time endpoint (InvokeEndpoint answers within 60 s). Traffic: "Run a custom load test" (users 1-3, spawn rate 0-3,
phase 120-3600 s). Instance types: serving_facts/catalogue.py and botocore's ProductionVariantInstanceType enum.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_recommend_request import CONFIG_PBTXT, argv

from endpoint_client import recommend
from endpoint_client.cli import main
from serving_facts.catalogue import INSTANCE_TYPES


@pytest.fixture
def model_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.pbtxt"
    path.write_text(CONFIG_PBTXT)
    return path


def replaced(args: list, option: str, value: str | None) -> list:
    """argv with `option`'s value replaced (or the option removed when value is None)."""
    index = args.index(option)
    return [*args[:index], *([] if value is None else [option, value]), *args[index + 2 :]]


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--model", "nope", "ERROR: --model 'nope': not a model of"),
        ("--instance-types", "ml.g9.xlarge", "ERROR: --instance-types: unknown instance type 'ml.g9.xlarge'"),
        ("--instance-types", "ml.c5.xlarge", "ERROR: --instance-types: ml.c5.xlarge has no GPU"),
        ("--instance-types", "ml.g5.xlarge,ml.g5.xlarge", "ERROR: --instance-types 'ml.g5.xlarge,ml.g5.xlarge': 1-10"),
        ("--instance-types", ",".join(sorted(INSTANCE_TYPES)[:11]), "ERROR: --instance-types"),
        ("--instance-types", "", "ERROR: --instance-types '': 1-10"),
        ("--role-arn", "arn:aws:iam::12:user/me", "ERROR: --role-arn 'arn:aws:iam::12:user/me': not an IAM role ARN"),
        ("--endpoint", "triton-mme-typo", "ERROR: --endpoint 'triton-mme-typo': not an endpoint of"),
        ("--endpoint", None, "ERROR: --endpoint: model 'bert_base' is served by triton-mme, triton-bert"),
        ("--region", None, "region: not set"),
        ("--config", "/nonexistent/dev.yaml", "ERROR: --config /nonexistent/dev.yaml: no such file"),
        ("--job-name", "bad_name", "ERROR: --job-name 'bad_name'"),
        ("--job-name", "dev-bert", "starting ir-"),
        ("--model-config", None, "ERROR: --model-config: model 'bert_base' has no config.pbtxt"),
        ("--region", "mars-1", "ERROR: --region 'mars-1' is not an AWS region code"),
        ("--region", "ap-southeast-7", "ERROR: --region ap-southeast-7: no SageMaker Triton 24.09 image"),
    ],
)
def test_refused_with_the_field(capsys, model_config, option, value, expected) -> None:
    assert main([*replaced(argv(model_config), option, value), "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


def test_inputs_and_model_config_together(capsys, model_config) -> None:
    assert main([*argv(model_config), "--tensor", "input_ids=INT32:1x128:" + ",".join(["1"] * 128), "--dry-run"]) == 1
    assert "ERROR: give inputs as invoke takes them or --model-config" in capsys.readouterr().err


def test_bucket_other_than_the_stages(capsys, model_config) -> None:
    assert main([*argv(model_config), "--bucket", "someone-elses-bucket", "--dry-run"]) == 1
    assert "dev.yaml: artifacts.bucket_name: the stage's bucket is" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--slo-p99-ms", "0"),
        ("--slo-p99-ms", "-5"),
        ("--slo-p99-ms", "abc"),
        ("--slo-p99-ms", "100.5"),
        ("--slo-p99-ms", "60001"),
        ("--slo-p99-ms", "1e3"),
        ("--users", "4"),
        ("--spawn-rate", "4"),
        ("--duration", "119"),
        ("--duration", "3601"),
        ("--job-duration", "18001"),
        ("--env-range", "SAGEMAKER_TRITON_LOG_VERBOSE=true"),
        ("--env-range", "SAGEMAKER_TRITON_THREAD_COUNT=1,2,3,4"),
        ("--env-range", "SAGEMAKER_TRITON_THREAD_COUNT=0"),
        ("--safety-factor", "1.5"),
        ("--stop-percentile", "P50"),
    ],
)
def test_usage_errors_name_the_option(capsys, model_config, option, value) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv(model_config), option, value, "--dry-run"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "Traceback" not in err


def test_catalogue_types_are_types_inference_recommender_tests() -> None:
    """Every catalogue type is in EndpointInputConfiguration.InstanceType's enum (botocore), so the catalogue is the
    only list a user meets."""
    from endpoint_client.recommend_request import enum_values

    offered = set(
        enum_values("CreateInferenceRecommendationsJob", "InputConfig", "EndpointConfigurations", "InstanceType")
    )
    assert set(INSTANCE_TYPES) <= offered


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
@example("0\x1f")  # str.strip() removes U+001F, int() does not: it once escaped as a bare ValueError
def test_slo_parser_takes_whole_milliseconds_only(text: str) -> None:
    parse = recommend._bounded_int(1, recommend.MAX_SLO_MS, "--slo-p99-ms")
    try:
        value = parse(text)
    except argparse.ArgumentTypeError as error:
        assert "--slo-p99-ms must be a whole number, 1-60000" in str(error)
    else:
        assert 1 <= value <= 60_000 and str(value) == text.strip().lstrip("0")
