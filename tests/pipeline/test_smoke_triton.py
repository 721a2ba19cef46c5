"""The smoke test end to end against a real CPU Triton behind a SageMaker-runtime front (boto3).

The local endpoints and the front are the invocation client's (endpoint_client.LocalEndpoint and
tests/client's FakeSageMakerRuntime, imported, not copied): a multi-model endpoint reached with
`TargetModel` that first answers ModelNotReadyException, and a single-model endpoint.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from endpoint_client import RetryPolicy
from endpoint_client.errors import LocalEndpointError
from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.triton_install import TritonInstall
from model_build.package import write_model_archive
from triton_cdk.pipeline.smoke import client_factory, read_model_config, run_plan
from triton_cdk.pipeline.smoke_plan import EndpointCheck, ModelCheck, SmokePlan

pytestmark = pytest.mark.triton

REPO_ROOT = Path(__file__).resolve().parents[2]
TRITON_ENV = REPO_ROOT / ".venv-triton"
EXAMPLE_MODEL = REPO_ROOT / "examples" / "models" / "add_sub"
QUIET = {"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}


def _client_fixtures():
    spec = importlib.util.spec_from_file_location("client_conftest", REPO_ROOT / "tests" / "client" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FakeSageMakerRuntime = _client_fixtures().FakeSageMakerRuntime


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("smoke-triton") / "add_sub.tar.gz"
    write_model_archive(EXAMPLE_MODEL, path)
    return path


@pytest.fixture(scope="module")
def endpoints(archive, tmp_path_factory) -> Iterator[dict[str, FakeSageMakerRuntime]]:
    """Both local endpoints, each behind its own SageMaker-runtime front; all stopped afterwards."""
    try:
        TritonInstall.find(TRITON_ENV)
    except LocalEndpointError as error:
        pytest.skip(f"no CPU Triton: {error}")
    single = LocalEndpoint(
        archive,
        environment={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "add_sub", **QUIET},
        triton_env=TRITON_ENV,
        workdir=tmp_path_factory.mktemp("smoke-single"),
        startup_timeout=60,
    )
    multi = LocalEndpoint(
        environment=QUIET,
        multi_model=True,
        triton_env=TRITON_ENV,
        workdir=tmp_path_factory.mktemp("smoke-multi"),
        startup_timeout=60,
    )
    fronts = []
    try:
        single.start()
        multi.start()
        multi.load_model("add_sub.tar.gz", archive)
        fronts = [FakeSageMakerRuntime(single.url).__enter__(), FakeSageMakerRuntime(multi.url).__enter__()]
        yield {"triton-single": fronts[0], "triton-mme": fronts[1]}
    finally:
        for front in fronts:
            front.__exit__(None, None, None)
        multi.stop()
        single.stop()


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


def test_every_endpoint_and_model_passes_on_real_triton(endpoints, archive):
    endpoints["triton-mme"].not_ready = 2  # the MME first answers ModelNotReadyException twice
    endpoints["triton-mme"].calls.clear()
    report, lines = _run(_plan(bound_ms=5000), endpoints, archive)
    assert report.passed, lines
    assert [r.endpoint for r in report.results] == ["triton-mme", "triton-single"]
    assert all(len(r.latencies_ms) == 2 for r in report.results)
    # 2 refused + 1 checked + 2 timed, every one routed with TargetModel to the endpoint's invocations.
    calls = endpoints["triton-mme"].calls
    assert len(calls) == 5
    assert {c["target"] for c in calls} == {"add_sub.tar.gz"}
    assert {c["path"] for c in calls} == {"/endpoints/dev-triton-mme/invocations"}
    assert report.summary().startswith("dev smoke PASSED: 2/2 models on 2 endpoint(s), slowest call ")


def test_a_latency_bound_real_calls_cannot_meet_fails_the_stage(endpoints, archive):
    report, lines = _run(_plan(bound_ms=0.001), endpoints, archive)
    assert not report.passed
    assert all(line.startswith("FAIL ") and "above the 0 ms bound" in line for line in lines)


def test_a_model_the_endpoint_does_not_serve_fails_the_stage(endpoints, archive):
    plan = SmokePlan(
        "dev",
        timed_calls=1,
        attempts=2,
        endpoints=[EndpointCheck("triton-mme", "dev-triton-mme", 5000, [ModelCheck("add_sub", "k", "missing.tar.gz")])],
    )
    report, lines = _run(plan, endpoints, archive)
    assert not report.passed
    assert lines[0].startswith("FAIL triton-mme add_sub: not timed: model 'missing.tar.gz on endpoint dev-triton-mme'")
