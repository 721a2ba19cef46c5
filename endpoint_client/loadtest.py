"""The load generator behind `python -m endpoint_client loadtest`: closed-loop concurrency levels and open-loop
Poisson rates against a local endpoint, its Triton, or a SageMaker endpoint.

Why asyncio + aiohttp rather than threads: a closed-loop level of C users is C coroutines each awaiting its
reply, and an open-loop rate is one scheduler that starts a coroutine per arrival without waiting for earlier
replies; the event loop multiplexes all of them on one thread with keep-alive connections (aiohttp's pooled
connector), so the generator's cost per request is a few tens of microseconds and does not grow with the
concurrency (measured: bench/loadtest_ceiling.py, bench/README.md). A thread per user would pay a context switch
and the GIL per request, and urllib (the `invoke` path) opens a connection per request. aiohttp is the asyncio
HTTP client with the longest record (aio-libs, since 2014), pinned in requirements.txt.

SageMaker endpoints go through `invoke`'s own request code (SageMakerTransport.send: boto3's sagemaker-runtime
client, SigV4-signed, the same errors): botocore is synchronous, so those calls run in asyncio's executor, a
thread pool as wide as the level, with botocore's connection pool as wide and its retries off (a throttled
request is a measured error, not a hidden retry). Local targets send the body `invoke` would send
(codec.encode_request) to the route and headers LocalTransport uses; each run starts with one request through
EndpointClient.invoke itself, whose reply is decoded, so a model that refuses the inputs stops the run with its
own message before any load is sent.

Always stops by itself: every level ends at its warm-up plus duration (replies still on the way get at most the
request timeout), a run is capped in requests (`max_requests`) and its planned time is capped (MAX_RUN_SECONDS);
the CLI refuses plans beyond the caps below.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from endpoint_client.codec import EncodedRequest
from endpoint_client.errors import EndpointClientError, EndpointError
from endpoint_client.limits import INVOCATION_TIMEOUT_SECONDS, MAX_PAYLOAD_BYTES
from endpoint_client.transport import local_route

# Hard caps (the CLI refuses anything above them; a run always ends by itself).
MAX_CONCURRENCY = 1024  # users in one closed-loop level
MAX_LEVELS = 32
MAX_RATE = 10_000.0  # requests per second of one open-loop level (well above the generator's own ceiling)
MAX_LEVEL_SECONDS = 3600.0  # --duration
MAX_WARMUP_SECONDS = 600.0
MAX_RUN_SECONDS = 6 * 3600.0  # levels x (warm-up + duration)
DEFAULT_MAX_REQUESTS = 1_000_000
HARD_MAX_REQUESTS = 100_000_000
DEFAULT_MAX_IN_FLIGHT = 1024  # open loop: arrivals beyond this many unanswered requests are counted, not sent

# Error keys that are not HTTP statuses.
TIMEOUT = "timeout"
UNREACHABLE = "unreachable"
IN_FLIGHT_CAP = "client-in-flight-cap"
REPLY_TOO_LARGE = "reply-too-large"


class Target(Protocol):
    kind: str  # "local", "triton" or "sagemaker"

    async def open(self, connections: int) -> None: ...

    async def send(self) -> str | None:
        """One request; None when the reply is 200, else the error key (an HTTP status or a word above)."""
        ...

    async def close(self) -> None: ...


class HttpTarget:
    """POST one prepared body over aiohttp's pooled keep-alive connections."""

    def __init__(self, kind: str, url: str, body: bytes, headers: dict[str, str], timeout: float) -> None:
        self.kind = kind
        self.url = url
        self.body = body
        self.headers = headers
        self.timeout = timeout
        self._session: Any = None

    async def open(self, connections: int) -> None:
        import aiohttp

        await self.close()
        connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout), auto_decompress=False
        )

    async def send(self) -> str | None:
        import aiohttp

        try:
            async with self._session.post(self.url, data=self.body, headers=self.headers) as response:
                if response.content_length is not None and response.content_length > MAX_PAYLOAD_BYTES:
                    return REPLY_TOO_LARGE
                await response.read()
                return None if response.status == 200 else str(response.status)
        except TimeoutError:
            return TIMEOUT
        except (aiohttp.ClientError, OSError):
            return UNREACHABLE

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


def local_target(
    url: str,
    request: EncodedRequest,
    *,
    target_model: str | None = None,
    inference_component: str | None = None,
    timeout: float = INVOCATION_TIMEOUT_SECONDS,
) -> HttpTarget:
    """The route and headers of LocalTransport.send (transport.py) for a local endpoint's SageMaker API."""
    path, routing = local_route(target_model, inference_component)
    headers = {"Content-Type": request.content_type, **routing}
    return HttpTarget("local", url.rstrip("/") + path, request.body, headers, timeout)


