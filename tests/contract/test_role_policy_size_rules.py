"""Every role of every shipped stage stays within IAM's policy-size quotas, summed over all the stage's stacks (each
endpoint stack adds inline policies to the stage's one execution role, created in the artifact stack).

Source: IAM User Guide, "IAM and AWS STS quotas" (reference_iam-quotas.html): "Role policy size cannot exceed 10,240
characters" (the aggregate of all inline policies of a role; "IAM does not count white space"), managed policy size
6,144 characters, managed policies attached to a role: 10 (default; a quota increase raises it to 20). Sizes are worst
cases: references resolved to the longest value they can take (stacks/role_policy_size.py); app.py refuses a stage
over them (tests/foundation/test_role_policy_size.py).
"""

from __future__ import annotations

from pathlib import Path

from stacks.role_policy_size import (
    ATTACHED_POLICIES_PER_ROLE_QUOTA,
    MANAGED_POLICY_SIZE_QUOTA,
    ROLE_POLICY_SIZE_QUOTA,
    RolePolicies,
    assembly_stages,
    role_policies,
)


def _roles(shipped_assemblies: dict[str, Path]) -> dict[str, list[RolePolicies]]:
    """{assembly folder (one stage, or a pipeline stage's nested assembly): its roles}."""
    return {
        f"{label}:{Path(folder).name}": role_policies(templates)
        for label, directory in shipped_assemblies.items()
        for folder, templates in assembly_stages(directory).items()
    }


def test_quotas_are_iams() -> None:
    assert (ROLE_POLICY_SIZE_QUOTA, MANAGED_POLICY_SIZE_QUOTA, ATTACHED_POLICIES_PER_ROLE_QUOTA) == (10_240, 6_144, 10)


def test_every_execution_role_holds_its_endpoints_policies(shipped_assemblies: dict[str, Path]) -> None:
    """The imported role of each endpoint stack (Fn::ImportValue of the artifact stack's export) is counted on the
    artifact stack's role, not as a role of its own: else the sum would miss every endpoint's share."""
    found = 0
    for label, roles in _roles(shipped_assemblies).items():
        for role in roles:
            assert role.stack, f"{label}: a policy names a role outside its stage: {role.logical_id}"
            endpoint_shares = [p for p in role.inline if "-Endpoint-" in p.stack]
            if role.stack.endswith("-Artifacts") and role.logical_id.startswith("ExecutionRole"):
                assert endpoint_shares, f"{label}: {role.name} has no endpoint's policy"
                found += 1
            else:
                assert not endpoint_shares or role.stack == endpoint_shares[0].stack, f"{label}: {role.name}"
    assert found >= 6, "fewer stage execution roles than shipped stages: the rule would pass vacuously"


def test_every_role_is_within_the_inline_policy_quota(shipped_assemblies: dict[str, Path]) -> None:
    over = [
        f"{label}: {role.name}: {role.inline_size:,} characters ({role.contributors()})"
        for label, roles in _roles(shipped_assemblies).items()
        for role in roles
        if role.inline_size > ROLE_POLICY_SIZE_QUOTA
    ]
    assert not over, f"over IAM's {ROLE_POLICY_SIZE_QUOTA:,} characters of inline policies per role:\n" + "\n".join(
        over
    )


def test_every_role_is_within_the_managed_policy_quotas(shipped_assemblies: dict[str, Path]) -> None:
    over = [
        f"{label}: {role.name}: {role.attached_count} attached, sizes {[p.size for p in role.managed]}"
        for label, roles in _roles(shipped_assemblies).items()
        for role in roles
        if role.attached_count > ATTACHED_POLICIES_PER_ROLE_QUOTA
        or any(p.size > MANAGED_POLICY_SIZE_QUOTA for p in role.managed)
    ]
    assert not over, "over IAM's managed policy quotas:\n" + "\n".join(over)
