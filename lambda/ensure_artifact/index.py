"""Custom::TritonModelArtifact: make sure a content-addressed model artifact exists in S3.

CDK Provider framework handlers (standard library + boto3 only, so the asset needs no bundling):

- `on_event` (Create/Update): the artifact key (and, when asked, the unpacked layout) already
  exists -> nothing is started. Missing -> PROMOTE mode (`SourceBucket` given) copies it
  server-side from the source stage's bucket, re-encrypted with this stage's key, and never
  builds; BUILD mode starts the CodeBuild model build with the key and the model's inputs as
  environment-variable overrides. Delete -> returns at once without any AWS call (artifacts are
  retained: other stacks, stages or rollbacks may still serve them).
- `is_complete`: polls the build (BatchGetBuilds). SUCCEEDED -> verifies the key now exists;
  FAILED / FAULT / TIMED_OUT / STOPPED -> fails the deployment with the build id and a link to
  its logs. The build uploads under the key only as its very last step (conditional, atomic
  upload in `model_build upload`), so a failed build leaves nothing under the key.

After the artifact exists, its copies (`CopyTo`: `<name>.tar.gz` under a multi-model endpoint's
prefix) are made server-side, so the SageMaker models created after this resource find them.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

FAILED_STATES = ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")
# Written last when the build uploads the unpacked layout: its presence means the layout is whole.
UNCOMPRESSED_MARKER = "config.pbtxt"


class ArtifactError(Exception):
    """Fails the CloudFormation operation; the Provider framework reports the message."""


# ---------------------------------------------------------------------------------------------
# Clients: created lazily so that Delete (and tests that replace them) never touch AWS.


def s3_client() -> Any:
    return boto3.client("s3")


def codebuild_client() -> Any:
    return boto3.client("codebuild")


# ---------------------------------------------------------------------------------------------
# Properties


def _properties(event: dict) -> dict:
    properties = dict(event.get("ResourceProperties") or {})
    missing = [name for name in ("Bucket", "Key", "ModelName", "KmsKeyArn") if not properties.get(name)]
    if missing:
        raise ArtifactError(f"Custom::TritonModelArtifact is missing properties: {', '.join(missing)}")
    if not properties.get("SourceBucket") and not properties.get("ProjectName"):
        raise ArtifactError("Custom::TritonModelArtifact needs ProjectName (build) or SourceBucket (promote)")
    properties.setdefault("CopyTo", [])
    properties.setdefault("BuildEnvironment", {})
    return properties


def _marker_key(properties: dict) -> str | None:
    prefix = properties.get("UncompressedPrefix")
    return f"{prefix}{properties['ModelName']}/{UNCOMPRESSED_MARKER}" if prefix else None


# ---------------------------------------------------------------------------------------------
# S3


def _exists(s3: Any, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def _artifact_present(s3: Any, properties: dict, bucket: str | None = None) -> bool:
    bucket = bucket or properties["Bucket"]
    if not _exists(s3, bucket, properties["Key"]):
        return False
    marker = _marker_key(properties)
    return marker is None or _exists(s3, bucket, marker)


def _copy(s3: Any, source_bucket: str, source_key: str, bucket: str, key: str, kms_key_arn: str) -> None:
    """Server-side copy (multipart for large objects), re-encrypted with this stage's key.

    Metadata (the `sha256` the build recorded) travels with the object.
    """
    head = s3.head_object(Bucket=source_bucket, Key=source_key)
    s3.copy(
        {"Bucket": source_bucket, "Key": source_key},
        bucket,
        key,
        ExtraArgs={
            "ServerSideEncryption": "aws:kms",
            "SSEKMSKeyId": kms_key_arn,
            "Metadata": head.get("Metadata", {}),
            "MetadataDirective": "REPLACE",
        },
    )


def _keys_under(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


def _make_copies(s3: Any, properties: dict) -> list[str]:
    """`CopyTo` keys (multi-model `<name>.tar.gz`) from the artifact key, skipping those present."""
    made = []
    for target in properties["CopyTo"]:
        if not _exists(s3, properties["Bucket"], target):
            _copy(s3, properties["Bucket"], properties["Key"], properties["Bucket"], target, properties["KmsKeyArn"])
            made.append(target)
    return made


def _promote(s3: Any, properties: dict) -> None:
    """Copy the artifact from the source stage's bucket; refuse when the source lacks it."""
    source = properties["SourceBucket"]
    key = properties["Key"]
    marker = _marker_key(properties)
    try:
        missing = (
            key if not _exists(s3, source, key) else marker if marker and not _exists(s3, source, marker) else None
        )
    except ClientError as error:
        # A source bucket in another account may not let this stage list it: a missing key is 403 then.
        code = error.response.get("Error", {}).get("Code")
        raise ArtifactError(
            f"{key} is not readable in {source} ({code}): either it was not built there (deploy the source stage "
            "first) or that stage does not grant this account read access (its artifacts.reader_accounts)"
        ) from None
    if missing:
        raise ArtifactError(
            f"{missing} not built in {source}; deploy the source stage first "
            "(promotion copies artifacts, it never builds)"
        )
    prefix = properties.get("UncompressedPrefix")
    if prefix:
        # The unpacked files first and the marker last, then the archive key: whatever is present
        # after an interruption is never mistaken for a whole artifact.
        try:
            listed = _keys_under(s3, source, prefix)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            raise ArtifactError(
                f"cannot list {prefix} in {source} ({code}): promoting an unpacked layout needs s3:ListBucket on "
                "the source stage's models/ prefix for this account"
            ) from None
        for name in sorted(listed, key=lambda name: name == marker):
            _copy(s3, source, name, properties["Bucket"], name, properties["KmsKeyArn"])
    if not _exists(s3, properties["Bucket"], key):  # only the unpacked layout was missing
        _copy(s3, source, key, properties["Bucket"], key, properties["KmsKeyArn"])


