"""Triton's command line in the local endpoint: every listening service pinned to 127.0.0.1, no secret.

Source: triton-inference-server/server `src/command_line_parser.h` at v2.51.0 (the wheel's tritonserver):
`sagemaker_address_{"0.0.0.0"}` has no option, while HTTP, gRPC and metrics take an address; options are
parsed in order, the last value winning. Model control (issue 22 C1): `docs/user_guide/model_management.md`
(POLL: load/unload requests "will return an error response"); locked APIs: `--http-restricted-api`'s
`<apis>:<header>=<value>` with a value no header can carry (triton_backend.py).
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from pathlib import Path

import pytest

from endpoint_client.errors import LocalEndpointError
from endpoint_client.local_endpoint import LocalEndpoint, bind_address
from endpoint_client.sagemaker_serve import serve_plan
from endpoint_client.triton_backend import LOCK_HEADER, LOCK_VALUE, local_arguments, network_options_in
from endpoint_client.triton_install import TritonInstall


def plan_arguments(tmp_path: Path, env: dict[str, str]) -> list[str]:
    (tmp_path / "m" / "add_sub").mkdir(parents=True)
    return serve_plan(env, model_repository=tmp_path / "m", multi_model_repository=tmp_path / "mme").arguments


def test_the_sagemaker_service_is_swapped_for_loopback_http(tmp_path: Path) -> None:
    env = {
        "SAGEMAKER_BIND_TO_PORT": "8080",
        "SAGEMAKER_TRITON_THREAD_COUNT": "4",
        "SAGEMAKER_TRITON_ALLOW_GRPC": "true",
    }

    arguments = local_arguments(plan_arguments(tmp_path, env), http_port=40001, multi_model=False)

    assert not [a for a in arguments if a.startswith(("--sagemaker-port", "--allow-sagemaker=true", "--allow-http=f"))]
    assert "--http-thread-count=4" in arguments
    assert "--allow-grpc=true" in arguments  # what the environment asked for stays
    assert arguments[-9:] == [
        "--allow-sagemaker=false",
        "--allow-vertex-ai=false",
        "--allow-http=true",
        "--http-address=127.0.0.1",
        "--http-port=40001",
        f"--http-restricted-api=model-repository,shared-memory,trace,logging:{LOCK_HEADER}={LOCK_VALUE}",
        "--grpc-address=127.0.0.1",
        f"--grpc-restricted-protocol=model-repository,shared-memory,trace,logging:{LOCK_HEADER}={LOCK_VALUE}",
        "--metrics-address=127.0.0.1",
    ]
    assert "--model-control-mode=explicit" in arguments and "--load-model=add_sub" in arguments  # the script's


def test_a_multi_model_triton_polls_its_repository_and_takes_no_load_requests(tmp_path: Path) -> None:
    """POLL: load/unload requests "will have no affect and will return an error response" (Triton's
    docs/user_guide/model_management.md, v2.51.0); the repository index stays open (read-only there)."""
    plan = serve_plan(
        {"SAGEMAKER_MULTI_MODEL": "true"}, model_repository=tmp_path / "m", multi_model_repository=tmp_path / "mme"
    )

    arguments = local_arguments(plan.arguments, http_port=1, multi_model=True)

    assert [a for a in arguments if a.startswith("--model-control-mode")] == ["--model-control-mode=poll"]
    assert "--repository-poll-secs=1" in arguments
    assert f"--http-restricted-api=shared-memory,trace,logging:{LOCK_HEADER}={LOCK_VALUE}" in arguments


def test_no_argument_holds_a_secret_and_the_lock_value_cannot_be_sent_in_a_header(tmp_path: Path) -> None:
    """Every local user reads /proc/PID/cmdline (issue 22 C1). The lock value is public: it holds a line feed,
    where an HTTP header value ends (RFC 9110 5.5: field values exclude CR and LF), so no request matches it."""
    arguments = local_arguments(plan_arguments(tmp_path, {}), http_port=1, multi_model=False)

    assert "\n" in LOCK_VALUE and "\r" not in LOCK_VALUE
    assert not [a for a in arguments if "key" in a.lower()]


def test_the_pinned_flags_come_after_additional_args(tmp_path: Path) -> None:
    env = {"SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--grpc-port=9000 --log-info=true"}

    arguments = local_arguments(plan_arguments(tmp_path, env), http_port=1, multi_model=False)

    assert arguments.index("--grpc-port=9000") < arguments.index("--grpc-address=127.0.0.1")


@pytest.mark.parametrize(
    ("additional", "found"),
    [
        ("--http-address=0.0.0.0 --log-info=true", ["--http-address=0.0.0.0"]),
        ("--grpc-addr=0.0.0.0", ["--grpc-addr=0.0.0.0"]),  # getopt_long accepts unambiguous prefixes
        ("--allow-sagemaker=true --sagemaker-port 8080", ["--allow-sagemaker=true", "--sagemaker-port"]),
        ("--allow-vertex-ai=true", ["--allow-vertex-ai=true"]),
        ("--metrics-address 0.0.0.0", ["--metrics-address"]),
        ("--log-verbose=1 --grpc-port=9000 --exit-timeout-secs=5", []),
        ("--model-control-mode=explicit --repository-poll=5", ["--model-control-mode=explicit", "--repository-poll=5"]),
    ],
)
def test_network_options_in_additional_args_are_found(additional: str, found: list[str]) -> None:
    assert network_options_in(additional) == found


def test_additional_args_that_widen_the_addresses_are_refused(tmp_path: Path) -> None:
    endpoint = LocalEndpoint(
        tmp_path / "none.tar.gz",
        environment={"SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--http-address=0.0.0.0"},
        workdir=tmp_path / "work",
        triton_env=tmp_path / "venv",
    )
    (tmp_path / "none.tar.gz").write_bytes(b"")

    with pytest.raises(LocalEndpointError, match=r"ADDITIONAL_ARGS sets --http-address=0\.0\.0\.0: the local endpoint"):
        endpoint.start()
    assert endpoint.process is None and endpoint.front is None


@pytest.mark.parametrize(
    ("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.0.0.2", True),
                           ("0.0.0.0", False), ("::", False), ("192.168.1.10", False)]
)  # fmt: skip
def test_only_loopback_hosts_are_accepted(host: str, loopback: bool) -> None:
    """Servers we start listen on loopback only: the endpoint has no authentication."""
    if loopback:
        assert ipaddress.ip_address(bind_address(host)).is_loopback
    else:
        refusal = rf"--host {re.escape(host)}: the local endpoint listens on loopback only"
        with pytest.raises(LocalEndpointError, match=refusal):
            bind_address(host)
        with pytest.raises(LocalEndpointError, match="loopback only"):
            LocalEndpoint(None, multi_model=True, host=host)


def test_a_host_name_is_refused() -> None:
    with pytest.raises(LocalEndpointError, match=r"--host 'example\.com' is not an IP address"):
        bind_address("example.com")


@pytest.mark.triton
def test_the_wheels_tritonserver_has_no_sagemaker_address_option(triton_env: Path) -> None:
    """Why the SageMaker service stays off: if a later wheel gains such an option, this says so."""
    install = TritonInstall.find(triton_env)
    env = install.environment({"PATH": "/usr/bin:/bin"})
    help_text = subprocess.run(
        [install.binary, "--help"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60
    ).stdout

    assert "--sagemaker-port" in help_text
    for option in ("--http-address", "--grpc-address", "--metrics-address", "--http-restricted-api"):
        assert option in help_text
    assert "--sagemaker-address" not in help_text
