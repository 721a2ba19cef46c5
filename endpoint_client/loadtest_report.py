"""A load test's figures: per level, the JSON document (`--json`, schema below), the printed table, the SLO
search and the autoscaling target it implies (`--slo-p99-ms`), and the plot (`--plot`).

JSON schema, version 1 (docs/performance.md, "Load tests", documents every field; a change that removes or
renames a field raises SCHEMA_VERSION):

    {"schema": "triton-sagemaker-cdk/loadtest", "schema_version": 1, "started_at": ISO-8601 UTC,
     "target": {"kind": "local" | "triton" | "sagemaker", "url" | "endpoint", "region", "variant",
                "target_model", "inference_component"},
     "mode": "concurrency" | "rate", "duration_s", "warmup_s", "instances", "inferences_per_request",
     "request_bytes", "encoding",
     "levels": [{"concurrency": int | null, "rate": float | null, "window_s", "requests", "ok",
                 "errors": {"<HTTP status or error word>": count}, "invocations_per_s", "inferences_per_s",
                 "invocations_per_minute_per_instance",
                 "latency_ms": {"p50", "p90", "p95", "p99", "max", "mean"} (null when nothing succeeded),
                 "stopped_by": null | "max-requests",
                 "cloudwatch": null | {"window": [start, end], "ModelLatency": {...ms}, "OverheadLatency": {...ms}}
                               | {"error": "..."}}],
     "sustainable": null | {"level": index, "invocations_per_s", "inferences_per_s",
                            "invocations_per_minute_per_instance", "basis": "slo" | "max-error-free"},
     "slo": null | {"p99_ms", "level": index | null, "max_invocations_per_s_per_instance", "safety_factor",
                    "invocations_per_instance"}}
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from endpoint_client.errors import EndpointClientError
from endpoint_client.loadtest import Measured, percentiles

SCHEMA = "triton-sagemaker-cdk/loadtest"
SCHEMA_VERSION = 1
# SageMaker "Load testing your auto scaling configuration" (docs.aws.amazon.com/sagemaker/latest/dg/
# endpoint-scaling-loadtest.html): SageMakerVariantInvocationsPerInstance = (MAX_RPS * SAFETY_FACTOR) * 60, and
# "SageMaker AI recommends that you start testing with a SAFETY_FACTOR of 0.5".
DEFAULT_SAFETY_FACTOR = 0.5
# The stage config's target field (stage_config/endpoint.py): AutoscalingSettings.invocations_per_instance
# and CopyScalingSettings.invocations_per_copy, both PositiveInt <= 1_000_000.
MAX_SCALING_TARGET = 1_000_000


def level_document(measured: Measured, *, instances: int, inferences_per_request: int) -> dict[str, Any]:
    ok = len(measured.latencies)
    window = measured.window_seconds
    per_s = ok / window if window > 0 else 0.0
    return {
        "concurrency": measured.level.concurrency,
        "rate": measured.level.rate,
        "window_s": round(window, 3),
        "requests": measured.requests,
        "ok": ok,
        "errors": dict(sorted(measured.errors.items())),
        "invocations_per_s": round(per_s, 3),
        "inferences_per_s": round(per_s * inferences_per_request, 3),
        "invocations_per_minute_per_instance": round(per_s * 60 / instances, 1),
        "latency_ms": percentiles(measured.latencies),
        "stopped_by": measured.stopped_by,
        "cloudwatch": None,
    }


@dataclass(frozen=True)
class SloResult:
    p99_ms: float
    level: int | None  # index into levels
    max_per_s_per_instance: float | None
    safety_factor: float
    target: int | None  # invocations per instance (or copy) per minute


def within_slo(level: dict[str, Any], p99_ms: float) -> bool:
    p99 = level["latency_ms"]["p99"]
    return level["ok"] > 0 and not level["errors"] and p99 is not None and p99 < p99_ms


def find_slo(levels: list[dict[str, Any]], p99_ms: float, safety_factor: float, instances: int) -> SloResult:
    """The level with the highest throughput among those whose p99 stays under `p99_ms` with no errors, and
    the autoscaling target it gives: per-instance invocations/s x safety factor x 60 (per minute, the period of
    SageMaker's InvocationsPerInstance metric), rounded down, at least 1."""
    passing = [i for i, level in enumerate(levels) if within_slo(level, p99_ms)]
    if not passing:
        return SloResult(p99_ms, None, None, safety_factor, None)
    best = max(passing, key=lambda i: levels[i]["invocations_per_s"])
    per_instance = levels[best]["invocations_per_s"] / instances
    target = min(max(math.floor(per_instance * safety_factor * 60), 1), MAX_SCALING_TARGET)
    return SloResult(p99_ms, best, round(per_instance, 3), safety_factor, target)


def sustainable(levels: list[dict[str, Any]], slo: SloResult | None) -> dict[str, Any] | None:
    """The measured sustainable load: the SLO's level, or without an SLO the error-free level with the highest
    throughput (what `cost --loadtest` prices per inference)."""
    if slo is not None:
        index, basis = slo.level, "slo"
    else:
        clean = [i for i, level in enumerate(levels) if level["ok"] and not level["errors"]]
        index = max(clean, key=lambda i: levels[i]["invocations_per_s"]) if clean else None
        basis = "max-error-free"
    if index is None:
        return None
    level = levels[index]
    keys = ("invocations_per_s", "inferences_per_s", "invocations_per_minute_per_instance")
    return {"level": index, **{k: level[k] for k in keys}, "basis": basis}


def slo_document(slo: SloResult | None) -> dict[str, Any] | None:
    if slo is None:
        return None
    return {
        "p99_ms": slo.p99_ms,
        "level": slo.level,
        "max_invocations_per_s_per_instance": slo.max_per_s_per_instance,
        "safety_factor": slo.safety_factor,
        "invocations_per_instance": slo.target,
    }


def slo_text(slo: SloResult, levels: list[dict[str, Any]], *, instances: int, component: bool) -> str:
    if slo.level is None:
        seen = [lv["latency_ms"]["p99"] for lv in levels if lv["latency_ms"]["p99"] is not None]
        lowest = f"; the lowest p99 measured was {min(seen):g} ms" if seen else ""
        return f"no level kept p99 under {slo.p99_ms:g} ms without errors{lowest}: no autoscaling target follows"
    level = levels[slo.level]
    unit = "copy" if component else "instance"
    field = (
        "inference_components:\n      copy_scaling:\n        invocations_per_copy"
        if component
        else "autoscaling:\n      invocations_per_instance"
    )
    return "\n".join(
        [
            f"SLO p99 < {slo.p99_ms:g} ms: highest level within it is {_label(level)} "
            f"(p99 {level['latency_ms']['p99']:g} ms, no errors, {level['invocations_per_s']:g} invocations/s "
            f"on {instances} {unit}{'s' if instances != 1 else ''})",
            f"sustained maximum (MAX_RPS) = {slo.max_per_s_per_instance:g} invocations/s per {unit}; "
            f"safety factor (SAFETY_FACTOR) = {slo.safety_factor:g}",
            f"autoscaling target = MAX_RPS x SAFETY_FACTOR x 60 = {slo.target} invocations per {unit} per minute "
            '(SageMaker, "Load testing your auto scaling configuration")',
            "stage config (config/<stage>.yaml, under the endpoint):",
            f"    {field}: {slo.target}",
        ]
    )


def _label(level: dict[str, Any]) -> str:
    return f"concurrency {level['concurrency']}" if level["concurrency"] is not None else f"rate {level['rate']:g}/s"


def table(levels: list[dict[str, Any]]) -> str:
    header = (
        f"{'level':>16} {'requests':>9} {'errors':>12} {'inv/s':>9} {'inf/s':>9} {'inv/min/inst':>12} "
        f"{'p50 ms':>8} {'p90 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    )
    lines = [header]
    for level in levels:
        errors = ",".join(f"{k}:{v}" for k, v in level["errors"].items()) or "0"
        lat = level["latency_ms"]
        cells = [f"{lat[k]:8.2f}" if lat[k] is not None else f"{'-':>8}" for k in ("p50", "p90", "p95", "p99", "max")]
        lines.append(
            f"{_label(level):>16} {level['requests']:>9} {errors:>12} {level['invocations_per_s']:>9.1f} "
            f"{level['inferences_per_s']:>9.1f} {level['invocations_per_minute_per_instance']:>12.0f} "
            + " ".join(cells)
            + (f"  (stopped: {level['stopped_by']})" if level["stopped_by"] else "")
        )
        cloudwatch = level.get("cloudwatch")
        if cloudwatch and "error" in cloudwatch:
            lines.append(f"{'':>16} CloudWatch: {cloudwatch['error']}")
        elif cloudwatch:
            parts = []
            for metric in ("ModelLatency", "OverheadLatency"):
                stats = cloudwatch.get(metric) or {}
                shown = ", ".join(f"{k} {v:g}" for k, v in stats.items() if v is not None and k != "samples")
                parts.append(f"{metric} {shown or 'no datapoints yet'}")
            lines.append(f"{'':>16} CloudWatch (ms): " + "; ".join(parts))
    return "\n".join(lines)


def write_plot(document: dict[str, Any], path: Path) -> None:
    """Client latency percentiles against throughput, one point per level (matplotlib, Agg: no display)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EndpointClientError(
            f"--plot {path}: matplotlib is not installed (pip install matplotlib, or `make bootstrap`: it is in "
            "requirements-dev.txt); the JSON and the table do not need it"
        ) from None
    levels = [lv for lv in document["levels"] if lv["latency_ms"]["p50"] is not None]
    figure, axes = plt.subplots(figsize=(8, 5))
    for key in ("p50", "p90", "p95", "p99"):
        axes.plot(
            [lv["invocations_per_s"] for lv in levels], [lv["latency_ms"][key] for lv in levels], marker="o", label=key
        )
    for lv in levels:
        axes.annotate(
            _label(lv),
            (lv["invocations_per_s"], lv["latency_ms"]["p99"]),
            fontsize=7,
            textcoords="offset points",
            xytext=(3, 3),
        )
    if document.get("slo"):
        axes.axhline(document["slo"]["p99_ms"], color="grey", linestyle="--", label="p99 SLO")
    target = document["target"]
    axes.set_title(f"{target['kind']}: {target.get('endpoint') or target.get('url')}", fontsize=9)
    axes.set_xlabel("throughput (invocations/s)")
    axes.set_ylabel("client latency (ms)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    try:
        figure.savefig(path, dpi=100)
    except OSError as error:
        raise EndpointClientError(f"--plot {path}: cannot write it ({error.strerror})") from None
    finally:
        plt.close(figure)
