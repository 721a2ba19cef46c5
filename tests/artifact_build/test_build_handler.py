"""The ensure-artifact handler against moto_server (S3, KMS) with CodeBuild stubbed (botocore Stubber).

CodeBuild is not served by moto_server in a useful way (builds never run), so its responses are
stubbed with botocore's Stubber on a real client: request parameters are checked against the
service model and against the expected values; an unexpected call fails the test. Wait-condition
signals go to a real HTTP server on 127.0.0.1 standing in for the handle's presigned S3 URL.
"""

from __future__ import annotations

import http.server
import json
import threading

import boto3
import pytest
from botocore.stub import Stubber

pytestmark = pytest.mark.moto  # starts moto_server on a loopback port


PROJECT = "TritonModelBuildA10G"
BUILD_ID = f"{PROJECT}:0b5e3c1e-1111-2222-3333-444455556666"
DEEP_LINK = "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEvent:group=/triton/build;stream=x"
KEY = "models/resnet50/" + "a" * 64 + "/model.tar.gz"
SHA = "f" * 64
BUILD_ENVIRONMENT = {
    "BUILD_CONFIG": '{"triton_release": "24.09", "models": [{"name": "resnet50"}]}',
    "GPU_TARGET": "sm86",
    "EXPECT_TENSORRT": "10.4.0.26",
    "EXPECT_COMPUTE_CAPABILITY": "8.6",
    "SOURCE_KIND": "export",
    "SOURCE_URI": "resnet50",
}


class _Signals(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append({"content_type": self.headers.get("Content-Type"), **json.loads(body)})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def wait_handle():
    """A stand-in for the WaitConditionHandle URL on 127.0.0.1; yields (url, received signals)."""
    _Signals.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Signals)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/handle?signature=x", _Signals.received
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def codebuild(handler, monkeypatch):
    client = boto3.client("codebuild", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.activate()
    monkeypatch.setattr(handler, "codebuild_client", lambda: client)
    monkeypatch.setattr(handler, "sleep", lambda seconds: None)
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
def build_props(make_bucket, kms_key_arn, wait_handle):
    return {
        "ServiceToken": "arn:aws:lambda:us-east-1:111111111111:function:provider",
        "Bucket": make_bucket(),
        "Key": KEY,
        "ModelName": "resnet50",
        "KmsKeyArn": kms_key_arn,
        "ProjectName": PROJECT,
        "BuildEnvironment": BUILD_ENVIRONMENT,
        "CopyTo": [],
        "WaitHandle": wait_handle[0],
    }


def put_artifact(s3, bucket: str, key: str = KEY, body: bytes = b"archive-bytes", sha: str | None = SHA) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata={"sha256": sha} if sha else {})


def build(status: str, props: dict, *, phases: list | None = None, copy_to: list | None = None) -> dict:
    variables = {
        "MODEL_NAME": "resnet50",
        "ARTIFACT_BUCKET": props["Bucket"],
        "ARTIFACT_KEY": KEY,
        "UNCOMPRESSED_PREFIX": props.get("UncompressedPrefix", ""),
        "WAIT_HANDLE_URL": props["WaitHandle"],
        "KMS_KEY_ARN": props["KmsKeyArn"],
        "COPY_TO": json.dumps(copy_to or []),
    }
    result = {
        "id": BUILD_ID,
        "buildStatus": status,
        "logs": {"deepLink": DEEP_LINK, "groupName": "/triton/build"},
        "environment": {
            "type": "LINUX_GPU_CONTAINER",
            "image": "x",
            "computeType": "BUILD_GENERAL1_SMALL",
            "environmentVariables": [{"name": k, "value": v, "type": "PLAINTEXT"} for k, v in variables.items()],
        },
    }
    if phases is not None:
        result["phases"] = phases
    return {"builds": [result]}


def state_event(status: str) -> dict:
    return {
        "source": "aws.codebuild",
        "detail-type": "CodeBuild Build State Change",
        "detail": {"build-status": status, "project-name": PROJECT, "build-id": BUILD_ID},
    }


