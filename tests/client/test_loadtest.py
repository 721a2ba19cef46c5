"""`python -m endpoint_client loadtest` against real loopback servers: a tiny in-test server that answers
/invocations as Triton's SageMaker service does, and (marked triton) the real local endpoint on add_sub.

Rules and their sources: the autoscaling target is SageMaker's "Load testing your auto scaling configuration"
formula (SageMakerVariantInvocationsPerInstance = MAX_RPS x SAFETY_FACTOR x 60, SAFETY_FACTOR 0.5 to start);
local targets are loopback only like the local endpoint (local_endpoint.bind_address).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from endpoint_client import loadtest as lt
from endpoint_client import loadtest_report as report
from endpoint_client.cli import main
from endpoint_client.client import EndpointClient
from endpoint_client.loadtest_inputs import generated_inputs

PROJECT = Path(__file__).resolve().parents[2]
ADD_SUB = PROJECT / "examples" / "models" / "add_sub"
REPLY = json.dumps(
    {"model_name": "add_sub", "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 4], "data": [2] * 4}]}
).encode()
TENSOR = ["--tensor", "INPUT0=FP32:1x4:1,2,3,4", "--tensor", "INPUT1=FP32:1x4:1,1,1,1"]
FAST = ["--duration", "0.4", "--warmup", "0.1", "--quiet"]


class Invocations:
    """A loopback HTTP/1.1 server (keep-alive) that records each request and answers `status(n)` for the n-th."""

    def __init__(self, status: Callable[[int], int] = lambda n: 200) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.status = status
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with recorder.lock:
                    recorder.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    code = recorder.status(len(recorder.requests))
                reply = REPLY if code == 200 else b'{"error": "busy"}'
                head = f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {len(reply)}\r\n\r\n"
                self.wfile.write(head.encode() + reply)  # one write: no Nagle wait on a split reply

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[Invocations]:
    started = Invocations()
    yield started
    started.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["loadtest", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_concurrency_sweep_writes_every_figure(server: Invocations, tmp_path: Path, capsys) -> None:
    out_file = tmp_path / "lt.json"
    code, out, err = run(capsys, "--local", server.url, *TENSOR, "--concurrency", "1,3", *FAST, "--json", str(out_file))
    assert code == 0, err
    document = json.loads(out_file.read_text())
    assert (document["schema"], document["schema_version"]) == (report.SCHEMA, 1)
    assert document["target"] == {"kind": "local", "url": server.url, "target_model": None, "inference_component": None}
    assert [lv["concurrency"] for lv in document["levels"]] == [1, 3]
    for level in document["levels"]:
        assert level["ok"] == level["requests"] > 0 and level["errors"] == {}
        assert level["invocations_per_s"] == pytest.approx(level["ok"] / level["window_s"], rel=1e-3)
        assert level["invocations_per_minute_per_instance"] == pytest.approx(level["invocations_per_s"] * 60, rel=1e-3)
        latency = level["latency_ms"]
        assert 0 < latency["p50"] <= latency["p90"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    assert document["sustainable"]["basis"] == "max-error-free"
    assert "concurrency 3" in out and "p99 ms" in out


def test_load_requests_are_the_ones_invoke_sends(server: Invocations, capsys) -> None:
    """Same route, Content-Type and body as LocalTransport (invoke's own code), also for a target model."""
    tensors = {"INPUT0": np.array([[1, 2, 3, 4]], np.float32), "INPUT1": np.ones((1, 4), np.float32)}
    EndpointClient.for_url(server.url).invoke(tensors, target_model="add_sub.tar.gz")
    invoked = server.requests[-1]
    code, _, err = run(capsys, "--local", server.url, *TENSOR, "--target-model", "add_sub.tar.gz", *FAST)
    assert code == 0, err
    paths = {path for path, _, _ in server.requests}
    assert paths == {"/models/add_sub.tar.gz/invoke"}
    for _, headers, body in server.requests[1:]:
        assert body == invoked[2]
        assert headers["content-type"] == invoked[1]["content-type"]
        assert headers["x-amzn-sagemaker-target-model"] == "add_sub.tar.gz"


def test_errors_are_counted_by_status(capsys) -> None:
    busy = Invocations(status=lambda n: 503 if n > 1 and n % 3 == 0 else 200)  # the first (invoke's) passes
    try:
        code, out, err = run(capsys, "--local", busy.url, *TENSOR, *FAST, "--concurrency", "2", "--json", "/dev/null")
    finally:
        busy.close()
    assert code == 0, err
    assert "503:" in out


def test_first_request_refused_stops_the_run_with_the_servers_message(capsys) -> None:
    refusing = Invocations(status=lambda n: 400)
    try:
        code, _, err = run(capsys, "--local", refusing.url, *TENSOR, *FAST)
    finally:
        refusing.close()
    assert code == 1 and "HTTP 400: busy" in err and "Traceback" not in err
    assert len(refusing.requests) == 1


def test_open_loop_rate_and_request_cap(server: Invocations, tmp_path: Path, capsys) -> None:
    out_file = tmp_path / "rate.json"
    code, _, err = run(
        capsys,
        "--local",
        server.url,
        *TENSOR,
        "--rate",
        "100",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--quiet",
        "--json",
        str(out_file),
    )
    assert code == 0, err
    level = json.loads(out_file.read_text())["levels"][0]
    assert level["rate"] == 100 and level["concurrency"] is None
    assert 50 <= level["requests"] <= 160  # Poisson(100) in 1 s
    code, _, err = run(
        capsys,
        "--local",
        server.url,
        *TENSOR,
        "--rate",
        "50,100",
        "--duration",
        "30",
        "--warmup",
        "0",
        "--max-requests",
        "12",
        "--quiet",
        "--json",
        str(out_file),
    )
    document = json.loads(out_file.read_text())
    assert code == 0 and "stopped after --max-requests 12" in err
    assert len(document["levels"]) == 1 and document["levels"][0]["stopped_by"] == "max-requests"
    assert document["levels"][0]["requests"] == 12 and document["levels"][0]["window_s"] < 5


def test_slo_prints_the_autoscaling_target_as_stage_config(server: Invocations, tmp_path: Path, capsys) -> None:
    out_file = tmp_path / "slo.json"
    code, out, err = run(
        capsys,
        "--local",
        server.url,
        *TENSOR,
        "--concurrency",
        "1,2",
        *FAST,
        "--slo-p99-ms",
        "5000",
        "--instances",
        "2",
        "--json",
        str(out_file),
    )
    assert code == 0, err
    document = json.loads(out_file.read_text())
    slo = document["slo"]
    best = max(document["levels"], key=lambda lv: lv["invocations_per_s"])
    assert slo["level"] == document["levels"].index(best) and slo["safety_factor"] == 0.5
    assert slo["invocations_per_instance"] == int(best["invocations_per_s"] / 2 * 0.5 * 60)
    assert f"      invocations_per_instance: {slo['invocations_per_instance']}" in out
    assert "safety factor (SAFETY_FACTOR) = 0.5" in out and "MAX_RPS" in out
    code, _, err = run(capsys, "--local", server.url, *TENSOR, *FAST, "--slo-p99-ms", "0.0001")
    assert code == 1 and "no level kept p99 under 0.0001 ms" in err


def test_find_slo_picks_the_fastest_level_within_it() -> None:
    """SageMaker's guidance: target = MAX_RPS x SAFETY_FACTOR x 60 (endpoint-scaling-loadtest.html)."""

    def level(per_s: float, p99: float, errors: dict | None = None) -> dict:
        latency = {"p99": p99}
        return {"concurrency": 1, "ok": 10, "errors": errors or {}, "invocations_per_s": per_s, "latency_ms": latency}

    levels = [level(10, 5), level(40, 9), level(80, 30), level(90, 8, {"503": 1})]
    slo = report.find_slo(levels, 10, 0.5, 1)
    assert (slo.level, slo.target) == (1, 1200)  # 40/s x 0.5 x 60
    assert report.find_slo(levels, 10, 0.25, 2).target == 300  # 20/s per instance x 0.25 x 60
    assert report.find_slo(levels, 1, 0.5, 1).level is None
    text = report.slo_text(slo, levels, instances=1, component=True)
    assert "copy_scaling:\n        invocations_per_copy: 1200" in text


def test_generated_inputs_follow_the_config(tmp_path: Path) -> None:
    tensors, per_request = generated_inputs(ADD_SUB, batch_size=4)
    assert per_request == 4
    assert {k: (v.dtype, v.shape) for k, v in tensors.items()} == {
        "INPUT0": (np.float32, (4, 4)),
        "INPUT1": (np.float32, (4, 4)),
    }
    with pytest.raises(ValueError, match="at most max_batch_size 8"):
        generated_inputs(ADD_SUB, batch_size=9)
    strings = PROJECT / "examples" / "models" / "image_classifier"
    with pytest.raises(ValueError, match=r"'image' is TYPE_STRING.*--raw"):
        generated_inputs(strings, batch_size=1)
    broken = tmp_path / "config.pbtxt"
    broken.write_text("name: ")
    with pytest.raises(ValueError, match="not a Triton model config"):
        generated_inputs(broken, batch_size=1)


def test_model_config_inputs_and_plot(server: Invocations, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    plot, out_file = tmp_path / "lt.png", tmp_path / "lt.json"
    code, _, err = run(
        capsys,
        "--local",
        server.url,
        "--model-config",
        str(ADD_SUB),
        "--batch-size",
        "2",
        *FAST,
        "--plot",
        str(plot),
        "--json",
        str(out_file),
    )
    assert code == 0, err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    document = json.loads(out_file.read_text())
    assert document["inferences_per_request"] == 2
    level = document["levels"][0]
    assert level["inferences_per_s"] == pytest.approx(level["invocations_per_s"] * 2, rel=1e-3)


def test_plot_without_matplotlib_is_a_clean_error(server: Invocations, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    code, _, err = run(capsys, "--local", server.url, *TENSOR, *FAST, "--plot", str(tmp_path / "x.png"))
    assert code == 1 and "matplotlib is not installed" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--local", "http://10.0.0.1:8080"], "loopback only"),
        (["--local", "http://example.com:8080"], "loopback only"),
        (["--local", "https://127.0.0.1:8080"], "is not http://HOST:PORT"),
        (["--local", "http://127.0.0.1:99999"], "is not http://HOST:PORT"),
        (["--local", "http://127.0.0.1:8080/invocations"], "is not http://HOST:PORT"),
        (["--local", "http://user:pw@127.0.0.1:8080"], "give only http://HOST:PORT"),
        (["--triton", "http://192.168.1.1:8000"], "loopback only"),
        (["--local", "http://127.0.0.1:1", "--rate", "0"], "not a rate"),
        (["--local", "http://127.0.0.1:1", "--rate", "-5"], "not a rate"),
        (["--local", "http://127.0.0.1:1", "--rate", "nan"], "not a rate"),
        (["--local", "http://127.0.0.1:1", "--rate", "1e9"], "at most 10000"),
        (["--local", "http://127.0.0.1:1", "--rate", "fast"], "not a rate"),
        (["--local", "http://127.0.0.1:1", "--duration", "0"], "not a duration"),
        (["--local", "http://127.0.0.1:1", "--duration", "inf"], "not a duration"),
        (["--local", "http://127.0.0.1:1", "--warmup", "-1"], "not a warm-up"),
        (["--local", "http://127.0.0.1:1", "--concurrency", "0"], "not a concurrency"),
        (["--local", "http://127.0.0.1:1", "--concurrency", "1,,2"], "not a concurrency"),
        (["--local", "http://127.0.0.1:1", "--concurrency", "5000"], "not a concurrency"),
        (["--local", "http://127.0.0.1:1", "--concurrency", ",".join(["1"] * 33)], "give 1-32"),
        (["--local", "http://127.0.0.1:1", "--max-requests", "0"], "not a request cap"),
        (["--local", "http://127.0.0.1:1", "--rate", "5", "--concurrency", "2"], "not allowed with"),
    ],
)
def test_usage_errors_exit_2_with_a_message(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["loadtest", *argv, *TENSOR])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--local", "http://127.0.0.1:1", *TENSOR], "cannot reach"),
        (["--local", "http://127.0.0.1:1"], "no inputs"),
        (["--local", "http://127.0.0.1:1", *TENSOR, "--model-config", str(ADD_SUB)], "not both"),
        (["--local", "http://127.0.0.1:1", *TENSOR, "--batch-size", "2"], "goes with --model-config"),
        (["--local", "http://127.0.0.1:1", "--model-config", "/nonexistent/m"], "cannot read it"),
        (["--triton", "http://127.0.0.1:1", *TENSOR], "needs --model-name"),
        (["--local", "http://127.0.0.1:1", *TENSOR, "--region", "us-east-1"], "--region goes with --endpoint"),
        (["--local", "http://127.0.0.1:1", *TENSOR, "--plot", "x.svg"], "give a .png"),
        (["--local", "http://127.0.0.1:1", *TENSOR, "--json", "/nonexistent/x.json"], "does not exist"),
        (
            ["--local", "http://127.0.0.1:1", *TENSOR, "--concurrency", ",".join(["1"] * 10), "--duration", "3600"],
            "planned in all",
        ),
    ],
)
def test_refusals_exit_1_with_a_message(argv: list[str], message: str, capsys) -> None:
    code, _, err = run(capsys, *argv, "--quiet")
    assert code == 1 and message in err and "Traceback" not in err, err


