"""Session-wide test settings shared by every area."""

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from synth_helpers import CONFIG_DIR, SHIPPED_CONFIG_DIR, Synthesized, synth_pipeline, synth_stage

from endpoint_client.errors import LocalEndpointError
from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.triton_install import TritonInstall
from model_build.package import write_model_archive

# jsii prints an end-of-life banner on Node 20 unless told not to; set before aws_cdk loads.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = PROJECT_ROOT.parent / "shared"


def pytest_configure(config: pytest.Config) -> None:
    # `pytest --collect-only` runs no test, so syrupy would report every snapshot as unused and exit 1.
    if config.option.collectonly:
        config.option.warn_unused_snapshots = True


# The files that take longest (>= ~10 s each on 2 workers; bench/README.md "make test"), slowest first. pytest-xdist
# (`--dist loadfile --no-loadscope-reorder`, Makefile) hands files to whichever worker is free in collection order,
# so these go first and the small files fill in at the end: the workers finish together instead of one running the
# last long file alone. Only the order changes; a file not listed runs after them, in its usual place.
SLOW_FILES_FIRST = (
    "tests/contract/test_api_constraints.py",  # synthesizes every shipped configuration with every check
    "tests/artifact_build/test_build_buildspec_run.py",
    "tests/contract/test_guard_rules.py",
    "tests/foundation/test_config_properties.py",
    "tests/client/test_image_example.py",
    "tests/client/test_client_local_endpoint.py",
    "tests/client/test_build_report_triton.py",
    "tests/foundation/test_doc_commands.py",
    "tests/model_build/test_python_env.py",
    "tests/contract/test_cfn_lint.py",
    "tests/client/test_local_endpoint_attacker.py",
    "tests/foundation/test_role_policy_size.py",
    "tests/client/test_loadtest.py",
    "tests/foundation/test_config_file_refusals.py",
    "tests/contract/test_deploy_rules.py",
    "tests/pipeline/test_pipeline_stack.py",
    "tests/artifact_build/test_build_handler.py",
    "tests/pipeline/test_pipeline_environment.py",
    "tests/foundation/test_stage_without_pipeline.py",
    "tests/client/test_build_report_check_review.py",
    "tests/foundation/test_app_entrypoint.py",
    "tests/pipeline/test_performance_gate.py",
    "tests/artifact_build/test_build_stack.py",
    "tests/foundation/test_cdk_cli_synth.py",
    "tests/foundation/test_user_filled_config.py",
)


def _usable_cores() -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota (a container limited with
    `--cpus` still sees every core of its host in its affinity)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # not macOS
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return cores
    return min(cores, max(1, -(-int(quota) // int(period)))) if quota.isdigit() and period.isdigit() else cores


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (the Makefile's default): one worker per usable core, plus one. About a fifth of the time a worker
    waits on a process (Triton starting and stopping, a Python backend's stub) with its core idle; the extra worker
    fills it (bench/README.md, make test: on 2 cores, 3 workers took about 6 minutes where 2 took about 7, and 4
    were slower again). PYTEST_XDIST_AUTO_NUM_WORKERS still decides where it is set, and `-n logical` is
    pytest-xdist's own."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.option.numprocesses != "auto":
        return None
    return _usable_cores() + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of SLOW_FILES_FIRST first, in its order; every other test keeps its place after them."""
    missing = [path for path in SLOW_FILES_FIRST if not (PROJECT_ROOT / path).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py SLOW_FILES_FIRST names files that do not exist: {missing}")
    rank = {path: index for index, path in enumerate(SLOW_FILES_FIRST)}

    def place(item: pytest.Item) -> int:
        path = Path(item.path)
        return (
            rank.get(path.relative_to(PROJECT_ROOT).as_posix(), len(rank))
            if path.is_relative_to(PROJECT_ROOT)
            else len(rank)
        )

    items.sort(key=place)  # stable: the usual order within a file and among the files not listed


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared test material not found at {SHARED_DIR} (CI clones it beside the project)")
    return SHARED_DIR


@pytest.fixture
def shipped_checkout(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder is a checkout whose config/ is as shipped (tests/shipped_config/): relative paths such as
    `config/dev.yaml` and the CLIs' default `--config-dir config` name the shipped copy, whatever the user has
    put in the project's own config/. Returns that config folder (synth_helpers.SHIPPED_CONFIG_DIR)."""
    monkeypatch.chdir(SHIPPED_CONFIG_DIR.parent)
    return SHIPPED_CONFIG_DIR


# ---------------------------------------------------------------------------------------------------------
# Synthesized apps: one synth per app per session, shared by every area (tests/synth_helpers.py).


@pytest.fixture(scope="session")
def dev_app() -> Synthesized:
    """config/dev.yaml's stage app, as `make synth` writes cdk.out/."""
    return synth_stage("dev", checks=False)  # checked once: tests/contract shipped_assemblies


@pytest.fixture(scope="session")
def prod_app() -> Synthesized:
    """config/prod.yaml's stage app (promotes from dev), as `make synth STAGE=prod` writes it."""
    return synth_stage("prod", checks=False)


@pytest.fixture(scope="session")
def pipeline_app() -> Synthesized:
    """config/pipeline.yaml's app (`make synth-pipeline`): the pipeline stack, its stages nested."""
    return synth_pipeline(CONFIG_DIR, checks=False)


# ---------------------------------------------------------------------------------------------------------
# The real CPU Triton (nvidia-pytriton's tritonserver in .venv-triton, made by `make .venv-triton/.stamp`,
# which `make test` runs first), started once per session per mode on a free loopback port, always stopped
# in the fixture's `finally`, also when a test fails. Used by tests/client and the pipeline's smoke tests.

TRITON_ENV = PROJECT_ROOT / ".venv-triton"
EXAMPLE_MODEL = PROJECT_ROOT / "examples" / "models" / "add_sub"
QUIET = {"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}  # as the CDK model sets it by default


@pytest.fixture(scope="session")
def triton_env() -> Path:
    try:
        TritonInstall.find(TRITON_ENV)
    except LocalEndpointError as error:
        pytest.skip(f"no CPU Triton: {error}")
    return TRITON_ENV


@pytest.fixture(scope="session")
def add_sub_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example model packaged by model_build's packager: what the local endpoint serves."""
    archive = tmp_path_factory.mktemp("package") / "model.tar.gz"
    write_model_archive(EXAMPLE_MODEL, archive)
    return archive


def _started(endpoint: LocalEndpoint) -> Iterator[LocalEndpoint]:
    try:
        endpoint.start()
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture(scope="session")
def single_endpoint(
    triton_env: Path, add_sub_archive: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalEndpoint]:
    endpoint = LocalEndpoint(
        add_sub_archive,
        environment={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "add_sub", **QUIET},
        triton_env=triton_env,
        workdir=tmp_path_factory.mktemp("single-endpoint"),
        startup_timeout=60,
    )
    yield from _started(endpoint)


@pytest.fixture(scope="session")
def multi_endpoint(triton_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    endpoint = LocalEndpoint(
        environment=QUIET,
        multi_model=True,
        triton_env=triton_env,
        workdir=tmp_path_factory.mktemp("multi-endpoint"),
        startup_timeout=60,
    )
    yield from _started(endpoint)


@pytest.fixture(scope="session")
def moto_server_url() -> Iterator[str]:
    """One real moto_server (S3, KMS, ...) for the session, on 127.0.0.1 and a free port; always stopped.

    Tests share it: each makes its own uniquely named buckets.
    """
    from endpoint_client.local_endpoint import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start on {url}") from None
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
