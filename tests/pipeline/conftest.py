"""Fixtures of the pipeline tests: the pipeline app synthesized once per session per configuration
(two: the repository's configs with promotion set up, and a cross-account promotion with a prod
wave and a CodeCommit source, which the contract tests check too: one synth for both).
"""

from __future__ import annotations

import pytest
from pipeline_helpers import cross_account_folder, default_pipeline_folder
from synth_helpers import Synthesized, synth_pipeline


@pytest.fixture(scope="session")
def default_pipeline() -> Synthesized:
    """The shipped config/pipeline.yaml with its dev/prod configs (tests/shipped_config/), promotion set up (same
    account); the user's own config/ is the pipeline_app fixture's (tests/conftest.py)."""
    return synth_pipeline(default_pipeline_folder())


@pytest.fixture(scope="session")
def cross_account_pipeline() -> Synthesized:
    return synth_pipeline(cross_account_folder(), checks=False)  # checked in tests/contract
