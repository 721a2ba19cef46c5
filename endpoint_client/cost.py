"""`python -m endpoint_client cost --config config/<stage>.yaml`: what a stage's endpoints and GPU builds cost.

Prices come from the AWS Price List API when boto3 finds credentials, else from the snapshot shipped in
endpoint_client/data/ (named in the output); --price-source picks one explicitly. Heavy imports (the stage
config schema) happen in `run`, so `invoke` does not pay for them. Reference: docs/performance.md, "Cost".
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from endpoint_client.errors import InvalidInputError

REGION_HELP = "region to price (default: the config's region; required when the config has none)"
# Below one hour a month every figure rounds to $0.00 at cents: refuse rather than print zeros that mean nothing.
MIN_HOURS_PER_MONTH = 1.0


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    if not math.isfinite(value) or not MIN_HOURS_PER_MONTH <= value <= 744:  # 744 = 31 days x 24 h, the longest month
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: hours per month must be at least 1 and at most 744")
    return value


def _model_memory(text: str) -> tuple[str, float]:
    name, sep, size = text.partition("=")
    try:
        gib = float(size)
    except ValueError:
        gib = math.nan
    if not sep or not name or not math.isfinite(gib) or not 0 < gib <= 4096:
        raise argparse.ArgumentTypeError(f"{text!r} is not MODEL=GIB (GPU memory the model needs, 0 < GIB <= 4096)")
    return name, gib


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, metavar="FILE", help="the stage's config/<stage>.yaml")
    parser.add_argument("--region", help=REGION_HELP)
    parser.add_argument(
        "--hours-per-month",
        type=_hours,
        default=730.0,
        metavar="H",
        help="hours in a month (default 730, the AWS Pricing Calculator's month)",
    )
    parser.add_argument(
        "--price-source",
        choices=("auto", "price-list", "snapshot"),
        default="auto",
        help="auto (default): the AWS Price List API when credentials exist, else the shipped snapshot",
    )
    parser.add_argument(
        "--price-snapshot", type=Path, metavar="FILE", help="a price snapshot file (default: the shipped one)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON (schema_version 1)")
    parser.add_argument(
        "--compare-multi-model",
        action="store_true",
        help="also price the stage's models on one multi-model endpoint of the smallest catalogue type",
    )
    parser.add_argument(
        "--model-memory",
        action="append",
        default=[],
        type=_model_memory,
        metavar="MODEL=GIB",
        help="--compare-multi-model: memory a model needs, to check the type holds them all (repeatable)",
    )
    parser.add_argument(
        "--loadtest", type=Path, metavar="FILE", help="a load-test JSON: cost per million inferences at its rate"
    )
    parser.add_argument(
        "--loadtest-endpoint",
        metavar="NAME",
        help="--loadtest: the stage endpoint it measured (default: the file's target.endpoint)",
    )
    parser.add_argument(
        "--loadtest-instances",
        type=int,
        metavar="N",
        help="--loadtest of an inference-component endpoint: instances the endpoint ran during the test (the "
        "file's `instances` counts component copies; default: the endpoint's fixed count when min_instances = "
        "max_instances)",
    )


def run(args: argparse.Namespace) -> int:
    from endpoint_client import cost_report
    from endpoint_client.prices import PriceListPrices, SnapshotPrices, credentials_available

    if args.model_memory and not args.compare_multi_model:
        # Silently ignoring a size (or an unknown model) would hide a typo: it only means something there.
        raise InvalidInputError("--model-memory goes with --compare-multi-model")
    if args.loadtest_instances is not None and not args.loadtest:
        raise InvalidInputError("--loadtest-instances goes with --loadtest")
    config = _load_config(args.config)
    region = _region(args, config)
    loadtest = None
    if args.loadtest:
        from endpoint_client.cost_loadtest import read_loadtest

        loadtest = read_loadtest(args.loadtest)  # refused before any price is looked up
    if args.price_snapshot and args.price_source == "price-list":
        raise InvalidInputError("--price-snapshot goes with --price-source snapshot or auto")
    use_api = args.price_source == "price-list" or (
        args.price_source == "auto" and not args.price_snapshot and credentials_available()
    )
    prices = PriceListPrices.from_boto3() if use_api else SnapshotPrices(args.price_snapshot)
    report = cost_report.stage_report(config, region=region, prices=prices, hours_per_month=args.hours_per_month)
    if args.compare_multi_model:
        report["multi_model_comparison"] = cost_report.multi_model_comparison(
            config,
            report,
            region=region,
            prices=prices,
            hours_per_month=args.hours_per_month,
            model_memory_gib=_memory(args.model_memory, config),
        )
    if loadtest is not None:
        report["loadtest"] = _loadtest_section(args, loadtest, report)
    # allow_nan=False: every figure is finite or null (a non-finite one would not be JSON).
    print(json.dumps(report, indent=2, allow_nan=False) if args.json else format_text(report))
    return 0


def _load_config(path: Path) -> Any:
    from stage_config import ConfigError, load_config

    if not path.is_file():
        raise InvalidInputError(f"--config {path}: no such file (use config/<stage>.yaml)")
    try:
        return load_config(path)
    except ConfigError as error:
        raise InvalidInputError(str(error)) from None


def _region(args: argparse.Namespace, config: Any) -> str:
    import re

    from endpoint_client.prices import REGION_PATTERN

    if args.region is not None and not re.fullmatch(REGION_PATTERN, args.region):
        raise InvalidInputError(f"--region {args.region[:40]!r} is not an AWS region code (e.g. us-east-1)")
    if args.region is not None and args.region not in known_regions():
        raise InvalidInputError(
            f"--region {args.region}: not a region in botocore's endpoint data (its partitions' regions); a region "
            "newer than the installed botocore needs a newer botocore"
        )
    if config.region and args.region and args.region != config.region:
        raise InvalidInputError(
            f"{args.config}: region: the stage deploys to {config.region}, not --region {args.region}; "
            "leave out --region"
        )
    region = config.region or args.region
    if not region:
        raise InvalidInputError(
            f"{args.config}: region: not set (an environment-agnostic stage); give --region to price it"
        )
    return region


def known_regions() -> frozenset[str]:
    """Every region of every partition in botocore's endpoint data (endpoints.json, what
    boto3.session.Session().get_available_regions reads)."""
    import botocore.session

    data = botocore.session.get_session().get_data("endpoints")
    return frozenset(region for partition in data["partitions"] for region in partition.get("regions", {}))


def _memory(pairs: list[tuple[str, float]], config: Any) -> dict[str, float]:
    known = {m.name for m in config.models}
    sizes: dict[str, float] = {}
    for name, gib in pairs:
        if name not in known:
            raise InvalidInputError(f"--model-memory {name}=...: no model {name!r} in the config")
        if name in sizes:
            raise InvalidInputError(f"--model-memory {name}: given twice")
        sizes[name] = gib
    return sizes


def _loadtest_section(args: argparse.Namespace, loadtest: Any, report: dict[str, Any]) -> dict[str, Any]:
    from endpoint_client.cost_loadtest import cost_per_million, sustainable_rate

    wanted = args.loadtest_endpoint or loadtest.target.endpoint
    rows = {e["name"]: e for e in report["endpoints"]} | {e["deployed_name"]: e for e in report["endpoints"]}
    if wanted is None:
        if len(report["endpoints"]) != 1:
            raise InvalidInputError(
                f"{args.loadtest}: target.endpoint: not set; give --loadtest-endpoint NAME (one of "
                f"{', '.join(e['name'] for e in report['endpoints'])})"
            )
        endpoint = report["endpoints"][0]
    elif wanted in rows:
        endpoint = rows[wanted]
    else:
        raise InvalidInputError(
            f"{args.loadtest}: endpoint {wanted[:80]!r} is not an endpoint of stage {report['stage']} "
            f"({', '.join(e['name'] for e in report['endpoints'])}); give --loadtest-endpoint NAME"
        )
    target = loadtest.target
    if target.region is not None and target.region != report["region"]:
        raise InvalidInputError(
            f"{args.loadtest}: target.region: the load test ran in {target.region}, the stage is priced in "
            f"{report['region']}; price the region the test measured"
        )
    variant = _loadtest_variant(args, target.variant, endpoint)
    instances = _loadtest_instances(args, loadtest, endpoint)
    rate = sustainable_rate(loadtest)
    hourly = variant["hourly_usd"]
    per_million = cost_per_million(hourly, instances, rate)
    note = None
    if rate is None:
        note = "no level without errors and with a throughput above 0: no sustainable rate"
    elif hourly is None:
        note = f"unknown price of {variant['instance_type']}"
    elif per_million is None:
        note = f"a sustainable rate of {rate:g} inferences/s gives no finite, non-zero cost per million"
    return {
        "file": str(args.loadtest),
        "endpoint": endpoint["name"],
        "variant": variant["name"],
        "instance_type": variant["instance_type"],
        "instances": instances,
        "sustainable_inferences_per_second": rate,
        "usd_per_million_inferences": per_million,
        "note": note,
    }


def _loadtest_variant(args: argparse.Namespace, name: str | None, endpoint: dict[str, Any]) -> dict[str, Any]:
    """The variant the load test drove (target.variant); with several variants and none named, traffic was split
    between them by weight, so no one instance type's price applies: refused."""
    variants = {v["name"]: v for v in endpoint["variants"]}
    if name is None:
        if len(variants) > 1:
            raise InvalidInputError(
                f"{args.loadtest}: target.variant: not set, and endpoint {endpoint['name']} has variants "
                f"{', '.join(variants)} (traffic split between them); load-test one (loadtest --variant NAME)"
            )
        return endpoint["variants"][0]
    if name not in variants:
        raise InvalidInputError(
            f"{args.loadtest}: target.variant: {name[:80]!r} is not a variant of endpoint {endpoint['name']} "
            f"({', '.join(variants)})"
        )
    return variants[name]