def test_plan_problems_name_every_cap() -> None:
    plan = lt.Plan((lt.Level(rate=0.0), lt.Level(concurrency=0)), duration=0, warmup=-1, max_requests=0)
    problems = "; ".join(plan.problems())
    for part in ("rate 0.0", "concurrency 0", "duration 0", "warm-up -1", "max requests 0"):
        assert part in problems


def test_progress_line_on_a_pipe() -> None:
    import io

    stream = io.StringIO()
    show = lt.progress_printer(stream)
    measured = lt.Measured(lt.Level(concurrency=2), 0.0, 1.0, latencies=[0.001, 0.002])
    show(measured, 1.0, 1.0)
    assert stream.getvalue().startswith("concurrency 2:   1.0/1 s  2 ok  0 errors  2.0 inv/s  p99 2.0 ms")


@pytest.mark.triton
def test_real_local_endpoint_and_its_triton(single_endpoint, tmp_path: Path, capsys) -> None:
    """The real local endpoint on add_sub (tests/conftest.py), through the front and straight to its Triton."""
    for target in (["--local", single_endpoint.url], ["--triton", f"http://127.0.0.1:{single_endpoint.triton.port}"]):
        out_file = tmp_path / "real.json"
        code, _, err = run(
            capsys,
            *target,
            "--model-name",
            "add_sub",
            "--model-config",
            str(ADD_SUB),
            "--concurrency",
            "1,2",
            "--duration",
            "1",
            "--warmup",
            "0.2",
            "--quiet",
            "--json",
            str(out_file),
        )
        assert code == 0, err
        for level in json.loads(out_file.read_text())["levels"]:
            assert level["ok"] > 0 and level["errors"] == {}


