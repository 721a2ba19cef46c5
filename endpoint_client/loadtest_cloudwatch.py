"""SageMaker's own latency figures for a load test's windows, from CloudWatch (GetMetricData).

`ModelLatency` (the container's time, as SageMaker sees it) and `OverheadLatency` (SageMaker's own time) are in
namespace `AWS/SageMaker`, in microseconds, per minute (../shared/README.md, "Metrics"); a variant's carry the
dimensions EndpointName and VariantName, an inference component's InferenceComponentName only
(triton_cdk/serving/inference_components.py). A level's window is widened to whole minutes and queried as one
period, so a level shorter than a minute shares its minute with its neighbours: give `--duration 60` or more
for figures of one level each. SageMaker publishes them a minute or more late (hence `--cloudwatch-delay`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

NAMESPACE = "AWS/SageMaker"
METRICS = ("ModelLatency", "OverheadLatency")
# GetMetricData Stat names; the query ids must match ^[a-z][a-zA-Z0-9_]*$ (CloudWatch API reference).
STATS = {"avg": "Average", "p50": "p50", "p90": "p90", "p99": "p99", "max": "Maximum", "samples": "SampleCount"}
PERIOD_UNIT = 60  # standard-resolution metrics: periods are multiples of 60 s


def minute_window(start: float, seconds: float) -> tuple[dt.datetime, dt.datetime]:
    """[start, start + seconds] widened to whole minutes (UTC)."""
    first = int(start // PERIOD_UNIT) * PERIOD_UNIT
    last = -(-int(start + seconds) // PERIOD_UNIT) * PERIOD_UNIT
    last = max(last, first + PERIOD_UNIT)
    as_time = dt.datetime.fromtimestamp
    return as_time(first, dt.UTC), as_time(last, dt.UTC)


def dimensions(endpoint: str, variant: str, inference_component: str | None) -> list[dict[str, str]]:
    if inference_component:
        return [{"Name": "InferenceComponentName", "Value": inference_component}]
    return [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": variant}]


def queries(dims: list[dict[str, str]], period: int) -> list[dict[str, Any]]:
    found = []
    for metric in METRICS:
        for key, stat in STATS.items():
            found.append(
                {
                    "Id": f"{metric.lower()}_{key}",
                    "MetricStat": {
                        "Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": dims},
                        "Period": period,
                        "Stat": stat,
                    },
                    "ReturnData": True,
                }
            )
    return found


def latency_for_window(
    client: Any, *, endpoint: str, variant: str, inference_component: str | None, start: float, seconds: float
) -> dict[str, Any]:
    """{"window": [ISO, ISO], "ModelLatency": {"avg", "p50", "p90", "p99", "max" in ms, "samples"}, ...};
    a statistic without a datapoint is None (not published yet, or no traffic)."""
    first, last = minute_window(start, seconds)
    period = int((last - first).total_seconds())
    reply = client.get_metric_data(
        MetricDataQueries=queries(dimensions(endpoint, variant, inference_component), period),
        StartTime=first,
        EndTime=last,
        ScanBy="TimestampAscending",
    )
    values = {result["Id"]: result.get("Values") or [] for result in reply.get("MetricDataResults", [])}
    found: dict[str, Any] = {"window": [first.isoformat(), last.isoformat()]}
    for metric in METRICS:
        stats: dict[str, float | None] = {}
        for key in STATS:
            points = values.get(f"{metric.lower()}_{key}") or []
            if not points:
                stats[key] = None
            elif key == "samples":
                stats[key] = float(points[0])
            else:
                stats[key] = round(float(points[0]) / 1000.0, 3)  # microseconds -> ms
        found[metric] = stats
    return found


def cloudwatch_figures(
    make_client: Any, windows: list[tuple[float, float]], *, endpoint: str, variant: str, component: str | None
) -> list[dict[str, Any]]:
    """One entry per (start, seconds) window; a failure (no credentials, access denied) is an {"error"} entry
    for every window instead of failing the run: the client-side figures stand on their own."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client = make_client()
        return [
            latency_for_window(
                client, endpoint=endpoint, variant=variant, inference_component=component, start=s, seconds=n
            )
            for s, n in windows
        ]
    except (BotoCoreError, ClientError) as error:
        return [{"error": f"GetMetricData failed: {error}"} for _ in windows]
