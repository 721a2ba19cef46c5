"""Narrow the `"Resource": "*"` statements CDK Pipelines writes itself to what they act on.

aws-cdk-lib's `pipelines` grants (pipelines/lib/private/asset-singleton-role and codepipeline.ts):
- the asset-publishing role: `codebuild:BatchGetBuilds/StartBuild/StopBuild` on `*`. CodePipeline
  assumes this role to run the asset projects, which are made after the role; they live in the
  pipeline's own account and region, like every project of the pipeline stack.
- the self-mutation project: `cloudformation:DescribeStacks` and `s3:ListBucket` on `*`. Its `cdk deploy`
  updates the pipeline stack only (its own account and region) and reads the CDK bootstrap staging bucket
  (`cdk-<qualifier>-assets-<account>-<region>`, the bootstrap template's default name); S3 answers
  403 instead of 404 for a missing object without s3:ListBucket (S3 API Reference, HeadObject), which is
  why CDK grants it.
The L2 policies offer no way to replace a statement, so the synthesized statement is overridden.
"""

from __future__ import annotations

from collections.abc import Callable

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import pipelines
from constructs import IConstruct

__all__ = [
    "ASSET_PROJECT_ACTIONS",
    "BOOTSTRAP_BUCKETS",
    "SELF_MUTATION_READS",
    "override_statements",
    "scope_pipeline_wildcards",
]

ASSET_PROJECT_ACTIONS = {"codebuild:BatchGetBuilds", "codebuild:StartBuild", "codebuild:StopBuild"}
SELF_MUTATION_READS = {"cloudformation:DescribeStacks", "s3:ListBucket"}
BOOTSTRAP_BUCKETS = "cdk-*-assets-*"


def override_statements(scope: IConstruct, match: Callable[[dict], bool], resources: Callable[[dict], object]) -> int:
    """Give every statement under `scope` that `match`es the Resource `resources(statement)`; returns how many."""
    changed = 0
    for construct in scope.node.find_all():
        if not isinstance(construct, iam.CfnPolicy):
            continue
        document = cdk.Stack.of(construct).resolve(construct.policy_document)
        for index, statement in enumerate(document.get("Statement", [])):
            if match(statement):
                construct.add_property_override(f"PolicyDocument.Statement.{index}.Resource", resources(statement))
                changed += 1
    return changed


def _actions(statement: dict) -> set[str]:
    actions = statement.get("Action", [])
    return {actions} if isinstance(actions, str) else set(actions)


def scope_pipeline_wildcards(pipeline: pipelines.CodePipeline) -> int:
    """Call after `build_pipeline()`. Returns the number of statements narrowed (0 when CDK changes them)."""
    stack = cdk.Stack.of(pipeline)
    projects = stack.format_arn(service="codebuild", resource="project", resource_name="*")
    stacks = stack.format_arn(service="cloudformation", resource="stack", resource_name="*")
    buckets = stack.format_arn(service="s3", region="", account="", resource=BOOTSTRAP_BUCKETS)
    changed = 0
    assets = pipeline.node.try_find_child("Assets")
    if assets is not None:
        changed += override_statements(
            assets,
            lambda s: s.get("Resource") == "*" and _actions(s) == ASSET_PROJECT_ACTIONS,
            lambda _: projects,
        )
    changed += override_statements(
        pipeline.self_mutation_project,
        lambda s: s.get("Resource") == "*" and _actions(s) <= SELF_MUTATION_READS,
        lambda s: (
            [stacks] * ("cloudformation:DescribeStacks" in _actions(s)) + [buckets] * ("s3:ListBucket" in _actions(s))
        ),
    )
    return changed