def _loadtest_instances(args: argparse.Namespace, loadtest: Any, endpoint: dict[str, Any]) -> int:
    """Instances billed during the test. On an inference-component endpoint `loadtest --instances` counts copies
    ("instances (or inference component copies)"), while the bill is the endpoint's instances: those come from
    --loadtest-instances, or from the config when min_instances = max_instances (a fixed count)."""
    component = loadtest.target.inference_component
    components = endpoint["mode"] == "inference_components"
    if component is not None and component not in {c["name"] for c in endpoint["components"]}:
        on = ", ".join(c["name"] for c in endpoint["components"]) or "it has none"
        raise InvalidInputError(
            f"{args.loadtest}: target.inference_component: {component[:80]!r} is not a component of endpoint "
            f"{endpoint['name']} ({on})"
        )
    given = args.loadtest_instances
    if not components:
        if given is not None:
            raise InvalidInputError(
                f"--loadtest-instances: endpoint {endpoint['name']} has no inference components; the file's "
                "`instances` counts the instances that served the load"
            )
        return loadtest.instances
    if given is not None:
        if not 1 <= given <= 1000:
            raise InvalidInputError(f"--loadtest-instances {given}: 1-1000 instances")
        return given
    if endpoint["instances_min"] == endpoint["instances_max"] and endpoint["instances_min"] >= 1:
        return endpoint["instances_min"]
    raise InvalidInputError(
        f"{args.loadtest}: instances: on inference-component endpoint {endpoint['name']} it counts component "
        f"copies, and the endpoint runs {endpoint['instances_min']}-{endpoint['instances_max']} instances; give "
        "--loadtest-instances N (the instances it ran during the test)"
    )


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def _usd_small(value: float | None) -> str:
    """A figure that may be far below a cent (cost per million inferences): significant digits, never $0.00."""
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if value >= 0.01 else f"${value:.4g}"


