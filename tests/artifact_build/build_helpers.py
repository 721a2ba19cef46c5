"""Helpers of the build tests: purpose-built configs and their stacks (synthesis: tests/synth_helpers.py)."""

from __future__ import annotations

from pathlib import Path

from synth_helpers import PROJECT_ROOT

HANDLER_PATH = PROJECT_ROOT / "triton_cdk" / "artifact_build" / "handlers" / "ensure_artifact" / "index.py"
SHARED = PROJECT_ROOT.parent / "shared"
SIMPLE_ONNX = SHARED / "triton-configs" / "valid" / "simple" / "1" / "model.onnx"
FLEET_ARN = "arn:aws:codebuild:us-east-1:111111111111:fleet/t4-fleet:0a1b2c3d"


def mixed_document() -> dict:
    """Every on-demand build environment in one config: A10G exact and ampere+, V100, CPU packaging,
    a local ONNX file, an S3 source, an unpacked single-model endpoint and a multi-model one."""
    gpu_model = {"platform": "tensorrt_plan", "max_batch_size": 8, "tensorrt": {"precision": "fp16"}}
    return {
        "stage": "mixed",
        "triton_release": "24.09",
        "build": {
            "timeout_minutes": 90,
            "queue_timeout_minutes": 30,
            "concurrency": 3,
            "log_retention_days": 14,
        },
        "models": [
            {"name": "resnet50", "source": {"export": "resnet50"}, **gpu_model},
            {"name": "local_trt", "source": {"path": str(SIMPLE_ONNX)}, **gpu_model},
            {
                "name": "s3_trt",
                "source": {"s3_uri": "s3://model-sources-bucket/onnx/model.onnx?versionId=v1"},
                **gpu_model,
            },
            {
                "name": "cpu_onnx",
                "source": {"path": str(SIMPLE_ONNX)},
                "platform": "onnxruntime_onnx",
                "max_batch_size": 8,
                "instance_groups": [{"kind": "KIND_CPU", "count": 1}],
            },
        ],
        "endpoints": [
            {
                "name": "mme-g5",
                "mode": "multi_model",
                "models": ["resnet50", "cpu_onnx"],
                "instance_type": "ml.g5.xlarge",
            },
            {
                "name": "g6-unpacked",
                "mode": "single_model",
                "models": ["resnet50"],
                "instance_type": "ml.g6.xlarge",
                "uncompressed_model_data": True,
            },
            {"name": "p3", "mode": "single_model", "models": ["local_trt"], "instance_type": "ml.p3.2xlarge"},
            {"name": "g5-s3", "mode": "single_model", "models": ["s3_trt"], "instance_type": "ml.g5.2xlarge"},
        ],
    }


def fleet_document() -> dict:
    return {
        "stage": "fleet",
        "triton_release": "24.09",
        "build": {"fleet": {"arn": FLEET_ARN, "gpu": "T4"}},
        "models": [{"name": "resnet50", "source": {"export": "resnet50"}, "platform": "tensorrt_plan"}],
        "endpoints": [
            {"name": "t4", "mode": "single_model", "models": ["resnet50"], "instance_type": "ml.g4dn.xlarge"}
        ],
    }


def promote_documents() -> tuple[dict, dict]:
    """(source stage "dev2" with a fixed bucket name, stage "prod2" promoting from it)."""
    source = {**fleet_document(), "stage": "dev2", "artifacts": {"bucket_name": "triton-dev2-artifacts"}}
    source["build"] = {}
    source["endpoints"] = [
        {"name": "g5", "mode": "multi_model", "models": ["resnet50"], "instance_type": "ml.g5.xlarge"},
        {
            "name": "g5-unpacked",
            "mode": "single_model",
            "models": ["resnet50"],
            "instance_type": "ml.g5.xlarge",
            "uncompressed_model_data": True,
        },
    ]
    # dev2 and prod2 in different regions and accounts: promotion must decrypt through dev2's region.
    source.update(account="111111111111", region="us-east-1")
    target = {**source, "stage": "prod2", "artifacts": {}, "promote_from": "dev2"}
    target.update(account="222222222222", region="eu-west-1")
    return source, target


def write_configs(folder: Path, *documents: dict) -> Path:
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    for document in documents:
        (folder / f"{document['stage']}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return folder


def stage_stacks(app, config, config_dir: Path | None = None) -> dict:
    """The artifact and build stacks of one stage (the endpoint stacks belong to other tests).

    A promoting stage's source config is read from `config_dir`, as app.py reads it from config/.
    """
    from stacks.artifact_plan import endpoint_artifacts
    from stacks.artifact_stack import ArtifactStack
    from stacks.build_stack import BuildStack
    from stacks.promotion import promotion_source_bucket
    from stage_config import load_stage

    source_bucket = source = None
    if config.promote_from:
        source = load_stage(config.promote_from, config_dir)
        source_bucket = promotion_source_bucket(config, source)

    prefix = f"Triton-{config.stage}"
    artifacts = ArtifactStack(app, f"{prefix}-Artifacts", config=config)
    located = [endpoint_artifacts(config, endpoint, PROJECT_ROOT) for endpoint in config.endpoints]
    build = BuildStack(
        app,
        f"{prefix}-Build",
        config=config,
        artifacts=artifacts,
        endpoint_artifacts=located,
        promotion_source_bucket=source_bucket,
        promotion_source_region=source.region if source else None,
        promotion_source_account=source.account if source else None,
    )
    return {f"{config.stage}-artifacts": artifacts, f"{config.stage}-build": build}
