"""Helpers of the serving tests: configs and template look-ups (synthesis: tests/synth_helpers.py).

`dev` and `prod` are the shipped configs; `custom` is one purpose-built config whose endpoints
cover what the defaults do not (multi-GPU scaling, CPU models, uncompressed data, VPC, data
capture, rolling, linear, extra variants). Templates are read from the cloud assembly, so
each app is synthesized (and cdk-nag run over it) exactly once.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from aws_cdk.assertions import Template
from synth_helpers import PROJECT_ROOT, config_folder, read_shipped_config  # noqa: F401 (PROJECT_ROOT: imported from here)

DEV_DOCUMENT = read_shipped_config("dev")  # as shipped (tests/shipped_config/), whatever the user set in config/

CPU_GROUP = [{"count": 1, "kind": "KIND_CPU"}]
CUSTOM_MODELS = [
    {"name": "add_sub", "source": {"path": "examples/models/add_sub"}, "platform": "python", "max_batch_size": 8,
     "instance_groups": CPU_GROUP},
    {"name": "simple_onnx", "source": {"s3_uri": "s3://example-models/simple/model.onnx"},
     "platform": "onnxruntime_onnx", "max_batch_size": 8, "instance_groups": CPU_GROUP},
]  # fmt: skip

CUSTOM_ENDPOINTS = [
    {
        # 4 x A10G: per-GPU targets are multiplied by 4.
        "name": "multi-gpu",
        "mode": "single_model",
        "models": ["bert_base"],
        "instance_type": "ml.g5.12xlarge",
        "initial_instance_count": 2,
        # No volume_size_gb: ml.g5 has NVMe instance storage only (catalogue nvme_storage_only).
        "model_data_download_timeout_seconds": 1200,
        "container_startup_health_check_timeout_seconds": 900,
        "container": {
            "log_verbose": True,
            "thread_count": 16,
            "buffer_manager_thread_count": 4,
            "shm_default_byte_size": 33554432,
            "shm_growth_byte_size": 2097152,
            "model_load_gpu_limit": 0.8,
            "ping_mode": "live",
            "additional_args": "--backend-config=tensorrt,version-compatible=true",
            "extra_environment": {"OMP_NUM_THREADS": "1"},
        },
        "autoscaling": {
            "min_capacity": 2,
            "max_capacity": 6,
            "invocations_per_instance": 300,
            "gpu_utilization_percent": 70,
            "scale_in_cooldown_seconds": 600,
            "scale_out_cooldown_seconds": 120,
            "disable_scale_in": True,
            "scheduled": [
                {"name": "night", "schedule": "cron(0 20 * * ? *)", "min_capacity": 1, "time_zone": "Europe/Berlin"},
                {"name": "morning", "schedule": "cron(0 6 * * ? *)", "min_capacity": 2, "max_capacity": 6},
            ],
        },
        "alarms": {"latency_p99_ms": 250, "gpu_memory_percent": 80, "cpu_percent": 50, "period_seconds": 60},
        "deployment": {"strategy": "rolling", "rolling_batch_percent": 25, "wait_seconds": 180,
                       "maximum_execution_timeout_seconds": 7200, "rollback_alarms": ["latency", "gpu_memory"]},
    },
    {
        "name": "cpu-python",
        "mode": "single_model",
        "models": ["add_sub"],
        "instance_type": "ml.c5.xlarge",
        "uncompressed_model_data": True,
        "volume_size_gb": 50,  # ml.c5 instances take an EBS volume
        "network_isolation": True,
        "vpc": {"subnet_ids": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
                "security_group_ids": ["sg-0123456789abcdef0"]},
        "data_capture": {"enabled": True, "sampling_percent": 50, "capture_response": False},
        "autoscaling": {"min_capacity": 1, "max_capacity": 3, "invocations_per_instance": 1000},
        # Rollback alarms must reach ALARM within the 60 s bake: one 60 s period.
        "alarms": {"period_seconds": 60, "evaluation_periods": 2, "datapoints_to_alarm": 1},
        "deployment": {"strategy": "blue_green", "traffic": "linear", "linear_step_percent": 20, "wait_seconds": 120,
                       "termination_wait_seconds": 120, "rollback_alarms": ["errors_5xx", "cpu"]},
    },
    {
        "name": "cpu-mme",
        "mode": "multi_model",
        "models": ["add_sub", "simple_onnx"],
        "instance_type": "ml.c5.2xlarge",
        "network_isolation": False,  # the per-endpoint opt-out (e.g. a Python model that calls out)
        "deployment": {"strategy": "blue_green", "traffic": "canary", "canary_percent": 10, "wait_seconds": 900,
                       "rollback_alarms": ["disk", "errors_5xx"]},
    },
    {
        "name": "two-variants",
        "mode": "single_model",
        "models": ["resnet50"],
        "instance_type": "ml.g5.xlarge",
        "initial_weight": 0.8,
        "extra_variants": [{"name": "Larger", "instance_type": "ml.g5.2xlarge", "initial_weight": 0.2}],
        "autoscaling": {"min_capacity": 1, "max_capacity": 2, "gpu_utilization_percent": 60},
    },
]  # fmt: skip


def custom_document() -> dict:
    document = copy.deepcopy(DEV_DOCUMENT)
    document["stage"] = "test"
    document["notifications"] = {"emails": ["oncall@example.com"]}
    document["models"] += copy.deepcopy(CUSTOM_MODELS)
    document["endpoints"] = copy.deepcopy(CUSTOM_ENDPOINTS)
    return document


def custom_config_folder() -> Path:
    """The folder holding `custom_document()` as test.yaml, shared with the contract tests (one synth)."""
    return config_folder("tests/serving:custom", {"test": custom_document()})


def write_config(directory: Path, document: dict) -> Path:
    path = directory / f"{document['stage']}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def only(template: Template, resource_type: str, props: dict | None = None) -> tuple[str, dict]:
    """The one resource of a type (matching props), as (logical id, resource)."""
    from aws_cdk.assertions import Match

    found = template.find_resources(resource_type, {"Properties": Match.object_like(props)} if props else None)
    assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
    return next(iter(found.items()))
