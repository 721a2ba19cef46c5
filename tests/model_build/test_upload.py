"""model_build.upload against a real moto_server on a loopback port (S3 over HTTP).

moto 5.2.5 implements what the uploader relies on: IfNoneMatch="*" on PutObject and
CompleteMultipartUpload (412 PreconditionFailed), HeadObject with ChecksumMode=ENABLED, SHA-256
checksums stored on PutObject/UploadPart (composite for multipart objects, though its HeadObject
leaves out S3's "-<parts>" suffix) and the 5 MiB minimum part size, so none of those paths is
faked here. moto does NOT verify the checksum values we send (S3 answers BadDigest), so a
corrupted-part test would prove nothing against it and is left out.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from model_build import cli, upload
from model_build.errors import MissingToolError, ModelBuildError
from model_build.upload import (
    MIN_PART_SIZE,
    ConflictingObjectError,
    Progress,
    choose_part_size,
    upload_file,
)

pytestmark = pytest.mark.moto
MIB = 1024 * 1024
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


@pytest.fixture
def moto_url(moto_server_url: str) -> str:
    """The session's moto_server (tests/conftest.py)."""
    return moto_server_url


@pytest.fixture
def s3(moto_url: str):
    return boto3.client("s3", endpoint_url=moto_url, **CREDENTIALS)


@pytest.fixture
def bucket(s3) -> str:
    name = f"artifacts-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def count_calls(client, operation: str) -> list[str]:
    calls: list[str] = []
    client.meta.events.register(f"before-call.s3.{operation}", lambda **_: calls.append(operation))
    return calls


