"""Build once: prod may only need artifact keys dev builds; otherwise synth fails naming model and difference."""

from __future__ import annotations

import pytest
from synth_helpers import PROJECT_ROOT, new_app

from stacks.pipeline_stack import PipelineStack
from stacks.promotion import PromotionError, check_promotion, promotion_problems
from stacks.stage_plan import plan_stage
from stage_config import AppConfig, load_stage
from stage_config.pipeline import load_pipeline_config

DEV = load_stage("dev")
PROD = load_stage("prod")


def _artifacts(config: AppConfig) -> dict:
    """What the app hands the promotion check: the stage plan's artifacts, by model name."""
    return plan_stage(config, PROJECT_ROOT).stage_artifacts()


def _problems(target: AppConfig, source: AppConfig) -> list[str]:
    return promotion_problems(target, source, _artifacts(target), _artifacts(source))


def _with_model(config: AppConfig, name: str, **changes) -> AppConfig:
    models = [m.model_copy(update=changes) if m.name == name else m for m in config.models]
    return config.model_copy(update={"models": models})


def test_repository_prod_needs_exactly_the_keys_dev_builds():
    assert _problems(PROD, DEV) == []
    dev_keys = set(plan_stage(DEV, PROJECT_ROOT).artifact_keys())
    prod_keys = set(plan_stage(PROD, PROJECT_ROOT).artifact_keys())
    assert prod_keys == dev_keys
    assert len(dev_keys) == 3  # resnet50, yolov5s, bert_base: bert_base served twice, one key


def test_another_triton_release_is_refused_naming_each_model():
    prod = PROD.model_copy(update={"triton_release": "25.04"})
    problems = _problems(prod, DEV)
    assert [p.split("'")[1] for p in problems] == ["resnet50", "yolov5s", "bert_base"]
    assert "differs (dev -> prod): triton_release '24.09' -> '25.04'" in problems[0]


def test_changed_build_setting_is_refused_naming_the_field():
    tensorrt = PROD.model("resnet50").tensorrt.model_copy(update={"precision": "fp32"})
    prod = _with_model(PROD, "resnet50", tensorrt=tensorrt)
    (problem,) = _problems(prod, DEV)
    assert problem.startswith("model 'resnet50': stage 'prod' needs models/resnet50/")
    assert "tensorrt {" in problem and "'precision': 'fp16'" in problem and "'precision': 'fp32'" in problem
    assert "Make config/prod.yaml match config/dev.yaml for this model, or deploy the change to dev first" in problem


def test_other_gpu_target_is_refused_naming_the_target():
    endpoints = [
        e.model_copy(update={"instance_type": "ml.g6.xlarge"}) if e.name == "triton-bert" else e for e in PROD.endpoints
    ]
    prod = PROD.model_copy(update={"endpoints": endpoints})
    problems = _problems(prod, DEV)
    assert len(problems) == 1
    assert "model 'bert_base'" in problems[0] and "GPU target" in problems[0]


def test_model_dev_never_serves_is_refused():
    endpoints = [e.model_copy(update={"models": ["resnet50"]}) if e.name == "triton-mme" else e for e in DEV.endpoints]
    dev = DEV.model_copy(update={"endpoints": endpoints})
    problems = _problems(PROD, dev)
    assert any(
        p.startswith("model 'yolov5s': stage 'prod' serves it but stage 'dev' builds no artifact") for p in problems
    )


def test_pipeline_stack_refuses_before_building_anything():
    prod = PROD.model_copy(update={"triton_release": "25.04", "promote_from": "dev"})
    app = new_app()
    with pytest.raises(PromotionError, match=r"stage 'prod' promotes from 'dev' but would need artifacts 'dev' never"):
        PipelineStack(app, "Pipeline", pipeline_config=load_pipeline_config(), stage_configs={"dev": DEV, "prod": prod})
    assert app.node.try_find_child("Pipeline").node.try_find_child("Pipeline") is None


def test_check_promotion_passes_silently_when_keys_match():
    check_promotion(PROD, DEV, _artifacts(PROD), _artifacts(DEV))
