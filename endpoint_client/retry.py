"""Bounded, jittered retries of ModelNotReadyException.

On a multi-model endpoint the first request for a model makes SageMaker download and load it; until
it is loaded the request answers ModelNotReadyException and loading continues
(../shared/README.md, "GPU multi-model endpoints"). Nothing else is retried: other errors are the
caller's to see at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from endpoint_client.errors import ModelNotReadyError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter").

    attempts: calls in all, the first included. Delay before retry k (1-based) is uniform in
    [0, min(max_delay, base_delay * 2**(k-1))]; the sleep and random source are injectable for tests.
    """

    attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 20.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    uniform: Callable[[float, float], float] = field(default=random.uniform, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError(f"delays must be >= 0, got base_delay={self.base_delay}, max_delay={self.max_delay}")

    def delay(self, retry: int) -> float:
        return self.uniform(0.0, min(self.max_delay, self.base_delay * 2 ** (retry - 1)))

    def call(self, operation: Callable[[], T]) -> T:
        waited = 0.0
        for attempt in range(1, self.attempts + 1):
            try:
                return operation()
            except ModelNotReadyError as error:
                if attempt == self.attempts:
                    raise ModelNotReadyError(
                        error.model,
                        f"{error.server_message} (still not ready after {self.attempts} attempts over "
                        f"{waited:.1f} s; the model may still be loading: retry later or raise --attempts)",
                        status=error.status,
                        code=error.code,
                    ) from error
                pause = self.delay(attempt)
                waited += pause
                self.sleep(pause)
        raise AssertionError("unreachable")  # the loop returns or raises


NO_RETRY = RetryPolicy(attempts=1)
