"""Session-wide test settings shared by every area."""

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

# jsii prints an end-of-life banner on Node 20 unless told not to; set before aws_cdk loads.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = PROJECT_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared test material not found at {SHARED_DIR} (CI clones it beside the project)")
    return SHARED_DIR


@functools.cache
def synth_stage(stage: str):
    """The app for config/<stage>.yaml, synthesized once per test session (with cdk-nag on).

    Returns (app, StageStacks, CloudAssembly); assert on it with Template.from_stack(...).
    """
    from stacks.app_factory import create_app
    from triton_cdk.config import load_stage

    outdir = tempfile.mkdtemp(prefix=f"cdk-{stage}-")
    # The CLI passes cdk.json's context (feature flags); tests must synthesize with the same.
    context = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
    config = load_stage(stage)
    source = load_stage(config.promote_from) if config.promote_from else None
    app, stacks = create_app(config, promotion_source=source, outdir=outdir, context=context)
    return app, stacks, app.synth()


@pytest.fixture(scope="session")
def dev_stage():
    return synth_stage("dev")


@pytest.fixture(scope="session")
def prod_stage():
    return synth_stage("prod")


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
