"""An endpoint's `async_inference:` mapped onto TritonServingEndpoint's `asynchronous` prop (issue #26 part 1), for
stacks/endpoint_stack.py, and the lifecycle rules of stacks/artifact_stack.py.

The S3 prefixes come from stage_config/async_paths.py (one definition shared with the invoke-async client); the
constructs receive them as plain strings.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stage_config import AppConfig
from stage_config import endpoint_props as props
from stage_config.async_paths import async_prefixes
from stage_config.endpoint import EndpointSettings
from triton_cdk.nag import acknowledge
from triton_cdk.serving.async_inference import AsyncInference
from triton_cdk.serving.serving_endpoint import AsyncServing

if TYPE_CHECKING:  # stacks/artifact_stack.py imports this module for its lifecycle rules
    from stacks.artifact_stack import ArtifactImports


def async_root(endpoint_name: str) -> str:
    """The prefix holding an endpoint's inputs, answers and failures (what its lifecycle rule expires)."""
    p = async_prefixes(endpoint_name)
    return posixpath.commonpath([p.input, p.output, p.failure]) + "/"


def scales_on_backlog(settings: EndpointSettings) -> bool:
    """The endpoint's variant is a scalable target of backlog scaling (`async_inference.scaling`)."""
    return settings.async_inference is not None and settings.async_inference.scaling is not None


# Days an expired input, answer or failure is kept as a noncurrent version before S3 deletes it.
ASYNC_NONCURRENT_DAYS = 1


def add_async_lifecycle_rules(bucket: s3.Bucket, config: AppConfig) -> None:
    """Two rules per asynchronous endpoint of the stage on the artifact bucket (a property of the bucket: no
    logical id changes; stages without asynchronous endpoints keep their template unchanged).

    The artifact bucket is versioned, and S3 "Expiring objects": "Object expiration applies only to an object's
    current version" (it becomes noncurrent behind a delete marker); the bucket-wide rule keeps noncurrent versions
    `artifacts.noncurrent_version_expiration_days`. So the expiry rule also deletes noncurrent versions under the
    prefix after ASYNC_NONCURRENT_DAYS, and a second rule removes the expired-object delete markers left behind
    (S3 lifecycle: ExpiredObjectDeleteMarker cannot be combined with Days in one rule's Expiration)."""
    for settings in config.endpoints:
        if settings.async_inference is None:
            continue
        bucket.add_lifecycle_rule(
            id=f"ExpireAsyncInference-{settings.name}",
            prefix=async_root(settings.name),
            expiration=cdk.Duration.days(settings.async_inference.output_expiration_days),
            noncurrent_version_expiration=cdk.Duration.days(ASYNC_NONCURRENT_DAYS),
        )
        bucket.add_lifecycle_rule(
            id=f"RemoveAsyncDeleteMarkers-{settings.name}",
            prefix=async_root(settings.name),
            expired_object_delete_marker=True,
        )


def async_serving(scope: Construct, settings: EndpointSettings, artifacts: ArtifactImports) -> AsyncServing | None:
    """The endpoint's `async_inference:` as TritonServingEndpoint's `asynchronous` prop: its S3 locations and topics
    (construct id `AsyncInference`), the backlog-age alarm and backlog scaling; None for a real-time endpoint."""
    a = settings.async_inference
    if a is None:
        return None
    prefixes = async_prefixes(settings.name)
    inference = AsyncInference(
        scope,
        "AsyncInference",
        bucket=artifacts.bucket,
        key=artifacts.key,
        input_prefix=prefixes.input,
        output_prefix=prefixes.output,
        failure_prefix=prefixes.failure,
        notifications=a.notifications,
        max_concurrent_invocations_per_instance=a.max_concurrent_invocations_per_instance,
    )
    return AsyncServing(
        inference=inference,
        max_backlog_age_seconds=a.max_backlog_age_seconds,
        scaling=props.ASYNC_SCALING.build(a.scaling) if a.scaling is not None else None,
    )


def acknowledge_async_grants(settings: EndpointSettings, artifacts: ArtifactImports) -> None:
    """cdk-nag's acknowledgement of the execution role's asynchronous grants (the pattern grants them; their
    wildcards name the artifact bucket ARN's export, which only the app knows)."""
    if settings.async_inference is None:
        return
    prefixes = async_prefixes(settings.name)
    role = artifacts.execution_role
    # An imported role keeps the grants in a policy of its own (aws-cdk-lib names it Policy<stack id>).
    for policy in [c for c in role.node.children if isinstance(c, iam.Policy)]:
        export = artifacts.bucket_arn_export_name
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "Asynchronous inference reads inputs and writes answers and failures under this endpoint's own "
            "prefixes (object keys chosen by the client and by SageMaker); kms:GenerateDataKey* is what "
            "Topic.grant_publish gives for the topics' key (SNS generates a data key per message).",
            applies_to=[
                f"Resource::{export}/{prefixes.input}*",
                f"Resource::{export}/{prefixes.output}*",
                f"Resource::{export}/{prefixes.failure}*",
                "Action::kms:GenerateDataKey*",
            ],
        )
