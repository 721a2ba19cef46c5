"""What a stage's endpoints and GPU builds cost: the data behind `python -m endpoint_client cost` (JSON schema 1).

Rules (docs/performance.md, "Cost"):
- An instance costs its on-demand hourly price for every hour it runs; a month is `hours_per_month` hours (730 by
  default, the AWS Pricing Calculator's month). Storage, data transfer and taxes are not included.
- Minimum capacity: autoscaling.min_capacity per variant (inference components: min_instances; no autoscaling:
  initial_instance_count); maximum: autoscaling.max_capacity (max_instances; initial_instance_count).
- Scheduled actions: the average bounds over a week (endpoint_client/schedule_week.py) times the hourly price.
- A GPU build is priced as its CodeBuild GPU minute price x build.timeout_minutes: an upper bound, a build that
  finishes earlier costs less. One build per model and GPU target (serving_facts.matching.match_build); a stage that
  promotes artifacts (promote_from) builds nothing.
- An unknown price stays unknown: its figures are null and every total that needs it is null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from endpoint_client.prices import Price, PriceSource
from endpoint_client.schedule_week import Action, NotWeekly, weekly_capacity
from serving_facts.catalogue import INSTANCE_TYPES, InstanceType
from serving_facts.matching import BuildMatchError, match_build
from stage_config.app import AppConfig
from stage_config.endpoint import ComponentSettings, EndpointSettings, component_name

SCHEMA_VERSION = 1
DEFAULT_HOURS_PER_MONTH = 730.0  # AWS Pricing Calculator: 730 hours in a month
CENTS = 2

MULTI_MODEL_CAVEATS = (
    "cold loads: a model not in memory is loaded on its first request (ModelNotReadyException, "
    "ModelLoadingWaitTime) and may be unloaded again under memory pressure",
    "shared GPU: the models share one GPU's memory and compute, so one model's traffic raises the others' latency",
    "one instance count for all models: the endpoint scales on their combined traffic",
    "GPU multi-model endpoints run on single-GPU instance types only",
    "load-test the combined endpoint before choosing it (`python -m endpoint_client loadtest`)",
)


@dataclass(frozen=True)
class Capacity:
    low: int
    high: int
    actions: tuple[Action, ...] = ()


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, CENTS)


def _monthly(price: Price, count: float, hours: float) -> float | None:
    return None if price.usd is None else price.usd * count * hours


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def capacity(endpoint: EndpointSettings, initial_count: int) -> Capacity:
    if endpoint.mode == "inference_components" and endpoint.inference_components is not None:
        settings = endpoint.inference_components
        return Capacity(settings.min_instances, settings.max_instances)
    scaling = endpoint.autoscaling
    if scaling is None:
        return Capacity(initial_count, initial_count)
    actions = tuple(Action(a.name, a.schedule, a.min_capacity, a.max_capacity, a.time_zone) for a in scaling.scheduled)
    return Capacity(scaling.min_capacity, scaling.max_capacity, actions)


def endpoint_cost(
    config: AppConfig, endpoint: EndpointSettings, region: str, prices: PriceSource, hours: float
) -> dict[str, Any]:
    variants = [(endpoint.variant_name, endpoint.instance_type, endpoint.initial_instance_count)]
    variants += [(v.name, v.instance_type, v.initial_instance_count) for v in endpoint.extra_variants]
    shadow = endpoint.shadow  # its own instances, never autoscaled (docs/serving.md, "Shadow tests")
    if shadow:
        variants.append((shadow.variant_name, shadow.instance_type, shadow.initial_instance_count))
    rows: list[dict[str, Any]] = []
    unknown: list[str] = []
    scheduled_parts: list[float | None] = []
    scheduled_note: str | None = None
    scheduled_instances: tuple[float, float] | None = None
    for name, type_name, initial in variants:
        bounds = Capacity(initial, initial) if shadow and name == shadow.variant_name else capacity(endpoint, initial)
        price = prices.hosting_hourly(type_name, region)
        if price.usd is None:
            unknown.append(price.note)
        rows.append(
            {
                "name": name,
                "instance_type": type_name,
                "hourly_usd": price.usd,
                "price_note": price.note,
                "instances_min": bounds.low,
                "instances_max": bounds.high,
                "monthly_usd_min": _money(_monthly(price, bounds.low, hours)),
                "monthly_usd_max": _money(_monthly(price, bounds.high, hours)),
            }
        )
        if bounds.actions:
            try:
                week = weekly_capacity(bounds.low, bounds.high, bounds.actions)
            except NotWeekly as error:
                scheduled_note = str(error)
                continue
            scheduled_instances = (week.average_min, week.average_max)
            scheduled_parts += [_monthly(price, week.average_min, hours), _monthly(price, week.average_max, hours)]
    scheduled = None
    if scheduled_instances is not None and scheduled_note is None:
        lows, highs = scheduled_parts[0::2], scheduled_parts[1::2]
        scheduled = {
            "average_instances_min": round(scheduled_instances[0], 3),
            "average_instances_max": round(scheduled_instances[1], 3),
            "monthly_usd_min": _money(_sum(lows)),
            "monthly_usd_max": _money(_sum(highs)),
        }
    primary = rows[0]
    result: dict[str, Any] = {
        "name": endpoint.name,
        "deployed_name": config.deployed_endpoint_name(endpoint),
        "mode": endpoint.mode,
        "instance_type": primary["instance_type"],
        "hourly_usd": primary["hourly_usd"],
        "monthly_usd_min": _money(_sum([r["monthly_usd_min"] for r in rows])),
        "monthly_usd_max": _money(_sum([r["monthly_usd_max"] for r in rows])),
        "instances_min": sum(r["instances_min"] for r in rows),
        "instances_max": sum(r["instances_max"] for r in rows),
        "scheduled": scheduled,
        "scheduled_note": scheduled_note,
        "variants": rows,
        "components": _components(config, endpoint),
        "unknown": unknown,
    }
    return result


def _components(config: AppConfig, endpoint: EndpointSettings) -> list[dict[str, Any]]:
    """Inference components share the endpoint's instances: they are listed with their copies, and the cost is
    the instances' (by their count), not a per-component figure."""
    if endpoint.mode != "inference_components" or endpoint.inference_components is None:
        return []
    deployed = config.deployed_endpoint_name(endpoint)
    listed = []
    for model in endpoint.models:
        settings = endpoint.inference_components.components.get(model, ComponentSettings())
        listed.append(
            {
                "name": component_name(deployed, model),
                "model": model,
                "copies": settings.copy_count,
                "max_copies": settings.max_copies,
            }
        )
    return listed