def format_text(report: dict[str, Any]) -> str:
    lines = [
        f"Stage {report['stage']} in {report['region']}, on-demand, {report['hours_per_month']:g} hours per month",
        f"Prices: {report['price_source']}",
        "",
    ]
    for e in report["endpoints"]:
        hourly = "unknown price" if e["hourly_usd"] is None else f"${e['hourly_usd']:g}/h"
        lines.append(
            f"{e['deployed_name']} ({e['mode']}): {e['instance_type']} at {hourly}, {e['instances_min']}-"
            f"{e['instances_max']} instances: {_usd(e['monthly_usd_min'])} - {_usd(e['monthly_usd_max'])} a month"
        )
        for v in e["variants"][1:]:
            lines.append(f"  variant {v['name']}: {v['instance_type']}, {v['instances_min']}-{v['instances_max']}")
        if e["scheduled"]:
            s = e["scheduled"]
            lines.append(
                f"  with its scheduled actions over a week: {s['average_instances_min']:g}-"
                f"{s['average_instances_max']:g} instances on average: {_usd(s['monthly_usd_min'])} - "
                f"{_usd(s['monthly_usd_max'])} a month"
            )
        if e["scheduled_note"]:
            lines.append(f"  scheduled actions not averaged: {e['scheduled_note']}")
        for c in e["components"]:
            most = f", at most {c['max_copies']}" if c["max_copies"] else ""
            lines.append(f"  component {c['name']} ({c['model']}): {c['copies']} copies{most}, on these instances")
    lines.append(f"Total: {_usd(report['total_monthly_usd_min'])} - {_usd(report['total_monthly_usd_max'])} a month")
    builds = report["gpu_builds"]
    lines.append("")
    if builds["note"]:
        lines.append(f"GPU builds: none ({builds['note']})")
    elif not builds["builds"]:
        lines.append("GPU builds: none (no TensorRT model)")
    else:
        lines.append(f"GPU builds (upper bound: the build timeout, {builds['timeout_minutes']} minutes):")
        for b in builds["builds"]:
            lines.append(
                f"  {b['model']} for {b['gpu_target']} on {b['compute_type']}: at most {_usd(b['max_usd_per_build'])}"
                " per build"
            )
    comparison = report.get("multi_model_comparison")
    if comparison:
        lines += ["", "One multi-model endpoint instead:"]
        if comparison["instance_type"] is None:
            lines.append(f"  {comparison['note']}")
        else:
            lines.append(
                f"  {', '.join(comparison['models'])} on {comparison['instance_type']}, {comparison['instances_min']}-"
                f"{comparison['instances_max']} instances: {_usd(comparison['monthly_usd_min'])} - "
                f"{_usd(comparison['monthly_usd_max'])} a month (this layout: "
                f"{_usd(comparison['layout_monthly_usd_min'])} - {_usd(comparison['layout_monthly_usd_max'])})"
            )
        lines += [f"  caveat: {c}" for c in comparison["caveats"]]
    test = report.get("loadtest")
    if test:
        served = f"{test['instances']} x {test['instance_type']}, variant {test['variant']}"
        lines += ["", f"Load test {test['file']} on {test['endpoint']} ({served}):"]
        if test["note"]:
            lines.append(f"  {test['note']}")
        if test["sustainable_inferences_per_second"] is not None:
            lines.append(
                f"  sustainable {test['sustainable_inferences_per_second']:g} inferences/s: "
                f"{_usd_small(test['usd_per_million_inferences'])} per million inferences"
            )
    sources = sorted(
        {v["price_note"] for e in report["endpoints"] for v in e["variants"] if v["hourly_usd"] is not None}
        | {b["price_note"] for b in builds["builds"] if b["minute_usd"] is not None}
    )
    if sources:
        lines += ["", "Price sources:"] + [f"  {source}" for source in sources]
    if report["unknown_prices"]:
        lines += ["", "Unknown prices (no figure is guessed):"] + [f"  {note}" for note in report["unknown_prices"]]
    return "\n".join(lines)


__all__ = ["add_arguments", "format_text", "run"]
