"""The local endpoint serves Triton's Prometheus metrics on loopback (issue #26 part 3).

Sources (triton-inference-server/server): `docs/user_guide/metrics.md` (the metric names and labels; request
metrics are updated per request); `src/command_line_parser.cc` (`--metrics-address`, `--metrics-port`, default
8002); `docker/sagemaker/serve` lines 81-88 (SAGEMAKER_TRITON_ALLOW_METRICS / _METRICS_PORT). The wheel's
tritonserver (2.51) is built with metrics (its --help lists the options).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from endpoint_client import EndpointClient
from endpoint_client.errors import LocalEndpointError
from endpoint_client.loadtest_triton_metrics import (
    FAILURE,
    QUEUE_US,
    SUCCESS,
    MetricsUnavailable,
    level_delta,
    per_model,
    scrape,
)
from endpoint_client.local_endpoint import LocalEndpoint, local_metrics_port
from endpoint_client.sagemaker_serve import serve_plan
from endpoint_client.triton_backend import local_arguments

REPO_ROOT = Path(__file__).resolve().parents[2]

PAGE = """# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="add_sub",version="1"} 4
nv_inference_request_success{model="add_sub",version="2"} 6
nv_inference_request_failure{model="add_sub",reason="BACKEND",version="1"} 0
nv_inference_request_failure{model="add_sub",reason="OTHER",version="1"} 0
nv_inference_request_duration_us{model="add_sub",version="1"} 5000
nv_inference_queue_duration_us{model="add_sub",version="1"} 1000
nv_inference_compute_infer_duration_us{model="add_sub",version="1"} 3000
nv_inference_request_success{model="idle",version="1"} 2
nv_gpu_utilization{gpu_uuid="GPU-1"} 0.5
"""


def _tcp_listeners(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} write them) listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(hex_port, 16) == port:
                found.append(address)
    return found


def _pair() -> dict[str, np.ndarray]:
    return {"INPUT0": np.ones((1, 4), np.float32), "INPUT1": np.ones((1, 4), np.float32)}


def test_a_metrics_page_is_summed_per_model_over_versions() -> None:
    models = per_model(PAGE)
    assert models["add_sub"][SUCCESS] == 10 and models["add_sub"][QUEUE_US] == 1000
    assert models["idle"][SUCCESS] == 2


def test_a_level_is_the_difference_of_two_scrapes_per_request() -> None:
    before = per_model(PAGE)
    after = per_model(PAGE)
    after["add_sub"][SUCCESS] += 4
    after["add_sub"][FAILURE] += 1  # 5 requests in all
    after["add_sub"][QUEUE_US] += 2000

    [row] = level_delta(before, after)  # "idle" served nothing in between

    assert row.model == "add_sub" and row.requests == 5 and row.failures == 1
    assert row.queue_us == pytest.approx(2000 / 5) and row.compute_infer_us == 0


def test_only_loopback_metrics_are_read() -> None:
    with pytest.raises(MetricsUnavailable, match="only a local endpoint's metrics"):
        scrape("http://192.0.2.1:8002/metrics")


def test_metrics_are_on_locally_unless_the_environment_says_false() -> None:
    """SageMaker: off unless SAGEMAKER_TRITON_ALLOW_METRICS is set (serve lines 81-85). Locally on by default, on a
    free port unless SAGEMAKER_TRITON_METRICS_PORT names one (two local endpoints would both take 8002)."""
    assert local_metrics_port({"SAGEMAKER_TRITON_ALLOW_METRICS": "false"}) is None
    given = {"SAGEMAKER_TRITON_ALLOW_METRICS": "true", "SAGEMAKER_TRITON_METRICS_PORT": "9102"}
    assert local_metrics_port(given) == 9102
    assert local_metrics_port({}) not in (None, 8002)
    with pytest.raises(LocalEndpointError, match="is not a port"):
        local_metrics_port({"SAGEMAKER_TRITON_METRICS_PORT": "80a"})


def test_the_metrics_flags_come_after_the_environments_and_keep_the_loopback_address(tmp_path: Path) -> None:
    (tmp_path / "m" / "add_sub").mkdir(parents=True)
    env = {"SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--metrics-port=8002 --allow-metrics=false"}
    plan = serve_plan(env, model_repository=tmp_path / "m", multi_model_repository=tmp_path / "t")

    arguments = local_arguments(plan.arguments, http_port=1, multi_model=False, metrics_port=40002)

    assert arguments.index("--allow-metrics=false") < arguments.index("--allow-metrics=true")
    assert arguments.index("--metrics-port=8002") < arguments.index("--metrics-port=40002")
    assert arguments[-1] == "--metrics-address=127.0.0.1"


@pytest.mark.triton
def test_metrics_answer_on_loopback_only_and_count_the_served_model(single_endpoint: LocalEndpoint) -> None:
    url = single_endpoint.metrics_url
    assert url is not None and url.startswith("http://127.0.0.1:")
    assert single_endpoint.metrics_port is not None
    assert _tcp_listeners(single_endpoint.metrics_port) == ["0100007F"]  # 127.0.0.1 only, no IPv6 or wildcard

    before = scrape(url).get("add_sub", {}).get(SUCCESS, 0.0)
    EndpointClient.for_url(single_endpoint.url, model_name="add_sub").invoke(_pair())
    with urllib.request.urlopen(url, timeout=5) as reply:
        page = reply.read().decode()

    # Labels (2.51): model, version, and namespace (the repository: the serve script turns namespacing on).
    assert 'nv_inference_request_success{model="add_sub",' in page
    assert per_model(page)["add_sub"][SUCCESS] == before + 1


@pytest.mark.triton
def test_metrics_stay_off_when_the_environment_turns_them_off(
    triton_env: Path, add_sub_archive: Path, tmp_path: Path
) -> None:
    environment = {"SAGEMAKER_TRITON_LOG_VERBOSE": "false", "SAGEMAKER_TRITON_ALLOW_METRICS": "false"}
    with LocalEndpoint(
        add_sub_archive, environment=environment, triton_env=triton_env, workdir=tmp_path / "w", startup_timeout=60
    ) as endpoint:
        assert endpoint.metrics_url is None
        assert "--allow-metrics=true" not in (endpoint.process.args if endpoint.process else [])


@pytest.mark.triton
def test_the_cli_prints_the_metrics_url(triton_env: Path, add_sub_archive: Path) -> None:
    """`python -m endpoint_client local` says where the metrics are (stderr; stdout keeps only the endpoint URL)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "endpoint_client", "local", str(add_sub_archive), "--port", "0",
         "--triton-env", str(triton_env), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=false"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        stderr = process.stderr.read()
        metrics = re.search(r"^Triton metrics: (http://127\.0\.0\.1:\d+/metrics)$", stderr, re.MULTILINE)
        assert metrics, stderr
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


