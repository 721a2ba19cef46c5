"""Upload an artifact to its content-addressed S3 key, never overwriting different bytes.

A key names an artifact's inputs (model_build.key), so the bytes under it must never change once
written: endpoints already serving that key would silently load something else on their next
instance. The rules:

- The object's full-file SHA-256 travels with it as user metadata `sha256` (S3's own
  `ChecksumSHA256` of a multipart object is a checksum of the part checksums, "<b64>-<parts>",
  which cannot be compared with a file's digest, and S3 offers full-object multipart checksums
  for CRC algorithms only). Every request also carries S3-verified SHA-256 checksums
  (`ChecksumAlgorithm=SHA256`), so corruption in transit fails the upload.
- Writes are conditional (`IfNoneMatch="*"` on PutObject and CompleteMultipartUpload): when two
  builds race for the same key, exactly one write lands and the other gets 412 Precondition Failed.
- An existing key is compared by its `sha256` metadata (or, for single-part objects written by
  someone else, its non-composite `ChecksumSHA256` read with `ChecksumMode=ENABLED`): the same
  bytes are "already present" and skipped; different or unverifiable bytes are refused.
- A multipart upload is aborted on any failure, so no parts are left behind (billed, invisible).

moto 5.2.5 (our test server) implements IfNoneMatch on both writes, ChecksumMode on HeadObject
and multipart checksums, so the tests exercise these paths against it; it does not verify the
checksum values sent (real S3 does, answering BadDigest).
"""

from __future__ import annotations

import base64
import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from model_build.errors import MissingToolError, ModelBuildError
from model_build.key import file_sha256

# S3 limits: parts of 5 MiB..5 GiB (the last may be smaller), at most 10,000 parts.
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PARTS = 10_000
DEFAULT_PART_SIZE = 16 * 1024 * 1024
# Files up to this size go in one PutObject; larger ones in parts (resumable per part by botocore's
# retries, and S3 verifies each part's checksum).
DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024
SHA256_METADATA_KEY = "sha256"

Status = Literal["uploaded", "already present"]


@dataclass(frozen=True)
class UploadResult:
    bucket: str
    key: str
    sha256: str
    size: int
    status: Status

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


class ConflictingObjectError(ModelBuildError):
    """The key already holds different (or unverifiable) bytes."""


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def make_s3_client(*, endpoint_url: str | None = None, region: str | None = None) -> Any:
    import boto3  # deferred: `python -m model_build --help` should not pay for boto3's import

    return boto3.client("s3", endpoint_url=endpoint_url, region_name=region)


# --- progress -----------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on a TTY; silent otherwise (CI logs get the final summary only)."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None, *, force: bool = False) -> None:
        self._stream = stream or sys.stderr
        self._enabled = force or self._stream.isatty()
        self._label = label
        self._total = max(total, 1)
        self._done = 0
        self._last_draw = 0.0

    def advance(self, count: int) -> None:
        self._done += count
        now = time.monotonic()
        if self._enabled and (now - self._last_draw >= 0.1 or self._done >= self._total):
            self._last_draw = now
            fraction = min(self._done / self._total, 1.0)
            bar = "#" * int(fraction * 30)
            mib = 1024 * 1024
            self._stream.write(
                f"\r{self._label} [{bar:<30}] {fraction:4.0%} {self._done / mib:.1f}/{self._total / mib:.1f} MiB"
            )
            self._stream.flush()

    def close(self) -> None:
        if self._enabled and self._last_draw:
            self._stream.write("\n")
            self._stream.flush()


# --- existing objects ---------------------------------------------------------------------------


def _error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _is_precondition_failed(error: Exception) -> bool:
    response = getattr(error, "response", None) or {}
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    # 409 ConditionalRequestConflict: S3's answer when a conflicting write is still in progress.
    return _error_code(error) in {"PreconditionFailed", "412", "ConditionalRequestConflict"} or status in {409, 412}


def _listed(client: Any, bucket: str, key: str) -> bool:
    """Whether `key` exists according to a listing of its own prefix (True when the listing fails)."""
    from botocore.exceptions import ClientError

    try:
        found = client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
    except ClientError:
        return True
    return any(item.get("Key") == key for item in found)


def existing_sha256(client: Any, bucket: str, key: str) -> str | None:
    """sha256 hex of the object under `key`; None when there is no object.

    Raises ConflictingObjectError when an object exists but its SHA-256 cannot be established.
    """
    from botocore.exceptions import ClientError

    try:
        head = client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as error:
        if _error_code(error) in {"404", "NoSuchKey", "NotFound"}:
            return None
        # Without s3:ListBucket on the whole bucket a missing key answers 403, not 404 (HeadObject API
        # reference); the build role may list the models/ prefix only, so ask a listing of the key itself.
        if _error_code(error) in {"403", "AccessDenied", "Forbidden"} and not _listed(client, bucket, key):
            return None
        raise
    recorded = (head.get("Metadata") or {}).get(SHA256_METADATA_KEY)
    if recorded:
        return recorded.lower()
    checksum = head.get("ChecksumSHA256")
    # A multipart object's SHA-256 checksum is composite, a digest of the part digests, never of the
    # file. S3 marks it "<b64>-<parts>" and ChecksumType COMPOSITE; moto 5.2.5 marks neither, but
    # a multipart ETag ("<md5>-<parts>") gives it away on both.
    multipart = "-" in head.get("ETag", "") or "-" in (checksum or "") or head.get("ChecksumType") == "COMPOSITE"
    if checksum and not multipart:
        return base64.b64decode(checksum).hex()
    raise ConflictingObjectError(
        f"s3://{bucket}/{key} already exists without a '{SHA256_METADATA_KEY}' metadata entry or a full-object "
        "SHA-256 checksum, so its bytes cannot be compared; it was not written by model_build. Delete it or "
        "choose another key"
    )


