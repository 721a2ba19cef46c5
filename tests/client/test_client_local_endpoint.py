"""The client against a real CPU Triton serving the packaged example model as SageMaker would."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest

from endpoint_client import Encoding, EndpointClient, EndpointError, ModelNotReadyError, RetryPolicy, smoke_test
from endpoint_client.codec import BINARY_CONTENT_TYPE_PREFIX
from endpoint_client.errors import LocalEndpointError
from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.transport import SageMakerTransport, http_request

pytestmark = pytest.mark.triton

REPO_ROOT = Path(__file__).resolve().parents[2]


def pair(batch: int, dtype: type = np.float32) -> dict[str, np.ndarray]:
    a = np.arange(batch * 4, dtype=dtype).reshape(batch, 4)
    return {"INPUT0": a, "INPUT1": np.full((batch, 4), 2, dtype=np.float32)}


def assert_add_sub(outputs: dict[str, np.ndarray], inputs: dict[str, np.ndarray]) -> None:
    assert sorted(outputs) == ["OUTPUT0", "OUTPUT1"]
    np.testing.assert_array_equal(outputs["OUTPUT0"], inputs["INPUT0"] + inputs["INPUT1"])
    np.testing.assert_array_equal(outputs["OUTPUT1"], inputs["INPUT0"] - inputs["INPUT1"])
    assert outputs["OUTPUT0"].dtype == np.float32


def test_ping_answers_once_started(single_endpoint: LocalEndpoint) -> None:
    status, _, _ = http_request("GET", single_endpoint.url + "/ping", None, {}, 5)

    assert status == 200
    assert single_endpoint.url.startswith("http://127.0.0.1:")
    assert single_endpoint.plan is not None and "--load-model=add_sub" in single_endpoint.plan.arguments


@pytest.mark.parametrize("encoding", list(Encoding))
def test_invoke_in_both_encodings(single_endpoint: LocalEndpoint, encoding: Encoding) -> None:
    inputs = pair(2)
    client = EndpointClient.for_url(single_endpoint.url, encoding=encoding, model_name="add_sub")

    assert_add_sub(client.invoke(inputs), inputs)


@pytest.mark.parametrize("encoding", list(Encoding))
def test_replies_come_back_in_the_requests_encoding(single_endpoint: LocalEndpoint, encoding: Encoding) -> None:
    from endpoint_client.codec import encode_request

    request = encode_request(pair(1), encoding=encoding)
    status, body, content_type = http_request(
        "POST", single_endpoint.url + "/invocations", request.body, {"Content-Type": request.content_type}, 10
    )

    assert status == 200
    if encoding is Encoding.BINARY:
        assert content_type.startswith(BINARY_CONTENT_TYPE_PREFIX)
    else:
        assert content_type == "application/json"
        assert json.loads(body)["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


def test_only_the_requested_output(single_endpoint: LocalEndpoint) -> None:
    outputs = EndpointClient.for_url(single_endpoint.url).invoke(pair(1), outputs=["OUTPUT1"])
    assert list(outputs) == ["OUTPUT1"]


def test_batches_up_to_max_batch_size_are_served(single_endpoint: LocalEndpoint) -> None:
    inputs = pair(8)
    assert_add_sub(EndpointClient.for_url(single_endpoint.url).invoke(inputs), inputs)


def test_a_batch_above_max_batch_size_is_refused(single_endpoint: LocalEndpoint) -> None:
    client = EndpointClient.for_url(single_endpoint.url, model_name="add_sub")

    with pytest.raises(EndpointError) as raised:
        client.invoke(pair(9))

    assert raised.value.status == 400
    assert raised.value.model == f"add_sub at {single_endpoint.url}"
    assert "inference request batch-size must be <= 8 for 'add_sub'" in str(raised.value)


def test_a_wrong_data_type_is_refused(single_endpoint: LocalEndpoint) -> None:
    with pytest.raises(
        EndpointError, match="inference input 'INPUT0' data-type is 'INT32', but model 'add_sub' expects 'FP32'"
    ):
        EndpointClient.for_url(single_endpoint.url).invoke(pair(1, np.int32))


def test_a_missing_input_is_refused(single_endpoint: LocalEndpoint) -> None:
    with pytest.raises(EndpointError, match="expected 2 inputs but got 1 inputs for model 'add_sub'"):
        EndpointClient.for_url(single_endpoint.url).invoke({"INPUT0": np.ones((1, 4), np.float32)})


# Triton's own SageMaker service answered 500 for an unparseable JSON body (issue 12); the local
# endpoint's front refuses malformed requests with a 4xx before they reach Triton (request_check.py).
@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        (b'{"inputs": [', "application/json", 400, "the request's JSON header is not valid JSON"),
        (
            b'{"inputs": []}',
            f"{BINARY_CONTENT_TYPE_PREFIX}99",
            400,
            "json-header-size=99 is outside the body: it must be between 1 and 14",
        ),
        (
            b'{"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2]}]}',
            "application/json",
            400,
            "input 'INPUT0': shape [1, 4] holds 4 values but 'data' has 2",
        ),
    ],
)
def test_a_malformed_body_is_refused(
    single_endpoint: LocalEndpoint, body: bytes, content_type: str, status: int, message: str
) -> None:
    reply_status, reply, _ = http_request(
        "POST", single_endpoint.url + "/invocations", body, {"Content-Type": content_type}, 10
    )

    assert reply_status == status
    assert message in json.loads(reply)["error"]


def test_a_malformed_body_surfaces_as_an_endpoint_error(single_endpoint: LocalEndpoint) -> None:
    from endpoint_client.codec import EncodedRequest
    from endpoint_client.transport import LocalTransport

    with pytest.raises(EndpointError, match="HTTP 400: the request's JSON header is not valid JSON: Expecting value"):
        LocalTransport(single_endpoint.url).send(EncodedRequest(b"garbage", "application/json"))


def test_an_unknown_model_is_refused_with_its_name(single_endpoint: LocalEndpoint) -> None:
    with pytest.raises(EndpointError) as raised:
        EndpointClient.for_url(single_endpoint.url).invoke(pair(1), target_model="nope.tar.gz")

    assert raised.value.status == 404
    assert str(raised.value) == (
        "model 'nope.tar.gz at " + single_endpoint.url + "': HTTP 404: model is not loaded on this endpoint "
        "(Triton answered 404)"
    )


def test_multi_model_load_invoke_unload(multi_endpoint: LocalEndpoint, add_sub_archive: Path) -> None:
    client = EndpointClient.for_url(multi_endpoint.url)
    inputs = pair(3)

    multi_endpoint.load_model("add_sub.tar.gz", add_sub_archive)
    try:
        assert multi_endpoint.list_models() == ["add_sub.tar.gz"]
        assert_add_sub(client.invoke(inputs, target_model="add_sub.tar.gz"), inputs)
    finally:
        multi_endpoint.unload_model("add_sub.tar.gz")

    assert multi_endpoint.list_models() == []
    with pytest.raises(EndpointError, match=r"'add_sub.tar.gz at .*': HTTP 404: model is not loaded"):
        client.invoke(inputs, target_model="add_sub.tar.gz")


def test_retry_through_sagemaker_runtime_until_the_model_is_ready(single_endpoint, fake_sagemaker_runtime) -> None:
    front = fake_sagemaker_runtime(single_endpoint.url)
    front.not_ready = 2
    sleeps: list[float] = []
    client = EndpointClient(
        SageMakerTransport("add-sub-endpoint", client=front.boto3_client()),
        retry=RetryPolicy(attempts=4, base_delay=0.01, sleep=sleeps.append),
    )
    inputs = pair(2)

    assert_add_sub(client.invoke(inputs), inputs)

    assert [call["path"] for call in front.calls] == ["/endpoints/add-sub-endpoint/invocations"] * 3
    assert len(sleeps) == 2 and all(0 <= s <= 0.02 for s in sleeps)


def test_retry_gives_up_with_the_model_name(single_endpoint, fake_sagemaker_runtime) -> None:
    front = fake_sagemaker_runtime(single_endpoint.url)
    front.not_ready = 10
    client = EndpointClient(
        SageMakerTransport("mme-endpoint", client=front.boto3_client()),
        retry=RetryPolicy(attempts=3, base_delay=0, sleep=lambda _: None),
    )

    with pytest.raises(ModelNotReadyError) as raised:
        client.invoke(pair(1), target_model="resnet50.tar.gz")

    assert len(front.calls) == 3
    assert front.calls[0]["target"] == "resnet50.tar.gz"
    assert raised.value.model == "resnet50.tar.gz on endpoint mme-endpoint"
    assert "Model resnet50.tar.gz is not ready yet (still not ready after 3 attempts" in str(raised.value)


def test_sagemaker_model_error_carries_tritons_message(single_endpoint, fake_sagemaker_runtime) -> None:
    front = fake_sagemaker_runtime(single_endpoint.url)
    client = (
        EndpointClient.for_endpoint.__func__(EndpointClient, "add-sub-endpoint")
        if False
        else EndpointClient(SageMakerTransport("add-sub-endpoint", client=front.boto3_client(), model_name="add_sub"))
    )

    with pytest.raises(EndpointError) as raised:
        client.invoke(pair(9))

    assert raised.value.code == "ModelError"
    assert raised.value.status == 400  # Triton's own status, from OriginalStatusCode
    assert str(raised.value).startswith("model 'add_sub on endpoint add-sub-endpoint': HTTP 400: ")
    assert "inference request batch-size must be <= 8 for 'add_sub'" in str(raised.value)


def test_multi_model_target_routes_through_sagemaker_runtime(
    multi_endpoint, add_sub_archive, fake_sagemaker_runtime
) -> None:
    front = fake_sagemaker_runtime(multi_endpoint.url)
    client = EndpointClient(SageMakerTransport("mme", client=front.boto3_client()), encoding=Encoding.JSON)
    multi_endpoint.load_model("add_sub.tar.gz", add_sub_archive)
    try:
        results = smoke_test(client, [("add_sub.tar.gz", pair(1))])
    finally:
        multi_endpoint.unload_model("add_sub.tar.gz")

    assert [r.target_model for r in results] == ["add_sub.tar.gz"]
    assert_add_sub(results[0].outputs, pair(1))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "endpoint_client", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )


def test_cli_invoke_prints_the_outputs(single_endpoint: LocalEndpoint) -> None:
    result = run_cli(
        "invoke",
        "--url",
        single_endpoint.url,
        "--tensor",
        "INPUT0=FP32:1x4:1,2,3,4",
        "--tensor",
        "INPUT1=FP32:1x4:1,1,1,1",
    )

    assert result.returncode == 0, result.stderr
    outputs = json.loads(result.stdout)["outputs"]
    assert outputs["OUTPUT0"] == {"dtype": "float32", "shape": [1, 4], "data": [2.0, 3.0, 4.0, 5.0]}
    assert outputs["OUTPUT1"]["data"] == [0.0, 1.0, 2.0, 3.0]


def test_cli_invoke_reports_the_servers_refusal(single_endpoint: LocalEndpoint) -> None:
    result = run_cli(
        "invoke", "--url", single_endpoint.url, "--encoding", "json",
        "--tensor", "INPUT0=INT32:1x4:1,2,3,4", "--tensor", "INPUT1=FP32:1x4:1,1,1,1",
    )  # fmt: skip

    assert result.returncode == 1
    assert result.stderr.startswith(f"ERROR: model 'default model at {single_endpoint.url}': HTTP 400: ")
    assert "data-type is 'INT32', but model 'add_sub' expects 'FP32'" in result.stderr


def test_cli_local_serves_until_interrupted(triton_env: Path, add_sub_archive: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "endpoint_client", "local", str(add_sub_archive), "--port", "0",
         "--triton-env", str(triton_env), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=false"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.poll() is not None else url
        outputs = EndpointClient.for_url(url).invoke(pair(1))
        assert_add_sub(outputs, pair(1))
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert "stopping (SIGINT)" in process.stderr.read()
        with pytest.raises(EndpointError, match="Connection refused"):
            EndpointClient.for_url(url).invoke(pair(1))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_stop_ends_the_whole_process_group(triton_env: Path, add_sub_archive: Path, tmp_path: Path) -> None:
    endpoint = LocalEndpoint(
        add_sub_archive, triton_env=triton_env, workdir=tmp_path, environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}
    )
    endpoint.start()
    group = endpoint.process.pid
    endpoint.stop()

    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # no server, no Python backend stub left


def test_a_model_that_fails_to_load_reports_the_server_log(triton_env: Path, tmp_path: Path) -> None:
    broken = tmp_path / "repo" / "broken"
    (broken / "1").mkdir(parents=True)
    (broken / "config.pbtxt").write_text(
        (REPO_ROOT / "examples/models/add_sub/config.pbtxt").read_text().replace('"add_sub"', '"broken"')
    )
    (broken / "1" / "model.py").write_text("raise RuntimeError('this model cannot initialise')\n")
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(broken, arcname="broken")
    started = time.monotonic()

    with pytest.raises(
        LocalEndpointError,
        match=r"(?s)tritonserver exited with code 1 before /ping answered.*this model cannot initialise",
    ):
        LocalEndpoint(
            archive,
            triton_env=triton_env,
            workdir=tmp_path / "work",
            environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "false"},
        ).start()

    assert time.monotonic() - started < 30


def test_an_archive_with_config_at_its_root_is_refused_before_starting(triton_env: Path, tmp_path: Path) -> None:
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(REPO_ROOT / "examples/models/add_sub/config.pbtxt", arcname="config.pbtxt")
    endpoint = LocalEndpoint(archive, triton_env=triton_env, workdir=tmp_path / "work")

    with pytest.raises(LocalEndpointError, match=r"config\.pbtxt sits at the top of the archive"):
        endpoint.start()
    assert endpoint.process is None


def test_the_server_dies_with_a_killed_parent(triton_env: Path, add_sub_archive: Path) -> None:
    script = (
        "import sys, time; from pathlib import Path; from endpoint_client.local_endpoint import LocalEndpoint\n"
        f"e = LocalEndpoint(Path({str(add_sub_archive)!r}), triton_env=Path({str(triton_env)!r}))\n"
        "e.start(); print(e.process.pid, flush=True); time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    server = int(parent.stdout.readline())
    try:
        parent.kill()  # SIGKILL: no finally, no stop() runs in the parent
        parent.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.killpg(server, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"tritonserver group {server} outlived its parent")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server, signal.SIGKILL)


def test_a_taken_port_is_refused_before_starting(triton_env: Path, add_sub_archive: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        endpoint = LocalEndpoint(add_sub_archive, triton_env=triton_env, port=port, workdir=tmp_path)

        with pytest.raises(LocalEndpointError, match=f"port {port} on 127.0.0.1 is in use .*--port 0 for a free one"):
            endpoint.start()
        assert endpoint.process is None