TENSOR = ["--tensor", "INPUT0=FP32:1x4:1,2,3,4", "--tensor", "INPUT1=FP32:1x4:1,1,1,1"]


@pytest.mark.triton
def test_the_load_test_reports_queue_vs_compute_per_level(
    single_endpoint: LocalEndpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per level, the requests Triton counted and its queue / compute / total microseconds per request."""
    from endpoint_client.cli import main

    out_file = tmp_path / "lt.json"
    code = main(
        ["loadtest", "--local", single_endpoint.url, "--triton-metrics", str(single_endpoint.metrics_url), *TENSOR,
         "--concurrency", "1,2", "--duration", "0.5", "--warmup", "0", "--quiet", "--json", str(out_file)]
    )  # fmt: skip
    out = capsys.readouterr().out

    assert code == 0
    levels = json.loads(out_file.read_text())["levels"]
    for level in levels:
        [row] = level["triton_metrics"]
        assert row["model"] == "add_sub" and row["failures"] == 0
        assert row["requests"] >= level["requests"] > 0  # the window's, plus any started after it closed
        assert 0 <= row["queue_us_per_request"] <= row["request_us_per_request"]
        assert 0 < row["compute_infer_us_per_request"] <= row["request_us_per_request"]
    assert "queue us" in out and "compute us" in out


def test_triton_metrics_go_with_a_local_target_only(capsys: pytest.CaptureFixture[str]) -> None:
    from endpoint_client.cli import main

    code = main(
        ["loadtest", "--endpoint", "x", "--triton-metrics", "http://127.0.0.1:8002", *TENSOR, "--no-cloudwatch"]
    )
    assert code != 0 and "--triton-metrics reads a local Triton" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["loadtest", "--local", "http://127.0.0.1:1", "--triton-metrics", "http://10.0.0.1:8002/metrics"])
    assert "loopback only" in capsys.readouterr().err
