"""`container.triton_metrics` / `triton_metrics_port`: Triton's Prometheus metrics in the SageMaker container.

Sources (triton-inference-server/server at e1db8a6):
- `docker/sagemaker/serve` lines 81-85: `--allow-metrics=${SAGEMAKER_TRITON_ALLOW_METRICS}` when set, else
  `--allow-metrics=false`; lines 86-88: `--metrics-port=${SAGEMAKER_TRITON_METRICS_PORT}` when set; lines 132-133:
  `SAGEMAKER_TRITON_ADDITIONAL_ARGS` appended after them; line 183: `--allow-sagemaker=true --allow-http=false`.
- `src/command_line_parser.h`: `metrics_port_{8002}`, `sagemaker_port_{8080}`, `sagemaker_address_{"0.0.0.0"}`;
  `src/grpc/grpc_server.h`: gRPC `port_{8001}`; `src/command_line_parser.cc` `CheckPortCollision`: two enabled
  services on one address and port, or a port outside the SageMaker safe range, stop the server.
The local CPU Triton (2.51, .venv-triton) is the oracle for the collision message.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from config_edits import refusal, set_path, shipped, write
from pydantic import ValidationError

from endpoint_client.sagemaker_serve import serve_plan
from stacks.container_environment import container_environment
from stage_config import triton_metrics
from stage_config.container import OWNED_VARIABLES, ContainerSettings


def _refused(**fields) -> str:
    with pytest.raises(ValidationError) as refused:
        ContainerSettings(**fields)
    return str(refused.value)


def test_off_by_default_sets_nothing():
    """Unset, the serve script passes --allow-metrics=false (lines 81-85): nothing to add, templates unchanged."""
    environment = container_environment(ContainerSettings())
    assert not set(environment) & set(triton_metrics.VARIABLES)


def test_on_sets_the_variables_the_serve_script_reads(tmp_path):
    """The environment, through the serve script's mirror (endpoint_client/sagemaker_serve.py), gives the flags."""
    settings = ContainerSettings(triton_metrics=True, triton_metrics_port=9102)
    environment = container_environment(settings)
    assert environment["SAGEMAKER_TRITON_ALLOW_METRICS"] == "true"
    assert environment["SAGEMAKER_TRITON_METRICS_PORT"] == "9102"
    (tmp_path / "m" / "add_sub").mkdir(parents=True)
    plan = serve_plan(environment, model_repository=tmp_path / "m", multi_model_repository=tmp_path / "t")
    arguments = plan.arguments
    assert "--allow-metrics=true" in arguments and "--metrics-port=9102" in arguments
    default_port = container_environment(ContainerSettings(triton_metrics=True))
    assert "SAGEMAKER_TRITON_METRICS_PORT" not in default_port  # Triton's own 8002


def test_the_variables_are_owned():
    assert set(triton_metrics.VARIABLES) <= OWNED_VARIABLES


def test_a_port_without_metrics_is_refused():
    assert "triton_metrics_port 9102 is set but triton_metrics is false" in _refused(triton_metrics_port=9102)


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_ports_outside_1_to_65535_are_refused(port):
    _refused(triton_metrics=True, triton_metrics_port=port)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"triton_metrics_port": 8080}, "is the SageMaker service's port"),
        ({"triton_metrics_port": 9000, "extra_environment": {"SAGEMAKER_BIND_TO_PORT": "9000"}}, "SageMaker service"),
        ({"extra_environment": {"SAGEMAKER_BIND_TO_PORT": "8002"}}, "is the SageMaker service's port"),
        ({"triton_metrics_port": 8001, "extra_environment": {"SAGEMAKER_TRITON_ALLOW_GRPC": "true"}}, "gRPC's port"),
        (
            {
                "triton_metrics_port": 9200,
                "extra_environment": {"SAGEMAKER_TRITON_ALLOW_GRPC": "true", "SAGEMAKER_TRITON_GRPC_PORT": "9200"},
            },
            "gRPC's port",
        ),
        ({"extra_environment": {"SAGEMAKER_SAFE_PORT_RANGE": "8080-8090"}}, "outside SAGEMAKER_SAFE_PORT_RANGE"),
    ],
)
def test_ports_triton_would_refuse_at_start_are_refused(fields, expected):
    """CheckPortCollision: same address (all 0.0.0.0 on SageMaker) and port, or outside the safe range."""
    assert expected in _refused(triton_metrics=True, **fields)


def test_grpc_off_leaves_its_port_free():
    """--allow-grpc=false unless SAGEMAKER_TRITON_ALLOW_GRPC (serve lines 76-80): no gRPC listener, no collision."""
    ContainerSettings(triton_metrics=True, triton_metrics_port=8001)
    ContainerSettings(triton_metrics=True, extra_environment={"SAGEMAKER_SAFE_PORT_RANGE": "8000-8100"})


@pytest.mark.parametrize("words", ["--allow-metrics=true", "--metrics-port=9000", "--metrics-p 9000", "--allow-met=1"])
def test_metrics_flags_in_additional_args_are_refused(words):
    """Serve lines 132-133 append ADDITIONAL_ARGS after the metrics flags: they would override the fields."""
    assert "would override triton_metrics" in _refused(additional_args=f"--log-info=true {words}")


def test_other_metrics_options_in_additional_args_pass():
    ContainerSettings(triton_metrics=True, additional_args="--metrics-interval-ms=1000 --allow-gpu-metrics=false")


def test_a_config_refusal_names_the_file_and_field(tmp_path):
    document = set_path(shipped(), "endpoints.1.container", {"triton_metrics": True, "triton_metrics_port": 8080})
    message = refusal(write(tmp_path, document, "dev"))
    assert "endpoints[1].container" in message and "is the SageMaker service's port" in message, message


@pytest.mark.triton
def test_triton_itself_refuses_metrics_on_the_sagemaker_port(triton_env: Path, tmp_path: Path):
    """The oracle: the real tritonserver with the serve script's service flags and both on one port stops at parse
    time with CheckPortCollision's message (nothing listens: the repository does not exist either)."""
    from endpoint_client.triton_install import TritonInstall

    install = TritonInstall.find(triton_env)
    arguments = [
        str(install.binary),
        "--allow-sagemaker=true",
        "--allow-http=false",
        "--allow-grpc=false",
        f"--model-repository={tmp_path / 'missing'}",
        "--sagemaker-port=18080",
        "--allow-metrics=true",
        "--metrics-port=18080",
    ]
    run = subprocess.run(arguments, env=install.environment({}), capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "cannot listen to metrics requests and SageMaker requests at the same address and port" in (
        run.stdout + run.stderr
    )
