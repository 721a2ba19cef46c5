"""The typed configuration: every bad value is refused with file, field path and what is allowed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from synth_helpers import read_shipped_config

from stage_config import ConfigError, load_config, load_stage

DEV = read_shipped_config("dev")  # as shipped (tests/shipped_config/), whatever the user set in config/


def _write(tmp_path: Path, document: dict, stage: str = "dev") -> Path:
    path = tmp_path / f"{stage}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _mutated(change) -> dict:
    document = copy.deepcopy(DEV)
    change(document)
    return document


def _set(path: str, value):
    """Mutation that sets a dotted path ("endpoints.0.autoscaling.min_capacity")."""

    def change(document: dict) -> None:
        *parents, leaf = path.split(".")
        node = document
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(leaf) if leaf.isdigit() else leaf] = value

    return change


def _cpu_onnx_endpoint(document: dict) -> None:
    document["models"].append(
        {
            "name": "tabular",
            "source": {"path": "model.onnx"},
            "platform": "onnxruntime_onnx",
            "instance_groups": [{"count": 1, "kind": "KIND_CPU"}],
        }
    )
    document["endpoints"].append(
        {
            "name": "cpu-endpoint",
            "mode": "single_model",
            "models": ["tabular"],
            "instance_type": "ml.c5.xlarge",
            "autoscaling": {"min_capacity": 1, "max_capacity": 2, "gpu_utilization_percent": 60},
        }
    )


BAD_CONFIGS = {
    "unknown top-level key": (_set("tritonrelease", "24.09"), "tritonrelease: unknown key"),
    "unknown nested key": (_set("endpoints.0.autoscalling", {}), "endpoints[0].autoscalling: unknown key"),
    "unknown instance type": (
        _set("endpoints.0.instance_type", "ml.g5.xlrge"),
        "endpoints[0].instance_type: unknown instance type 'ml.g5.xlrge' (did you mean ml.g5.xlarge",
    ),
    "TensorRT on a CPU instance": (
        _set("endpoints.1.instance_type", "ml.c5.xlarge"),
        "endpoints[1].instance_type: model 'bert_base' is a TensorRT plan and needs a GPU instance",
    ),
    "min > max capacity": (
        _set("endpoints.0.autoscaling.min_capacity", 3),
        "endpoints[0].autoscaling: min_capacity 3 > max_capacity 2",
    ),
    "endpoint name over 63 characters": (
        _set("endpoints.0.name", "e" * 64),
        "endpoints[0].name: String should have at most 63 characters",
    ),
    "endpoint name SageMaker rejects": (
        _set("endpoints.0.name", "triton_mme"),
        "endpoints[0].name: String should match pattern '^(?:[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})$'",
    ),
    "deployed endpoint name over 63 characters": (
        _set("endpoints.0.name", "e" * 62),
        "endpoints[0].name: deployed name 'dev-" + "e" * 62 + "' is 66 characters; SageMaker allows 63",
    ),
    "model twice on one endpoint": (
        _set("endpoints.0.models", ["resnet50", "resnet50"]),
        "endpoints[0]: models listed twice on one endpoint: ['resnet50']",
    ),
    "Triton release the SDK does not know": (
        _set("triton_release", "24.10"),
        "triton_release: '24.10' is not a release the SageMaker SDK knows; use one of 23.12, 24.01",
    ),
    "multi-model endpoint on a multi-GPU instance": (
        _set("endpoints.0.instance_type", "ml.g5.12xlarge"),
        "endpoints[0].instance_type: multi-model endpoints need a single-GPU instance; ml.g5.12xlarge has 4 GPUs",
    ),
    "endpoint serves an unknown model": (
        _set("endpoints.0.models", ["resnet5"]),
        "endpoints[0].models: unknown model 'resnet5'; configured models: bert_base, resnet50, yolov5s",
    ),
    "Triton-invalid model name": (_set("models.0.name", "-resnet"), "models[0].name: String should match pattern"),
    "duplicate model names": (
        _set("models.1.name", "resnet50"),
        "models: model name 'resnet50' is used twice; names must be unique",
    ),
    "duplicate endpoint names": (
        _set("endpoints.1.name", "triton-mme"),
        "endpoints: endpoint name 'triton-mme' is used twice; names must be unique",
    ),
    "GPU scaling on a CPU instance": (
        _cpu_onnx_endpoint,
        "endpoints[2].autoscaling.gpu_utilization_percent: GPU scaling needs a GPU instance; ml.c5.xlarge has none",
    ),
    "preferred batch size above max_batch_size": (
        _set("models.0.dynamic_batching.preferred_batch_sizes", [8, 64]),
        "models[0]: dynamic_batching.preferred_batch_sizes [64] exceed max_batch_size 32",
    ),
    "int8 without calibration cache": (
        _set("models.0.tensorrt", {"precision": "int8"}),
        "models[0].tensorrt: precision 'int8' needs 'calibration_cache'",
    ),
    "canary without rollback alarms": (
        _set("endpoints.0.deployment", {"traffic": "canary", "rollback_alarms": []}),
        "endpoints[0].deployment: traffic 'canary' without rollback_alarms",
    ),
    "model download timeout below SageMaker's range": (
        _set("endpoints.0.model_data_download_timeout_seconds", 30),
        "endpoints[0].model_data_download_timeout_seconds: Input should be greater than or equal to 60 (got 30)",
    ),
    "startup timeout above SageMaker's range": (
        _set("endpoints.0.container_startup_health_check_timeout_seconds", 4000),
        "endpoints[0].container_startup_health_check_timeout_seconds: Input should be less than or equal to 3600",
    ),
    "volume size above SageMaker's range": (
        _set("endpoints.0.volume_size_gb", 1000),
        "endpoints[0].volume_size_gb: Input should be less than or equal to 512",
    ),
    "single-model endpoint with two models": (
        _set("endpoints.1.models", ["bert_base", "resnet50"]),
        "endpoints[1]: mode 'single_model' serves exactly one model, got 2; use mode 'multi_model'",
    ),
    "T4 without a reserved fleet": (
        _set("endpoints.1.instance_type", "ml.g4dn.xlarge"),
        "endpoints[1].instance_type: ml.g4dn.xlarge (T4) cannot be matched. Options:",
    ),
    "V100 with a release that dropped Volta": (
        lambda d: (_set("triton_release", "25.04")(d), _set("endpoints.1.instance_type", "ml.p3.2xlarge")(d)),
        "endpoints[1].instance_type: Triton 25.04 does not support V100 (compute capability 7.0)",
    ),
    "region without a Triton image": (
        _set("region", "us-gov-west-1"),
        "region: no SageMaker Triton 24.09 image in region 'us-gov-west-1'",
    ),
    "account id not 12 digits": (_set("account", "12345"), "account: String should match pattern '^[0-9]{12}$'"),
    "two sources for one model": (
        _set("models.0.source", {"export": "resnet50", "path": "x.onnx"}),
        "models[0].source: give exactly one of 'path', 's3_uri' or 'export' (got path, export)",
    ),
    "KIND_GPU instance group on a CPU instance": (
        lambda d: (
            _cpu_onnx_endpoint(d),
            _set("models.3.instance_groups", [{"count": 1, "kind": "KIND_GPU"}])(d),
            _set("endpoints.2.autoscaling", {"invocations_per_instance": 10})(d),
        ),
        "endpoints[2].instance_type: model 'tabular' has KIND_GPU instance groups but ml.c5.xlarge has no GPU",
    ),
    "initial count below autoscaling minimum": (
        _set("endpoints.0.autoscaling.min_capacity", 2),
        "endpoints[0]: initial_instance_count 1 < autoscaling.min_capacity 2",
    ),
    "not an e-mail address": (_set("notifications.emails", ["ops"]), "notifications: not e-mail addresses: ['ops']"),
    "reader account not an account id": (
        _set("artifacts.reader_accounts", ["prod"]),
        "artifacts: reader_accounts must be 12-digit account ids, got ['prod']",
    ),
}


def test_the_default_stages_are_valid() -> None:
    for stage in ("dev", "prod"):
        config = load_stage(stage)
        assert config.stage == stage
        assert [e.name for e in config.endpoints] == ["triton-mme", "triton-bert"]
        assert config.endpoints[0].models == ["resnet50", "yolov5s", "bert_base"]
        assert {e.instance_type for e in config.endpoints} == {"ml.g5.xlarge"}


def test_there_are_at_least_twenty_bad_configs() -> None:
    assert len(BAD_CONFIGS) >= 20


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_is_refused_with_file_field_and_rule(case: str, tmp_path: Path) -> None:
    change, expected = BAD_CONFIGS[case]
    path = _write(tmp_path, _mutated(change))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert f"{path}: {expected}" in message, message


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    def two_problems(document: dict) -> None:
        _set("endpoints.0.instance_type", "ml.g5.12xlarge")(document)
        _set("endpoints.1.models", ["bert"])(document)

    with pytest.raises(ConfigError) as refused:
        load_config(_write(tmp_path, _mutated(two_problems)))
    lines = str(refused.value).splitlines()
    assert len(lines) == 2
    assert "endpoints[0].instance_type" in lines[0] and "endpoints[1].models" in lines[1]


def test_stage_must_match_its_file(tmp_path: Path) -> None:
    path = _write(tmp_path, _mutated(_set("stage", "prod")))
    with pytest.raises(ConfigError, match=r"dev\.yaml: stage: is 'prod' but the file is for stage 'dev'"):
        load_config(path)


def test_invalid_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dev.yaml"
    path.write_text("models: [unclosed\n")
    with pytest.raises(ConfigError, match=r"dev\.yaml: not valid YAML"):
        load_config(path)


def test_unknown_stage_lists_the_stages_there_are(tmp_path: Path) -> None:
    _write(tmp_path, DEV)
    with pytest.raises(ConfigError, match=r"staging\.yaml: no such config file \(stages in .*: dev\)"):
        load_stage("staging", tmp_path)


def test_ampere_plus_targets_and_fleets_are_accepted(tmp_path: Path) -> None:
    def g6_and_t4_fleet(document: dict) -> None:
        _set("endpoints.1.instance_type", "ml.g6.xlarge")(document)
        _set("endpoints.0.instance_type", "ml.g4dn.xlarge")(document)
        document["build"] = {"fleet": {"arn": "arn:aws:codebuild:us-east-1:111111111111:fleet/t4:1", "gpu": "T4"}}

    # T4 via a T4 fleet is an exact match; g6 (L4) via a T4 fleet is not.
    with pytest.raises(ConfigError) as refused:
        load_config(_write(tmp_path, _mutated(g6_and_t4_fleet)))
    assert "endpoints[1].instance_type: build.fleet has T4 hosts" in str(refused.value)
    assert "endpoints[0]" not in str(refused.value)

    config = load_config(_write(tmp_path, _mutated(_set("endpoints.1.instance_type", "ml.p5.48xlarge"))))
    assert config.endpoints[1].instance_type == "ml.p5.48xlarge"