def body(s3, bucket: str, key: str) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_a_new_key_is_uploaded_with_its_sha256(tmp_path: Path, s3, bucket: str) -> None:
    data = os.urandom(300_000)
    result = upload_file(write(tmp_path / "model.tar.gz", data), bucket, "models/m/abc/model.tar.gz", client=s3)
    assert (result.status, result.size, result.uri) == (
        "uploaded",
        len(data),
        f"s3://{bucket}/models/m/abc/model.tar.gz",
    )
    assert result.sha256 == hashlib.sha256(data).hexdigest()
    head = s3.head_object(Bucket=bucket, Key="models/m/abc/model.tar.gz", ChecksumMode="ENABLED")
    assert head["Metadata"] == {"sha256": result.sha256}
    assert head["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(data).digest()).decode()
    assert body(s3, bucket, "models/m/abc/model.tar.gz") == data


def test_the_same_bytes_again_are_skipped(tmp_path: Path, s3, bucket: str) -> None:
    path = write(tmp_path / "a.tar.gz", os.urandom(10_000))
    upload_file(path, bucket, "k", client=s3)
    puts = count_calls(s3, "PutObject")
    result = upload_file(path, bucket, "k", client=s3)
    assert result.status == "already present"
    assert puts == []


def test_different_bytes_under_the_same_key_are_refused(tmp_path: Path, s3, bucket: str) -> None:
    original = os.urandom(10_000)
    upload_file(write(tmp_path / "a", original), bucket, "k", client=s3)
    other = write(tmp_path / "b", os.urandom(10_000))
    with pytest.raises(ConflictingObjectError, match=rf"s3://{bucket}/k already holds different bytes \(sha256 "):
        upload_file(other, bucket, "k", client=s3)
    assert body(s3, bucket, "k") == original


def test_multipart_upload_with_part_checksums(tmp_path: Path, s3, bucket: str) -> None:
    data = os.urandom(2 * MIN_PART_SIZE + 123_456)
    path = write(tmp_path / "big.tar.gz", data)
    parts = count_calls(s3, "UploadPart")
    result = upload_file(path, bucket, "big", client=s3, part_size=MIN_PART_SIZE, multipart_threshold=MIN_PART_SIZE)
    assert result.status == "uploaded"
    assert len(parts) == 3
    head = s3.head_object(Bucket=bucket, Key="big", ChecksumMode="ENABLED")
    # S3's multipart SHA-256 is a checksum of the part checksums ("<b64>-3" on S3; moto's HeadObject
    # leaves out the "-3"): the file's own digest travels as metadata.
    part_digests = b"".join(
        hashlib.sha256(data[i : i + MIN_PART_SIZE]).digest() for i in range(0, len(data), MIN_PART_SIZE)
    )
    assert head["ChecksumSHA256"].split("-")[0] == base64.b64encode(hashlib.sha256(part_digests).digest()).decode()
    assert head["Metadata"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert body(s3, bucket, "big") == data
    again = upload_file(path, bucket, "big", client=s3, part_size=MIN_PART_SIZE, multipart_threshold=MIN_PART_SIZE)
    assert again.status == "already present"
    assert len(parts) == 3


def test_a_failure_mid_way_leaves_no_object_and_no_open_upload(tmp_path: Path, s3, bucket: str) -> None:
    path = write(tmp_path / "big.tar.gz", os.urandom(2 * MIN_PART_SIZE + 1))
    calls = 0

    def fail_second_part(**_) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ConnectionResetError("network gone")

    s3.meta.events.register("before-call.s3.UploadPart", fail_second_part)
    with pytest.raises(ConnectionResetError, match="network gone"):
        upload_file(path, bucket, "big", client=s3, part_size=MIN_PART_SIZE, multipart_threshold=MIN_PART_SIZE)
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    with pytest.raises(ClientError, match="404"):
        s3.head_object(Bucket=bucket, Key="big")


def test_a_race_lost_at_completion_aborts_the_multipart_upload(tmp_path: Path, s3, bucket: str) -> None:
    path = write(tmp_path / "big.tar.gz", os.urandom(MIN_PART_SIZE + 1))
    theirs = os.urandom(100)
    other_client = boto3.client("s3", endpoint_url=s3.meta.endpoint_url, **CREDENTIALS)

    def other_build_completes_first(**_) -> None:
        other_client.put_object(
            Bucket=bucket, Key="big", Body=theirs, Metadata={"sha256": hashlib.sha256(theirs).hexdigest()}
        )

    s3.meta.events.register_first("before-call.s3.CompleteMultipartUpload", other_build_completes_first)
    with pytest.raises(ConflictingObjectError, match=r"s3://.*/big already holds different bytes"):
        upload_file(path, bucket, "big", client=s3, part_size=MIN_PART_SIZE, multipart_threshold=MIN_PART_SIZE)
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    assert body(s3, bucket, "big") == theirs


@pytest.mark.parametrize("same_bytes", [True, False])
def test_a_racing_writer_is_caught_by_if_none_match(tmp_path: Path, s3, bucket: str, same_bytes: bool) -> None:
    mine = os.urandom(10_000)
    theirs = mine if same_bytes else os.urandom(10_000)
    other_client = boto3.client("s3", endpoint_url=s3.meta.endpoint_url, **CREDENTIALS)

    def other_build_writes_first(**_) -> None:
        # Runs after our existence check and before our conditional PutObject.
        other_client.put_object(
            Bucket=bucket, Key="k", Body=theirs, Metadata={"sha256": hashlib.sha256(theirs).hexdigest()}
        )

    s3.meta.events.register_first("before-call.s3.PutObject", other_build_writes_first)
    if same_bytes:
        assert upload_file(write(tmp_path / "a", mine), bucket, "k", client=s3).status == "already present"
    else:
        with pytest.raises(ConflictingObjectError, match="already holds different bytes"):
            upload_file(write(tmp_path / "a", mine), bucket, "k", client=s3)
    assert body(s3, bucket, "k") == theirs


def test_objects_written_by_others(tmp_path: Path, s3, bucket: str) -> None:
    data = os.urandom(5000)
    path = write(tmp_path / "a", data)
    # A full-object SHA-256 checksum (single part) is as good as our metadata.
    s3.put_object(Bucket=bucket, Key="with-checksum", Body=data, ChecksumAlgorithm="SHA256")
    assert upload_file(path, bucket, "with-checksum", client=s3).status == "already present"
    # A multipart object's SHA-256 is a digest of part digests: not comparable, refuse.
    big = os.urandom(MIN_PART_SIZE + 1)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="multipart", ChecksumAlgorithm="SHA256")["UploadId"]
    parts = []
    for number, piece in enumerate((big[:MIN_PART_SIZE], big[MIN_PART_SIZE:]), start=1):
        answer = s3.upload_part(
            Bucket=bucket,
            Key="multipart",
            UploadId=upload_id,
            PartNumber=number,
            Body=piece,
            ChecksumAlgorithm="SHA256",
        )
        parts.append({"PartNumber": number, "ETag": answer["ETag"], "ChecksumSHA256": answer["ChecksumSHA256"]})
    s3.complete_multipart_upload(Bucket=bucket, Key="multipart", UploadId=upload_id, MultipartUpload={"Parts": parts})
    with pytest.raises(ConflictingObjectError, match=r"s3://.*/multipart already exists without a 'sha256' metadata"):
        upload_file(write(tmp_path / "big", big), bucket, "multipart", client=s3)
    # Nothing to compare with: refuse rather than guess.
    s3.put_object(Bucket=bucket, Key="bare", Body=data, ChecksumAlgorithm="CRC32")
    with pytest.raises(ConflictingObjectError, match=r"s3://.*/bare already exists without a 'sha256' metadata"):
        upload_file(path, bucket, "bare", client=s3)


def test_errors_are_model_build_errors(tmp_path: Path, s3, monkeypatch) -> None:
    with pytest.raises(ModelBuildError, match=r"missing.tar.gz: no such file to upload"):
        upload_file(tmp_path / "missing.tar.gz", "b", "k", client=s3)
    with pytest.raises(ModelBuildError, match=r"upload to s3://no-such-bucket/k failed: .*NoSuchBucket"):
        upload_file(write(tmp_path / "a", b"x"), "no-such-bucket", "k", client=s3)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # A fresh session: boto3's default one may hold credentials resolved by an earlier test.
    anonymous = boto3.session.Session().client("s3", endpoint_url=s3.meta.endpoint_url, region_name="us-east-1")
    with pytest.raises(MissingToolError, match=r"no AWS credentials to upload to s3://b/k"):
        upload_file(write(tmp_path / "a", b"x"), "b", "k", client=anonymous)


def test_part_size_rules() -> None:
    with pytest.raises(ModelBuildError, match=r"part size 1048576 bytes is below S3's minimum of 5242880"):
        choose_part_size(10 * MIB, MIB)
    assert choose_part_size(10 * MIB, 16 * MIB) == 16 * MIB
    # 10,000 parts at most: a 500 GiB file needs parts of at least 52 MiB (rounded up to whole MiB).
    assert choose_part_size(500 * 1024 * MIB, 16 * MIB) == 52 * MIB


def test_progress_bar_only_on_a_tty(tmp_path: Path, s3, bucket: str) -> None:
    quiet = io.StringIO()
    upload_file(write(tmp_path / "a", os.urandom(1000)), bucket, "quiet", client=s3, progress_stream=quiet)
    assert quiet.getvalue() == ""
    shown = io.StringIO()
    progress = Progress("upload x", 2 * MIB, shown, force=True)
    progress.advance(MIB)
    progress.advance(MIB)
    progress.close()
    assert "upload x [" in shown.getvalue() and "100% 2.0/2.0 MiB" in shown.getvalue()


def test_cli(tmp_path: Path, moto_url: str, s3, bucket: str, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    path = write(tmp_path / "model.tar.gz", os.urandom(2000))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    argv = ["upload", str(path), "--bucket", bucket, "--key", "m/model.tar.gz", "--endpoint-url", moto_url]
    argv += ["--region", "us-east-1"]
    for status in ("uploaded", "already present"):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert cli.main(argv) == 0
        assert out.getvalue() == f"s3://{bucket}/m/model.tar.gz  sha256:{sha}  {status}\n"
    path.write_bytes(os.urandom(2000))
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert cli.main(argv) == 1
    assert err.getvalue().startswith(f"ERROR: s3://{bucket}/m/model.tar.gz already holds different bytes")


def test_an_unreadable_file_is_an_error_not_a_traceback(tmp_path: Path, s3, bucket: str, monkeypatch) -> None:
    """Tests run as root, which reads anything: EACCES is simulated where the file is first read."""
    path = tmp_path / "model.tar.gz"
    path.write_bytes(b"archive")

    def denied(target: Path) -> str:
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(upload, "file_sha256", denied)
    with pytest.raises(ModelBuildError, match=r"model.tar.gz: cannot be read \(Permission denied\)"):
        upload.upload_file(path, bucket, "models/m/x/model.tar.gz", client=s3)
