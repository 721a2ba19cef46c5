"""The stateful artifact stack: key, buckets, explicit bucket policy, least-privilege roles."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template

KEY_ID = "ArtifactsKeyA4B22E2B"
BUCKET_ID = "ArtifactsBucket88671897"
LOG_BUCKET_ID = "ArtifactsAccessLogs4D97777C"


@pytest.fixture(scope="module")
def template(dev_app) -> Template:
    stacks = dev_app.stacks
    return Template.from_stack(stacks.artifacts)


@pytest.fixture(scope="module")
def resources(template: Template) -> dict:
    return template.to_json()["Resources"]


def _statements(resources: dict, logical_id_prefix: str) -> list[dict]:
    found = [r for k, r in resources.items() if k.startswith(logical_id_prefix)]
    assert found, logical_id_prefix
    return found[0]["Properties"]["PolicyDocument"]["Statement"]


def _by_sid(statements: list[dict], sid: str) -> dict:
    return next(s for s in statements if s.get("Sid") == sid)


def test_stateful_logical_ids_do_not_change(resources: dict) -> None:
    # Renaming these would replace the key or bucket: a deliberate migration, never an accident.
    assert {KEY_ID, BUCKET_ID, LOG_BUCKET_ID} <= set(resources)


def test_stack_is_termination_protected(dev_app) -> None:
    stacks = dev_app.stacks
    assert stacks.artifacts.termination_protection is True


def test_key_rotates_and_is_retained(template: Template, resources: dict) -> None:
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    assert resources[KEY_ID]["DeletionPolicy"] == "Retain"


def test_bucket_is_versioned_kms_encrypted_private_logged_and_retained(resources: dict) -> None:
    bucket = resources[BUCKET_ID]
    props = bucket["Properties"]
    assert bucket["DeletionPolicy"] == "Retain" and bucket["UpdateReplacePolicy"] == "Retain"
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    rule = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["BucketKeyEnabled"] is True
    assert rule["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": {"Fn::GetAtt": [KEY_ID, "Arn"]},
    }
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": LOG_BUCKET_ID}
    lifecycle = props["LifecycleConfiguration"]["Rules"][0]
    assert lifecycle["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}


def test_prod_keeps_noncurrent_versions_longer(prod_app) -> None:
    stacks = prod_app.stacks
    bucket = Template.from_stack(stacks.artifacts).to_json()["Resources"][BUCKET_ID]
    assert bucket["Properties"]["LifecycleConfiguration"]["Rules"][0]["NoncurrentVersionExpiration"] == {
        "NoncurrentDays": 90
    }


def test_bucket_policy_is_tls_only(resources: dict) -> None:
    statements = _statements(resources, "ArtifactsBucketPolicy")
    tls = [s for s in statements if s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}]
    assert tls and tls[0]["Effect"] == "Deny" and tls[0]["Action"] == "s3:*"


def test_bucket_policy_denies_uploads_not_encrypted_with_the_key(resources: dict) -> None:
    statements = _statements(resources, "ArtifactsBucketPolicy")
    by_type = _by_sid(statements, "DenyForeignEncryptionType")
    by_key = _by_sid(statements, "DenyForeignEncryptionKey")
    assert by_type["Effect"] == by_key["Effect"] == "Deny"
    assert by_type["Action"] == by_key["Action"] == "s3:PutObject"
    kms_key = "s3:x-amz-server-side-encryption-aws-kms-key-id"
    assert by_type["Condition"] == {
        "StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"},
        "Null": {"s3:x-amz-server-side-encryption": "false"},
    }
    assert by_key["Condition"] == {
        "StringNotEquals": {kms_key: {"Fn::GetAtt": [KEY_ID, "Arn"]}},
        "Null": {kms_key: "false"},
    }


def _models_arn() -> dict:
    return {"Fn::Join": ["", [{"Fn::GetAtt": [BUCKET_ID, "Arn"]}, "/models/*"]]}


def test_bucket_policy_grants_read_and_write_on_the_model_prefix_only(resources: dict) -> None:
    statements = _statements(resources, "ArtifactsBucketPolicy")
    read = _by_sid(statements, "SageMakerExecutionReadModels")
    write = _by_sid(statements, "ModelBuildWriteModels")
    assert read["Resource"] == write["Resource"] == _models_arn()
    assert read["Action"] == ["s3:GetObject", "s3:GetObjectVersion"]
    assert "s3:PutObject" in write["Action"] and "s3:DeleteObject" not in write["Action"]
    assert read["Principal"]["AWS"]["Fn::GetAtt"][0].startswith("ExecutionRole")
    assert write["Principal"]["AWS"]["Fn::GetAtt"][0].startswith("BuildRole")
    for statement in statements:
        if statement["Effect"] == "Allow":
            assert statement["Resource"] in (_models_arn(), {"Fn::GetAtt": [BUCKET_ID, "Arn"]}), statement


def test_execution_role_is_trusted_by_sagemaker_of_this_account_only(template: Template) -> None:
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Action": "sts:AssumeRole",
                        "Effect": "Allow",
                        "Principal": {"Service": "sagemaker.amazonaws.com"},
                        "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
                    }
                ]
            }
        },
    )


def test_execution_role_permissions_are_least_privilege(resources: dict) -> None:
    statements = _statements(resources, "ExecutionRoleDefaultPolicy")
    by_sid = {s["Sid"]: s for s in statements}
    assert by_sid["ReadModels"]["Resource"] == _models_arn()
    assert by_sid["ListModels"]["Condition"] == {"StringLike": {"s3:prefix": ["models/*"]}}
    assert by_sid["DecryptModels"]["Resource"] == {"Fn::GetAtt": [KEY_ID, "Arn"]}
    assert "sagemaker-tritonserver" in json.dumps(by_sid["PullTritonImage"]["Resource"])
    assert "/aws/sagemaker/Endpoints/*" in json.dumps(by_sid["WriteLogs"]["Resource"])
    # "*" only where the action has no resource type.
    wildcard = {s["Sid"] for s in statements if s["Resource"] == "*"}
    assert wildcard == {"EcrLogin", "PutMetrics"}
    assert by_sid["EcrLogin"]["Action"] == "ecr:GetAuthorizationToken"
    assert by_sid["PutMetrics"]["Condition"]["StringLike"]["cloudwatch:namespace"]


def test_no_role_has_managed_full_access_or_wildcard_actions(resources: dict) -> None:
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role":
            assert "ManagedPolicyArns" not in resource["Properties"], logical_id
        if resource["Type"] == "AWS::IAM::Policy":
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                assert not any(a == "*" or a.endswith(":*") for a in actions), (logical_id, statement)
    assert "FullAccess" not in json.dumps(resources)


def test_build_role_writes_models_only(resources: dict) -> None:
    statements = _statements(resources, "BuildRoleDefaultPolicy")
    by_sid = {s["Sid"]: s for s in statements}
    assert by_sid["WriteModels"]["Resource"] == _models_arn()
    assert all(s["Resource"] != "*" for s in statements)


def test_triton_image_mapping_is_env_agnostic(resources: dict, template: Template) -> None:
    mappings = template.to_json()["Mappings"]
    (images,) = [m for k, m in mappings.items() if k.startswith("TritonImage")]
    assert images["us-east-1"]["gpu"].endswith("/sagemaker-tritonserver:24.09-py3")
    assert images["us-east-1"]["cpu"].endswith(":24.09-py3-cpu")


def test_artifact_stack_owns_the_bucket_arn_export(template: Template, dev_app) -> None:
    """One export of the bucket ARN, made here: CloudFormation refuses a second export of a name
    (CloudFormation User Guide, "Outputs": export names are unique per account and region)."""
    stacks = dev_app.stacks
    outputs = template.to_json()["Outputs"]
    exported = {o["Export"]["Name"]: o["Value"] for o in outputs.values() if "Export" in o}
    assert exported["Triton-dev-Artifacts-ArtifactBucketArn"] == {"Fn::GetAtt": [BUCKET_ID, "Arn"]}
    assert stacks.artifacts.bucket_arn_export.export_name == "Triton-dev-Artifacts-ArtifactBucketArn"


def test_key_lets_only_aws_services_create_grants(resources: dict) -> None:
    """AWS Control Tower proactive control CT.KMS.PR.3 (its Guard rule runs on every synth)."""
    statement = _by_sid(resources[KEY_ID]["Properties"]["KeyPolicy"]["Statement"], "DenyGrantsExceptForAwsServices")
    assert statement["Effect"] == "Deny" and statement["Action"] == "kms:CreateGrant"
    assert statement["Principal"] == {"AWS": "*"} and statement["Resource"] == "*"
    assert statement["Condition"] == {
        "BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}
    }
