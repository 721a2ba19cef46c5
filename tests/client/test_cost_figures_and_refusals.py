"""`cost` prints a figure only where it has one (finite or null, never an invented outcome), prices inference
components, variants and regions as SageMaker bills them, and refuses input it cannot price; each test names the
rule's source."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_cost import loadtest_file, run_json, snapshot_file, stage_file

from endpoint_client.cli import main
from endpoint_client.cost_loadtest import cost_per_million
from endpoint_client.schedule_week import Action, NotWeekly, weekly_capacity


def run_error(capsys, *argv: str) -> str:
    code = main(["cost", *argv])
    captured = capsys.readouterr()
    assert code != 0, captured.out
    assert "Traceback" not in captured.err
    return captured.err


# --- day names that contain W ---------------------------------------------------------------------------


def test_day_names_with_w_are_day_names() -> None:
    """EventBridge cron (Application Auto Scaling scheduled actions): W is a Day-of-month wildcard only; WED is a
    Day-of-week name, so `MON-WED` is 2-4 and is averaged."""
    named = weekly_capacity(
        1, 4, [Action("up", "cron(0 8 ? * MON-WED *)", min_capacity=2), Action("down", "cron(0 20 ? * * *)", 1)]
    )
    numbered = weekly_capacity(
        1, 4, [Action("up", "cron(0 8 ? * 2-4 *)", min_capacity=2), Action("down", "cron(0 20 ? * * *)", 1)]
    )
    assert named == numbered
    assert named.average_min == pytest.approx((3 * 12 * 2 + (168 - 36)) / 168)
    assert weekly_capacity(1, 4, [Action("w", "cron(0 8 ? * wed *)", min_capacity=2)]).average_min > 1
    # The special characters themselves still have no weekly pattern.
    for schedule in ("cron(0 8 ? * 6L *)", "cron(0 8 ? * 2#1 *)", "cron(0 8 LW * ? *)"):
        with pytest.raises(NotWeekly):
            weekly_capacity(1, 2, [Action("a", schedule, min_capacity=2)])


# --- no invented semantics ------------------------------------------------------------------------------


def test_minimum_above_maximum_has_no_figure() -> None:
    """AWS (Application Auto Scaling scheduled scaling) requires an action to leave the new minimum at or below
    the maximum and documents nothing else: a schedule that raises the minimum above the maximum gets no weekly
    figure, with the reason, instead of an invented outcome."""
    with pytest.raises(NotWeekly, match="minimum 5 is above the maximum 2"):
        weekly_capacity(1, 2, [Action("peak", "cron(0 8 ? * MON *)", min_capacity=5)])


def test_same_minute_conflict_has_no_figure() -> None:
    """Application Auto Scaling documents no order for actions firing in the same minute: two that set a bound to
    different values then give no weekly figure; two that agree are fine."""
    conflicting = [
        Action("a", "cron(0 8 ? * MON *)", min_capacity=2, max_capacity=4),
        Action("b", "cron(0 8 ? * MON *)", min_capacity=3, max_capacity=4),
    ]
    with pytest.raises(NotWeekly, match="same minute"):
        weekly_capacity(1, 4, conflicting)
    agreeing = [Action("a", "cron(0 8 ? * MON *)", min_capacity=2), Action("b", "cron(0 8 ? * MON *)", max_capacity=4)]
    assert weekly_capacity(1, 4, agreeing).average_min > 1


def test_minimum_above_maximum_in_the_report(tmp_path: Path, capsys) -> None:
    """The report prints no scheduled figure and says why (docs/performance.md, "Cost": no figure is guessed)."""

    def scheduled(data: dict) -> None:
        data["endpoints"][0]["autoscaling"] = {
            "min_capacity": 1,
            "max_capacity": 2,
            "invocations_per_instance": 100,
            "scheduled": [{"name": "peak", "schedule": "cron(0 8 ? * MON *)", "min_capacity": 3}],
        }

    config = stage_file(tmp_path, scheduled)
    report = run_json(capsys, "--config", str(config), "--price-snapshot", str(snapshot_file(tmp_path, {})))
    endpoint = report["endpoints"][0]
    assert endpoint["scheduled"] is None and "above the maximum" in endpoint["scheduled_note"]


# --- finite or null -------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [1e-320, 5e-324, 1e308, 1.7e308])
def test_cost_per_million_is_finite_or_null(rate: float) -> None:
    """JSON (RFC 8259) has no Infinity or NaN, and docs/performance.md says null means unknown, never zero: the
    figure is a finite number above zero, or None."""
    value = cost_per_million(1.0, 1000, rate)
    assert value is None or (math.isfinite(value) and value > 0)


def test_tiny_cost_per_million_is_not_zero() -> None:
    """A cost per million far below a cent keeps its significant digits instead of rounding to 0.0."""
    value = cost_per_million(1.0, 1, 1e12)
    assert value is not None and value == pytest.approx(1.0 / (1e12 * 3600) * 1e6)


@pytest.mark.parametrize("rate", [1e-320, 1e308])
def test_loadtest_extreme_rates_print_json_or_null(tmp_path: Path, capsys, rate: float) -> None:
    """`cost --json` output is strict JSON (json.dumps(allow_nan=False)); an extreme rate gives a figure or null
    with a note, and the text never prints $inf."""
    config = stage_file(tmp_path)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.0})
    document = {
        "schema_version": 1,
        "target": {"endpoint": "dev-triton-bert"},
        "instances": 1,
        "levels": [{"inferences_per_s": rate, "ok": 1, "errors": {}}],
    }
    test = loadtest_file(tmp_path, document)
    argv = ["--config", str(config), "--price-snapshot", str(prices), "--loadtest", str(test)]
    assert main(["cost", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    section = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in --json output"))["loadtest"]
    figure = section["usd_per_million_inferences"]
    assert (figure is None and section["note"]) or (math.isfinite(figure) and figure > 0)
    assert main(["cost", *argv]) == 0
    text = capsys.readouterr().out
    assert "inf" not in text.lower().replace("inferences", "") and "$0.00 per million" not in text


# --- inference components, variants, regions ------------------------------------------------------------


def components_stage(tmp_path: Path, *, low: int = 1, high: int = 3) -> Path:
    def components(data: dict) -> None:
        data["endpoints"][1] = {
            "name": "triton-ic",
            "mode": "inference_components",
            "models": ["bert_base"],
            "instance_type": "ml.g5.xlarge",
            "initial_instance_count": low,
            "deployment": {"strategy": "rolling"},
            "inference_components": {"min_instances": low, "max_instances": high},
        }

    return stage_file(tmp_path, components)


def ic_loadtest(tmp_path: Path, copies: int = 4, **target: str) -> Path:
    return loadtest_file(
        tmp_path,
        {
            "schema_version": 1,
            "target": {"kind": "sagemaker", "endpoint": "dev-triton-ic", "region": "us-east-1", **target},
            "instances": copies,
            "levels": [{"inferences_per_s": 100.0, "ok": 10, "errors": {}}],
        },
    )


def test_inference_component_copies_are_not_instances(tmp_path: Path, capsys) -> None:
    """`loadtest --instances` counts "instances (or inference component copies)" (endpoint_client/loadtest_cli.py);
    the bill is the endpoint's instances. With a fixed instance count (min = max) that count is used; 4 copies on
    2 instances cost 2 instance-hours, not 4."""
    config = components_stage(tmp_path, low=2, high=2)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.8})
    test = ic_loadtest(tmp_path, copies=4, inference_component="dev-triton-ic-bert-base")
    report = run_json(capsys, "--config", str(config), "--price-snapshot", str(prices), "--loadtest", str(test))
    section = report["loadtest"]
    assert section["instances"] == 2
    assert section["usd_per_million_inferences"] == pytest.approx(1.8 * 2 / (100 * 3600) * 1e6, rel=1e-5)


def test_inference_component_scaling_instances_must_be_given(tmp_path: Path, capsys) -> None:
    """With managed instance scaling (min != max) the instances during the test are not in the file: refused,
    asking for --loadtest-instances; given, they are used."""
    config = components_stage(tmp_path, low=1, high=3)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.8})
    test = ic_loadtest(tmp_path, copies=4, inference_component="dev-triton-ic-bert-base")
    argv = ["--config", str(config), "--price-snapshot", str(prices), "--loadtest", str(test)]
    assert "--loadtest-instances" in run_error(capsys, *argv)
    section = run_json(capsys, *argv, "--loadtest-instances", "3")["loadtest"]
    assert section["instances"] == 3
    # Not for an endpoint without components: there the file's count is the instances.
    plain = loadtest_file(
        tmp_path,
        {"schema_version": 1, "target": {"endpoint": "dev-triton-bert"}, "instances": 2, "levels": []},
    )
    assert run_error(capsys, "--config", str(config), "--loadtest", str(plain), "--loadtest-instances", "3")


def test_loadtest_component_must_be_the_endpoints(tmp_path: Path, capsys) -> None:
    """A file that invoked an inference component the priced endpoint does not have measured something else:
    refused."""
    config = components_stage(tmp_path, low=2, high=2)
    test = ic_loadtest(tmp_path, inference_component="dev-other-component")
    assert "target.inference_component" in run_error(capsys, "--config", str(config), "--loadtest", str(test))


def test_loadtest_variant_is_priced(tmp_path: Path, capsys) -> None:
    """`target.variant` names the production variant the test drove (loadtest --variant): its instance type is
    priced, not the primary's; an unknown variant, or none on a multi-variant endpoint, is refused."""

    def variants(data: dict) -> None:
        data["endpoints"][1]["extra_variants"] = [
            {"name": "Canary", "instance_type": "ml.g5.2xlarge", "initial_instance_count": 1, "initial_weight": 1}
        ]

    config = stage_file(tmp_path, variants)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.0, "ml.g5.2xlarge": 2.0})
    base = {"schema_version": 1, "instances": 1, "levels": [{"inferences_per_s": 100.0, "ok": 1, "errors": {}}]}
    argv = ["--config", str(config), "--price-snapshot", str(prices), "--loadtest"]
    canary = loadtest_file(tmp_path, {**base, "target": {"endpoint": "dev-triton-bert", "variant": "Canary"}})
    section = run_json(capsys, *argv, str(canary))["loadtest"]
    assert (section["variant"], section["instance_type"]) == ("Canary", "ml.g5.2xlarge")
    assert section["usd_per_million_inferences"] == pytest.approx(2.0 / (100 * 3600) * 1e6, rel=1e-5)
    unnamed = loadtest_file(tmp_path, {**base, "target": {"endpoint": "dev-triton-bert"}})
    assert "target.variant" in run_error(capsys, *argv, str(unnamed))
    wrong = loadtest_file(tmp_path, {**base, "target": {"endpoint": "dev-triton-bert", "variant": "Nope"}})
    assert "not a variant" in run_error(capsys, *argv, str(wrong))