def build_costs(config: AppConfig, region: str, prices: PriceSource) -> dict[str, Any]:
    """One GPU build per model and GPU target; each priced at its upper bound (timeout x minute price)."""
    timeout = config.build.timeout_minutes
    if config.promote_from:
        return {"timeout_minutes": timeout, "builds": [], "note": f"promotes {config.promote_from}'s artifacts"}
    builds: dict[tuple[str, str], dict[str, Any]] = {}
    served = [(e.instance_type, e.models) for e in config.endpoints]
    served += [(e.shadow.instance_type, [e.shadow.model]) for e in config.endpoints if e.shadow]  # built for its type
    for type_name, names in served:
        try:
            instance = INSTANCE_TYPES[type_name]
        except KeyError:
            continue  # refused by the config loader
        for model in config.served_models(names):
            if not model.needs_gpu_build:
                continue
            try:
                plan = match_build(instance, config.triton_release, config.build.fleet)
            except BuildMatchError:
                continue  # refused by the config loader
            key = (model.name, plan.gpu_target)
            if key in builds:
                continue
            if plan.compute == "fleet":
                price = Price(None, "unknown price: a reserved-capacity fleet is billed for its capacity, not by build")
            else:
                price = prices.gpu_build_minute(plan.compute, region)
            builds[key] = {
                "model": model.name,
                "gpu_target": plan.gpu_target,
                "compute_type": plan.compute,
                "minute_usd": price.usd,
                "price_note": price.note,
                "max_usd_per_build": _money(None if price.usd is None else price.usd * timeout),
            }
    rows = list(builds.values())
    return {
        "timeout_minutes": timeout,
        "builds": rows,
        "max_usd_all_builds": _money(_sum([r["max_usd_per_build"] for r in rows])) if rows else 0.0,
        "note": None,
    }