def triton_target(url: str, model: str, request: EncodedRequest, *, timeout: float) -> HttpTarget:
    """Triton's own KServe route (`POST /v2/models/<model>/infer`), the same body: the binary+json body's JSON
    header length travels as `Inference-Header-Content-Length` (Triton's binary tensor extension) instead of in
    the SageMaker Content-Type. For measuring what the local endpoint's front adds."""
    import urllib.parse

    from endpoint_client.codec import header_length

    headers = {"Content-Type": "application/octet-stream"}
    size = header_length(request.content_type)
    if size is None:
        headers["Content-Type"] = "application/json"
    else:
        headers["Inference-Header-Content-Length"] = str(size)
    path = f"/v2/models/{urllib.parse.quote(model, safe='')}/infer"
    return HttpTarget("triton", url.rstrip("/") + path, request.body, headers, timeout)


class SageMakerTarget:
    """InvokeEndpoint through `invoke`'s SageMakerTransport, in asyncio's executor (botocore blocks)."""

    kind = "sagemaker"

    def __init__(
        self,
        make_transport: Callable[[int], Any],
        request: EncodedRequest,
        *,
        target_model: str | None = None,
        inference_component: str | None = None,
    ) -> None:
        self.make_transport = make_transport  # connections -> SageMakerTransport with a pool that wide
        self.request = request
        self.target_model = target_model
        self.component = {"inference_component": inference_component} if inference_component else {}
        self._executor: ThreadPoolExecutor | None = None
        self._transport: Any = None

    async def open(self, connections: int) -> None:
        await self.close()
        self._transport = self.make_transport(connections)
        self._executor = ThreadPoolExecutor(max_workers=connections, thread_name_prefix="loadtest")

    def _send(self) -> str | None:
        try:
            self._transport.send(self.request, target_model=self.target_model, **self.component)
        except EndpointError as error:
            if error.status or error.code:
                return str(error.status) if error.status else str(error.code)
            # no answer at all (botocore's connection and read errors, as SageMakerTransport words them)
            return TIMEOUT if "timeout" in error.server_message.lower() else UNREACHABLE
        except EndpointClientError:
            return "client-error"
        return None

    async def send(self) -> str | None:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._send)

    async def close(self) -> None:
        if self._executor is not None:
            executor, self._executor = self._executor, None
            executor.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class Level:
    """One step of a run: `concurrency` users in a closed loop, or Poisson arrivals at `rate` per second."""

    concurrency: int | None = None
    rate: float | None = None

    def label(self) -> str:
        return f"concurrency {self.concurrency}" if self.concurrency is not None else f"rate {self.rate:g}/s"


@dataclass(frozen=True)
class Plan:
    levels: tuple[Level, ...]
    duration: float
    warmup: float
    max_requests: int = DEFAULT_MAX_REQUESTS
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    seed: int = 0

    def problems(self) -> list[str]:
        """Every cap the plan breaks (the CLI's types refuse most of these first)."""
        found = []
        if not 1 <= len(self.levels) <= MAX_LEVELS:
            found.append(f"{len(self.levels)} levels: give 1-{MAX_LEVELS}")
        for level in self.levels:
            if level.concurrency is not None and not 1 <= level.concurrency <= MAX_CONCURRENCY:
                found.append(f"concurrency {level.concurrency}: 1-{MAX_CONCURRENCY}")
            if level.rate is not None and not (math.isfinite(level.rate) and 0 < level.rate <= MAX_RATE):
                found.append(f"rate {level.rate}: above 0, at most {MAX_RATE:g} requests/s")
        if not (math.isfinite(self.duration) and 0 < self.duration <= MAX_LEVEL_SECONDS):
            found.append(f"duration {self.duration}: above 0, at most {MAX_LEVEL_SECONDS:g} s")
        if not (math.isfinite(self.warmup) and 0 <= self.warmup <= MAX_WARMUP_SECONDS):
            found.append(f"warm-up {self.warmup}: 0-{MAX_WARMUP_SECONDS:g} s")
        planned = len(self.levels) * (self.duration + self.warmup)
        if math.isfinite(planned) and planned > MAX_RUN_SECONDS:
            found.append(f"{planned:g} s planned in all: at most {MAX_RUN_SECONDS:g} s")
        if not 1 <= self.max_requests <= HARD_MAX_REQUESTS:
            found.append(f"max requests {self.max_requests}: 1-{HARD_MAX_REQUESTS}")
        if not 1 <= self.max_in_flight <= MAX_CONCURRENCY:
            found.append(f"max in flight {self.max_in_flight}: 1-{MAX_CONCURRENCY}")
        return found

    def connections(self, level: Level) -> int:
        return level.concurrency if level.concurrency is not None else self.max_in_flight


@dataclass
class Measured:
    """What one level measured: requests started inside its window (after the warm-up)."""

    level: Level
    window_start: float  # time.time() of the window's start (CloudWatch's query window)
    window_seconds: float
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests only
    errors: Counter[str] = field(default_factory=Counter)
    stopped_by: str | None = None  # "max-requests" when the run's request cap ended the level early

    @property
    def requests(self) -> int:
        return len(self.latencies) + sum(self.errors.values())