def test_loadtest_region_mismatch_is_refused(tmp_path: Path, capsys) -> None:
    """A load test's `target.region` is where it ran: pricing another region would be a different figure without
    a word, so it is refused."""
    config = stage_file(tmp_path)
    test = loadtest_file(
        tmp_path,
        {
            "schema_version": 1,
            "target": {"endpoint": "dev-triton-bert", "region": "us-west-2"},
            "instances": 1,
            "levels": [{"inferences_per_s": 1.0, "ok": 1, "errors": {}}],
        },
    )
    assert "us-west-2" in run_error(capsys, "--config", str(config), "--loadtest", str(test))


# --- duplicate keys -------------------------------------------------------------------------------------


def test_duplicate_keys_in_a_loadtest_are_refused(tmp_path: Path, capsys) -> None:
    """RFC 8259 section 4: with duplicate names an object's behaviour is unpredictable (Python keeps the last
    silently): a load-test JSON with a key twice is refused, naming the key."""
    config = stage_file(tmp_path)
    level = '{"inferences_per_s": 1, "ok": 1, "errors": {}}'
    text = '{"schema_version": 1, "instances": 1, "instances": 8, "levels": [' + level + "]}"
    error = run_error(capsys, "--config", str(config), "--loadtest", str(loadtest_file(tmp_path, text)))
    assert "'instances' is given twice" in error