def expected_overrides(props: dict, *, uncompressed: str = "", unpack_only: str = "false") -> list[dict]:
    variables = {
        **BUILD_ENVIRONMENT,
        "MODEL_NAME": "resnet50",
        "ARTIFACT_BUCKET": props["Bucket"],
        "ARTIFACT_KEY": KEY,
        "UNCOMPRESSED_PREFIX": uncompressed,
        "UNPACK_ONLY": unpack_only,
        "WAIT_HANDLE_URL": props["WaitHandle"],
        "KMS_KEY_ARN": props["KmsKeyArn"],
        "COPY_TO": json.dumps(props["CopyTo"]),
    }
    return [{"name": k, "value": v, "type": "PLAINTEXT"} for k, v in sorted(variables.items())]


# ---------------------------------------------------------------------------------------------
# on_event (BUILD mode)


def test_existing_key_starts_no_build_and_signals_the_new_wait_condition(handler, codebuild, s3, build_props):
    """CloudFormation template reference, AWS::CloudFormation::WaitCondition: signals are JSON with Status
    SUCCESS/FAILURE, Reason, UniqueId and Data, PUT to the handle's presigned URL."""
    put_artifact(s3, build_props["Bucket"])
    result = handler.on_event(event(**build_props))
    assert result == {"PhysicalResourceId": KEY, "Data": {"Key": KEY, "Built": "false", "BuildId": ""}}
    [received] = _Signals.received
    assert received == {
        "content_type": "",
        "Status": "SUCCESS",
        "Reason": f"{KEY} already exists; nothing was built",
        "UniqueId": KEY,
        "Data": KEY,
    }


def test_an_update_with_the_same_wait_handle_signals_nothing(handler, codebuild, s3, build_props):
    """A wait condition that already completed has an old handle, whose presigned URL may have expired."""
    put_artifact(s3, build_props["Bucket"])
    update = {**event("Update", **build_props), "PhysicalResourceId": KEY, "OldResourceProperties": build_props}
    assert handler.on_event(update)["PhysicalResourceId"] == KEY
    assert _Signals.received == []


def test_missing_key_starts_the_build_with_the_key_the_inputs_and_the_wait_handle(handler, codebuild, build_props):
    codebuild.add_response(
        "start_build",
        {"build": {"id": BUILD_ID}},
        {"projectName": PROJECT, "environmentVariablesOverride": expected_overrides(build_props)},
    )
    result = handler.on_event(event(**build_props))
    assert result == {"PhysicalResourceId": f"{KEY}|{BUILD_ID}", "Data": {"Key": KEY, "BuildId": BUILD_ID}}
    assert _Signals.received == []  # the build's end signals, not the start


def test_update_with_a_missing_key_builds_too(handler, codebuild, build_props):
    codebuild.add_response("start_build", {"build": {"id": BUILD_ID}}, None)
    result = handler.on_event({**event("Update", **build_props), "PhysicalResourceId": "models/old/key"})
    assert result["Data"]["BuildId"] == BUILD_ID
    assert result["PhysicalResourceId"] == f"{KEY}|{BUILD_ID}"


def test_over_a_project_limit_the_start_is_retried(handler, codebuild, build_props):
    """'Builds in AWS CodeBuild': with a project concurrent build limit, builds over it return an error."""
    codebuild.add_client_error("start_build", "AccountLimitExceededException", "Cannot have more than 2 builds")
    codebuild.add_response("start_build", {"build": {"id": BUILD_ID}}, None)
    assert handler.on_event(event(**build_props))["Data"]["BuildId"] == BUILD_ID


def test_a_limit_that_never_clears_fails_naming_the_setting(handler, codebuild, build_props):
    for _ in range(len(handler.START_RETRY_DELAYS) + 1):
        codebuild.add_client_error("start_build", "AccountLimitExceededException", "Cannot have more than 2 builds")
    with pytest.raises(handler.ArtifactError) as raised:
        handler.on_event(event(**build_props))
    message = str(raised.value)
    assert f"refused to start the build of resnet50 on {PROJECT} after 5 attempts: Cannot have more than 2" in message
    assert "remove build.concurrency or raise it" in message


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
    with pytest.raises(handler.ArtifactError, match="needs WaitHandle"):
        handler.on_event(event(Key=KEY, ModelName="m", Bucket="b", KmsKeyArn="k", ProjectName=PROJECT))


