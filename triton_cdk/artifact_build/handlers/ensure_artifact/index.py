"""Custom::TritonModelArtifact: make sure a content-addressed model artifact exists in S3.

Standard library + boto3 only, so the asset needs no bundling. Three entry points:

- `on_event` (CDK Provider framework, Create/Update): the artifact key (and, when asked, the
  unpacked layout) already exists -> nothing is started; BUILD mode signals the resource's wait
  condition at once. Missing -> PROMOTE mode (`SourceBucket` given) copies it from the source
  stage's bucket, re-encrypted with this stage's key, and never builds; BUILD mode starts the
  CodeBuild model build and returns: the deployment then waits on an
  AWS::CloudFormation::WaitCondition (up to 12 hours, CloudFormation's limit) instead of the
  custom resource (at most 1 hour), so builds longer than an hour deploy.
- `on_build_state` (EventBridge "CodeBuild Build State Change" of the model-build projects): a
  finished build signals its wait condition: SUCCESS once the key exists (after the multi-model
  copies are made), FAILURE with the build id, the failed phase and a link to its logs otherwise
  (FAILED, FAULT, TIMED_OUT, STOPPED: also builds that never reached their own last command).
- `on_event` Delete (stack deletion, or the rollback of a deployment that gave up, e.g. its wait
  condition timed out): stops the build this resource started if it still runs; artifacts are
  retained (other stacks, stages or rollbacks may serve them).

Artifacts are write-once, like `model_build upload` (model_build/upload.py): every copy is a
conditional write (`If-None-Match: *` on CopyObject / CompleteMultipartUpload, so a concurrent
writer makes it fail with 412 instead of overwriting), and a key that already exists is compared
by its recorded SHA-256 (`sha256` metadata, or a full-object `ChecksumSHA256`): the same bytes are
kept, different or unverifiable bytes fail the deployment.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

FAILED_STATES = ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")
# Written last when the build uploads the unpacked layout: its presence means the layout is whole.
UNCOMPRESSED_MARKER = "config.pbtxt"
SHA256_METADATA_KEY = "sha256"  # model_build/upload.py writes it on every object
# CopyObject copies at most 5 GiB; larger objects are copied in parts (S3: 5 MiB..5 GiB per part).
MAX_SINGLE_COPY = 5 * 1024**3
COPY_PART_SIZE = 512 * 1024**2
# StartBuild over a project's ConcurrentBuildLimit fails with AccountLimitExceededException instead
# of queueing ("Builds in AWS CodeBuild"): retry with backoff, then fail naming the setting.
START_RETRY_DELAYS = (15, 30, 60, 120)
# Stop starting new copies when the function has less than this left (its own message wins over
# the Lambda timeout's).
DEADLINE_MARGIN_MS = 60_000
SIGNAL_REASON_LIMIT = 1000
sleep: Callable[[float], None] = time.sleep


class ArtifactError(Exception):
    """Fails the CloudFormation operation (or the wait condition); the message is what people read."""


# ---------------------------------------------------------------------------------------------
# Clients: created lazily so that Delete (and tests that replace them) never touch AWS needlessly.


def s3_client(region: str | None = None) -> Any:
    return boto3.client("s3", region_name=region) if region else boto3.client("s3")


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
    if properties.get("ProjectName") and not properties.get("WaitHandle"):
        raise ArtifactError("Custom::TritonModelArtifact in build mode needs WaitHandle (its wait condition's handle)")
    properties.setdefault("CopyTo", [])
    properties.setdefault("BuildEnvironment", {})
    return properties


def _marker_key(properties: dict) -> str | None:
    prefix = properties.get("UncompressedPrefix")
    return f"{prefix}{properties['ModelName']}/{UNCOMPRESSED_MARKER}" if prefix else None


# ---------------------------------------------------------------------------------------------
# S3


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _status(error: ClientError) -> int | None:
    return error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _forbidden(error: ClientError) -> bool:
    return _code(error) in ("403", "AccessDenied", "Forbidden") or _status(error) == 403


def listed(s3: Any, bucket: str, key: str) -> bool:
    """Whether `key` exists, by listing its own prefix.

    S3 HeadObject answers a missing key with 404 only to a caller holding s3:ListBucket on the bucket,
    otherwise 403 (HeadObject API reference); our roles hold ListBucket only for `s3:prefix` models/*,
    which a HEAD request does not carry. A ListObjectsV2 with the key as prefix is within that grant.
    True (or an error) keeps the 403 as it was.
    """
    try:
        found = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
    except ClientError:
        return True
    return any(item.get("Key") == key for item in found)


def _head(s3: Any, bucket: str, key: str) -> dict | None:
    """The object's HEAD (with its checksum), None when absent; a 403 is explained, not passed on."""
    try:
        return s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as error:
        if _code(error) in ("404", "NoSuchKey", "NotFound"):
            return None
        if _forbidden(error) and not listed(s3, bucket, key):
            return None  # absent: see listed()
        if _forbidden(error):
            raise ArtifactError(
                f"access denied (403) reading s3://{bucket}/{key}: this ensure-artifact handler's role needs "
                f"s3:GetObject on the models/ prefix and s3:ListBucket on {bucket} (without ListBucket a missing key "
                "also answers 403), and neither the bucket policy nor the KMS key policy may deny it"
            ) from None
        raise


def _exists(s3: Any, bucket: str, key: str) -> bool:
    return _head(s3, bucket, key) is not None


def _artifact_present(s3: Any, properties: dict, bucket: str | None = None) -> bool:
    bucket = bucket or properties["Bucket"]
    if not _exists(s3, bucket, properties["Key"]):
        return False
    marker = _marker_key(properties)
    return marker is None or _exists(s3, bucket, marker)


def recorded_sha256(head: dict) -> str | None:
    """SHA-256 hex the object carries: `sha256` metadata, or a full-object (not multipart) ChecksumSHA256.

    The same rule as model_build.upload.existing_sha256: a multipart checksum ("<b64>-<parts>", or
    an ETag with "-") is a digest of part digests and says nothing about the file.
    """
    recorded = (head.get("Metadata") or {}).get(SHA256_METADATA_KEY)
    if recorded:
        return recorded.lower()
    checksum = head.get("ChecksumSHA256")
    multipart = "-" in head.get("ETag", "") or "-" in (checksum or "") or head.get("ChecksumType") == "COMPOSITE"
    if checksum and not multipart:
        return base64.b64decode(checksum).hex()
    return None


def _is_precondition_failed(error: ClientError) -> bool:
    # 409 ConditionalRequestConflict: S3's answer while a conflicting write is still in progress.
    return _code(error) in ("PreconditionFailed", "412", "ConditionalRequestConflict") or _status(error) in (409, 412)


def _judge_existing(target: dict, source: dict, bucket: str, key: str, source_uri: str) -> None:
    """An existing key is kept only when it holds the source's bytes (by recorded SHA-256)."""
    found, wanted = recorded_sha256(target), recorded_sha256(source)
    if found is not None and found == wanted:
        return
    raise ArtifactError(
        f"s3://{bucket}/{key} already exists with sha256 {found or 'unknown'}, but {source_uri} has sha256 "
        f"{wanted or 'unknown'}: artifacts are write-once and never overwritten. Find out who wrote that object "
        "(its versions in the bucket), delete that version deliberately, then deploy again"
    )


def _copy_object(s3: Any, source: dict, size: int, bucket: str, key: str, kms_key_arn: str, metadata: dict) -> None:
    """Server-side copy, conditional on the key being absent (If-None-Match: *), re-encrypted with this stage's key."""
    encryption = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_arn, "Metadata": metadata}
    if size <= MAX_SINGLE_COPY:
        s3.copy_object(
            CopySource=source, Bucket=bucket, Key=key, MetadataDirective="REPLACE", IfNoneMatch="*", **encryption
        )
        return
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key, **encryption)["UploadId"]
    try:
        parts = []
        for number, start in enumerate(range(0, size, COPY_PART_SIZE), start=1):
            end = min(start + COPY_PART_SIZE, size) - 1
            part = s3.upload_part_copy(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                CopySource=source,
                CopySourceRange=f"bytes={start}-{end}",
            )
            parts.append({"PartNumber": number, "ETag": part["CopyPartResult"]["ETag"]})
        s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
        )
    except BaseException:
        try:  # leave no invisible, billed parts behind
            s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except ClientError as abort_error:
            LOG.warning("could not abort multipart upload %s: %s", upload_id, abort_error)
        raise


def copy_write_once(
    s3: Any, source_bucket: str, source_key: str, bucket: str, key: str, kms_key_arn: str, source_s3: Any = None
) -> str:
    """Copy s3://source_bucket/source_key to s3://bucket/key unless the key already holds the same bytes.

    Returns "copied" or "already present"; raises ArtifactError when the key holds other bytes or when
    the source's bytes cannot be verified (no recorded SHA-256).
    """
    source_uri = f"s3://{source_bucket}/{source_key}"
    source = _head(source_s3 or s3, source_bucket, source_key)
    if source is None:
        raise ArtifactError(f"{source_uri} does not exist")
    if recorded_sha256(source) is None:
        raise ArtifactError(
            f"{source_uri} has no '{SHA256_METADATA_KEY}' metadata or full-object SHA-256 checksum, so a copy could "
            "not be verified; it was not written by `model_build upload`"
        )
    existing = _head(s3, bucket, key)
    if existing is not None:
        _judge_existing(existing, source, bucket, key, source_uri)
        return "already present"
    metadata = dict(source.get("Metadata") or {})
    metadata.setdefault(SHA256_METADATA_KEY, recorded_sha256(source))
    try:
        _copy_object(
            s3,
            {"Bucket": source_bucket, "Key": source_key},
            source["ContentLength"],
            bucket,
            key,
            kms_key_arn,
            metadata,
        )
    except ClientError as error:
        if _is_precondition_failed(error):
            # Another writer created the key between our HEAD and our write: judge what it wrote.
            existing = _head(s3, bucket, key)
            if existing is None:
                raise
            _judge_existing(existing, source, bucket, key, source_uri)
            return "already present"
        if _forbidden(error):
            raise ArtifactError(
                f"access denied (403) copying {source_uri} to s3://{bucket}/{key}: check s3:GetObject on the source, "
                "s3:PutObject on the target, kms:Decrypt on the source's key and kms:GenerateDataKey on the target's"
            ) from None
        raise
    copied = _head(s3, bucket, key)
    if copied is None or recorded_sha256(copied) != recorded_sha256(source):
        raise ArtifactError(f"copy of {source_uri} to s3://{bucket}/{key} could not be verified after writing")
    return "copied"


def _keys_under(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


def _make_copies(s3: Any, bucket: str, key: str, copy_to: list[str], kms_key_arn: str) -> list[str]:
    """`CopyTo` keys (multi-model `<name>.tar.gz`) from the artifact key; present ones are verified, not rewritten."""
    return [target for target in copy_to if copy_write_once(s3, bucket, key, bucket, target, kms_key_arn) == "copied"]


def _promote(s3: Any, properties: dict, remaining_ms: Callable[[], int]) -> None:
    """Copy the artifact from the source stage's bucket; refuse when the source lacks it."""
    source = properties["SourceBucket"]
    source_s3 = s3_client(properties.get("SourceRegion")) if properties.get("SourceRegion") else s3
    key = properties["Key"]
    marker = _marker_key(properties)
    try:
        missing = next((k for k in (key, marker) if k and not _exists_quiet(source_s3, source, k)), None)
    except ClientError as error:
        # A source bucket in another account may not let this stage list it: a missing key is 403 then.
        raise ArtifactError(
            f"{key} is not readable in {source} ({_code(error)}): either it was not built there (deploy the source "
            "stage first) or that stage does not grant this account read access (its artifacts.reader_accounts)"
        ) from None
    if missing:
        raise ArtifactError(
            f"{missing} not built in {source}; deploy the source stage first "
            "(promotion copies artifacts, it never builds)"
        )
    names: list[str] = []
    prefix = properties.get("UncompressedPrefix")
    if prefix:
        try:
            listed = _keys_under(source_s3, source, prefix)
        except ClientError as error:
            raise ArtifactError(
                f"cannot list {prefix} in {source} ({_code(error)}): promoting an unpacked layout needs s3:ListBucket "
                "on the source stage's models/ prefix for this account"
            ) from None
        # The unpacked files first and the marker last, then the archive key: whatever is present
        # after an interruption is never mistaken for a whole artifact.
        names = sorted(listed, key=lambda name: name == marker)
    for name in [*names, key]:
        if remaining_ms() < DEADLINE_MARGIN_MS:
            raise ArtifactError(
                f"promotion of {key} from {source} ran out of time before {name}; deploy again: what was copied is "
                "kept and verified, the rest is copied then"
            )
        copy_write_once(s3, source, name, properties["Bucket"], name, properties["KmsKeyArn"], source_s3=source_s3)


def _exists_quiet(s3: Any, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if _code(error) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


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
        # Read back by on_build_state when the build ends (BatchGetBuilds returns them).
        "WAIT_HANDLE_URL": properties["WaitHandle"],
        "KMS_KEY_ARN": properties["KmsKeyArn"],
        "COPY_TO": json.dumps(list(properties["CopyTo"])),
    }
    return [{"name": name, "value": value, "type": "PLAINTEXT"} for name, value in sorted(variables.items())]


def _start_build(codebuild: Any, properties: dict, unpack_only: bool) -> str:
    overrides = _environment_overrides(properties, unpack_only)
    for attempt, delay in enumerate((*START_RETRY_DELAYS, None)):
        try:
            response = codebuild.start_build(
                projectName=properties["ProjectName"], environmentVariablesOverride=overrides
            )
            break
        except ClientError as error:
            if _code(error) != "AccountLimitExceededException":
                raise
            if delay is None:
                raise ArtifactError(
                    f"CodeBuild refused to start the build of {properties['ModelName']} on {properties['ProjectName']} "
                    f"after {attempt + 1} attempts: {error.response.get('Error', {}).get('Message', 'limit reached')}. "
                    "With a project concurrent build limit (build.concurrency) builds over it fail instead of "
                    "queueing; remove build.concurrency or raise it (or the account's CodeBuild quota)"
                ) from None
            LOG.warning("StartBuild over a limit (%s); retrying in %s s", _code(error), delay)
            sleep(delay)
    build_id = response["build"]["id"]
    LOG.info("started build %s for %s", build_id, properties["Key"])
    return build_id


def _stop_build(codebuild: Any, build_id: str) -> None:
    """Stop a build the deployment gave up on; never fails (a Delete must not be blocked by it)."""
    try:
        builds = codebuild.batch_get_builds(ids=[build_id]).get("builds") or []
        if builds and builds[0].get("buildStatus") == "IN_PROGRESS":
            codebuild.stop_build(id=build_id)
            LOG.info("stopped build %s", build_id)
    except ClientError as error:
        LOG.warning("could not stop build %s: %s", build_id, error)


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
# Wait condition signals (CloudFormation: a JSON document PUT to the handle's presigned S3 URL)


def signal(url: str, status: str, reason: str, unique_id: str, data: str = "") -> None:
    body = json.dumps(
        {"Status": status, "Reason": reason[:SIGNAL_REASON_LIMIT], "UniqueId": unique_id[:255], "Data": data}
    ).encode()
    # The presigned URL was signed without a content type: send none (as cfn-signal / curl -H 'Content-Type:').
    request = urllib.request.Request(url, data=body, method="PUT", headers={"Content-Type": ""})
    with urllib.request.urlopen(request, timeout=30) as response:
        LOG.info("signalled %s for %s: HTTP %s", status, unique_id, response.status)


# ---------------------------------------------------------------------------------------------
# Handlers

PHYSICAL_ID_SEPARATOR = "|"


def _physical_id(event: dict, key: str, build_id: str = "") -> str:
    """`<key>` or `<key>|<build id>`: Delete (and rollback clean-up) learn the build to stop from it.

    When nothing new is started for the same key, the current id is kept, so CloudFormation never
    mistakes an unchanged artifact for a replacement.
    """
    if build_id:
        return f"{key}{PHYSICAL_ID_SEPARATOR}{build_id}"
    current = event.get("PhysicalResourceId") or ""
    return current if current.split(PHYSICAL_ID_SEPARATOR, 1)[0] == key else key


def _remaining_ms(context: Any) -> Callable[[], int]:
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        return context.get_remaining_time_in_millis
    return lambda: 15 * 60 * 1000


def _new_wait_handle(event: dict, properties: dict) -> bool:
    old = (event.get("OldResourceProperties") or {}).get("WaitHandle")
    return event["RequestType"] == "Create" or old != properties.get("WaitHandle")


def on_event(event: dict, context: Any = None) -> dict:
    LOG.info("event: %s", json.dumps({k: v for k, v in event.items() if k != "ResponseURL"}, default=str))
    if event["RequestType"] == "Delete":
        physical = event.get("PhysicalResourceId") or event["ResourceProperties"]["Key"]
        _, _, build_id = physical.partition(PHYSICAL_ID_SEPARATOR)
        if build_id:
            _stop_build(codebuild_client(), build_id)
        # Artifacts are retained: the same key may serve other stacks, stages, or a rollback.
        return {"PhysicalResourceId": physical}
    properties = _properties(event)
    key = properties["Key"]
    s3 = s3_client()
    done = {"PhysicalResourceId": _physical_id(event, key), "Data": {"Key": key, "Built": "false", "BuildId": ""}}
    if _artifact_present(s3, properties):
        _make_copies(s3, properties["Bucket"], key, properties["CopyTo"], properties["KmsKeyArn"])
        if properties.get("WaitHandle") and _new_wait_handle(event, properties):
            try:
                signal(properties["WaitHandle"], "SUCCESS", f"{key} already exists; nothing was built", key, key)
            except OSError as error:
                # Never fail the operation for it: in a rollback the handle is an old one (its wait long
                # complete, its URL maybe expired); a new wait left unsignalled times out and rolls back.
                LOG.warning("could not signal the wait condition of %s: %s", key, error)
        return done
    if properties.get("SourceBucket"):
        _promote(s3, properties, _remaining_ms(context))
        _make_copies(s3, properties["Bucket"], key, properties["CopyTo"], properties["KmsKeyArn"])
        return done
    unpack_only = _exists(s3, properties["Bucket"], key)
    build_id = _start_build(codebuild_client(), properties, unpack_only)
    return {"PhysicalResourceId": _physical_id(event, key, build_id), "Data": {"Key": key, "BuildId": build_id}}


def _build_outcome(build: dict, variables: dict[str, str]) -> tuple[str, str]:
    """("SUCCESS" | "FAILURE", reason) for a finished build."""
    build_id, status = build.get("id", ""), build.get("buildStatus")
    key, bucket, model = (
        variables.get("ARTIFACT_KEY", ""),
        variables.get("ARTIFACT_BUCKET", ""),
        variables.get("MODEL_NAME", ""),
    )
    if status in FAILED_STATES:
        return "FAILURE", (
            f"model build {build_id} for {model} ended {status}{_failure_reason(build)}; nothing was written under "
            f"{key}. Logs: {_logs_link(build)}"
        )
    if status != "SUCCEEDED":
        return "FAILURE", f"model build {build_id} ended in unexpected state {status!r}. Logs: {_logs_link(build)}"
    properties = {
        "Bucket": bucket,
        "Key": key,
        "ModelName": model,
        "UncompressedPrefix": variables.get("UNCOMPRESSED_PREFIX"),
    }
    s3 = s3_client()
    try:
        if not _artifact_present(s3, properties):
            return "FAILURE", (
                f"model build {build_id} SUCCEEDED but {key} (or its unpacked layout) is missing in {bucket}; check "
                f"the build's upload step. Logs: {_logs_link(build)}"
            )
        copy_to = json.loads(variables.get("COPY_TO") or "[]")
        _make_copies(s3, bucket, key, copy_to, variables.get("KMS_KEY_ARN", ""))
    except ArtifactError as error:
        return "FAILURE", f"model build {build_id} SUCCEEDED, but: {error}"
    return "SUCCESS", f"model build {build_id} wrote {key}"


def on_build_state(event: dict, _context: Any = None) -> dict:
    """EventBridge target: a model build ended; signal the wait condition of the resource that started it."""
    detail = event.get("detail") or {}
    build_id, status = detail.get("build-id", ""), detail.get("build-status")
    if status not in (*FAILED_STATES, "SUCCEEDED"):
        return {"signalled": False, "reason": f"build {build_id} is {status}"}
    builds = codebuild_client().batch_get_builds(ids=[build_id]).get("builds") or []
    if not builds:
        LOG.warning("build %s not found", build_id)
        return {"signalled": False, "reason": f"build {build_id} not found"}
    build = builds[0]
    variables = {
        v["name"]: v.get("value", "") for v in (build.get("environment") or {}).get("environmentVariables") or []
    }
    url = variables.get("WAIT_HANDLE_URL")
    if not url:  # started by hand, not by a deployment
        return {"signalled": False, "reason": f"build {build_id} was not started by a deployment"}
    outcome, reason = _build_outcome(build, variables)
    signal(url, outcome, reason, build_id, variables.get("ARTIFACT_KEY", ""))
    return {"signalled": True, "status": outcome, "reason": reason}
