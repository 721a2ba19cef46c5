"""Fixtures of the pipeline tests: the pipeline app synthesized once per session per configuration
(two: the repository's configs with promotion set up, and a cross-account promotion with a prod
wave and a CodeCommit source).
"""

from __future__ import annotations

import pytest
from pipeline_helpers import (
    SynthesizedPipeline,
    cross_account_documents,
    promoted_documents,
    synthesize,
    write_documents,
)


@pytest.fixture(scope="session")
def default_pipeline(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPipeline:
    """config/pipeline.yaml with the repository's dev/prod configs, promotion set up (same account)."""
    return synthesize(write_documents(tmp_path_factory.mktemp("default-config"), promoted_documents()).parent)


@pytest.fixture(scope="session")
def cross_account_pipeline(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPipeline:
    return synthesize(write_documents(tmp_path_factory.mktemp("cross-account"), cross_account_documents()).parent)
