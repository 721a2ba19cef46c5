"""The ensure-artifact handler against moto_server (S3, KMS) with CodeBuild stubbed (botocore Stubber).

CodeBuild is not served by moto_server in a useful way (builds never run), so its responses are
stubbed with botocore's Stubber on a real client: request parameters are checked against the
service model and against the expected values; an unexpected call fails the test.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

pytestmark = pytest.mark.moto  # starts moto_server on a loopback port


PROJECT = "TritonModelBuildA10G"
BUILD_ID = f"{PROJECT}:0b5e3c1e-1111-2222-3333-444455556666"
DEEP_LINK = "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEvent:group=/triton/build;stream=x"
KEY = "models/resnet50/" + "a" * 64 + "/model.tar.gz"
BUILD_ENVIRONMENT = {
    "BUILD_CONFIG": '{"triton_release": "24.09", "models": [{"name": "resnet50"}]}',
    "GPU_TARGET": "sm86",
    "EXPECT_TENSORRT": "10.4.0.26",
    "EXPECT_COMPUTE_CAPABILITY": "8.6",
    "SOURCE_KIND": "export",
    "SOURCE_URI": "resnet50",
}


@pytest.fixture
def codebuild(handler, monkeypatch):
    client = boto3.client("codebuild", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.activate()
    monkeypatch.setattr(handler, "codebuild_client", lambda: client)
    yield stubber
    stubber.assert_no_pending_responses()


def event(request_type: str = "Create", **properties) -> dict:
    return {
        "RequestType": request_type,
        "RequestId": "r-1",
        "StackId": "arn:aws:cloudformation:us-east-1:111111111111:stack/Triton-dev-Build/x",
        "LogicalResourceId": "ArtifactResnet50",
        "ResourceType": "Custom::TritonModelArtifact",
        "ResourceProperties": properties,
    }


@pytest.fixture
def build_props(make_bucket, kms_key_arn):
    return {
        "ServiceToken": "arn:aws:lambda:us-east-1:111111111111:function:provider",
        "Bucket": make_bucket(),
        "Key": KEY,
        "ModelName": "resnet50",
        "KmsKeyArn": kms_key_arn,
        "ProjectName": PROJECT,
        "BuildEnvironment": BUILD_ENVIRONMENT,
        "CopyTo": [],
    }


def put_artifact(s3, bucket: str, key: str = KEY, body: bytes = b"archive-bytes") -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata={"sha256": "f" * 64})


def build_response(status: str, *, phases: list | None = None) -> dict:
    build = {"id": BUILD_ID, "buildStatus": status, "logs": {"deepLink": DEEP_LINK, "groupName": "/triton/build"}}
    if phases is not None:
        build["phases"] = phases
    return {"builds": [build]}


def expected_overrides(props: dict, *, uncompressed: str = "", unpack_only: str = "false") -> list[dict]:
    variables = {
        **BUILD_ENVIRONMENT,
        "MODEL_NAME": "resnet50",
        "ARTIFACT_BUCKET": props["Bucket"],
        "ARTIFACT_KEY": KEY,
        "UNCOMPRESSED_PREFIX": uncompressed,
        "UNPACK_ONLY": unpack_only,
    }
    return [{"name": k, "value": v, "type": "PLAINTEXT"} for k, v in sorted(variables.items())]


def test_existing_key_starts_no_build(handler, codebuild, s3, build_props):
    put_artifact(s3, build_props["Bucket"])
    result = handler.on_event(event(**build_props))
    assert result == {"PhysicalResourceId": KEY, "Data": {"Key": KEY, "Built": "false", "BuildId": ""}}
    # is_complete finishes at once: no build id, no CodeBuild call (the Stubber has no responses queued).
    done = handler.is_complete({**event(**build_props), **result})
    assert done == {"IsComplete": True, "Data": {"Key": KEY, "Built": "false", "BuildId": ""}}


def test_missing_key_starts_the_build_with_the_key_and_the_models_inputs(handler, codebuild, build_props):
    codebuild.add_response(
        "start_build",
        {"build": {"id": BUILD_ID}},
        {"projectName": PROJECT, "environmentVariablesOverride": expected_overrides(build_props)},
    )
    result = handler.on_event(event(**build_props))
    assert result == {"PhysicalResourceId": KEY, "Data": {"Key": KEY, "BuildId": BUILD_ID}}


def test_update_with_a_missing_key_builds_too(handler, codebuild, build_props):
    codebuild.add_response("start_build", {"build": {"id": BUILD_ID}}, None)
    result = handler.on_event({**event("Update", **build_props), "PhysicalResourceId": "models/old/key"})
    assert result["Data"]["BuildId"] == BUILD_ID
    assert result["PhysicalResourceId"] == KEY


def test_a_running_build_is_not_complete(handler, codebuild, build_props):
    codebuild.add_response("batch_get_builds", build_response("IN_PROGRESS"), {"ids": [BUILD_ID]})
    assert handler.is_complete({**event(**build_props), "Data": {"BuildId": BUILD_ID}}) == {"IsComplete": False}


def test_a_succeeded_build_completes_once_the_key_exists_and_makes_the_multi_model_copies(
    handler, codebuild, s3, build_props
):
    copy_target = "models/_multi-model/" + "b" * 64 + "/resnet50.tar.gz"
    props = {**build_props, "CopyTo": [copy_target]}
    put_artifact(s3, props["Bucket"])
    codebuild.add_response("batch_get_builds", build_response("SUCCEEDED"), {"ids": [BUILD_ID]})
    done = handler.is_complete({**event(**props), "Data": {"BuildId": BUILD_ID}})
    assert done == {"IsComplete": True, "Data": {"Key": KEY, "Built": "true", "BuildId": BUILD_ID}}
    copied = s3.get_object(Bucket=props["Bucket"], Key=copy_target)
    assert copied["Body"].read() == b"archive-bytes"
    assert copied["ServerSideEncryption"] == "aws:kms"
    assert copied["SSEKMSKeyId"] == props["KmsKeyArn"]
    assert copied["Metadata"] == {"sha256": "f" * 64}


def test_a_succeeded_build_without_its_key_fails(handler, codebuild, build_props):
    codebuild.add_response("batch_get_builds", build_response("SUCCEEDED"), {"ids": [BUILD_ID]})
    with pytest.raises(handler.ArtifactError, match=rf"model build {BUILD_ID} SUCCEEDED but {KEY} .* is missing"):
        handler.is_complete({**event(**build_props), "Data": {"BuildId": BUILD_ID}})


@pytest.mark.parametrize("status", ["FAILED", "FAULT", "TIMED_OUT", "STOPPED"])
def test_a_failed_build_fails_the_deployment_with_its_id_and_logs_link(handler, codebuild, s3, build_props, status):
    phases = [
        {"phaseType": "INSTALL", "phaseStatus": "SUCCEEDED"},
        {
            "phaseType": "BUILD",
            "phaseStatus": status,
            "contexts": [{"statusCode": "COMMAND_EXECUTION_ERROR", "message": "Error while executing command"}],
        },
    ]
    codebuild.add_response("batch_get_builds", build_response(status, phases=phases), {"ids": [BUILD_ID]})
    with pytest.raises(handler.ArtifactError) as raised:
        handler.is_complete({**event(**build_props), "Data": {"BuildId": BUILD_ID}})
    message = str(raised.value)
    assert (
        f"model build {BUILD_ID} for resnet50 ended {status} in phase BUILD: Error while executing command" in message
    )
    assert f"Logs: {DEEP_LINK}" in message
    assert f"nothing was written under {KEY}" in message
    assert s3.list_objects_v2(Bucket=build_props["Bucket"]).get("KeyCount") == 0


def test_a_failed_build_without_a_deep_link_links_the_console(handler, codebuild, build_props):
    response = {"builds": [{"id": BUILD_ID, "buildStatus": "FAILED"}]}
    codebuild.add_response("batch_get_builds", response, {"ids": [BUILD_ID]})
    with pytest.raises(
        handler.ArtifactError,
        match=r"Logs: https://us-east-1\.console\.aws\.amazon\.com/codesuite/"
        rf"codebuild/projects/{PROJECT}/build/{PROJECT}%3A0b5e3c1e",
    ):
        handler.is_complete({**event(**build_props), "Data": {"BuildId": BUILD_ID}})


@pytest.mark.parametrize("step", ["on_event", "is_complete"])
def test_delete_makes_no_aws_call(handler, monkeypatch, step):
    def no_aws():
        raise AssertionError("Delete must not call AWS")

    monkeypatch.setattr(handler, "s3_client", no_aws)
    monkeypatch.setattr(handler, "codebuild_client", no_aws)
    monkeypatch.setattr(handler.boto3, "client", lambda *a, **k: no_aws())
    delete = {**event("Delete", Key=KEY), "PhysicalResourceId": KEY}
    result = getattr(handler, step)(delete)
    assert result == ({"PhysicalResourceId": KEY} if step == "on_event" else {"IsComplete": True})


def test_an_archive_without_its_unpacked_layout_unpacks_instead_of_rebuilding(handler, codebuild, s3, build_props):
    prefix = KEY.replace("model.tar.gz", "uncompressed/")
    props = {**build_props, "UncompressedPrefix": prefix}
    put_artifact(s3, props["Bucket"])
    codebuild.add_response(
        "start_build",
        {"build": {"id": BUILD_ID}},
        {
            "projectName": PROJECT,
            "environmentVariablesOverride": expected_overrides(props, uncompressed=prefix, unpack_only="true"),
        },
    )
    assert handler.on_event(event(**props))["Data"]["BuildId"] == BUILD_ID


def test_an_archive_with_its_unpacked_layout_is_present(handler, codebuild, s3, build_props):
    prefix = KEY.replace("model.tar.gz", "uncompressed/")
    props = {**build_props, "UncompressedPrefix": prefix}
    put_artifact(s3, props["Bucket"])
    put_artifact(s3, props["Bucket"], f"{prefix}resnet50/config.pbtxt", b"name: 'resnet50'")
    assert handler.on_event(event(**props))["Data"]["Built"] == "false"


def test_missing_properties_are_named(handler):
    with pytest.raises(handler.ArtifactError, match="missing properties: Bucket, KmsKeyArn"):
        handler.on_event(event(Key=KEY, ModelName="resnet50", ProjectName=PROJECT))
    with pytest.raises(handler.ArtifactError, match=r"needs ProjectName \(build\) or SourceBucket \(promote\)"):
        handler.on_event(event(Key=KEY, ModelName="m", Bucket="b", KmsKeyArn="k"))


# ---------------------------------------------------------------------------------------------
# Promotion: copy from the source stage's bucket, never build


@pytest.fixture
def promote_props(make_bucket, kms_key_arn):
    return {
        "Bucket": make_bucket("prod"),
        "SourceBucket": make_bucket("dev"),
        "Key": KEY,
        "ModelName": "resnet50",
        "KmsKeyArn": kms_key_arn,
    }


def test_promotion_copies_from_the_source_bucket_reencrypted_and_never_builds(handler, codebuild, s3, promote_props):
    copy_target = "models/_multi-model/" + "c" * 64 + "/resnet50.tar.gz"
    props = {**promote_props, "CopyTo": [copy_target]}
    put_artifact(s3, props["SourceBucket"])
    result = handler.on_event(event(**props))
    assert result == {"PhysicalResourceId": KEY, "Data": {"Key": KEY, "Built": "false", "BuildId": ""}}
    for key in (KEY, copy_target):
        copied = s3.get_object(Bucket=props["Bucket"], Key=key)
        assert copied["Body"].read() == b"archive-bytes"
        assert copied["SSEKMSKeyId"] == props["KmsKeyArn"]
        assert copied["Metadata"] == {"sha256": "f" * 64}


def test_promotion_copies_the_unpacked_layout_too(handler, codebuild, s3, promote_props):
    prefix = KEY.replace("model.tar.gz", "uncompressed/")
    props = {**promote_props, "UncompressedPrefix": prefix}
    put_artifact(s3, props["SourceBucket"])
    for name in ("resnet50/config.pbtxt", "resnet50/1/model.plan"):
        put_artifact(s3, props["SourceBucket"], prefix + name, name.encode())
    handler.on_event(event(**props))
    listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=props["Bucket"])["Contents"])
    assert listed == [KEY, f"{prefix}resnet50/1/model.plan", f"{prefix}resnet50/config.pbtxt"]


def test_promotion_refuses_when_the_source_lacks_the_artifact(handler, codebuild, s3, promote_props):
    with pytest.raises(handler.ArtifactError) as raised:
        handler.on_event(event(**promote_props))
    assert str(raised.value) == (
        f"{KEY} not built in {promote_props['SourceBucket']}; deploy the source stage first "
        "(promotion copies artifacts, it never builds)"
    )
    assert s3.list_objects_v2(Bucket=promote_props["Bucket"]).get("KeyCount") == 0


def test_promotion_refuses_a_source_without_the_unpacked_layout(handler, codebuild, s3, promote_props):
    prefix = KEY.replace("model.tar.gz", "uncompressed/")
    put_artifact(s3, promote_props["SourceBucket"])
    with pytest.raises(handler.ArtifactError, match=rf"^{prefix}resnet50/config\.pbtxt not built in"):
        handler.on_event(event(**promote_props, UncompressedPrefix=prefix))


def test_promotion_with_the_key_already_present_copies_nothing(handler, codebuild, s3, promote_props):
    put_artifact(s3, promote_props["Bucket"], body=b"already-here")
    assert handler.on_event(event(**promote_props))["Data"]["Built"] == "false"
    assert s3.get_object(Bucket=promote_props["Bucket"], Key=KEY)["Body"].read() == b"already-here"


def test_promotion_from_an_unreadable_source_says_what_to_check(handler, codebuild, monkeypatch, promote_props):
    client = boto3.client("s3", region_name="us-east-1")
    s3_stub = Stubber(client)
    s3_stub.add_client_error("head_object", "404", http_status_code=404)  # not in this stage's bucket
    s3_stub.add_client_error("head_object", "403", http_status_code=403)  # source: no list right, 403
    s3_stub.activate()
    monkeypatch.setattr(handler, "s3_client", lambda: client)
    with pytest.raises(handler.ArtifactError) as raised:
        handler.on_event(event(**promote_props))
    assert str(raised.value) == (
        f"{KEY} is not readable in {promote_props['SourceBucket']} (403): either it was not built there (deploy the "
        "source stage first) or that stage does not grant this account read access (its artifacts.reader_accounts)"
    )
    s3_stub.assert_no_pending_responses()


def test_promotion_of_a_large_artifact_copies_it_in_parts_with_its_metadata(handler, codebuild, s3, promote_props):
    """Above 8 MiB boto3's managed copy switches to UploadPartCopy: the bytes and `sha256` must survive."""
    body = bytes(range(256)) * (9 * 4096)  # 9 MiB
    put_artifact(s3, promote_props["SourceBucket"], body=body)
    handler.on_event(event(**promote_props))
    copied = s3.get_object(Bucket=promote_props["Bucket"], Key=KEY)
    assert copied["Body"].read() == body
    assert copied["Metadata"] == {"sha256": "f" * 64}
    assert copied["SSEKMSKeyId"] == promote_props["KmsKeyArn"]
    assert "-" in copied["ETag"]  # a multipart object: the copy really went through parts


def test_promotion_of_a_missing_unpacked_layout_keeps_the_existing_archive(handler, codebuild, s3, promote_props):
    prefix = KEY.replace("model.tar.gz", "uncompressed/")
    props = {**promote_props, "UncompressedPrefix": prefix}
    # Versioned, like the artifact bucket: a second write of the key would show as a second version.
    s3.put_bucket_versioning(Bucket=props["Bucket"], VersioningConfiguration={"Status": "Enabled"})
    put_artifact(s3, props["Bucket"], body=b"archive-bytes")
    put_artifact(s3, props["SourceBucket"], body=b"archive-bytes")
    put_artifact(s3, props["SourceBucket"], f"{prefix}resnet50/config.pbtxt", b"config")
    version = s3.head_object(Bucket=props["Bucket"], Key=KEY)["ETag"]
    handler.on_event(event(**props))
    assert s3.get_object(Bucket=props["Bucket"], Key=f"{prefix}resnet50/config.pbtxt")["Body"].read() == b"config"
    assert s3.list_object_versions(Bucket=props["Bucket"], Prefix=KEY).get("Versions", [])[0]["ETag"] == version
    assert len(s3.list_object_versions(Bucket=props["Bucket"], Prefix=KEY).get("Versions", [])) == 1
