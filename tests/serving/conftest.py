"""Synthesized apps for the serving tests: each app is synthesized once per session.

`dev` and `prod` are the shipped configs (tests/conftest.py `dev_app` / `prod_app`, shared by every
area); `custom` is one purpose-built config whose endpoints cover what the defaults do not (see
serving_helpers.CUSTOM_ENDPOINTS), synthesized once for these tests and the contract tests.
"""

from __future__ import annotations

import pytest
from serving_helpers import custom_config_folder
from synth_helpers import Synthesized, synth_stage


@pytest.fixture(scope="session")
def dev(dev_app: Synthesized) -> Synthesized:
    return dev_app


@pytest.fixture(scope="session")
def prod(prod_app: Synthesized) -> Synthesized:
    return prod_app


@pytest.fixture(scope="session")
def custom() -> Synthesized:
    return synth_stage("test", custom_config_folder(), checks=False)  # checked in tests/contract
