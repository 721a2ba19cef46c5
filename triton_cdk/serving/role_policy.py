"""RolePolicy: a grantee whose grants go to one named IAM policy attached to a role, created on the first grant."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct


class RolePolicy(iam.PrincipalBase):
    """An `iam.IGrantable` standing for `role`: every statement granted to it lands in one `iam.Policy` with the
    construct id `construct_id` under `scope`, attached to `role` and created on the first grant (no grant, no
    policy).

    Why not grant to the role itself: an imported role puts grants in a default policy named after the importing
    construct, shared by every grant in the stack. The serving patterns keep the statements SageMaker checks when it
    creates the model and endpoint (data capture, VPC, rollback alarms) in one policy of their own that those
    resources wait for (`policy`), with a fixed logical id.

    An immutable role (`iam.Role.from_role_arn(..., mutable=False)`, a role imported from another account, or
    `Role.without_policy_updates()`) gets no policy, as aws-cdk-lib's `Grant` leaves such a role alone
    (ImmutableRole.addToPrincipalPolicy adds nothing): its owner must already allow what the grants name, and
    `policy` stays None.
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

    @property
    def mutable(self) -> bool:
        """False for an immutable role (class docstring): no policy is attached to it."""
        return not is_immutable(self._role)

    def add_to_principal_policy(self, statement: iam.PolicyStatement) -> iam.AddToPrincipalPolicyResult:
        if not self.mutable:  # what aws-cdk-lib's ImmutableRole answers: "added", nothing attached
            return iam.AddToPrincipalPolicyResult(statement_added=True)
        if self._policy is None:
            self._policy = iam.Policy(self._scope, self._construct_id, roles=[self._role])
        self._policy.add_statements(statement)
        return iam.AddToPrincipalPolicyResult(statement_added=True, policy_dependable=self._policy)


def is_immutable(role: iam.IRole) -> bool:
    """Whether `role` is aws-cdk-lib's ImmutableRole, which ignores policy changes. jsii shows no class for it, so
    this reads where aws-cdk-lib (2.275.0, aws-iam/lib/role.ts) puts it: `Role.fromRoleArn` builds the ImmutableRole
    under `id` beside the role it wraps, `MutableRole<id>`; `Role.withoutPolicyUpdates` under `ImmutableRole<id>`
    beside the role `<id>`."""
    scope = role.node.scope
    if scope is None:
        return False
    construct_id = role.node.id
    if scope.node.try_find_child(f"MutableRole{construct_id}") is not None:
        return True
    prefix = "ImmutableRole"
    return construct_id.startswith(prefix) and scope.node.try_find_child(construct_id[len(prefix) :]) is not None
