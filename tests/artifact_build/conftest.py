"""Fixtures of the build tests: a moto_server on 127.0.0.1 for S3/KMS, the handler module, configs."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import uuid

import boto3
import pytest
from build_helpers import (
    HANDLER_PATH,
    PROJECT_ROOT,
    SHARED,
    fleet_document,
    mixed_document,
    promote_documents,
    stage_stacks,
    write_configs,
)
from synth_helpers import Synthesized, synthesize_built

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_endpoint(moto_server_url: str) -> str:
    """The session's moto_server (tests/conftest.py)."""
    return moto_server_url


@pytest.fixture
def aws_env(moto_endpoint, monkeypatch):
    """Dummy credentials and every boto3 client pointed at moto_server (AWS_ENDPOINT_URL)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return moto_endpoint


@pytest.fixture
def s3(aws_env):
    return boto3.client("s3", region_name=REGION)


@pytest.fixture
def kms_key_arn(aws_env):
    return boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]


@pytest.fixture
def make_bucket(s3):
    def make(prefix: str = "artifacts") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(Bucket=name)
        return name

    return make


@pytest.fixture
def handler():
    """The ensure-artifact handler's index.py, loaded by path (a handler folder, not a package)."""
    spec = importlib.util.spec_from_file_location("ensure_artifact_index", HANDLER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# Synthesized apps


@pytest.fixture(scope="session")
def dev_synth(dev_app: Synthesized) -> Synthesized:
    """The shipped dev app (tests/conftest.py `dev_app`, one synth for every area), its stacks under
    "stage" as the variants' are under their names."""
    return dataclasses.replace(dev_app, stacks={"stage": dev_app.stacks})


@pytest.fixture(scope="session")
def variants_synth(tmp_path_factory) -> Synthesized:
    """mixed, fleet and promote (source + promoting stage) in one app: one synth for all."""
    from stage_config import load_config

    folder = write_configs(tmp_path_factory.mktemp("configs"), mixed_document(), fleet_document(), *promote_documents())

    def build(app):
        stacks = {}
        for stage in ("mixed", "fleet", "dev2", "prod2"):
            # mixed's local sources are ../shared test data: allow that root beside the project's.
            config = load_config(folder / f"{stage}.yaml", source_roots=(PROJECT_ROOT, SHARED))
            stacks.update(stage_stacks(app, config, folder))
        return stacks

    return synthesize_built(build, tmp_path_factory.mktemp("variants"))
