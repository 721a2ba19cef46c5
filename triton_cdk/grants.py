"""`iam.Grant`s from policy statements that keep their Sids."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from aws_cdk import aws_iam as iam

from triton_cdk.errors import InvalidPropsError

__all__ = ["grant_statements"]


def grant_statements(grantee: iam.IGrantable, statements: Sequence[iam.PolicyStatement]) -> iam.Grant:
    """Add `statements` to `grantee`'s identity policy, as one `iam.Grant` (what aws-cdk-lib's `grant_*` return).

    `iam.Grant.add_to_principal` writes no Sid; these keep each statement's: snapshots, tests and cdk-nag
    reviews name the statements by it, and CDK's policy minimisation leaves a statement with a Sid unmerged.
    """
    if not statements:
        raise InvalidPropsError("grant_statements needs at least one statement")
    grants = []
    for statement in statements:
        grant = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=statement.actions,
            resource_arns=statement.resources,
            conditions=statement.conditions or None,
        )
        if statement.sid:
            for added in grant.principal_statements:
                added.sid = statement.sid
        grants.append(grant)
    return functools.reduce(iam.Grant.combine, grants)
