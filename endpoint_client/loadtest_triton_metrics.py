"""Queue vs compute time per load level, read from a local Triton's Prometheus metrics (issue #26 part 3).

Triton's request metrics (triton-inference-server/server `docs/user_guide/metrics.md`, "Inference Request
Metrics"), per model and version (summed here over versions and, for failures, reasons; 2.51 also labels the
repository `namespace`), updated per request (not on the --metrics-interval-ms timer, so a scrape right after a
level is exact): `nv_inference_request_success` / `_failure` (each request counts 1, whatever its batch),
and the cumulative microseconds `nv_inference_request_duration_us` (end to end in Triton),
`nv_inference_queue_duration_us` (waiting in the scheduling queue) and `nv_inference_compute_infer_duration_us`
(executing the model). The difference of two scrapes divided by the requests in between gives the mean per request
of that level: queue time growing while compute stays flat says the model's instances are saturated.

Only the local endpoint's metrics (`LocalEndpoint.metrics_url`, 127.0.0.1) are read: SageMaker's container metrics
are not reachable from a client (docs/serving.md "Triton's own metrics").
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

SUCCESS = "nv_inference_request_success"
FAILURE = "nv_inference_request_failure"
REQUEST_US = "nv_inference_request_duration_us"
QUEUE_US = "nv_inference_queue_duration_us"
COMPUTE_INFER_US = "nv_inference_compute_infer_duration_us"
COUNTERS = (SUCCESS, FAILURE, REQUEST_US, QUEUE_US, COMPUTE_INFER_US)
MAX_SCRAPE_BYTES = 16 * 2**20  # a metrics page of thousands of models stays far below

# Prometheus text exposition format: name{label="value",...} value [timestamp]
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


class MetricsUnavailable(Exception):
    """The metrics URL did not answer with a metrics page."""


def per_model(text: str) -> dict[str, dict[str, float]]:
    """{model: {counter: value}} for COUNTERS, summed over the model's versions; other lines are skipped."""
    models: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if not match or match["name"] not in COUNTERS:
            continue
        labels = dict(_LABEL.findall(match["labels"] or ""))
        try:
            value = float(match["value"])
        except ValueError:
            continue
        if "model" in labels and math.isfinite(value):
            counters = models.setdefault(labels["model"], dict.fromkeys(COUNTERS, 0.0))
            counters[match["name"]] += value
    return models


def scrape(url: str, timeout: float = 5.0) -> dict[str, dict[str, float]]:
    """The per-model counters of a metrics page on loopback (the local endpoint's only)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise MetricsUnavailable(f"{url}: only a local endpoint's metrics (on loopback) are read")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            body = reply.read(MAX_SCRAPE_BYTES + 1)
    except (urllib.error.URLError, OSError) as error:
        raise MetricsUnavailable(f"{url}: {getattr(error, 'reason', error)}") from None
    if len(body) > MAX_SCRAPE_BYTES:
        raise MetricsUnavailable(f"{url}: over {MAX_SCRAPE_BYTES} bytes; not a Triton metrics page")
    return per_model(body.decode("utf-8", "replace"))


@dataclass(frozen=True)
class QueueCompute:
    """One model over one level: requests Triton finished and mean microseconds per request."""

    model: str
    requests: int
    failures: int
    request_us: float
    queue_us: float
    compute_infer_us: float

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "model": self.model,
            "requests": self.requests,
            "failures": self.failures,
            "request_us_per_request": round(self.request_us, 1),
            "queue_us_per_request": round(self.queue_us, 1),
            "compute_infer_us_per_request": round(self.compute_infer_us, 1),
        }


def level_delta(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> list[QueueCompute]:
    """Per model that served requests between the two scrapes (ensembles list their steps as models too)."""
    rows = []
    for model in sorted(after):
        start = before.get(model, dict.fromkeys(COUNTERS, 0.0))
        change = {name: after[model][name] - start[name] for name in COUNTERS}
        requests = round(change[SUCCESS] + change[FAILURE])
        if requests <= 0:
            continue
        rows.append(
            QueueCompute(
                model=model,
                requests=requests,
                failures=round(change[FAILURE]),
                request_us=change[REQUEST_US] / requests,
                queue_us=change[QUEUE_US] / requests,
                compute_infer_us=change[COMPUTE_INFER_US] / requests,
            )
        )
    return rows


class ScrapingTarget:
    """A load-test target (loadtest.Target) that scrapes Triton's metrics when each level opens its connections and
    when the run closes: the levels run one after the other and each waits for its last reply, so the difference of
    consecutive scrapes is one level's requests (its warm-up included)."""

    def __init__(self, target: Any, url: str) -> None:
        self.kind = target.kind
        self.url = url
        self._target = target
        self.scrapes: list[dict[str, dict[str, float]] | str] = []  # a scrape, or why it failed

    async def _scrape(self) -> None:
        try:
            self.scrapes.append(await asyncio.to_thread(scrape, self.url))
        except MetricsUnavailable as error:
            self.scrapes.append(str(error))

    async def open(self, connections: int) -> None:
        await self._scrape()
        await self._target.open(connections)

    async def send(self) -> str | None:
        return await self._target.send()

    async def close(self) -> None:
        try:
            if self.scrapes:
                await self._scrape()
        finally:
            await self._target.close()

    def per_level(self) -> list[list[dict[str, Any]] | dict[str, str]]:
        """Per level: a row per model that served requests (QueueCompute.as_dict), or {"error": why}."""
        levels: list[list[dict[str, Any]] | dict[str, str]] = []
        for before, after in itertools.pairwise(self.scrapes):
            if isinstance(before, str) or isinstance(after, str):
                levels.append({"error": before if isinstance(before, str) else str(after)})
            else:
                levels.append([row.as_dict() for row in level_delta(before, after)])
        return levels


def metrics_url(text: str) -> str:
    """`--triton-metrics`: http://HOST:PORT[/metrics] on loopback (what `python -m endpoint_client local` prints)."""
    from endpoint_client.loadtest_cli import loopback_url

    base = text[: -len("/metrics")] if text.endswith("/metrics") else text
    return loopback_url(base) + "/metrics"


def table(levels: list[dict[str, Any]]) -> str:
    """Queue vs compute per level and model, in microseconds per request (Triton's own clocks)."""
    lines = [f"{'level':>16} {'model':>24} {'requests':>9} {'queue us':>10} {'compute us':>11} {'in Triton us':>13}"]
    for level in levels:
        closed = level["concurrency"] is not None
        label = f"concurrency {level['concurrency']}" if closed else f"rate {level['rate']:g}/s"
        figures = level.get("triton_metrics")
        if isinstance(figures, dict):
            lines.append(f"{label:>16} Triton metrics: {figures['error']}")
            continue
        for row in figures or []:
            lines.append(
                f"{label:>16} {row['model'][:24]:>24} {row['requests']:>9} {row['queue_us_per_request']:>10.0f} "
                f"{row['compute_infer_us_per_request']:>11.0f} {row['request_us_per_request']:>13.0f}"
            )
    return "\n".join(lines)
