"""The local endpoint's front refuses with 400, before Triton sees it, what Triton would misread (a repeated JSON key:
Python's json keeps the last value, Triton's reader the first) or answer with 500 (mistyped parameters, values
outside a datatype's range); on SageMaker a 5XX counts as the model's failure. A multi-model load beyond the most
models is a 507, and gRPC cannot load a model. Triton's behaviour was measured against tritonserver 2.51
(.venv-triton).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import StubTriton

from endpoint_client import model_registry as registry_module
from endpoint_client.front import SageMakerAPI
from endpoint_client.local_endpoint import LOOPBACK, LocalEndpoint, free_port
from endpoint_client.model_registry import LoadedModel, ModelRegistry
from endpoint_client.request_check import RequestRefused, check_invocation
from endpoint_client.transport import http_request

JSON = {"content-type": "application/json"}
GOOD_INPUT = {"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
INPUT1 = '{"name":"INPUT1","datatype":"FP32","shape":[1,4],"data":[1,1,1,1]}'
# A 170-byte attack: Python's json keeps the last "shape", Triton reads the first.
REPEATED_SHAPE = (
    '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,100000000],"shape":[1,4],"data":[1,2,3,4]},'
    + INPUT1
    + "]}"
)
REPEATED_INPUTS = (
    '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,100000000],"data":[1,2,3,4]},' + INPUT1 + "],"
    '"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},' + INPUT1 + "]}"
)


def refused(body: str | bytes, content_type: str = "application/json") -> RequestRefused:
    with pytest.raises(RequestRefused) as raised:
        check_invocation(body.encode() if isinstance(body, str) else body, content_type)
    return raised.value


def multi_api(triton: StubTriton, tmp_path: Path) -> SageMakerAPI:
    registry = ModelRegistry(triton, repository=tmp_path / "repo", staging=tmp_path / "mme")
    registry.models["add_sub.tar.gz"] = LoadedModel("add_sub.tar.gz", str(tmp_path), ("add_sub.tar.gz",))
    return SageMakerAPI(triton, ping_mode="live", default_model=None, registry=registry)


# --- a repeated JSON key is refused at any level ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (REPEATED_SHAPE, "shape"),
        (REPEATED_INPUTS, "inputs"),
        ('{"inputs":[' + INPUT1 + '],"parameters":{"timeout":1,"timeout":2}}', "timeout"),
        ('{"inputs":[{"name":"INPUT1","name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]}', "name"),
        ('{"inputs":[' + INPUT1 + '],"outputs":[{"name":"A","parameters":{"x":{"y":1,"y":2}}}]}', "y"),
    ],
)
def test_a_repeated_key_at_any_level_is_refused(body: str, key: str) -> None:
    """Python's json keeps a repeated key's last value and Triton's reader its first, so the size check
    saw shape [1,4] while Triton allocated [1,100000000] (Triton grew 32 -> 414 MB)."""
    error = refused(body)

    assert error.status == 400
    assert f"the key {key!r} appears twice in one object" in error.message


def test_a_repeated_key_is_refused_in_a_binary_header_and_on_the_multi_model_route(tmp_path: Path) -> None:
    header = REPEATED_SHAPE.encode()
    binary = f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}"
    assert refused(header, binary).status == 400

    triton = StubTriton()
    reply = multi_api(triton, tmp_path).handle("POST", "/models/add_sub.tar.gz/invoke", JSON, REPEATED_SHAPE.encode())
    control = multi_api(triton, tmp_path).handle(
        "POST", "/models", JSON, b'{"model_name":"a","model_name":"b","url":"/x"}'
    )

    assert reply.status == 400 and "'shape' appears twice" in json.loads(reply.body)["error"]
    assert control.status == 400 and "'model_name' appears twice" in json.loads(control.body)["error"]
    assert triton.calls == []  # Triton never saw either


@pytest.mark.triton
@pytest.mark.parametrize("body", [REPEATED_SHAPE, REPEATED_INPUTS])
def test_the_live_endpoint_answers_repeated_keys_with_400(single_endpoint: LocalEndpoint, body: str) -> None:
    status, reply, _ = http_request(
        "POST", single_endpoint.url + "/invocations", body.encode(), {"Content-Type": "application/json"}, 30
    )

    assert status == 400
    assert "appears twice" in json.loads(reply)["error"]


# --- gRPC loads no model ----------------------------------------------------------------------------------------------


@pytest.mark.triton
def test_grpc_load_model_with_inline_files_is_refused(triton_env: Path, add_sub_archive: Path, tmp_path: Path) -> None:
    """With SAGEMAKER_TRITON_ALLOW_GRPC=true, gRPC's load_model took a config and an inline model.py from
    any local process and ran it. Triton's `--grpc-restricted-protocol` (tritonserver
    --help, 2.51: `<protocols>:<key>=<value>`) locks the model-repository protocol with a value no gRPC
    metadata can carry (issue 22 C1: no secret on the command line)."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    grpc_port = free_port()
    marker = tmp_path / "ran"
    config = json.dumps({"name": "pwn", "backend": "python", "max_batch_size": 0})
    code = f"open({str(marker)!r}, 'w').write('x')\nclass TritonPythonModel:\n    pass\n".encode()
    endpoint = LocalEndpoint(
        add_sub_archive,
        environment={
            "SAGEMAKER_TRITON_ALLOW_GRPC": "true",
            "SAGEMAKER_TRITON_GRPC_PORT": str(grpc_port),
            "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
        },
        triton_env=triton_env,
        workdir=tmp_path / "work",
        startup_timeout=60,
    )
    try:
        endpoint.start()
        client = grpcclient.InferenceServerClient(f"{LOOPBACK}:{grpc_port}")
        with pytest.raises(Exception, match="This protocol is restricted"):
            client.load_model("pwn", config=config, files={"file:1/model.py": code})
        with pytest.raises(Exception, match="This protocol is restricted"):
            client.get_model_repository_index()
    finally:
        endpoint.stop()
    assert not marker.exists()


