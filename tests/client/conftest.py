"""Fixtures of the client and local-endpoint tests: SageMaker's runtime front in front of a local Triton.

The real CPU Triton endpoints (`triton_env`, `add_sub_archive`, `single_endpoint`, `multi_endpoint`) are
session fixtures of tests/conftest.py, shared with the pipeline's smoke tests; the front itself,
FakeSageMakerRuntime, is in tests/fakes.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fakes import FakeSageMakerRuntime


@pytest.fixture
def fake_sagemaker_runtime() -> Iterator[Callable[[str], FakeSageMakerRuntime]]:
    """Factory: `fake_sagemaker_runtime(backend_url)` -> a started front, shut down after the test."""
    started: list[FakeSageMakerRuntime] = []

    def start(backend_url: str) -> FakeSageMakerRuntime:
        front = FakeSageMakerRuntime(backend_url).__enter__()
        started.append(front)
        return front

    try:
        yield start
    finally:
        for front in started:
            front.__exit__(None, None, None)