class _Budget:
    def __init__(self, total: int) -> None:
        self.left = total

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


Progress = Callable[[Measured, float, float], None]  # (so far, seconds into the window, window length)


async def run_plan(target: Target, plan: Plan, progress: Progress | None = None) -> list[Measured]:
    problems = plan.problems()
    if problems:
        raise EndpointClientError("load test plan refused: " + "; ".join(problems))
    budget = _Budget(plan.max_requests)
    rng = random.Random(plan.seed)
    results = []
    try:
        for level in plan.levels:
            await target.open(plan.connections(level))
            results.append(await _run_level(target, level, plan, budget, rng, progress))
            if results[-1].stopped_by:
                break
    finally:
        await target.close()
    return results


async def _run_level(
    target: Target, level: Level, plan: Plan, budget: _Budget, rng: random.Random, progress: Progress | None
) -> Measured:
    clock = time.perf_counter
    begin = clock()
    window_start, window_end = begin + plan.warmup, begin + plan.warmup + plan.duration
    measured = Measured(level, time.time() + plan.warmup, plan.duration)
    stop = asyncio.Event()

    def out_of_budget() -> bool:
        if budget.take():
            return False
        if not stop.is_set():
            stop.set()
            measured.stopped_by = "max-requests"
            measured.window_seconds = max(clock() - window_start, 0.0)
        return True

    def record(started: float, error: str | None, finished: float) -> None:
        if window_start <= started < window_end:
            if error is None:
                measured.latencies.append(finished - started)
            else:
                measured.errors[error] += 1

    async def user() -> None:
        while not stop.is_set() and clock() < window_end and not out_of_budget():
            started = clock()
            error = await target.send()
            record(started, error, clock())

    async def one(scheduled: float) -> None:
        error = await target.send()
        record(scheduled, error, clock())  # from the planned arrival: a late start counts (no coordinated omission)

    async def arrivals(rate: float) -> None:
        in_flight: set[asyncio.Task] = set()
        planned = begin
        while not stop.is_set():
            planned += rng.expovariate(rate)
            if planned >= window_end:
                break
            delay = planned - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            if out_of_budget():
                break
            if len(in_flight) >= plan.max_in_flight:
                record(planned, IN_FLIGHT_CAP, planned)
                continue
            task = asyncio.create_task(one(planned))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        if in_flight:
            await asyncio.gather(*in_flight)

    async def report() -> None:
        while True:
            await asyncio.sleep(1.0)
            if progress is not None:
                progress(measured, clock() - window_start, plan.duration)

    reporter = asyncio.create_task(report())
    try:
        if level.concurrency is not None:
            await asyncio.gather(*(user() for _ in range(level.concurrency)))
        else:
            await arrivals(float(level.rate or 0))
    finally:
        reporter.cancel()
    if progress is not None:
        progress(measured, plan.duration, plan.duration)
    return measured


def percentiles(latencies: list[float]) -> dict[str, float | None]:
    """Client latency in milliseconds: nearest-rank percentiles (numpy's `inverted_cdf`: the smallest latency
    at or above the fraction of requests), the maximum and the mean; None when nothing succeeded."""
    if not latencies:
        return dict.fromkeys(("p50", "p90", "p95", "p99", "max", "mean"))
    values = np.asarray(latencies) * 1000.0
    ranks = np.percentile(values, [50, 90, 95, 99], method="inverted_cdf")
    found: dict[str, float | None] = {f"p{q}": round(float(v), 3) for q, v in zip((50, 90, 95, 99), ranks, strict=True)}
    found["max"] = round(float(values.max()), 3)
    found["mean"] = round(float(values.mean()), 3)
    return found


def progress_printer(stream: Any = None, interval: float = 1.0) -> Progress:
    """A live line on a terminal (rewritten in place), or a line every 5 s when stderr is a file or a pipe."""
    stream = stream or sys.stderr
    tty = stream.isatty()
    last = [0.0]

    def show(measured: Measured, elapsed: float, duration: float) -> None:
        now = time.monotonic()
        final = elapsed >= duration
        if not tty and not final and now - last[0] < max(interval, 5.0):
            return
        last[0] = now
        window = max(min(elapsed, duration), 1e-9)
        ok = len(measured.latencies)
        phase = "warm-up" if elapsed < 0 else f"{min(elapsed, duration):5.1f}/{duration:g} s"
        p99 = percentiles(measured.latencies[-20000:])["p99"] if ok else None
        line = (
            f"{measured.level.label()}: {phase}  {ok} ok  {sum(measured.errors.values())} errors  "
            f"{ok / window if elapsed > 0 else 0:.1f} inv/s  p99 {p99 if p99 is not None else '-'} ms"
        )
        if tty:
            stream.write("\r\x1b[K" + line + ("\n" if final else ""))
        else:
            stream.write(line + "\n")
        stream.flush()

    return show
