"""Session-wide test settings shared by every area."""

import functools
import json
import os
import tempfile
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
    app, stacks, _ = create_app(config, promotion_source=source, outdir=outdir, context=context)
    return app, stacks, app.synth()


@pytest.fixture(scope="session")
def dev_stage():
    return synth_stage("dev")


@pytest.fixture(scope="session")
def prod_stage():
    return synth_stage("prod")
