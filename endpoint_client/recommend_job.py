"""Waiting for Inference Recommender jobs, and what their results propose.

Statuses and result members are botocore's (DescribeInferenceRecommendationsJob: RecommendationJobStatus,
InferenceRecommendations[].Metrics / EndpointConfiguration / ModelConfiguration). The proposal turns a result's
MaxInvocations (requests per minute the instance sustained) into the stage config's autoscaling target
`invocations_per_instance` (SageMakerVariantInvocationsPerInstance, also per minute) times a safety factor, as
SageMaker's "Load testing your auto scaling configuration" guide does (target = max per minute x safety factor,
0.5 recommended).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from endpoint_client.errors import EndpointClientError
from endpoint_client.recommend_request import TUNABLE_VARIABLES

DONE = "COMPLETED"
FAILED = ("FAILED", "STOPPED", "STOPPING", "DELETING", "DELETED")  # no result will come


_sleep = time.sleep
_clock = time.monotonic


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RecommendJobError(EndpointClientError):
    """A job failed, stopped, or did not finish in time."""


@dataclass(frozen=True)
class ResultRow:
    job: str
    instance_type: str
    environment: dict[str, str]
    cost_per_hour: float | None
    cost_per_inference: float | None
    max_invocations: int | None
    model_latency_ms: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "instance_type": self.instance_type,
            "environment": self.environment,
            "cost_per_hour": self.cost_per_hour,
            "cost_per_inference": self.cost_per_inference,
            "max_invocations_per_minute": self.max_invocations,
            "model_latency_ms": self.model_latency_ms,
        }


def wait_for_jobs(
    client: Any,
    names: list[str],
    *,
    poll_seconds: float,
    timeout_seconds: float,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Poll every job until each is COMPLETED; the descriptions by job name. A failed job, or a timeout, raises
    (jobs keep running on SageMaker after a timeout: the message says how to look or stop). Default: the module's
    `_sleep` / `_clock` (time.sleep / time.monotonic) and progress lines on stderr."""
    sleep = sleep or _sleep
    clock = clock or _clock
    progress = progress or _progress
    start = clock()
    pending = list(names)
    finished: dict[str, dict[str, Any]] = {}
    last: dict[str, str] = {}
    while True:
        for name in list(pending):
            described = client.describe_inference_recommendations_job(JobName=name)
            status = described["Status"]
            if last.get(name) != status:
                progress(f"[{int(clock() - start)} s] {name}: {status}")
                last[name] = status
            if status == DONE:
                finished[name] = described
                pending.remove(name)
            elif status in FAILED:
                reason = described.get("FailureReason") or "no reason given"
                raise RecommendJobError(f"Inference Recommender job {name} is {status}: {reason}")
        if not pending:
            return finished
        if clock() - start + poll_seconds > timeout_seconds:
            running = ", ".join(f"{n} ({last[n]})" for n in pending)
            raise RecommendJobError(
                f"--wait-timeout {int(timeout_seconds)} s passed and {running} has not finished; it keeps running "
                "(and billing its test endpoints): look with `aws sagemaker describe-inference-recommendations-job "
                "--job-name NAME`, or stop it with `aws sagemaker stop-inference-recommendations-job --job-name NAME`"
            )
        sleep(poll_seconds)


def result_rows(described: dict[str, dict[str, Any]]) -> list[ResultRow]:
    rows = []
    for name, job in described.items():
        for recommendation in job.get("InferenceRecommendations", []):
            metrics = recommendation.get("Metrics", {})
            configuration = recommendation.get("EndpointConfiguration", {})
            parameters = recommendation.get("ModelConfiguration", {}).get("EnvironmentParameters", [])
            rows.append(
                ResultRow(
                    job=name,
                    instance_type=configuration.get("InstanceType", "?"),
                    environment={p["Key"]: p["Value"] for p in parameters if "Key" in p and "Value" in p},
                    cost_per_hour=metrics.get("CostPerHour"),
                    cost_per_inference=metrics.get("CostPerInference"),
                    max_invocations=metrics.get("MaxInvocations"),
                    model_latency_ms=metrics.get("ModelLatency"),
                )
            )
    return rows


def within_slo(row: ResultRow, slo_ms: int) -> bool:
    return row.model_latency_ms is not None and row.model_latency_ms <= slo_ms


def best_row(rows: list[ResultRow], slo_ms: int) -> ResultRow | None:
    """The cheapest inference among results within the SLO that sustained some traffic."""
    fitting = [r for r in rows if within_slo(r, slo_ms) and r.max_invocations and r.cost_per_inference is not None]
    return min(fitting, key=lambda r: (r.cost_per_inference, r.instance_type), default=None)


def proposed_lines(row: ResultRow, *, endpoint: str, safety_factor: float, mode: str = "single_model") -> list[str]:
    """Stage-config lines for the endpoint (reviewed by a person, never written by this tool), in the field the
    config loader takes for the endpoint's mode: `autoscaling.invocations_per_instance` (SageMakerVariantInvocations
    PerInstance), or on an inference-component endpoint, where the loader refuses `autoscaling`,
    `inference_components.copy_scaling.invocations_per_copy` (SageMakerInferenceComponentInvocationsPerCopy). The
    test ran the model alone on a whole instance, so the copy target assumes one copy per instance's worth of
    accelerators; review it against the components' resources."""
    target = max(1, math.floor((row.max_invocations or 0) * safety_factor))
    lines = ["endpoints:", f"  - name: {endpoint}", f"    instance_type: {row.instance_type}"]
    if mode == "inference_components":
        lines += ["    inference_components:", "      copy_scaling:", f"        invocations_per_copy: {target}"]
    else:
        lines += ["    autoscaling:", f"      invocations_per_instance: {target}"]
    container = [(TUNABLE_VARIABLES[k], v) for k, v in sorted(row.environment.items()) if k in TUNABLE_VARIABLES]
    if container:
        lines.append("    container:")
        lines += [f"      {path.split('.', 1)[1]}: {value}" for path, value in container]
    return lines


def _money(value: float | None, digits: int) -> str:
    return "?" if value is None else f"${value:.{digits}f}"


def format_comparison(rows: list[ResultRow], *, slo_ms: int) -> str:
    header = ("instance", "environment", "cost/hour", "cost/inference", "max invocations/min", "latency ms", "SLO")
    table = [header]
    for row in sorted(rows, key=lambda r: (r.cost_per_inference is None, r.cost_per_inference or 0.0)):
        table.append(
            (
                row.instance_type,
                ",".join(f"{k.removeprefix('SAGEMAKER_TRITON_')}={v}" for k, v in sorted(row.environment.items()))
                or "-",
                _money(row.cost_per_hour, 3),
                _money(row.cost_per_inference, 8),
                "?" if row.max_invocations is None else str(row.max_invocations),
                "?" if row.model_latency_ms is None else str(row.model_latency_ms),
                "ok" if within_slo(row, slo_ms) else "over",
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table
    )