def stage_report(
    config: AppConfig, *, region: str, prices: PriceSource, hours_per_month: float = DEFAULT_HOURS_PER_MONTH
) -> dict[str, Any]:
    endpoints = [endpoint_cost(config, e, region, prices, hours_per_month) for e in config.endpoints]
    unknown = [note for e in endpoints for note in e["unknown"]]
    builds = build_costs(config, region, prices)
    unknown += [b["price_note"] for b in builds["builds"] if b["minute_usd"] is None]
    return {
        "schema_version": SCHEMA_VERSION,
        "currency": "USD",
        "stage": config.stage,
        "region": region,
        "price_source": prices.description,
        "hours_per_month": hours_per_month,
        "endpoints": endpoints,
        "total_monthly_usd_min": _money(_sum([e["monthly_usd_min"] for e in endpoints])),
        "total_monthly_usd_max": _money(_sum([e["monthly_usd_max"] for e in endpoints])),
        "gpu_builds": builds,
        "unknown_prices": sorted(set(unknown)),
    }


# --- multi-model comparison ------------------------------------------------------------------------------------


def _size_key(instance: InstanceType) -> tuple:
    return (instance.gpu.memory_gib if instance.gpu else 0, instance.vcpus, instance.memory_gib, instance.name)


def multi_model_comparison(
    config: AppConfig,
    report: dict[str, Any],
    *,
    region: str,
    prices: PriceSource,
    hours_per_month: float,
    model_memory_gib: dict[str, float],
) -> dict[str, Any]:
    """The stage's models on one multi-model endpoint of the smallest catalogue type that holds them.

    Candidates: single-GPU types of a GPU model the stage's endpoints use (TensorRT engines are built per GPU;
    GPU multi-model endpoints take single-GPU types only), or CPU types when no endpoint has a GPU. "Holds
    them": the GPU's memory (CPU types: the instance's memory) is at least the sum of --model-memory for every
    model; without a size for each model the fit is not checked and a caveat says so. Instances: the highest
    minimum of the stage's endpoints (at least 1) up to the sum of their maximums."""
    models: list[str] = []
    for endpoint in config.endpoints:
        for model in config.served_models(endpoint.models):
            if model.name not in models:
                models.append(model.name)
    types = [INSTANCE_TYPES[e.instance_type] for e in config.endpoints if e.instance_type in INSTANCE_TYPES]
    gpus = {t.gpu.model for t in types if t.gpu is not None}
    if gpus:
        candidates = [t for t in INSTANCE_TYPES.values() if t.gpu_count == 1 and t.gpu and t.gpu.model in gpus]
    else:
        candidates = [t for t in INSTANCE_TYPES.values() if not t.has_gpu]
    caveats = list(MULTI_MODEL_CAVEATS)
    sized = all(m in model_memory_gib for m in models)
    needed = sum(model_memory_gib[m] for m in models) if sized else None
    if needed is not None:
        candidates = [t for t in candidates if (t.gpu.memory_gib if t.gpu else t.memory_gib) >= needed]
    else:
        missing = [m for m in models if m not in model_memory_gib]
        caveats.append(f"fit not checked: no --model-memory for {', '.join(missing)}")
    if len(gpus) > 1:
        caveats.append(
            f"the stage uses several GPU models ({', '.join(sorted(gpus))}); TensorRT models need a build "
            "for the multi-model endpoint's GPU"
        )
    if not candidates or not models:
        note = "no catalogue type holds these models"
        return {"models": models, "instance_type": None, "note": note, "caveats": caveats}
    chosen = min(candidates, key=_size_key)
    low = max([1, *(e["instances_min"] for e in report["endpoints"])])
    high = max(low, sum(e["instances_max"] for e in report["endpoints"]))
    price = prices.hosting_hourly(chosen.name, region)
    mme_min = _money(_monthly(price, low, hours_per_month))
    mme_max = _money(_monthly(price, high, hours_per_month))
    layout_min, layout_max = report["total_monthly_usd_min"], report["total_monthly_usd_max"]
    return {
        "models": models,
        "instance_type": chosen.name,
        "model_memory_gib": needed,
        "hourly_usd": price.usd,
        "price_note": price.note,
        "instances_min": low,
        "instances_max": high,
        "monthly_usd_min": mme_min,
        "monthly_usd_max": mme_max,
        "layout_monthly_usd_min": layout_min,
        "layout_monthly_usd_max": layout_max,
        "saving_monthly_usd_min": _money(layout_min - mme_min) if None not in (layout_min, mme_min) else None,
        "note": None,
        "caveats": caveats,
    }
