"""One stage plan (models -> artifacts -> keys -> endpoints) per stage: the stage's stacks, the promotion
check and the pipeline's smoke role and smoke plan all read it; none recomputes the artifacts."""

from __future__ import annotations

import ast

import pytest
from synth_helpers import PROJECT_ROOT, new_app

import stacks.stage_plan
from stacks.artifact_plan import endpoint_artifacts
from stacks.pipeline_stack import add_pipeline_stack
from stacks.pipeline_steps import smoke_plan
from stacks.promotion import collect_stage_artifacts
from stacks.stage_plan import plan_stage
from stage_config import load_stage
from stage_config.pipeline import load_pipeline


def test_the_plan_holds_what_the_promotion_check_computes():
    dev = load_stage("dev")
    plan = plan_stage(dev, PROJECT_ROOT)
    assert list(plan.endpoints) == [e.name for e in dev.endpoints]
    assert {n: [a.key for a in v] for n, v in plan.stage_artifacts().items()} == {
        n: [a.key for a in v]
        for n, v in collect_stage_artifacts(endpoint_artifacts(dev, e, PROJECT_ROOT) for e in dev.endpoints).items()
    }
    assert plan.artifact_keys() == sorted({a.key for v in plan.stage_artifacts().values() for a in v})


def test_the_pipeline_plans_each_stage_once(monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    original = stacks.stage_plan.endpoint_artifacts

    def counting(config, endpoint, base_dir):
        calls.append(f"{config.stage}/{endpoint.name}")
        return original(config, endpoint, base_dir)

    monkeypatch.setattr(stacks.stage_plan, "endpoint_artifacts", counting)
    config_dir = PROJECT_ROOT / "config"
    pipeline_config, stage_configs = load_pipeline(config_dir / "pipeline.yaml", config_dir)
    stack = add_pipeline_stack(new_app(), pipeline_config, stage_configs)
    assert sorted(calls) == sorted(f"{c.stage}/{e.name}" for c in stage_configs.values() for e in c.endpoints)
    for name, triton_stages in stack.stages.items():
        for triton_stage in triton_stages:
            assert triton_stage.stacks.plan is stack.plans[name]
            smoke = smoke_plan(triton_stage.config, pipeline_config, plan=triton_stage.stacks.plan)
            assert {m.artifact_key for e in smoke.endpoints for m in e.models} <= set(stack.plans[name].artifact_keys())


def _computes_endpoint_artifacts(path) -> bool:
    """Imports `endpoint_artifacts` from stacks/artifact_plan.py (calls through the plan's accessor only read)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "stacks.artifact_plan"
            and any(alias.name == "endpoint_artifacts" for alias in node.names)
        ):
            return True
        if isinstance(node, ast.Import) and any(alias.name == "stacks.artifact_plan" for alias in node.names):
            return True
    return False


def test_only_the_stage_plan_computes_endpoint_artifacts():
    """One call site (issue #13): the build stack, endpoint stacks, promotion and pipeline read the plan."""
    computing = [
        str(path.relative_to(PROJECT_ROOT))
        for folder in ("stacks", "triton_cdk")
        for path in sorted((PROJECT_ROOT / folder).rglob("*.py"))
        if _computes_endpoint_artifacts(path)
    ]
    assert computing == ["stacks/stage_plan.py"]
