"""IAM's role policy size quota, summed over every stack of a stage: app.py refuses a stage whose execution role
would be over it, in one line naming the stage, the role, the size and the endpoints that add most, without a
traceback (stacks/role_policy_size.py).

Source: IAM User Guide, "IAM and AWS STS quotas" (reference_iam-quotas.html): "Role policy size cannot exceed 10,240
characters" (all inline policies of a role together; "IAM does not count white space"), "Managed policy size cannot
exceed 6,144 characters", 10 managed policies per role by default (20 at most). The longest region name comes from
botocore's endpoints.json (`aws` partition). Each endpoint stack attaches its own policies to the stage's one
execution role, so nothing per stack sees the sum; CloudFormation fails the deploy (PutRolePolicy LimitExceeded).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from synth_helpers import EXAMPLES_CONFIG_DIR, PROJECT_ROOT, cdk_context

from stacks.role_policy_size import (
    ACCOUNT,
    KEY_ID,
    ROLE_POLICY_SIZE_QUOTA,
    longest_region,
    policy_size,
    role_policies,
    role_policy_refusals,
)

ROLE_ARN_EXPORT = "Triton-dev-Artifacts-ExecutionRoleArn"
IMPORTED_ROLE = {
    "Fn::Select": [
        1,
        {"Fn::Split": ["/", {"Fn::Select": [5, {"Fn::Split": [":", {"Fn::ImportValue": ROLE_ARN_EXPORT}]}]}]},
    ]
}


def _document(*resources) -> dict:
    statements = [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": resource} for resource in resources]
    return {"Version": "2012-10-17", "Statement": statements}


def _stage(endpoint_policies: dict[str, dict]) -> dict[str, dict]:
    """An artifact stack with the role, its default policy and its export; one endpoint stack per entry."""
    artifacts = {
        "Resources": {
            "ExecutionRoleFAA49FA6": {"Type": "AWS::IAM::Role", "Properties": {}},
            "ArtifactsKey": {"Type": "AWS::KMS::Key", "Properties": {}},
            "ExecutionRoleDefaultPolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "PolicyDocument": _document({"Fn::GetAtt": ["ArtifactsKey", "Arn"]}),
                    "Roles": [{"Ref": "ExecutionRoleFAA49FA6"}],
                },
            },
        },
        "Outputs": {
            "ExecutionRoleArnExport": {
                "Value": {"Fn::GetAtt": ["ExecutionRoleFAA49FA6", "Arn"]},
                "Export": {"Name": ROLE_ARN_EXPORT},
            },
        },
    }
    templates = {"Triton-dev-Artifacts": artifacts}
    for name, document in endpoint_policies.items():
        templates[f"Triton-dev-Endpoint-{name}"] = {
            "Resources": {
                "ExecutionRoleAdditions": {
                    "Type": "AWS::IAM::Policy",
                    "Properties": {"PolicyDocument": document, "Roles": [IMPORTED_ROLE]},
                }
            }
        }
    return templates


def test_references_resolve_to_their_longest_values() -> None:
    """Account: 12 digits; region: the longest of the `aws` partition; a key ARN: its 36-character id; an import:
    the export's value in the exporting stack; white space not counted."""
    assert len(ACCOUNT) == 12 and len(KEY_ID) == 36
    assert len(longest_region()) >= len("ap-southeast-2")
    templates = _stage({})
    parts = ["arn:", {"Ref": "AWS::Partition"}, ":kms:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}]
    key = {"Fn::Join": ["", [*parts, ":key/x"]]}
    literal = f"arn:aws:kms:{longest_region()}:{ACCOUNT}:key/x"
    assert policy_size(_document(key), templates, "Triton-dev-Artifacts") == policy_size(
        _document(literal), templates, "Triton-dev-Artifacts"
    )
    spaced = _document("arn:aws:s3:::a b c")
    assert policy_size(spaced, templates, "x") == policy_size(_document("arn:aws:s3:::abc"), templates, "x")
    [role] = [r for r in role_policies(_stage({"a": _document("arn:aws:s3:::bucket/a/*")})) if r.inline]
    assert (role.stack, role.logical_id) == ("Triton-dev-Artifacts", "ExecutionRoleFAA49FA6")
    assert [p.stack for p in role.inline] == ["Triton-dev-Artifacts", "Triton-dev-Endpoint-a"]


def test_a_stage_over_the_quota_is_refused_in_one_line_naming_the_largest_endpoints() -> None:
    big = _document(*[f"arn:aws:s3:::bucket/{'p' * 60}/{index}/*" for index in range(40)])
    per_endpoint = policy_size(big, _stage({}), "x")
    count = ROLE_POLICY_SIZE_QUOTA // per_endpoint + 1
    [refusal] = role_policy_refusals(_stage({f"e{index}": big for index in range(count)}))
    assert "\n" not in refusal
    assert refusal.startswith("stage dev, role ExecutionRoleFAA49FA6 (stack Triton-dev-Artifacts): its inline policies")
    assert f"over IAM's {ROLE_POLICY_SIZE_QUOTA:,} per role" in refusal and "IAM and AWS STS quotas" in refusal
    assert f"endpoint 'e0' {per_endpoint:,}" in refusal and "split the endpoints over several stages" in refusal
    assert role_policy_refusals(_stage({f"e{index}": big for index in range(count - 2)})) == []


def test_managed_policy_quotas_are_checked() -> None:
    templates = _stage({})
    for index in range(11):
        templates["Triton-dev-Artifacts"]["Resources"][f"Managed{index}"] = {
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {"PolicyDocument": _document("*"), "Roles": [{"Ref": "ExecutionRoleFAA49FA6"}]},
        }
    [refusal] = role_policy_refusals(templates)
    assert "11 managed policies attached, over IAM's default 10 per role" in refusal


def test_app_py_refuses_a_stage_of_too_many_async_endpoints(tmp_path: Path) -> None:
    """The async example with its one endpoint repeated: each adds ~1,600 characters (input read, result write,
    SNS publish, rollback alarms) to the stage's role; six of them are over 10,240 with the artifact stack's
    ~1,400. The config is valid otherwise: the refusal comes after synth, before anything is deployed."""
    document = yaml.safe_load((EXAMPLES_CONFIG_DIR / "async.yaml").read_text())
    [endpoint] = document["endpoints"]
    document["endpoints"] = [{**copy.deepcopy(endpoint), "name": f"image{index}"} for index in range(6)]
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "async.yaml").write_text(json.dumps(document))
    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "CDK_CONTEXT_JSON": json.dumps({**cdk_context(), "stage": "async", "config_dir": str(config_dir)}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run([sys.executable, "app.py"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 1, result.stderr[-2000:]
    [error] = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert error.startswith("ERROR: stage async, role ExecutionRole"), error
    assert f"over IAM's {ROLE_POLICY_SIZE_QUOTA:,} per role" in error and "endpoint 'image" in error
    assert "split the endpoints over several stages" in error
    assert "Traceback" not in result.stderr


def test_docs_state_the_limit() -> None:
    refusals = (PROJECT_ROOT / "docs" / "config-refusals.md").read_text()
    serving = (PROJECT_ROOT / "docs" / "serving.md").read_text()
    assert "IAM's 10,240 characters of inline policies per role" in refusals
    assert "IAM's 10,240 characters of inline" in serving and "stacks/role_policy_size.py" in serving


def test_an_expression_it_does_not_model_counts_long_instead_of_failing() -> None:
    """app.py runs the check on every synth: a template shape it does not know must not end in a traceback."""
    odd = _document({"Fn::Select": ["not a number", ["a"]]}, {"Fn::GetAtt": "NoSuchResource.Arn"})
    assert policy_size(odd, _stage({}), "Triton-dev-Artifacts") > 2 * 256