class Recording:
    """A Target without a network: records when each request starts and how many are in flight."""

    kind = "fake"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.starts: list[float] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def open(self, connections: int) -> None:
        pass

    async def send(self) -> str | None:
        import asyncio
        import time

        self.starts.append(time.perf_counter())
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(self.delay)
        self.in_flight -= 1
        return None

    async def close(self) -> None:
        pass


def test_open_loop_arrivals_are_poisson_and_do_not_wait_for_replies() -> None:
    """Exponential gaps: mean 1/rate and a coefficient of variation near 1, not paced; replies slower than the
    gaps pile up in flight instead of slowing the arrivals (open loop)."""
    import asyncio

    target = Recording(delay=0.05)
    plan = lt.Plan((lt.Level(rate=400.0),), duration=1.5, warmup=0.0, seed=7)
    measured = asyncio.run(lt.run_plan(target, plan))[0]
    gaps = np.diff(target.starts)
    assert 450 <= len(target.starts) <= 750
    assert gaps.mean() == pytest.approx(1 / 400, rel=0.2)
    assert 0.6 <= gaps.std() / gaps.mean() <= 2.0  # exponential: 1 (timer jitter on a loaded machine adds); paced: ~0
    assert target.most_in_flight >= 10  # 400/s x 50 ms: about 20 waiting at once
    assert measured.requests == len(target.starts) and measured.errors == {}


