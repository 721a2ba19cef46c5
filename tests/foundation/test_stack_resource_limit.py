"""CloudFormation's 500 resources per stack is aws-cdk-lib's check at synth, and app.py reports a refused stack in
one line naming the stage and the endpoint (or build / artifact stack), without a traceback.

Source: CloudFormation User Guide, "Understand CloudFormation quotas" (Resources: 500 per stack); aws-cdk-lib
2.275.0 core/lib/stack.js (`MAX_RESOURCES = 500`, context key `@aws-cdk/core:stackResourceLimit`, error
`TooManyResourcesInStack`). The stage config's own estimate (stage_config/limits.py) was removed (issue #23 item 3).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from synth_helpers import PROJECT_ROOT, cdk_context, new_app, shipped_path

from stacks.resource_limit import CONTEXT_KEY, too_many_resources_message

DEV = yaml.safe_load(shipped_path("config/dev.yaml").read_text())


def _stack_of(count: int, tmp_path: Path) -> cdk.App:
    app = new_app(tmp_path / "cdk.out")
    stack = cdk.Stack(app, "Triton-dev-Endpoint-triton-bert")
    for index in range(count):
        cdk.CfnWaitConditionHandle(stack, f"Handle{index}")
    return app


def test_cdk_json_leaves_the_limit_at_cloudformations() -> None:
    """No context key raises or turns off (0) aws-cdk-lib's per-stack maximum."""
    assert CONTEXT_KEY not in cdk_context()


def test_aws_cdk_lib_refuses_501_resources_with_the_apps_context(tmp_path: Path) -> None:
    _stack_of(500, tmp_path / "at").synth()
    with pytest.raises(RuntimeError) as refused:
        _stack_of(501, tmp_path / "over").synth()
    message = too_many_resources_message(refused.value)
    assert message == (
        "stage dev, endpoint 'triton-bert' (stack Triton-dev-Endpoint-triton-bert): 501 resources, over "
        "CloudFormation's 500 per stack (aws-cdk-lib refused it at synth: TooManyResourcesInStack); use fewer "
        "extra_variants, models (inference components) or notifications.emails. Its resources: "
        "AWS::CloudFormation::WaitConditionHandle (501)"
    )


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("Triton-prod-Build", "stage prod, the build stack Triton-prod-Build: 612 resources"),
        ("Triton-prod-Artifacts", "stage prod, the artifacts stack Triton-prod-Artifacts: 612 resources"),
        (  # a stage inside the pipeline app: the stack id is the path's last part
            "Triton-Pipeline/dev/Triton-dev-Endpoint-triton-mme",
            "stage dev, endpoint 'triton-mme' (stack Triton-dev-Endpoint-triton-mme): 612 resources",
        ),
        ("Other", "stack Other: 612 resources"),
    ],
)
def test_the_message_names_the_stack_of_the_stage(path: str, named: str) -> None:
    error = RuntimeError(
        f"TooManyResourcesInStack: Number of resources in stack '{path}': 612 is greater than allowed maximum of "
        "500: AWS::SNS::Subscription (400)\n    at jsii stack frames"
    )
    message = too_many_resources_message(error)
    assert message is not None and message.startswith(named) and message.endswith("AWS::SNS::Subscription (400)")


def test_other_errors_are_not_taken_for_it() -> None:
    assert too_many_resources_message(RuntimeError("ValidationFailed: 3 findings")) is None
    assert too_many_resources_message(RuntimeError("")) is None


def test_app_py_reports_a_stage_over_the_limit_in_one_line(tmp_path: Path) -> None:
    """180 models on one multi-model endpoint: each is a Custom::TritonModelArtifact with its WaitCondition and
    handle in the build stack, over 500; the config itself is valid (the loader has no estimate of its own)."""
    resnet = next(m for m in DEV["models"] if m["name"] == "resnet50")
    models = [{**copy.deepcopy(resnet), "name": f"m{index:03d}"} for index in range(180)]
    endpoint = {**copy.deepcopy(DEV["endpoints"][0]), "models": [m["name"] for m in models]}
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    # JSON is YAML without anchors: the loader refuses more than 200 aliases.
    (config_dir / "dev.yaml").write_text(json.dumps({**DEV, "models": models, "endpoints": [endpoint]}))
    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "CDK_CONTEXT_JSON": json.dumps({**cdk_context(), "stage": "dev", "config_dir": str(config_dir)}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run([sys.executable, "app.py"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 1
    [error] = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert error.startswith("ERROR: stage dev, the build stack Triton-dev-Build: 5")
    assert "over CloudFormation's 500 per stack (aws-cdk-lib refused it at synth: TooManyResourcesInStack)" in error
    assert "Custom::TritonModelArtifact (180)" in error
    assert "Traceback" not in result.stderr
