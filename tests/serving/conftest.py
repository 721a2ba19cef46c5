"""Synthesized apps for the serving tests: each app is synthesized once per session.

`dev` and `prod` are the shipped configs, from the session-wide `dev_stage` / `prod_stage`
fixtures (tests/conftest.py: create_app with cdk.json's context, shared by every test area);
`custom` is one purpose-built config whose endpoints cover what the defaults do not (see
serving_helpers.CUSTOM_ENDPOINTS).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from serving_helpers import Synthesized, custom_document, read_assembly, synthesize, write_config

from triton_cdk.config import load_config, load_stage


@pytest.fixture(scope="session")
def dev(dev_stage) -> Synthesized:
    _, stacks, assembly = dev_stage
    return read_assembly(load_stage("dev"), stacks, assembly)


@pytest.fixture(scope="session")
def prod(prod_stage) -> Synthesized:
    _, stacks, assembly = prod_stage
    return read_assembly(load_stage("prod"), stacks, assembly)


@pytest.fixture(scope="session")
def custom(tmp_path_factory) -> Synthesized:
    config = load_config(write_config(tmp_path_factory.mktemp("custom-config"), custom_document()))
    return synthesize(config, tmp_path_factory.mktemp("custom"))
