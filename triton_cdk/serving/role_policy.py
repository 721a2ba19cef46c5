"""RolePolicy: a grantee whose grants go to one named IAM policy attached to a role, created on the first grant."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

__all__ = ["RolePolicy"]


class RolePolicy(iam.PrincipalBase):
    """An `iam.IGrantable` standing for `role`: every statement granted to it lands in one `iam.Policy` with the
    construct id `construct_id` under `scope`, attached to `role` and created on the first grant (no grant, no
    policy).

    Why not grant to the role itself: an imported role puts grants in a default policy named after the importing
    construct, shared by every grant in the stack. The serving patterns keep the statements SageMaker checks when it
    creates the model and endpoint (data capture, VPC, rollback alarms) in one policy of their own that those
    resources wait for (`policy`), with a fixed logical id.

    The policy is attached to `role` as aws-cdk-lib's own `iam.Policy(roles=[role])` attaches one: also to a role
    imported with `mutable=False` (aws-cdk-lib skips such a role only for grants made on the role itself). Give the
    patterns a role this stack may add a policy to; aws-cdk-lib offers no public way to tell an immutable role
    apart (its ImmutableRole class is not exported), so none is guessed here.
    """

    def __init__(self, scope: Construct, construct_id: str, role: iam.IRole) -> None:
        super().__init__()
        self._scope = scope
        self._construct_id = construct_id
        self._role = role
        self._policy: iam.Policy | None = None

    @property
    def policy(self) -> iam.Policy | None:
        """The policy, once something was granted; None before."""
        return self._policy

    @property
    def role(self) -> iam.IRole:
        return self._role

    @property
    def policy_fragment(self) -> iam.PrincipalPolicyFragment:
        return self._role.policy_fragment

    def dedupe_string(self) -> str | None:
        return None

    def add_to_principal_policy(self, statement: iam.PolicyStatement) -> iam.AddToPrincipalPolicyResult:
        if self._policy is None:
            self._policy = iam.Policy(self._scope, self._construct_id, roles=[self._role])
        self._policy.add_statements(statement)
        return iam.AddToPrincipalPolicyResult(statement_added=True, policy_dependable=self._policy)