def _check_existing(client: Any, bucket: str, key: str, sha256: str, size: int) -> UploadResult | None:
    found = existing_sha256(client, bucket, key)
    if found is None:
        return None
    if found == sha256:
        return UploadResult(bucket, key, sha256, size, "already present")
    raise ConflictingObjectError(
        f"s3://{bucket}/{key} already holds different bytes (sha256 {found}, this file {sha256}); "
        "content-addressed keys are never overwritten. If the inputs really are unchanged, the build is not "
        "reproducible; otherwise the key derivation missed an input (model_build.key)"
    )


# --- uploads ------------------------------------------------------------------------------------


def choose_part_size(size: int, requested: int = DEFAULT_PART_SIZE) -> int:
    """`requested`, grown (in whole MiB) when the file would need more than 10,000 parts."""
    if requested < MIN_PART_SIZE:
        raise ModelBuildError(f"part size {requested} bytes is below S3's minimum of {MIN_PART_SIZE} (5 MiB)")
    mib = 1024 * 1024
    needed = -(-size // MAX_PARTS)
    return max(requested, -(-needed // mib) * mib)


def _put_single(client: Any, path: Path, bucket: str, key: str, sha256: str, progress: Progress) -> None:
    with path.open("rb") as body:
        client.put_object(
            Bucket=bucket,
            Key=key,
            Body=body,
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=_b64(bytes.fromhex(sha256)),
            Metadata={SHA256_METADATA_KEY: sha256},
            IfNoneMatch="*",
        )
    progress.advance(path.stat().st_size)


def _put_multipart(
    client: Any, path: Path, bucket: str, key: str, sha256: str, part_size: int, progress: Progress
) -> None:
    upload = client.create_multipart_upload(
        Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256", Metadata={SHA256_METADATA_KEY: sha256}
    )
    upload_id = upload["UploadId"]
    try:
        parts = []
        with path.open("rb") as stream:
            number = 1
            # One part in memory at a time: memory is bounded by the part size, not the file size.
            while data := stream.read(part_size):
                checksum = _b64(hashlib.sha256(data).digest())
                response = client.upload_part(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=data,
                    ChecksumAlgorithm="SHA256",
                    ChecksumSHA256=checksum,
                )
                parts.append({"PartNumber": number, "ETag": response["ETag"], "ChecksumSHA256": checksum})
                progress.advance(len(data))
                number += 1
        client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
        )
    except BaseException:
        # Leave no invisible, billed parts behind, whatever went wrong (including Ctrl-C).
        try:
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except Exception as abort_error:  # the original failure matters more; report both
            print(f"WARNING: could not abort multipart upload {upload_id}: {abort_error}", file=sys.stderr)
        raise


def upload_file(
    path: Path,
    bucket: str,
    key: str,
    *,
    client: Any | None = None,
    part_size: int = DEFAULT_PART_SIZE,
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
    progress_stream: TextIO | None = None,
) -> UploadResult:
    """Upload `path` to s3://bucket/key unless the key already holds exactly these bytes."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    path = Path(path)
    if not path.is_file():
        raise ModelBuildError(f"{path}: no such file to upload")
    size = path.stat().st_size
    part_size = choose_part_size(size, part_size)
    try:
        sha256 = file_sha256(path)
    except OSError as error:
        raise ModelBuildError(f"{path}: cannot be read ({error.strerror or error}); check its permissions") from None
    client = client or make_s3_client()
    progress = Progress(f"upload s3://{bucket}/{key}", size, progress_stream)
    try:
        present = _check_existing(client, bucket, key, sha256, size)
        if present is not None:
            return present
        try:
            if size <= multipart_threshold:
                _put_single(client, path, bucket, key, sha256, progress)
            else:
                _put_multipart(client, path, bucket, key, sha256, part_size, progress)
        except ClientError as error:
            if not _is_precondition_failed(error):
                raise
            # Another writer created the key between our check and our write: judge its bytes.
            present = _check_existing(client, bucket, key, sha256, size)
            if present is None:
                raise
            return present
        return UploadResult(bucket, key, sha256, size, "uploaded")
    except NoCredentialsError as error:
        raise MissingToolError(
            f"no AWS credentials to upload to s3://{bucket}/{key}; set AWS_PROFILE or run inside the build role"
        ) from error
    except ClientError as error:
        raise ModelBuildError(f"upload to s3://{bucket}/{key} failed: {error}") from error
    except BotoCoreError as error:
        raise ModelBuildError(f"upload to s3://{bucket}/{key} failed: {error}") from error
    finally:
        progress.close()