def test_duplicate_keys_in_a_snapshot_are_refused(tmp_path: Path) -> None:
    """The same rule (RFC 8259 section 4) for a price snapshot: a price given twice is refused."""
    from endpoint_client.prices import PriceError, SnapshotPrices

    path = tmp_path / "prices.json"
    path.write_text('{"schema_version": 1, "currency": "USD", "currency": "EUR", "description": "x"}')
    with pytest.raises(PriceError, match="'currency' is given twice"):
        SnapshotPrices(path)


def test_absurd_price_list_price_is_unknown() -> None:
    """A Price List price at or above the snapshot's bound (10,000 USD a unit) is not an on-demand rate, and 1e308
    would overflow the monthly figures to infinity (not JSON): it is unknown."""
    from endpoint_client.prices import _one_price

    item = {"terms": {"OnDemand": {"o": {"priceDimensions": {"d": {"unit": "Hrs", "pricePerUnit": {"USD": "1e308"}}}}}}}
    assert _one_price([item], unit_words=("hr",), what="x").usd is None


# --- refusals -----------------------------------------------------------------------------------


def test_model_memory_needs_compare_multi_model(tmp_path: Path, capsys) -> None:
    """--model-memory only means something with --compare-multi-model: alone it is refused, not ignored."""
    config = stage_file(tmp_path)
    assert "--compare-multi-model" in run_error(capsys, "--config", str(config), "--model-memory", "nosuch=1")


def test_region_must_be_a_real_region(tmp_path: Path, capsys) -> None:
    """A region must be one of botocore's endpoint data (its partitions' regions; what
    boto3.session.Session().get_available_regions reads): `xx-fake-9` is refused, not priced as unknown."""
    config = stage_file(tmp_path, region=None)
    assert "botocore" in run_error(capsys, "--config", str(config), "--region", "xx-fake-9")
    report = run_json(capsys, "--config", str(config), "--region", "eu-west-1", "--price-source", "snapshot")
    assert report["region"] == "eu-west-1"


@pytest.mark.parametrize("hours", ["1e-300", "0.5", "0"])
def test_hours_per_month_has_a_sane_minimum(tmp_path: Path, hours: str) -> None:
    """Below one hour a month every figure rounds to $0.00 at cents (docs/performance.md, "Cost": money is rounded
    to cents): refused as a usage error."""
    with pytest.raises(SystemExit) as exited:
        main(["cost", "--config", str(stage_file(tmp_path)), "--hours-per-month", hours])
    assert exited.value.code == 2
