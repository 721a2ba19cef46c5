"""RetryPolicy: only ModelNotReadyException is retried, bounded, with jittered exponential backoff."""

from __future__ import annotations

import pytest

from endpoint_client.errors import EndpointError, ModelNotReadyError
from endpoint_client.retry import RetryPolicy


class Flaky:
    """Raises `error` for the first `failures` calls, then returns "ok"."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


NOT_READY = ModelNotReadyError("resnet50.tar.gz", "Model resnet50.tar.gz is not ready", status=429)


def policy(attempts: int, sleeps: list[float], **options: float) -> RetryPolicy:
    # uniform(low, high) -> high: the longest delay full jitter can pick, to check the cap.
    return RetryPolicy(attempts=attempts, sleep=sleeps.append, uniform=lambda low, high: high, **options)


def test_not_ready_is_retried_until_the_model_answers() -> None:
    sleeps: list[float] = []
    operation = Flaky(3, NOT_READY)

    assert policy(6, sleeps, base_delay=0.5, max_delay=10).call(operation) == "ok"

    assert operation.calls == 4
    assert sleeps == [0.5, 1.0, 2.0]  # exponential upper bounds


def test_backoff_is_capped_by_max_delay() -> None:
    sleeps: list[float] = []

    policy(8, sleeps, base_delay=1, max_delay=5).call(Flaky(7, NOT_READY))

    assert sleeps == [1, 2, 4, 5, 5, 5, 5]


def test_delays_are_jittered_between_zero_and_the_bound() -> None:
    bounds: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        bounds.append((low, high))
        return (low + high) / 2

    sleeps: list[float] = []
    RetryPolicy(attempts=3, base_delay=2, sleep=sleeps.append, uniform=uniform).call(Flaky(2, NOT_READY))

    assert bounds == [(0.0, 2), (0.0, 4)]
    assert sleeps == [1.0, 2.0]


def test_gives_up_after_the_attempts_with_the_model_and_server_message() -> None:
    sleeps: list[float] = []
    operation = Flaky(10, NOT_READY)

    with pytest.raises(ModelNotReadyError) as raised:
        policy(3, sleeps, base_delay=1).call(operation)

    assert operation.calls == 3
    assert len(sleeps) == 2
    assert raised.value.model == "resnet50.tar.gz"
    assert str(raised.value) == (
        "model 'resnet50.tar.gz': HTTP 429: Model resnet50.tar.gz is not ready (still not ready after 3 attempts "
        "over 3.0 s; the model may still be loading: retry later or raise --attempts)"
    )


def test_other_endpoint_errors_are_not_retried() -> None:
    sleeps: list[float] = []
    operation = Flaky(1, EndpointError("add_sub", "batch-size must be <= 8", status=400))

    with pytest.raises(EndpointError, match="batch-size must be <= 8"):
        policy(5, sleeps).call(operation)

    assert operation.calls == 1
    assert sleeps == []


@pytest.mark.parametrize(
    ("options", "message"),
    [({"attempts": 0}, "attempts must be >= 1, got 0"), ({"base_delay": -1}, "delays must be >= 0")],
)
def test_bad_policy_is_refused(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**options)
