"""Grants come from the resources: the artifact store grants model reads and writes, the image lookup grants
pulls; each returns the `iam.Grant`, and an imported store (another stack's) grants the same.

IAM: s3:ListBucket is a bucket action, narrowed by the `s3:prefix` condition key (Amazon S3 User Guide,
"Actions, resources, and condition keys for Amazon S3"); ecr:GetAuthorizationToken has no resource type
(Amazon ECR User Guide, "Private repository policies"), so it is granted on "*".
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from synth_helpers import new_app

from triton_cdk.artifacts import ArtifactStore, list_models_statement
from triton_cdk.images import TritonImageLookup, known_triton_releases


def _role_policy(build) -> list[dict]:
    app = new_app()
    stack = cdk.Stack(app, "Grants", env=cdk.Environment(account="111111111111", region="us-east-1"))
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    build(stack, role)
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    return [s for policy in policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]]


def _store(stack: cdk.Stack) -> ArtifactStore:
    return ArtifactStore(
        stack, "Store", noncurrent_version_expiration=cdk.Duration.days(30), access_log_expiration=cdk.Duration.days(30)
    )


def test_grant_read_models_reads_lists_and_decrypts_the_model_prefix_only() -> None:
    def build(stack, role):
        assert _store(stack).grant_read_models(role).success

    statements = {s["Sid"]: s for s in _role_policy(build)}
    assert set(statements) == {"ReadModels", "ListModels", "DecryptModels"}
    assert statements["ListModels"]["Action"] == "s3:ListBucket"
    assert statements["ListModels"]["Condition"]["StringLike"]["s3:prefix"] == ["models/*"]


def test_grant_pull_pulls_the_regions_triton_repository() -> None:
    def build(stack, role):
        assert TritonImageLookup(stack, "Images", release=known_triton_releases()[-1]).grant_pull(role).success

    statements = {s["Sid"]: s for s in _role_policy(build)}
    assert set(statements) == {"PullTritonImage", "EcrLogin"}
    assert statements["EcrLogin"]["Resource"] == "*"
    assert "ecr:BatchGetImage" in statements["PullTritonImage"]["Action"]


def test_list_models_statement_is_narrowed_to_the_prefix() -> None:
    statement = list_models_statement("arn:aws:s3:::bucket", "models/").to_statement_json()
    assert statement == {
        "Sid": "ListModels",
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": "arn:aws:s3:::bucket",
        "Condition": {"StringLike": {"s3:prefix": ["models/*"]}},
    }


def test_grant_write_models_writes_lists_and_encrypts_the_model_prefix_only() -> None:
    def build(stack, role):
        assert _store(stack).grant_write_models(role).success

    statements = {s["Sid"]: s for s in _role_policy(build)}
    assert set(statements) == {"WriteModels", "ListModels", "EncryptModels"}
    assert statements["WriteModels"]["Resource"]["Fn::Join"][1][1] == "/models/*"
    assert "s3:DeleteObject" not in statements["WriteModels"]["Action"]
    assert sorted(statements["EncryptModels"]["Action"]) == [
        "kms:Decrypt",
        "kms:DescribeKey",
        "kms:Encrypt",
        "kms:GenerateDataKey",
    ]


def test_an_imported_store_grants_exactly_the_named_archives() -> None:
    key = "models/bert/abc/model.tar.gz"

    def build(stack, role):
        store = ArtifactStore.from_store_attributes(
            stack, "Imported", bucket_arn="arn:aws:s3:::artifacts", key_arn="arn:aws:kms:us-east-1:111111111111:key/k"
        )
        assert store.grant_read_archives(role, [key]).success

    read, decrypt = _role_policy(build)
    assert read == {
        "Sid": "ReadModelArchives",
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::artifacts/{key}",
    }
    assert decrypt == {
        "Effect": "Allow",
        "Action": "kms:Decrypt",
        "Resource": "arn:aws:kms:us-east-1:111111111111:key/k",
    }


@pytest.mark.parametrize("keys", [[], ["config/dev.yaml"]])
def test_grant_read_archives_refuses_keys_outside_the_model_prefix(keys) -> None:
    def build(stack, role):
        _store(stack).grant_read_archives(role, keys)

    with pytest.raises(ValueError, match=r"keys must be at least one key, each under 'models/'; got (none|\['config)"):
        _role_policy(build)
