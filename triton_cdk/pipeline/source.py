"""The pipeline's source permission: `UseConnection` under the service prefix of the connection's own ARN.

Connections created since the 2024 rename have `arn:aws:codeconnections:...` ARNs. AWS, "Connections
rename - Summary of changes" (dtconsole user guide): "When specifying a resource in IAM policy, the
service prefix must match that of the resource." aws-cdk-lib's `CodeStarConnectionsSourceAction`
always grants `codestar-connections:UseConnection`, which does not act on a `codeconnections` ARN,
so the source action would be refused at its first run (/work/shared/README.md, "IAM service prefixes").
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from triton_cdk.errors import InvalidPropsError

__all__ = ["LEGACY_PREFIX", "PREFIXES", "connection_prefix", "match_connection_prefix", "use_connection_action"]

LEGACY_PREFIX = "codestar-connections"
PREFIXES = (LEGACY_PREFIX, "codeconnections")


def connection_prefix(connection_arn: str) -> str:
    """The IAM service prefix of a connection ARN: `codeconnections` or `codestar-connections`."""
    parts = connection_arn.split(":")
    if len(parts) < 6 or parts[2] not in PREFIXES:
        raise InvalidPropsError(f"not a connection ARN (arn:<partition>:codeconnections:...): {connection_arn!r}")
    return parts[2]


def use_connection_action(connection_arn: str) -> str:
    return f"{connection_prefix(connection_arn)}:UseConnection"


def match_connection_prefix(scope: IConstruct, connection_arn: str) -> int:
    """Rewrite CDK's `codestar-connections:*` grants on `connection_arn` under the ARN's own prefix.

    Call after `build_pipeline()`, when the source action's role policy is complete. Returns how many
    statements were rewritten (0 for a legacy `codestar-connections` ARN, whose grant is right as is).
    """
    prefix = connection_prefix(connection_arn)
    if prefix == LEGACY_PREFIX:
        return 0
    rewritten = 0
    for construct in scope.node.find_all():
        if not isinstance(construct, iam.CfnPolicy):
            continue
        stack = cdk.Stack.of(construct)
        document = stack.resolve(construct.policy_document)
        for index, statement in enumerate(document.get("Statement", [])):
            if statement.get("Resource") != connection_arn:
                continue
            actions = statement.get("Action")
            renamed = _renamed(actions, prefix)
            if renamed != actions:
                # An override of the synthesized statement: the L2 policy offers no way to replace one.
                construct.add_property_override(f"PolicyDocument.Statement.{index}.Action", renamed)
                rewritten += 1
    return rewritten


def _renamed(actions: Any, prefix: str) -> Any:
    if isinstance(actions, str):
        return actions.replace(f"{LEGACY_PREFIX}:", f"{prefix}:", 1) if actions.startswith(LEGACY_PREFIX) else actions
    if isinstance(actions, list):
        return [_renamed(action, prefix) for action in actions]
    return actions
