"""Deny statements on request-header condition keys deny only what they mean to.

IAM ("IAM JSON policy elements: Condition operators"): an `...IfExists` operator on a key that is absent
from the request evaluates to true, and so does a negated operator (`StringNotEquals`) on an absent key.
S3 puts `s3:x-amz-server-side-encryption*` in the request context only when the header is sent, and
UploadPart never sends it. A Deny on those keys must therefore say `Null: {key: "false"}`, or every plain
upload (and every multipart upload) to the bucket is refused.
"""

from __future__ import annotations

from contract_helpers import resources_of, statements_of

HEADER_KEY_PREFIX = "s3:x-amz-"


def header_key_problems(statement: dict) -> list[str]:
    if statement.get("Effect") != "Deny":
        return []
    conditions = statement.get("Condition", {})
    guarded = {key for key, value in conditions.get("Null", {}).items() if str(value).lower() == "false"}
    problems = []
    for operator, keys in conditions.items():
        for key in keys:
            if not key.lower().startswith(HEADER_KEY_PREFIX) or operator == "Null":
                continue
            if operator.endswith("IfExists"):
                problems.append(f"{statement.get('Sid')}: {operator} on {key} also denies requests without it")
            elif "Not" in operator and key not in guarded:
                problems.append(f"{statement.get('Sid')}: {operator} on {key} needs Null: {{{key}: false}}")
    return problems


def test_bucket_policy_denies_on_headers_apply_only_when_the_header_is_sent(shipped_templates):
    problems, checked = [], 0
    for shipped in shipped_templates:
        for logical_id, policy in resources_of(shipped.template, "AWS::S3::BucketPolicy").items():
            for statement in statements_of(policy["Properties"]["PolicyDocument"]):
                checked += 1
                problems += [f"{shipped.label}/{logical_id}: {p}" for p in header_key_problems(statement)]
    assert checked
    assert problems == []


def test_the_rule_catches_the_if_exists_form():
    statement = {
        "Sid": "DenyForeignEncryptionType",
        "Effect": "Deny",
        "Condition": {"StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption": "aws:kms"}},
    }
    assert header_key_problems(statement)
    statement["Condition"] = {"StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"}}
    assert header_key_problems(statement)
    statement["Condition"]["Null"] = {"s3:x-amz-server-side-encryption": "false"}
    assert header_key_problems(statement) == []
