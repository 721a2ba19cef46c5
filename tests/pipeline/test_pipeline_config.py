"""config/pipeline.yaml and the rules joining it to the stage files: each refusal names file, field and fix."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from pipeline_helpers import PROD_ACCOUNT, cross_account_documents, promoted_documents, write_documents
from synth_helpers import SHIPPED_CONFIG_DIR

from stage_config import ConfigError
from stage_config.pipeline import load_pipeline, load_pipeline_config


def _load(tmp_path: Path, documents: dict[str, dict]):
    return load_pipeline(write_documents(tmp_path, documents))


def test_repository_config_is_valid_with_placeholder_source():
    """The shipped config/pipeline.yaml (tests/shipped_config/: a user replaces the placeholder in config/)."""
    pipeline, stages = load_pipeline(SHIPPED_CONFIG_DIR / "pipeline.yaml")
    assert [s.name for s in pipeline.stages] == ["dev", "prod"]
    assert [s.approval for s in pipeline.stages] == [False, True]
    assert pipeline.source.is_placeholder
    assert pipeline.source.connection_arn == "arn:aws:codeconnections:us-east-1:111111111111:connection/REPLACE-ME"
    assert set(stages) == {"dev", "prod"}


def test_cross_account_config_loads(tmp_path):
    pipeline, stages = _load(tmp_path, cross_account_documents())
    assert pipeline.source.codecommit_repository == "triton-sagemaker"
    assert pipeline.stage("prod").regions == ["us-east-1", "us-west-2"]
    assert pipeline.smoke.latency_bound_ms("triton-bert") == 300
    assert pipeline.smoke.latency_bound_ms("triton-mme") == 2000
    assert stages["prod"].promote_from == "dev"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {
                "connection_arn": "arn:aws:codeconnections:us-east-1:111111111111:connection/x",
                "repository": "a/b",
                "codecommit_repository": "repo",
            },
            "give connection_arn \\+ repository, or codecommit_repository, not both",
        ),
        ({"connection_arn": "arn:aws:codeconnections:us-east-1:111111111111:connection/x"}, "repository is missing"),
        ({"branch": "main"}, "give connection_arn \\+ repository .* or codecommit_repository"),
        ({"connection_arn": "arn:aws:s3:::bucket", "repository": "a/b"}, "source.connection_arn: String should match"),
        (
            {"connection_arn": "arn:aws:codeconnections:us-east-1:111111111111:connection/x", "repository": "nope"},
            "source.repository: String should match",
        ),
    ],
)
def test_bad_source_is_refused(tmp_path, source, message):
    documents = promoted_documents()
    documents["pipeline"]["source"] = source
    with pytest.raises(ConfigError, match=message) as error:
        _load(tmp_path, documents)
    assert str(tmp_path / "pipeline.yaml") in str(error.value)


def test_stage_listed_twice_is_refused(tmp_path):
    documents = promoted_documents()
    documents["pipeline"]["stages"].append({"name": "dev"})
    with pytest.raises(
        ConfigError, match=r"pipeline.yaml: stages: \['dev'\] listed twice; each stage deploys once \(got"
    ):
        _load(tmp_path, documents)


def test_bad_wave_region_is_refused(tmp_path):
    documents = cross_account_documents()
    documents["pipeline"]["stages"][1]["regions"] = ["us-east-1", "mars-1"]
    with pytest.raises(
        ConfigError, match=r"stages\[1\]: regions must be AWS region names like us-east-1, got \['mars-1'\]"
    ):
        _load(tmp_path, documents)


def test_unknown_key_and_bad_latency_are_refused(tmp_path):
    documents = promoted_documents()
    documents["pipeline"]["smoke"] = {"max_latency_ms": 0, "retries": 3}
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, documents)
    assert "smoke.max_latency_ms: Input should be greater than 0 (got 0)" in str(error.value)
    assert "smoke.retries: unknown key" in str(error.value)


def test_missing_stage_file_is_refused(tmp_path):
    documents = promoted_documents()
    documents["pipeline"]["stages"].append({"name": "staging"})
    with pytest.raises(ConfigError, match=r"staging.yaml: no such config file"):
        _load(tmp_path, documents)


def test_promote_from_a_later_stage_is_refused(tmp_path):
    documents = promoted_documents()
    documents["pipeline"]["stages"] = [{"name": "prod"}, {"name": "dev"}]
    with pytest.raises(
        ConfigError,
        match=r"stages\[0\]: stage 'prod' promotes from 'dev', which must be an earlier stage of the pipeline",
    ):
        _load(tmp_path, documents)


def test_promote_from_a_stage_without_bucket_name_is_refused(tmp_path):
    documents = promoted_documents()
    del documents["dev"]["artifacts"]["bucket_name"]
    with pytest.raises(ConfigError, match=r"config/dev.yaml must set artifacts.bucket_name"):
        _load(tmp_path, documents)


def test_cross_account_promotion_needs_the_reader_account(tmp_path):
    documents = cross_account_documents()
    documents["dev"]["artifacts"]["reader_accounts"] = []
    with pytest.raises(ConfigError, match=rf"add {PROD_ACCOUNT} to config/dev.yaml artifacts.reader_accounts"):
        _load(tmp_path, documents)


def test_stage_environment_needs_a_pipeline_environment(tmp_path):
    documents = cross_account_documents()
    del documents["pipeline"]["account"]
    with pytest.raises(ConfigError, match=r"account: stages \['dev', 'prod'\] set an account or region"):
        _load(tmp_path, documents)


def test_latency_bound_for_unknown_endpoint_is_refused(tmp_path):
    documents = promoted_documents()
    documents["pipeline"]["smoke"]["endpoint_max_latency_ms"] = {"triton-typo": 100}
    with pytest.raises(ConfigError, match=r"smoke.endpoint_max_latency_ms: unknown endpoint 'triton-typo'"):
        _load(tmp_path, documents)


def test_missing_pipeline_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"pipeline.yaml: no such config file"):
        load_pipeline_config(tmp_path / "pipeline.yaml")


def test_documents_are_not_shared_between_tests():
    first = promoted_documents()
    first["pipeline"]["stages"].clear()
    assert promoted_documents()["pipeline"]["stages"] == copy.deepcopy(promoted_documents()["pipeline"]["stages"])
    assert promoted_documents()["pipeline"]["stages"]


def test_approved_stage_must_roll_out_gradually_with_rollback(tmp_path):
    documents = promoted_documents()
    documents["prod"]["endpoints"][1]["deployment"] = {"strategy": "blue_green", "traffic": "all_at_once"}
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, documents)
    assert str(error.value) == (
        f"{tmp_path / 'pipeline.yaml'}: stages[1]: stage 'prod' is approved before it deploys, so endpoint "
        "'triton-bert' must roll out gradually with auto-rollback: set deployment.traffic canary or linear (or "
        "strategy rolling) and rollback_alarms in config/prod.yaml (now: strategy blue_green, traffic all_at_once, "
        "rollback_alarms ['latency', 'errors_5xx'])"
    )


def test_smoke_step_installs_the_projects_pins():
    from stacks.pipeline_steps import SMOKE_PACKAGES, pinned_requirements

    pins = pinned_requirements(
        SMOKE_PACKAGES, "boto3==1.2.3\n# comment\nnumpy==2.0.0\ntritonclient[grpc,http]==2.73.0\n"
    )
    assert pins == ["boto3==1.2.3", "numpy==2.0.0", "tritonclient[grpc,http]==2.73.0"]
    with pytest.raises(
        ValueError, match=r"requirements\.txt pins no exact version of numpy; the smoke step needs them"
    ):
        pinned_requirements(SMOKE_PACKAGES, "boto3==1.2.3\nnumpy>=2\ntritonclient[http]==2.73.0\n")


def test_smoke_samples_name_a_served_model_and_a_file_one_request_carries(tmp_path):
    """smoke.raw_inputs: InvokeEndpoint's payload is at most 6 MiB (botocore sagemaker-runtime `BodyBlob` max,
    endpoint_client/limits.py); the step runs from the project root, so a sample lives inside the project."""
    documents = promoted_documents()
    documents["pipeline"]["smoke"]["raw_inputs"] = {
        "bert_typo": {"input_ids": "examples/images/cat.jpg"},
        "bert_base": {"input_ids": "/etc/hostname", "attention_mask": "examples/images"},
    }
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, documents)
    message = str(refused.value)
    assert "smoke.raw_inputs.bert_typo: no endpoint of the stages serves a model 'bert_typo'" in message
    assert "smoke.raw_inputs.bert_base.input_ids: '/etc/hostname' is not a file inside the project" in message
    assert "smoke.raw_inputs.bert_base.attention_mask: 'examples/images' is not a regular file" in message


def test_a_smoke_sample_larger_than_one_request_and_an_unknown_ensemble_input_are_refused(tmp_path):
    from synth_helpers import EXAMPLES_CONFIG_DIR

    from stage_config import load_stage
    from stage_config.pipeline import _raw_input_problems

    (tmp_path / "big.jpg").write_bytes(b"\xff" * (6_291_456 + 1))
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8")
    stages = {"ensemble": load_stage("ensemble", EXAMPLES_CONFIG_DIR)}
    problems = dict(
        _raw_input_problems({"image_classifier": {"image": "big.jpg", "pixels": "cat.jpg"}}, stages, tmp_path)
    )
    assert (
        "holds 6291457 bytes; one request carries at most 6291456"
        in problems["smoke.raw_inputs.image_classifier.image"]
    )
    assert problems["smoke.raw_inputs.image_classifier.pixels"] == (
        "ensemble 'image_classifier' has no input 'pixels' (inputs: ['image'])"
    )


def test_the_smoke_plan_carries_the_samples(tmp_path):
    from stacks.pipeline_steps import smoke_plan

    documents = promoted_documents()
    documents["pipeline"]["smoke"]["raw_inputs"] = {"bert_base": {"input_ids": "examples/images/cat.jpg"}}
    pipeline, stages = _load(tmp_path, documents)
    plan = smoke_plan(stages["dev"], pipeline)
    checks = {(e.name, m.name): m.raw_inputs for e in plan.endpoints for m in e.models}
    assert checks[("triton-bert", "bert_base")] == {"input_ids": "examples/images/cat.jpg"}
    assert checks[("triton-mme", "resnet50")] == {}
