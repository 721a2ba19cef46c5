"""The tritonserver command line derived from the container environment, as docker/sagemaker/serve does."""

from __future__ import annotations

from pathlib import Path

import pytest

from endpoint_client.errors import LocalEndpointError
from endpoint_client.sagemaker_serve import serve_plan


def repository(tmp_path: Path, *models: str) -> Path:
    root = tmp_path / "opt-ml-model"
    for model in models:
        (root / model / "1").mkdir(parents=True)
        (root / model / "config.pbtxt").write_text(f'name: "{model}"\n')
    root.mkdir(exist_ok=True)
    return root


def plan(tmp_path: Path, env: dict[str, str], *models: str):
    return serve_plan(env, model_repository=repository(tmp_path, *models), multi_model_repository=tmp_path / "mme")


def test_single_model_defaults_match_the_serve_script(tmp_path: Path) -> None:
    result = plan(tmp_path, {"SAGEMAKER_BIND_TO_PORT": "8085"}, "add_sub")

    assert result.arguments == [
        "--allow-sagemaker=true",
        "--allow-http=false",
        "--model-control-mode=explicit",
        f"--model-repository={tmp_path / 'opt-ml-model'}",
        "--model-namespacing=true",
        "--sagemaker-port=8085",
        "--allow-grpc=false",
        "--allow-metrics=false",
        "--log-verbose=true",
        "--backend-config=python,shm-default-byte-size=16777216",
        "--backend-config=python,shm-growth-byte-size=1048576",
        "--load-model=add_sub",
    ]
    assert result.environment == {
        "SAGEMAKER_TRITON_PING_MODE": "ready",
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "add_sub",
    }
    assert not result.multi_model


def test_container_settings_become_flags(tmp_path: Path) -> None:
    env = {
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "ensemble",
        "SAGEMAKER_TRITON_THREAD_COUNT": "4",
        "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": "2",
        "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432",
        "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "2097152",
        "SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--exit-timeout-secs=5  --strict-model-config=false",
        "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": "0.8",  # one flag per GPU: none on CPU
    }

    arguments = plan(tmp_path, env, "ensemble", "pre", "infer").arguments

    for flag in (
        "--sagemaker-thread-count=4",
        "--buffer-manager-thread-count=2",
        "--log-verbose=false",
        "--backend-config=python,shm-default-byte-size=33554432",
        "--backend-config=python,shm-growth-byte-size=2097152",
        "--exit-timeout-secs=5",
        "--strict-model-config=false",
        "--load-model=ensemble",
    ):
        assert flag in arguments
    assert not any(a.startswith("--model-load-gpu-limit") for a in arguments)


def test_multi_model_uses_the_dummy_repository_and_live_ping(tmp_path: Path) -> None:
    result = plan(tmp_path, {"SAGEMAKER_MULTI_MODEL": "true"})

    assert f"--model-repository={tmp_path / 'mme'}" in result.arguments
    assert not any(a.startswith("--load-model") for a in result.arguments)
    assert result.environment == {"SAGEMAKER_TRITON_PING_MODE": "live"}
    assert result.multi_model


def test_ping_mode_override(tmp_path: Path) -> None:
    env = {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TRITON_OVERRIDE_PING_MODE": "ready"}
    assert plan(tmp_path, env).environment["SAGEMAKER_TRITON_PING_MODE"] == "ready"


def test_the_only_model_is_loaded_without_a_default_name(tmp_path: Path) -> None:
    result = plan(tmp_path, {}, "bert_base")
    assert result.default_model == "bert_base"
    assert "--load-model=bert_base" in result.arguments


@pytest.mark.parametrize(
    ("env", "models", "message"),
    [
        ({}, (), "no model found in the archive"),
        ({}, ("a", "b"), r"more than 1 model folder in the archive \(a, b\): set SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"),
        (
            {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "c"},
            ("a", "b"),
            r"'c': no such folder in the archive \(folders: a, b\)",
        ),
        ({"SAGEMAKER_TRITON_INFERENCE_TYPE": "stream"}, ("a",), "invalid SAGEMAKER_TRITON_INFERENCE_TYPE 'stream'"),
    ],
)
def test_the_serve_scripts_refusals(tmp_path: Path, env: dict[str, str], models: tuple[str, ...], message: str) -> None:
    with pytest.raises(LocalEndpointError, match=message):
        plan(tmp_path, env, *models)


def test_config_at_the_archive_root_is_refused(tmp_path: Path) -> None:
    root = repository(tmp_path, "add_sub")
    (root / "config.pbtxt").write_text('name: "add_sub"\n')

    with pytest.raises(LocalEndpointError, match=r"config\.pbtxt sits at the top of the archive"):
        serve_plan({}, model_repository=root, multi_model_repository=tmp_path / "mme")