def test_a_403_on_the_bucket_is_explained(handler, monkeypatch, build_props):
    """S3 answers 403, not 404, for a missing key when the caller lacks s3:ListBucket (S3 API reference,
    HeadObject): the message names the rights to check instead of a bare ClientError."""
    client = boto3.client("s3", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_client_error("head_object", "403", "Forbidden", http_status_code=403)
    # The handler then lists the key's own prefix (a missing key would not be listed): denied as well.
    stub.add_client_error("list_objects_v2", "AccessDenied", http_status_code=403)
    stub.activate()
    monkeypatch.setattr(handler, "s3_client", lambda region=None: client)
    with pytest.raises(handler.ArtifactError) as raised:
        handler.on_event(event(**build_props))
    assert str(raised.value).startswith(f"access denied (403) reading s3://{build_props['Bucket']}/{KEY}: ")
    assert "s3:ListBucket" in str(raised.value)


# ---------------------------------------------------------------------------------------------
# Delete: stop builds the deployment gave up on


def test_delete_stops_the_build_it_started_while_it_runs(handler, codebuild, build_props):
    codebuild.add_response("batch_get_builds", {"builds": [{"id": BUILD_ID, "buildStatus": "IN_PROGRESS"}]}, None)
    codebuild.add_response("stop_build", {"build": {"id": BUILD_ID, "buildStatus": "STOPPED"}}, {"id": BUILD_ID})
    delete = {**event("Delete", **build_props), "PhysicalResourceId": f"{KEY}|{BUILD_ID}"}
    assert handler.on_event(delete) == {"PhysicalResourceId": f"{KEY}|{BUILD_ID}"}


def test_delete_leaves_a_finished_build_alone_and_never_fails(handler, codebuild, build_props):
    codebuild.add_response("batch_get_builds", {"builds": [{"id": BUILD_ID, "buildStatus": "SUCCEEDED"}]}, None)
    delete = {**event("Delete", **build_props), "PhysicalResourceId": f"{KEY}|{BUILD_ID}"}
    handler.on_event(delete)
    codebuild.add_client_error("batch_get_builds", "InvalidInputException", "no such build")
    handler.on_event(delete)  # an error only logs: a Delete must never be blocked


def test_delete_without_a_build_makes_no_aws_call(handler, monkeypatch):
    def no_aws(*_args, **_kwargs):
        raise AssertionError("Delete must not call AWS")

    monkeypatch.setattr(handler, "s3_client", no_aws)
    monkeypatch.setattr(handler, "codebuild_client", no_aws)
    monkeypatch.setattr(handler.boto3, "client", no_aws)
    delete = {**event("Delete", Key=KEY), "PhysicalResourceId": KEY}
    assert handler.on_event(delete) == {"PhysicalResourceId": KEY}


# ---------------------------------------------------------------------------------------------
# on_build_state: the build's end signals the wait condition


def test_a_succeeded_build_signals_success_once_the_key_exists_and_makes_the_copies(
    handler, codebuild, s3, build_props
):
    copy_target = "models/_multi-model/" + "b" * 64 + "/resnet50.tar.gz"
    put_artifact(s3, build_props["Bucket"])
    codebuild.add_response(
        "batch_get_builds", build("SUCCEEDED", build_props, copy_to=[copy_target]), {"ids": [BUILD_ID]}
    )
    result = handler.on_build_state(state_event("SUCCEEDED"))
    assert result["status"] == "SUCCESS"
    [received] = _Signals.received
    assert (received["Status"], received["UniqueId"], received["Data"]) == ("SUCCESS", BUILD_ID, KEY)
    copied = s3.get_object(Bucket=build_props["Bucket"], Key=copy_target)
    assert copied["Body"].read() == b"archive-bytes"
    assert copied["ServerSideEncryption"] == "aws:kms"
    assert copied["SSEKMSKeyId"] == build_props["KmsKeyArn"]
    assert copied["Metadata"] == {"sha256": SHA}


def test_a_succeeded_build_without_its_key_signals_failure(handler, codebuild, build_props):
    codebuild.add_response("batch_get_builds", build("SUCCEEDED", build_props), {"ids": [BUILD_ID]})
    handler.on_build_state(state_event("SUCCEEDED"))
    [received] = _Signals.received
    assert received["Status"] == "FAILURE"
    assert received["Reason"].startswith(f"model build {BUILD_ID} SUCCEEDED but {KEY} (or its unpacked layout)")


@pytest.mark.parametrize("status", ["FAILED", "FAULT", "TIMED_OUT", "STOPPED"])
def test_a_failed_build_signals_failure_with_its_id_phase_and_logs_link(handler, codebuild, s3, build_props, status):
    """CodeBuild's timeout or a StopBuild ends a build without running its last commands: the EventBridge
    state-change event (CodeBuild user guide, "Build notifications input format reference") still comes."""
    phases = [
        {"phaseType": "INSTALL", "phaseStatus": "SUCCEEDED"},
        {
            "phaseType": "BUILD",
            "phaseStatus": status,
            "contexts": [{"statusCode": "COMMAND_EXECUTION_ERROR", "message": "Error while executing command"}],
        },
    ]
    codebuild.add_response("batch_get_builds", build(status, build_props, phases=phases), {"ids": [BUILD_ID]})
    handler.on_build_state(state_event(status))
    [received] = _Signals.received
    assert received["Status"] == "FAILURE"
    assert received["UniqueId"] == BUILD_ID
    assert (
        f"model build {BUILD_ID} for resnet50 ended {status} in phase BUILD: Error while executing command"
        in received["Reason"]
    )
    assert f"nothing was written under {KEY}. Logs: {DEEP_LINK}" in received["Reason"]
    assert s3.list_objects_v2(Bucket=build_props["Bucket"]).get("KeyCount") == 0


def test_a_build_not_started_by_a_deployment_signals_nothing(handler, codebuild, build_props):
    response = {
        "builds": [
            {
                "id": BUILD_ID,
                "buildStatus": "FAILED",
                "environment": {
                    "type": "x",
                    "image": "x",
                    "computeType": "BUILD_GENERAL1_SMALL",
                    "environmentVariables": [],
                },
            }
        ]
    }
    codebuild.add_response("batch_get_builds", response, None)
    assert handler.on_build_state(state_event("FAILED"))["signalled"] is False
    assert _Signals.received == []


def test_a_failed_build_without_a_deep_link_links_the_console(handler, codebuild, build_props):
    response = build("FAILED", build_props)
    del response["builds"][0]["logs"]
    codebuild.add_response("batch_get_builds", response, None)
    handler.on_build_state(state_event("FAILED"))
    assert (
        f"Logs: https://us-east-1.console.aws.amazon.com/codesuite/codebuild/projects/{PROJECT}/build/"
        f"{PROJECT}%3A0b5e3c1e" in _Signals.received[0]["Reason"]
    )


# ---------------------------------------------------------------------------------------------
# Promotion: copy from the source stage's bucket, never build, never overwrite


@pytest.fixture
def promote_props(make_bucket, kms_key_arn, s3):
    props = {
        "Bucket": make_bucket("prod"),
        "SourceBucket": make_bucket("dev"),
        "Key": KEY,
        "ModelName": "resnet50",
        "KmsKeyArn": kms_key_arn,
    }
    # Versioned, like the artifact bucket: any second write of a key would show as a second version.
    s3.put_bucket_versioning(Bucket=props["Bucket"], VersioningConfiguration={"Status": "Enabled"})
    return props


def versions(s3, bucket: str, key: str) -> int:
    return len(s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", []))


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
        assert copied["Metadata"] == {"sha256": SHA}


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


def test_promotion_keeps_an_existing_key_with_the_same_bytes(handler, codebuild, s3, promote_props):
    put_artifact(s3, promote_props["SourceBucket"])
    put_artifact(s3, promote_props["Bucket"])
    assert handler.on_event(event(**promote_props))["Data"]["Built"] == "false"
    assert versions(s3, promote_props["Bucket"], KEY) == 1


def test_promotion_never_overwrites_an_unpacked_file_that_exists(handler, codebuild, s3, promote_props):
    """The unpacked layout's files: present and equal -> kept (no new version); present and different ->
    the deployment fails loudly, the object untouched (artifacts are write-once)."""
    prefix = KEY.replace("model.tar.gz", "uncompressed/")
    props = {**promote_props, "UncompressedPrefix": prefix}
    plan = f"{prefix}resnet50/1/model.plan"
    put_artifact(s3, props["SourceBucket"])
    put_artifact(s3, props["SourceBucket"], plan, b"engine", sha="1" * 64)
    put_artifact(s3, props["SourceBucket"], f"{prefix}resnet50/config.pbtxt", b"config", sha="2" * 64)
    put_artifact(s3, props["Bucket"], plan, b"other-engine", sha="3" * 64)
    with pytest.raises(handler.ArtifactError) as raised:
        handler.on_event(event(**props))
    assert str(raised.value).startswith(
        f"s3://{props['Bucket']}/{plan} already exists with sha256 {'3' * 64}, but "
        f"s3://{props['SourceBucket']}/{plan} has sha256 {'1' * 64}: artifacts are write-once and never overwritten"
    )
    assert versions(s3, props["Bucket"], plan) == 1
    assert s3.get_object(Bucket=props["Bucket"], Key=plan)["Body"].read() == b"other-engine"
    assert "Contents" not in s3.list_objects_v2(Bucket=props["Bucket"], Prefix=KEY)


def test_a_copy_target_with_other_bytes_fails_loudly(handler, codebuild, s3, promote_props):
    copy_target = "models/_multi-model/" + "c" * 64 + "/resnet50.tar.gz"
    put_artifact(s3, promote_props["Bucket"])
    put_artifact(s3, promote_props["Bucket"], copy_target, b"stale", sha="9" * 64)
    with pytest.raises(handler.ArtifactError, match="write-once and never overwritten"):
        handler.on_event(event(**promote_props, CopyTo=[copy_target]))
    assert s3.get_object(Bucket=promote_props["Bucket"], Key=copy_target)["Body"].read() == b"stale"


def test_every_copy_is_a_conditional_write(handler, codebuild, s3, promote_props, monkeypatch):
    """S3 user guide, "How to prevent object overwrites with conditional writes": If-None-Match: * on
    CopyObject (and CompleteMultipartUpload) makes S3 refuse with 412 when the key exists. moto 5.2.5
    does not enforce it on copies, so the requests themselves are checked for the header."""
    sent = []
    client = boto3.client("s3", region_name="us-east-1")
    client.meta.events.register(
        "before-send.s3.*", lambda request, **_: sent.append((request.method, request.headers.get("If-None-Match")))
    )
    monkeypatch.setattr(handler, "s3_client", lambda region=None: client)
    put_artifact(s3, promote_props["SourceBucket"])
    handler.on_event(event(**promote_props, CopyTo=["models/_multi-model/" + "c" * 64 + "/resnet50.tar.gz"]))
    writes = [header.decode() if isinstance(header, bytes) else header for method, header in sent if method == "PUT"]
    assert writes == ["*", "*"]  # the archive and its multi-model copy


def test_a_concurrent_writer_is_judged_not_overwritten(handler, codebuild, s3, promote_props, monkeypatch):
    """When the conditional copy answers 412 (another writer created the key after our HEAD), the key is
    judged like any existing key: other bytes fail loudly and stay as they are."""
    from botocore.exceptions import ClientError

    put_artifact(s3, promote_props["SourceBucket"])

    def racing_copy(*_args, **_kwargs):
        put_artifact(s3, promote_props["Bucket"], body=b"racer", sha="7" * 64)
        raise ClientError(
            {"Error": {"Code": "PreconditionFailed"}, "ResponseMetadata": {"HTTPStatusCode": 412}}, "CopyObject"
        )

    monkeypatch.setattr(handler, "_copy_object", racing_copy)
    with pytest.raises(handler.ArtifactError, match=f"already exists with sha256 {'7' * 64}"):
        handler.on_event(event(**promote_props))
    assert versions(s3, promote_props["Bucket"], KEY) == 1
    assert s3.get_object(Bucket=promote_props["Bucket"], Key=KEY)["Body"].read() == b"racer"


def test_a_source_without_a_recorded_checksum_is_not_copied(handler, codebuild, s3, promote_props):
    put_artifact(s3, promote_props["SourceBucket"], sha=None)
    with pytest.raises(handler.ArtifactError, match=r"has no 'sha256' metadata .* not written by `model_build upload`"):
        handler.on_event(event(**promote_props))
    assert s3.list_objects_v2(Bucket=promote_props["Bucket"]).get("KeyCount") == 0


def test_promotion_from_an_unreadable_source_says_what_to_check(handler, codebuild, monkeypatch, promote_props):
    client = boto3.client("s3", region_name="us-east-1")
    s3_stub = Stubber(client)
    s3_stub.add_client_error("head_object", "404", http_status_code=404)  # not in this stage's bucket
    s3_stub.add_client_error("head_object", "403", http_status_code=403)  # source: no list right, 403
    s3_stub.activate()
    monkeypatch.setattr(handler, "s3_client", lambda region=None: client)
    with pytest.raises(handler.ArtifactError) as raised:
        handler.on_event(event(**promote_props))
    assert str(raised.value) == (
        f"{KEY} is not readable in {promote_props['SourceBucket']} (403): either it was not built there (deploy the "
        "source stage first) or that stage does not grant this account read access (its artifacts.reader_accounts)"
    )
    s3_stub.assert_no_pending_responses()


def test_promotion_reads_the_source_through_its_own_region(handler, codebuild, s3, promote_props, monkeypatch):
    made = []
    real = handler.s3_client

    def client(region=None):
        made.append(region)
        return real(region)

    monkeypatch.setattr(handler, "s3_client", client)
    put_artifact(s3, promote_props["SourceBucket"])
    handler.on_event(event(**promote_props, SourceRegion="eu-west-1"))
    assert made == [None, "eu-west-1"]
    assert s3.get_object(Bucket=promote_props["Bucket"], Key=KEY)["Body"].read() == b"archive-bytes"


def test_a_large_artifact_is_copied_in_parts_conditionally_with_its_metadata(
    handler, codebuild, s3, promote_props, monkeypatch
):
    """CopyObject copies at most 5 GB (S3 API reference); above, UploadPartCopy parts and a conditional
    CompleteMultipartUpload. The limits are lowered so a 9 MiB object takes that path."""
    monkeypatch.setattr(handler, "MAX_SINGLE_COPY", 5 * 1024 * 1024)
    monkeypatch.setattr(handler, "COPY_PART_SIZE", 5 * 1024 * 1024)
    body = bytes(range(256)) * (9 * 4096)  # 9 MiB
    put_artifact(s3, promote_props["SourceBucket"], body=body)
    handler.on_event(event(**promote_props))
    copied = s3.get_object(Bucket=promote_props["Bucket"], Key=KEY)
    assert copied["Body"].read() == body
    assert copied["Metadata"] == {"sha256": SHA}
    assert copied["SSEKMSKeyId"] == promote_props["KmsKeyArn"]
    assert "-" in copied["ETag"]  # a multipart object: the copy really went through parts


def test_promotion_stops_with_its_own_message_before_the_function_times_out(handler, codebuild, s3, promote_props):
    class Context:
        @staticmethod
        def get_remaining_time_in_millis() -> int:
            return 30_000

    put_artifact(s3, promote_props["SourceBucket"])
    with pytest.raises(handler.ArtifactError, match=f"promotion of {KEY} .* ran out of time .* deploy again"):
        handler.on_event(event(**promote_props), Context())


def test_promotion_of_a_missing_unpacked_layout_keeps_the_existing_archive(handler, codebuild, s3, promote_props):
    prefix = KEY.replace("model.tar.gz", "uncompressed/")
    props = {**promote_props, "UncompressedPrefix": prefix}
    put_artifact(s3, props["Bucket"], body=b"archive-bytes")
    put_artifact(s3, props["SourceBucket"], body=b"archive-bytes")
    put_artifact(s3, props["SourceBucket"], f"{prefix}resnet50/config.pbtxt", b"config")
    handler.on_event(event(**props))
    assert s3.get_object(Bucket=props["Bucket"], Key=f"{prefix}resnet50/config.pbtxt")["Body"].read() == b"config"
    assert versions(s3, props["Bucket"], KEY) == 1


def test_a_rollback_never_fails_on_signalling_an_old_wait_handle(handler, codebuild, s3, build_props):
    """In a rollback the resource returns to the old properties, whose handle belongs to a wait condition
    that completed long ago (its presigned URL may have expired): a failed signal only logs."""
    from endpoint_client.local_endpoint import free_port

    put_artifact(s3, build_props["Bucket"])
    old = {**build_props, "WaitHandle": f"http://127.0.0.1:{free_port()}/expired"}
    rollback = {
        **event("Update", **old),
        "PhysicalResourceId": f"{KEY}|{BUILD_ID}",
        "OldResourceProperties": build_props,
    }
    assert handler.on_event(rollback)["PhysicalResourceId"] == f"{KEY}|{BUILD_ID}"  # same key: id kept
