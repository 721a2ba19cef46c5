"""The smoke test end to end against a real CPU Triton behind a SageMaker-runtime front (boto3).

The local endpoints are the session's (tests/conftest.py: `single_endpoint`, `multi_endpoint`, the
same Triton processes the client tests use) and the front is tests/fakes.py's FakeSageMakerRuntime:
a multi-model endpoint reached with `TargetModel` that first answers ModelNotReadyException, and a
single-model endpoint.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FakeSageMakerRuntime

from endpoint_client import RetryPolicy
from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.smoke import client_factory, read_model_config, run_plan
from endpoint_client.smoke_plan import EndpointCheck, ModelCheck, SmokePlan

pytestmark = pytest.mark.triton


@pytest.fixture(scope="module")
def endpoints(
    single_endpoint: LocalEndpoint, multi_endpoint: LocalEndpoint, add_sub_archive: Path
) -> Iterator[dict[str, FakeSageMakerRuntime]]:
    """The session's two local endpoints, each behind its own SageMaker-runtime front; the model this
    module loads on the shared multi-model endpoint is unloaded again afterwards."""
    multi_endpoint.load_model("add_sub.tar.gz", add_sub_archive)
    try:
        with FakeSageMakerRuntime(single_endpoint.url) as single, FakeSageMakerRuntime(multi_endpoint.url) as multi:
            yield {"triton-single": single, "triton-mme": multi}
    finally:
        multi_endpoint.unload_model("add_sub.tar.gz")


def _plan(bound_ms: float) -> SmokePlan:
    return SmokePlan(
        stage="dev",
        timed_calls=2,
        attempts=4,
        endpoints=[
            EndpointCheck("triton-mme", "dev-triton-mme", bound_ms, [ModelCheck("add_sub", "k", "add_sub.tar.gz")]),
            EndpointCheck("triton-single", "dev-triton-single", bound_ms, [ModelCheck("add_sub", "k", None)]),
        ],
    )


def _run(plan: SmokePlan, endpoints, archive: Path):
    retry = RetryPolicy(attempts=plan.attempts, sleep=lambda _: None)
    factories = {name: client_factory(plan, front.boto3_client(), retry) for name, front in endpoints.items()}

    def read_config(model: ModelCheck):
        with archive.open("rb") as stream:
            return read_model_config(stream, model.name, str(archive))

    lines: list[str] = []
    report = run_plan(plan, lambda e, m: factories[e.name](e, m), read_config, echo=lines.append)
    return report, lines


def test_every_endpoint_and_model_passes_on_real_triton(endpoints, add_sub_archive):
    endpoints["triton-mme"].not_ready = 2  # the MME first answers ModelNotReadyException twice
    endpoints["triton-mme"].calls.clear()
    report, lines = _run(_plan(bound_ms=5000), endpoints, add_sub_archive)
    assert report.passed, lines
    assert [r.endpoint for r in report.results] == ["triton-mme", "triton-single"]
    assert all(len(r.latencies_ms) == 2 for r in report.results)
    # 2 refused + 1 checked + 2 timed, every one routed with TargetModel to the endpoint's invocations.
    calls = endpoints["triton-mme"].calls
    assert len(calls) == 5
    assert {c["target"] for c in calls} == {"add_sub.tar.gz"}
    assert {c["path"] for c in calls} == {"/endpoints/dev-triton-mme/invocations"}
    assert report.summary().startswith("dev smoke PASSED: 2/2 models on 2 endpoint(s), slowest call ")


def test_a_latency_bound_real_calls_cannot_meet_fails_the_stage(endpoints, add_sub_archive):
    report, lines = _run(_plan(bound_ms=0.001), endpoints, add_sub_archive)
    assert not report.passed
    assert all(line.startswith("FAIL ") and "above the 0 ms bound" in line for line in lines)


def test_a_model_the_endpoint_does_not_serve_fails_the_stage(endpoints, add_sub_archive):
    plan = SmokePlan(
        "dev",
        timed_calls=1,
        attempts=2,
        endpoints=[EndpointCheck("triton-mme", "dev-triton-mme", 5000, [ModelCheck("add_sub", "k", "missing.tar.gz")])],
    )
    report, lines = _run(plan, endpoints, add_sub_archive)
    assert not report.passed
    assert lines[0].startswith("FAIL triton-mme add_sub: not timed: model 'missing.tar.gz on endpoint dev-triton-mme'")