def test_closed_loop_keeps_exactly_n_users() -> None:
    import asyncio

    target = Recording(delay=0.01)
    measured = asyncio.run(lt.run_plan(target, lt.Plan((lt.Level(concurrency=5),), duration=0.5, warmup=0.1)))[0]
    assert target.most_in_flight == 5
    assert 100 <= measured.requests <= 260  # 5 users x ~10 ms per request x 0.5 s
    assert min(measured.latencies) >= 0.01


def test_a_server_that_stops_answering_ends_in_timeouts_not_a_hang(capsys) -> None:
    """Always stops by itself: after the first request the server never replies; the level ends after its
    duration plus --timeout, with the requests counted as timeouts."""
    import time

    hanging = Invocations()
    release = threading.Event()
    original = hanging.status

    def status(n: int) -> int:
        if n > 1:
            release.wait(10)
        return original(n)

    hanging.status = status
    started = time.perf_counter()
    try:
        code, out, err = run(capsys, "--local", hanging.url, *TENSOR, "--concurrency", "2", "--duration", "0.3",
                             "--warmup", "0", "--timeout", "0.5", "--quiet")  # fmt: skip
    finally:
        release.set()
        hanging.close()
    assert code == 0, err
    assert time.perf_counter() - started < 5
    assert "timeout:2" in out
