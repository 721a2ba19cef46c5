"""Every log group the stages create is encrypted with a customer-managed KMS key, and the key lets
CloudWatch Logs use it for that group (issue: hostile-input review, "log groups encrypted with the
stage's key"; CloudWatch Logs User Guide, "Encrypt log data in CloudWatch Logs using AWS KMS": the
regional `logs.<region>.amazonaws.com` principal, conditioned on `kms:EncryptionContext:aws:logs:arn`)."""

from __future__ import annotations

from contract_helpers import resources_of


def test_every_log_group_has_a_kms_key(shipped_templates):
    unencrypted, checked = [], 0
    for shipped in shipped_templates:
        for logical_id, group in resources_of(shipped.template, "AWS::Logs::LogGroup").items():
            checked += 1
            if not group["Properties"].get("KmsKeyId"):
                unencrypted.append(f"{shipped.label}/{logical_id}")
    assert checked
    assert unencrypted == []


def test_every_key_used_by_log_groups_names_the_logs_principal(shipped_templates):
    """A KMS key in a log group's KmsKeyId that does not allow CloudWatch Logs fails the deploy
    ("The specified KMS key does not exist or is not allowed to be used")."""
    keys_with_logs: set[str] = set()
    for shipped in shipped_templates:
        for logical_id, key in resources_of(shipped.template, "AWS::KMS::Key").items():
            for statement in key["Properties"]["KeyPolicy"]["Statement"]:
                service = statement.get("Principal", {}).get("Service", "")
                services = service if isinstance(service, list) else [service]
                if any("logs." in str(s) for s in services) and statement.get("Effect") == "Allow":
                    keys_with_logs.add(f"{shipped.config}:{logical_id}")
    missing = []
    for shipped in shipped_templates:
        for logical_id, group in resources_of(shipped.template, "AWS::Logs::LogGroup").items():
            key = group["Properties"].get("KmsKeyId")
            if isinstance(key, dict) and "Fn::GetAtt" in key:
                if f"{shipped.config}:{key['Fn::GetAtt'][0]}" not in keys_with_logs:
                    missing.append(f"{shipped.label}/{logical_id}")
            elif (
                isinstance(key, dict)
                and str(key.get("Fn::ImportValue", "")).endswith("-ArtifactKeyArn")
                # The stage's artifact key: its policy lives in the stage's artifact stack.
                and not any(k.startswith(shipped.config + ":ArtifactsKey") for k in keys_with_logs)
            ):
                missing.append(f"{shipped.label}/{logical_id}")
    assert missing == []


def test_no_stage_adds_an_account_level_logs_resource_policy(shipped_templates):
    """CloudFormation User Guide, AWS::Logs::ResourcePolicy: "An account can have up to 10 resource policies per
    Amazon Region" (PutResourcePolicy, the same quota), shared by everything in the account. aws-cdk-lib adds one
    for each build project's log group when `logging=` grants it to an imported role of unresolved account and the
    stage sets an account (tests/pipeline:cross-account does; a user's filled-in config/ does): our stacks must add
    none, the build role's own policy grants the writes (triton_cdk/artifact_build/build_project.py)."""
    assert any(shipped.config.startswith("tests/pipeline:cross-account") for shipped in shipped_templates)
    found = [
        f"{shipped.label}/{logical_id}"
        for shipped in shipped_templates
        for logical_id in resources_of(shipped.template, "AWS::Logs::ResourcePolicy")
    ]
    assert found == []
