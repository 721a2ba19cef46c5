"""The `tritonserver` command line that SageMaker's Triton container would run, from its environment.

A line-by-line mirror of Triton's `docker/sagemaker/serve` (triton-inference-server/server; the
script SageMaker runs as the container's entry point, ../shared/README.md "Container environment"),
with the two container paths made parameters: the single-model repository (/opt/ml/model, where
SageMaker extracts model.tar.gz) and the multi-model dummy repository (/tmp/sagemaker). Its refusals
are the script's own, so a repository that would fail on SageMaker fails here first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from endpoint_client.errors import LocalEndpointError

INFERENCE_TYPES = ("infer", "generate", "generate_stream")


@dataclass(frozen=True)
class ServePlan:
    arguments: list[str]  # after `tritonserver`
    environment: dict[str, str]  # what the script leaves set for tritonserver (ping mode, default model)
    multi_model: bool
    default_model: str | None


def _optional(env: Mapping[str, str], variable: str, flag: str) -> list[str]:
    value = env.get(variable, "")
    return [f"{flag}={value}"] if value else []


def serve_plan(env: Mapping[str, str], *, model_repository: Path, multi_model_repository: Path) -> ServePlan:
    """Arguments and environment for `tritonserver`, exactly as the serve script builds them from `env`."""
    multi_model = env.get("SAGEMAKER_MULTI_MODEL") == "true"
    ping_mode = env.get("SAGEMAKER_TRITON_OVERRIDE_PING_MODE") or ("live" if multi_model else "ready")
    repository = multi_model_repository if multi_model else model_repository

    args = [f"--model-repository={repository}"]
    args.append(f"--model-namespacing={env.get('SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING') or 'true'}")
    args += _optional(env, "SAGEMAKER_BIND_TO_PORT", "--sagemaker-port")
    args += _optional(env, "SAGEMAKER_SAFE_PORT_RANGE", "--sagemaker-safe-port-range")
    args.append(f"--allow-grpc={env.get('SAGEMAKER_TRITON_ALLOW_GRPC') or 'false'}")
    args.append(f"--allow-metrics={env.get('SAGEMAKER_TRITON_ALLOW_METRICS') or 'false'}")
    args += _optional(env, "SAGEMAKER_TRITON_METRICS_PORT", "--metrics-port")
    args += _optional(env, "SAGEMAKER_TRITON_GRPC_PORT", "--grpc-port")
    args += _optional(env, "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT", "--buffer-manager-thread-count")
    args += _optional(env, "SAGEMAKER_TRITON_THREAD_COUNT", "--sagemaker-thread-count")
    args.append(f"--log-verbose={env.get('SAGEMAKER_TRITON_LOG_VERBOSE') or 'true'}")
    args += _optional(env, "SAGEMAKER_TRITON_LOG_INFO", "--log-info")
    args += _optional(env, "SAGEMAKER_TRITON_LOG_WARNING", "--log-warning")
    args += _optional(env, "SAGEMAKER_TRITON_LOG_ERROR", "--log-error")
    shm_default = env.get("SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE") or "16777216"  # 16 MiB
    shm_growth = env.get("SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE") or "1048576"  # 1 MiB
    args.append(f"--backend-config=python,shm-default-byte-size={shm_default}")
    args.append(f"--backend-config=python,shm-growth-byte-size={shm_growth}")
    if env.get("SAGEMAKER_TRITON_TENSORFLOW_VERSION"):
        args.append(f"--backend-config=tensorflow,version={env['SAGEMAKER_TRITON_TENSORFLOW_VERSION']}")
    # SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT adds one --model-load-gpu-limit per GPU (nvidia-smi -L):
    # the local endpoint runs on CPU, zero GPUs, so like the script it adds none.
    args += env.get("SAGEMAKER_TRITON_ADDITIONAL_ARGS", "").split()  # unquoted in the script: word-split

    if not multi_model and (repository / "config.pbtxt").is_file():
        raise LocalEndpointError(
            f"incorrect directory structure: {repository}/config.pbtxt sits at the top of the archive; "
            "the archive must contain the model's folder (<name>/config.pbtxt, <name>/1/...)"
        )
    inference_type = env.get("SAGEMAKER_TRITON_INFERENCE_TYPE", "")
    if inference_type and inference_type not in INFERENCE_TYPES:
        raise LocalEndpointError(
            f"invalid SAGEMAKER_TRITON_INFERENCE_TYPE {inference_type!r}: must be one of {', '.join(INFERENCE_TYPES)}"
        )

    environment = {"SAGEMAKER_TRITON_PING_MODE": ping_mode}
    default_model = env.get("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME") or None
    if not multi_model:
        default_model = _single_model(repository, default_model)
        environment["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] = default_model
        args.append(f"--load-model={default_model}")
    return ServePlan(
        ["--allow-sagemaker=true", "--allow-http=false", "--model-control-mode=explicit", *args],
        environment,
        multi_model,
        default_model,
    )


def _single_model(repository: Path, default_model: str | None) -> str:
    if default_model:
        folder = repository / default_model
        # One folder of the archive, no more: "../x" or "/x" would load a model.py from outside (finding 8).
        if "/" in default_model or default_model in (".", "..") or "\x00" in default_model or folder.is_symlink():
            raise LocalEndpointError(
                f"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME {default_model[:200]!r} must name a model folder at the top of "
                f"the archive (folders: {', '.join(_model_dirs(repository)) or 'none'})"
            )
        if not folder.is_dir():
            raise LocalEndpointError(
                f"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME {default_model!r}: no such folder in the archive "
                f"(folders: {', '.join(_model_dirs(repository)) or 'none'})"
            )
        return default_model
    folders = _model_dirs(repository)
    if not folders:
        raise LocalEndpointError(f"no model found in the archive ({repository} has no folder)")
    if len(folders) > 1:
        raise LocalEndpointError(
            f"more than 1 model folder in the archive ({', '.join(folders)}): set SAGEMAKER_TRITON_DEFAULT_MODEL_NAME "
            "(--model-name) to the one to serve, e.g. the ensemble"
        )
    return folders[0]


def _model_dirs(repository: Path) -> list[str]:
    return sorted(p.name for p in repository.iterdir() if p.is_dir()) if repository.is_dir() else []