# ---------------------------------------------------------------------------------------------
# CodeBuild


def _environment_overrides(properties: dict, unpack_only: bool) -> list[dict]:
    variables = {
        **{str(k): str(v) for k, v in properties["BuildEnvironment"].items()},
        "MODEL_NAME": properties["ModelName"],
        "ARTIFACT_BUCKET": properties["Bucket"],
        "ARTIFACT_KEY": properties["Key"],
        "UNCOMPRESSED_PREFIX": properties.get("UncompressedPrefix") or "",
        # The archive exists but the unpacked layout does not: unpack the existing archive instead
        # of rebuilding (TensorRT builds are not byte-reproducible; the key's bytes must not change).
        "UNPACK_ONLY": "true" if unpack_only else "false",
    }
    return [{"name": name, "value": value, "type": "PLAINTEXT"} for name, value in sorted(variables.items())]


def _start_build(codebuild: Any, properties: dict, unpack_only: bool) -> str:
    response = codebuild.start_build(
        projectName=properties["ProjectName"],
        environmentVariablesOverride=_environment_overrides(properties, unpack_only),
    )
    build_id = response["build"]["id"]
    LOG.info("started build %s for %s", build_id, properties["Key"])
    return build_id


def _logs_link(build: dict) -> str:
    logs = build.get("logs") or {}
    if logs.get("deepLink"):
        return logs["deepLink"]
    region = os.environ.get("AWS_REGION", "us-east-1")
    build_id = build.get("id", "")
    return (
        f"https://{region}.console.aws.amazon.com/codesuite/codebuild/projects/"
        f"{build_id.split(':', 1)[0]}/build/{build_id.replace(':', '%3A')}/log?region={region}"
    )


def _failure_reason(build: dict) -> str:
    for phase in reversed(build.get("phases") or []):
        if phase.get("phaseStatus") in FAILED_STATES:
            contexts = "; ".join(c.get("message", "") for c in phase.get("contexts") or [] if c.get("message"))
            return f" in phase {phase.get('phaseType')}" + (f": {contexts}" if contexts else "")
    return ""


# ---------------------------------------------------------------------------------------------
# Handlers


def _done(properties: dict, built: bool, build_id: str = "") -> dict:
    return {
        "PhysicalResourceId": properties["Key"],
        "Data": {"Key": properties["Key"], "Built": "true" if built else "false", "BuildId": build_id},
    }


def on_event(event: dict, _context: Any = None) -> dict:
    LOG.info("event: %s", json.dumps({k: v for k, v in event.items() if k != "ResponseURL"}, default=str))
    if event["RequestType"] == "Delete":
        # Retained: the same key may serve other stacks, stages, or a rollback.
        return {"PhysicalResourceId": event.get("PhysicalResourceId") or event["ResourceProperties"]["Key"]}
    properties = _properties(event)
    s3 = s3_client()
    if _artifact_present(s3, properties):
        _make_copies(s3, properties)
        return _done(properties, built=False)
    if properties.get("SourceBucket"):
        _promote(s3, properties)
        _make_copies(s3, properties)
        return _done(properties, built=False)
    unpack_only = _exists(s3, properties["Bucket"], properties["Key"])
    build_id = _start_build(codebuild_client(), properties, unpack_only)
    return {"PhysicalResourceId": properties["Key"], "Data": {"Key": properties["Key"], "BuildId": build_id}}


def is_complete(event: dict, _context: Any = None) -> dict:
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    properties = _properties(event)
    build_id = (event.get("Data") or {}).get("BuildId")
    if not build_id:
        return {"IsComplete": True, "Data": _done(properties, built=False)["Data"]}
    builds = codebuild_client().batch_get_builds(ids=[build_id]).get("builds") or []
    if not builds:
        raise ArtifactError(f"build {build_id} for {properties['Key']} not found (deleted?); deploy again")
    build = builds[0]
    status = build.get("buildStatus")
    if status == "IN_PROGRESS":
        return {"IsComplete": False}
    if status in FAILED_STATES:
        raise ArtifactError(
            f"model build {build_id} for {properties['ModelName']} ended {status}{_failure_reason(build)}; "
            f"nothing was written under {properties['Key']}. Logs: {_logs_link(build)}"
        )
    if status != "SUCCEEDED":
        raise ArtifactError(f"model build {build_id} ended in unexpected state {status!r}. Logs: {_logs_link(build)}")
    s3 = s3_client()
    if not _artifact_present(s3, properties):
        raise ArtifactError(
            f"model build {build_id} SUCCEEDED but {properties['Key']} (or its unpacked layout) is missing in "
            f"{properties['Bucket']}; check the build's upload step. Logs: {_logs_link(build)}"
        )
    _make_copies(s3, properties)
    return {"IsComplete": True, "Data": _done(properties, built=True, build_id=build_id)["Data"]}