# --- what Triton answers with 500 gets a 400 first --------------------------------------------------------------------


def body_of(entry: dict | None = None, **top: object) -> str:
    return json.dumps({"inputs": [entry or GOOD_INPUT], **top})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (body_of(parameters={"binary_data_output": "yes"}), "'binary_data_output' must be true or false"),
        (body_of(outputs=[{"name": "O", "parameters": {"binary_data": "yes"}}]), "'binary_data' must be true"),
        (
            body_of(outputs=[{"name": "O", "parameters": {"classification": -5}}]),
            "'classification' must be a whole",
        ),
        (body_of(parameters={"timeout": -1}), "'timeout' must be a whole number >= 0"),
        (body_of(parameters={"priority": "high"}), "'priority' must be a whole number >= 0"),
        (body_of(parameters={"sequence_start": "x"}), "'sequence_start' must be true or false"),
        (body_of(parameters={"sequence_id": -1}), "'sequence_id' must be a whole number >= 0 or a string"),
        (body_of(id=5), "'id' must be a string"),
        (
            body_of(dict(GOOD_INPUT, datatype="INT64", data=[2**63, 1, 1, 1])),
            "holds 9223372036854775808, not a",
        ),
        (body_of(dict(GOOD_INPUT, datatype="UINT64", data=[-1, 1, 1, 1])), "holds -1, not a UINT64 value"),
        (body_of(dict(GOOD_INPUT, datatype="INT8", data=[300, 1, 1, 1])), "holds 300, not a INT8 value"),
        (body_of(dict(GOOD_INPUT, shape=[0, 2**64 + 1], data=[])), "is over 2^63-1"),
        ('{"inputs":[{"name":"I","datatype":"FP32","shape":[1],"data":[1e999]}]}', "too large for a double"),
        ('{"inputs":[{"name":"I","datatype":"FP32","shape":[1],"data":[NaN]}]}', "NaN is not JSON"),
        (body_of(dict(GOOD_INPUT, datatype=[])), "unknown datatype"),  # finding 7: was a TypeError
        (body_of(dict(GOOD_INPUT, datatype={})), "unknown datatype"),
    ],
)
def test_what_triton_answers_with_500_is_refused_with_400(body: str, message: str) -> None:
    """Each of these got a 500 from tritonserver 2.51 (e.g. "Unable to parse 'timeout': attempt to access
    JSON non-unsigned-integer as unsigned-integer", src/http_server.cc); on SageMaker a 5XX counts as the
    model's failure (Invocation5XXErrors), so the front answers 400 with what is wrong."""
    error = refused(body)

    assert error.status == 400
    assert message in error.message


def test_the_types_triton_accepts_still_pass() -> None:
    body = body_of(
        parameters={"timeout": 2**64 - 1, "sequence_id": "abc", "sequence_start": True, "priority": 0},
        id="request-1",
        outputs=[{"name": "O", "parameters": {"binary_data": False, "classification": 2}}],
    )

    assert check_invocation(body.encode(), "application/json") is None


def test_a_triton_json_parse_500_becomes_a_400() -> None:
    """A parse error Triton reports as 500 that the check does not know yet is still the request's fault."""
    triton = StubTriton(500, b'{"error":"Unable to parse \'x\': attempt to access JSON non-boolean as boolean"}')
    api = SageMakerAPI(triton, ping_mode="ready", default_model="add_sub", registry=None)

    assert api.handle("POST", "/invocations", JSON, body_of().encode()).status == 400
    other = SageMakerAPI(StubTriton(500, b'{"error":"boom"}'), ping_mode="ready", default_model="m", registry=None)
    assert other.handle("POST", "/invocations", JSON, body_of().encode()).status == 500


# --- a multi-model endpoint loads at most MAX_LOADED_MODELS -----------------------------------------------------------


def test_loading_beyond_the_most_models_is_a_507(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "MAX_LOADED_MODELS", 1)
    staged = tmp_path / "mme" / "b" / "model" / "add_sub"
    staged.mkdir(parents=True)
    triton = StubTriton()
    api = multi_api(triton, tmp_path)

    reply = api.handle("POST", "/models", JSON, json.dumps({"model_name": "b", "url": str(staged.parent)}).encode())

    assert reply.status == 507 and "unload one first" in json.loads(reply.body)["error"]
    assert triton.calls == []
