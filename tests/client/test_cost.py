"""`python -m endpoint_client cost`: the figures, the JSON schema, scheduled actions over a week, the multi-model
comparison, cost per million inferences from a load test, and clean refusals (docs/performance.md, "Cost")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from synth_helpers import read_shipped_config

from endpoint_client.cli import main
from endpoint_client.schedule_week import Action, NotWeekly, weekly_capacity

HOURS = 730


def stage_file(tmp_path: Path, edit=None, *, region: str | None = "us-east-1") -> Path:
    """The shipped config/dev.yaml (no region: tests/shipped_config/, whatever the user set in config/) with a
    region, optionally edited, written as tmp_path/dev.yaml."""
    data = read_shipped_config("dev")
    if region:
        data["region"] = region
    if edit:
        edit(data)
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def snapshot_file(tmp_path: Path, hosting: dict[str, float], build_minute: float | None = None) -> Path:
    rows = [
        {
            "region": "us-east-1",
            "instance_type": name,
            "hourly_usd": usd,
            "source": "https://example.test/prices",
            "retrieved": "2026-11-27",
        }
        for name, usd in hosting.items()
    ]
    builds = []
    if build_minute is not None:
        builds.append(
            {
                "region": "us-east-1",
                "compute_type": "BUILD_GENERAL1_SMALL",
                "minute_usd": build_minute,
                "source": "https://example.test/codebuild",
                "retrieved": "2026-11-27",
            }
        )
    document = {
        "schema_version": 1,
        "currency": "USD",
        "description": "test prices",
        "sagemaker_hosting": rows,
        "codebuild_gpu": builds,
    }
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(document))
    return path


def run_json(capsys, *argv: str) -> dict:
    code = main(["cost", *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_snapshot_figures_and_json_shape(tmp_path: Path, capsys) -> None:
    """Monthly = hourly x instances x hours_per_month (730: the AWS Pricing Calculator's month); builds = minute
    price x build.timeout_minutes (120 by default), one per model and GPU target. The JSON carries every key of
    the issue's shape."""
    config = stage_file(tmp_path)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.5}, build_minute=0.25)
    report = run_json(capsys, "--config", str(config), "--price-source", "snapshot", "--price-snapshot", str(prices))
    issue_keys = {"currency", "region", "price_source", "hours_per_month", "endpoints"}
    assert issue_keys | {"total_monthly_usd_min", "total_monthly_usd_max", "schema_version"} <= set(report)
    assert report["schema_version"] == 1 and report["currency"] == "USD" and report["region"] == "us-east-1"
    assert "prices.json" in report["price_source"] and report["hours_per_month"] == HOURS
    for row in report["endpoints"]:
        assert {"name", "instance_type", "hourly_usd", "monthly_usd_min", "monthly_usd_max"} <= set(row)
        assert row["instance_type"] == "ml.g5.xlarge" and row["hourly_usd"] == 1.5
        assert row["monthly_usd_min"] == 1.5 * 1 * HOURS and row["monthly_usd_max"] == 1.5 * 2 * HOURS
    assert report["total_monthly_usd_min"] == 2 * 1.5 * HOURS
    assert report["total_monthly_usd_max"] == 2 * 1.5 * 2 * HOURS
    builds = report["gpu_builds"]
    assert builds["timeout_minutes"] == 120
    assert {(b["model"], b["gpu_target"]) for b in builds["builds"]} == {
        ("resnet50", "sm86"),
        ("yolov5s", "sm86"),
        ("bert_base", "sm86"),
    }
    assert all(b["max_usd_per_build"] == 0.25 * 120 for b in builds["builds"])
    assert builds["max_usd_all_builds"] == 3 * 30.0
    assert report["unknown_prices"] == []


def test_unknown_price_is_never_guessed(tmp_path: Path, capsys) -> None:
    """The shipped snapshot has no ml.g5.xlarge price: the figures and totals are null and the text says unknown."""
    config = stage_file(tmp_path)
    report = run_json(capsys, "--config", str(config), "--price-source", "snapshot")
    assert all(e["hourly_usd"] is None and e["monthly_usd_min"] is None for e in report["endpoints"])
    assert report["total_monthly_usd_min"] is None and report["total_monthly_usd_max"] is None
    assert any("ml.g5.xlarge in us-east-1" in note for note in report["unknown_prices"])
    assert main(["cost", "--config", str(config), "--price-source", "snapshot"]) == 0
    out = capsys.readouterr().out
    assert "unknown price" in out and "no figure is guessed" in out and "price snapshot" in out


def test_hours_per_month(tmp_path: Path, capsys) -> None:
    config = stage_file(tmp_path)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 2.0})
    report = run_json(capsys, "--config", str(config), "--price-snapshot", str(prices), "--hours-per-month", "720")
    assert report["hours_per_month"] == 720 and report["endpoints"][0]["monthly_usd_min"] == 2.0 * 720


def test_weekly_math_business_hours() -> None:
    """Application Auto Scaling scheduled actions set new bounds that hold until the next action: 3 instances
    MON-FRI 08:00-20:00, 1 otherwise -> (5 x 12 x 3 + 108 x 1) / 168 on average."""
    actions = [
        Action("day", "cron(0 8 ? * MON-FRI *)", min_capacity=3, max_capacity=6),
        Action("night", "cron(0 20 ? * MON-FRI *)", min_capacity=1, max_capacity=2),
    ]
    week = weekly_capacity(1, 2, actions)
    assert week.average_min == pytest.approx((5 * 12 * 3 + 108) / 168)
    assert week.average_max == pytest.approx((5 * 12 * 6 + 108 * 2) / 168)
    # The same schedule in another time zone keeps its shape (the reference weeks have no DST change).
    berlin = [Action(a.name, a.schedule, a.min_capacity, a.max_capacity, "Europe/Berlin") for a in actions]
    assert weekly_capacity(1, 2, berlin).average_min == pytest.approx(week.average_min)


def test_weekly_math_day_numbers_and_steps() -> None:
    """EventBridge Day-of-week 1-7 is SUN-SAT: 2 is Monday. Every 6 hours a min of 2, at 03:00 daily back to 1."""
    monday = weekly_capacity(
        1, 4, [Action("m", "cron(0 0 ? * 2 *)", min_capacity=2), Action("t", "cron(0 0 ? * 3 *)", min_capacity=1)]
    )
    assert monday.average_min == pytest.approx((24 * 2 + 144) / 168)
    stepped = weekly_capacity(
        1, 4, [Action("up", "cron(0 0/6 * * ? *)", min_capacity=2), Action("down", "cron(0 3 * * ? *)", min_capacity=1)]
    )
    # Per day: 00-03 at 2, 03-06 at 1, 06-24 at 2 -> 21 hours at 2, 3 at 1.
    assert stepped.average_min == pytest.approx((21 * 2 + 3) / 24)


@pytest.mark.parametrize(
    ("schedule", "why"),
    [
        ("at(2026-12-24T18:00:00)", "fires once"),
        ("rate(5 minutes)", "creation time"),
        ("cron(0 8 1 * ? *)", "depends on the date"),
        ("cron(0 8 ? * 6#3 *)", "no weekly pattern"),
        ("cron(0 8 ? * MON 2027)", "depends on the date"),
    ],
)
def test_weekly_math_refuses_what_has_no_week(schedule: str, why: str) -> None:
    with pytest.raises(NotWeekly, match=why):
        weekly_capacity(1, 2, [Action("a", schedule, min_capacity=2)])


def test_scheduled_actions_in_the_report(tmp_path: Path, capsys) -> None:
    def nights(data: dict) -> None:
        data["endpoints"][1]["autoscaling"]["scheduled"] = [
            {"name": "day", "schedule": "cron(0 8 ? * MON-FRI *)", "min_capacity": 2, "max_capacity": 2},
            {"name": "night", "schedule": "cron(0 20 ? * MON-FRI *)", "min_capacity": 1, "max_capacity": 1},
        ]

    config = stage_file(tmp_path, nights)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.0})
    report = run_json(capsys, "--config", str(config), "--price-snapshot", str(prices))
    bert = report["endpoints"][1]
    assert bert["scheduled"]["average_instances_min"] == pytest.approx((5 * 12 * 2 + 108) / 168, abs=1e-3)
    assert bert["scheduled"]["monthly_usd_min"] == pytest.approx((5 * 12 * 2 + 108) / 168 * HOURS, abs=0.01)
    assert report["endpoints"][0]["scheduled"] is None  # no scheduled actions: no weekly figure


def test_inference_components_by_instance_count(tmp_path: Path, capsys) -> None:
    def components(data: dict) -> None:
        data["endpoints"][1] = {
            "name": "triton-ic",
            "mode": "inference_components",
            "models": ["bert_base"],
            "instance_type": "ml.g5.xlarge",
            "deployment": {"strategy": "rolling"},
            "inference_components": {"min_instances": 1, "max_instances": 3},
        }

    config = stage_file(tmp_path, components)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.0})
    report = run_json(capsys, "--config", str(config), "--price-snapshot", str(prices))
    ic = report["endpoints"][1]
    assert (ic["instances_min"], ic["instances_max"]) == (1, 3)
    assert ic["monthly_usd_max"] == 3 * HOURS
    assert ic["components"] == [
        {"name": "dev-triton-ic-bert-base", "model": "bert_base", "copies": 1, "max_copies": None}
    ]


def test_compare_multi_model_reference_layout(tmp_path: Path, capsys) -> None:
    """The reference article's comparison: three models on three single-model ml.g4dn.xlarge endpoints vs one
    multi-model endpoint ($0.736/h, shipped snapshot); the smallest single-GPU T4 type that holds them."""

    def three_single(data: dict) -> None:
        data["endpoints"] = [
            {
                "name": f"triton-{m.replace('_', '-')}",
                "mode": "single_model",
                "models": [m],
                "instance_type": "ml.g4dn.xlarge",
            }
            for m in ("resnet50", "yolov5s", "bert_base")
        ]
        # T4 engines are built on a reserved-capacity fleet of T4 hosts (serving_facts.matching.match_build).
        data["build"] = {"fleet": {"arn": "arn:aws:codebuild:us-east-1:111111111111:fleet/t4:1", "gpu": "T4"}}

    config = stage_file(tmp_path, three_single)
    report = run_json(capsys, "--config", str(config), "--price-source", "snapshot", "--compare-multi-model")
    comparison = report["multi_model_comparison"]
    assert comparison["instance_type"] == "ml.g4dn.xlarge" and comparison["instances_min"] == 1
    assert comparison["layout_monthly_usd_min"] == pytest.approx(3 * 0.736 * HOURS, abs=0.01)
    assert comparison["monthly_usd_min"] == pytest.approx(0.736 * HOURS, abs=0.01)
    assert any("cold loads" in c for c in comparison["caveats"]) and any(
        "shared GPU" in c for c in comparison["caveats"]
    )
    assert any("fit not checked" in c for c in comparison["caveats"])
    fleet = report["gpu_builds"]["builds"][0]
    assert fleet["compute_type"] == "fleet" and fleet["max_usd_per_build"] is None and "capacity" in fleet["price_note"]


def test_compare_multi_model_checks_fit(tmp_path: Path, capsys) -> None:
    """With a size for every model the GPU's memory must hold their sum: 20 GiB fits an A10G (24 GiB), 30 GiB fits no
    single-GPU A10G type (GPU multi-model endpoints take single-GPU types only)."""
    config = stage_file(tmp_path)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.0})
    base = ["--config", str(config), "--price-snapshot", str(prices), "--compare-multi-model"]
    sizes = ["--model-memory", "resnet50=5", "--model-memory", "yolov5s=5", "--model-memory", "bert_base=10"]
    fits = run_json(capsys, *base, *sizes)["multi_model_comparison"]
    assert fits["instance_type"] == "ml.g5.xlarge" and fits["model_memory_gib"] == 20
    too_big = run_json(capsys, *base, *sizes[:-2], "--model-memory", "bert_base=20")["multi_model_comparison"]
    assert too_big["instance_type"] is None and "no catalogue type" in too_big["note"]


def loadtest_file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "loadtest.json"
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_cost_per_million_inferences(tmp_path: Path, capsys) -> None:
    """Sustainable rate = the highest throughput of a level without errors; cost per million = hourly x instances /
    (rate x 3600) x 1e6. Unknown keys of the load-test output are ignored."""
    config = stage_file(tmp_path)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.8})
    test = loadtest_file(
        tmp_path,
        {
            "schema": "triton-sagemaker-cdk/loadtest",
            "schema_version": 1,
            "target": {"kind": "sagemaker", "endpoint": "dev-triton-bert", "region": "us-east-1"},
            "instances": 2,
            "levels": [
                {"concurrency": 1, "inferences_per_s": 100.0, "ok": 10, "errors": {}},
                {"concurrency": 8, "inferences_per_s": 500.0, "ok": 50, "errors": {}},
                {"concurrency": 16, "inferences_per_s": 900.0, "ok": 90, "errors": {"500": 3}},
                {"concurrency": 32, "inferences_per_s": None, "ok": 0, "errors": {"timeout": 9}},
            ],
            "sustainable": None,
        },
    )
    report = run_json(capsys, "--config", str(config), "--price-snapshot", str(prices), "--loadtest", str(test))
    section = report["loadtest"]
    assert section["endpoint"] == "triton-bert" and section["sustainable_inferences_per_second"] == 500.0
    assert section["usd_per_million_inferences"] == pytest.approx(1.8 * 2 / (500 * 3600) * 1e6, abs=1e-4)
    # The load test's own `sustainable` (its SLO level with --slo-p99-ms) wins over the error-free maximum.
    document = json.loads(test.read_text())
    document["sustainable"] = {"level": 0, "inferences_per_s": 100.0, "basis": "slo"}
    test.write_text(json.dumps(document))
    report = run_json(capsys, "--config", str(config), "--price-snapshot", str(prices), "--loadtest", str(test))
    assert report["loadtest"]["sustainable_inferences_per_second"] == 100.0


GOOD_LEVEL = {"inferences_per_s": 5.0, "ok": 5, "errors": {}}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{oops", "is not JSON"),
        ({"schema_version": 1, "instances": 1, "levels": []}, "levels"),
        ({"schema_version": 1, "instances": 1, "levels": [dict(GOOD_LEVEL, inferences_per_s=-1)]}, "levels[0].inf"),
        ({"schema_version": 1, "instances": 1, "levels": [dict(GOOD_LEVEL, inferences_per_s="5")]}, "levels[0].inf"),
        ({"schema_version": 1, "instances": 1, "levels": [dict(GOOD_LEVEL, errors={"500": -2})]}, "levels[0].errors"),
        ({"schema_version": 1, "levels": [GOOD_LEVEL]}, "instances: Field required"),
        ({"schema_version": 2, "instances": 1, "levels": [GOOD_LEVEL]}, "schema_version"),
        (
            {"schema_version": 1, "target": {"endpoint": "nope"}, "instances": 1, "levels": [GOOD_LEVEL]},
            "'nope' is not an endpoint of stage dev",
        ),
        ({"schema_version": 1, "instances": 1, "levels": [GOOD_LEVEL]}, "target.endpoint: not set"),
    ],
)
def test_bad_loadtest_is_a_clean_error(tmp_path: Path, capsys, document: object, message: str) -> None:
    config = stage_file(tmp_path)
    test = loadtest_file(tmp_path, document)
    args = ["cost", "--config", str(config), "--price-source", "snapshot", "--loadtest", str(test)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and str(test) in err and message in err and "Traceback" not in err


def test_bad_config_names_file_and_field(tmp_path: Path, capsys) -> None:
    config = stage_file(tmp_path, lambda data: data["endpoints"][0].update(instance_count=3))
    assert main(["cost", "--config", str(config), "--price-source", "snapshot"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and "dev.yaml: endpoints[0].instance_count: unknown key" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config", "nowhere/dev.yaml"], "no such file"),
        (["--region", "eu-west-1"], "region: the stage deploys to us-east-1"),
        (["--region", "moon"], "is not an AWS region code"),
    ],
)
def test_refusals(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    config = stage_file(tmp_path)
    args = ["cost", "--price-source", "snapshot", *argv]
    if "--config" not in argv:
        args += ["--config", str(config)]
    assert main(args) == 1
    assert message in capsys.readouterr().err


def test_region_required_when_config_has_none(tmp_path: Path, capsys) -> None:
    config = stage_file(tmp_path, region=None)
    assert main(["cost", "--config", str(config), "--price-source", "snapshot"]) == 1
    assert "dev.yaml: region: not set" in capsys.readouterr().err
    assert main(["cost", "--config", str(config), "--price-source", "snapshot", "--region", "us-east-1"]) == 0


def test_bad_snapshot_is_a_clean_error(tmp_path: Path, capsys) -> None:
    config = stage_file(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "currency": "EUR", "description": "x"}')
    assert main(["cost", "--config", str(config), "--price-snapshot", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.json: currency:" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["--hours-per-month", "0"], ["--hours-per-month", "nan"], ["--model-memory", "x"]])
def test_usage_errors_exit_2(tmp_path: Path, argv: list[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["cost", "--config", "config/dev.yaml", *argv])
    assert raised.value.code == 2


def test_price_list_path_end_to_end(tmp_path: Path, capsys, monkeypatch) -> None:
    """--price-source price-list: every hosting price from GetProducts (Stubber-validated requests). The stage builds
    on BUILD_GENERAL1_SMALL GPU, whose Price List usage type no source confirms (review finding L8): unknown, no
    call made, never guessed."""
    import boto3
    from botocore.stub import ANY, Stubber
    from test_cost_prices import price_item

    from endpoint_client import prices as prices_module

    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    hosting = price_item({"instanceName": "ml.g5.xlarge", "regionCode": "us-east-1", "component": "Hosting"}, "1.25")
    request = {"ServiceCode": ANY, "FormatVersion": "aws_v1", "Filters": ANY}
    stubber.add_response("get_products", {"PriceList": [hosting]}, request)  # one call: cached for both endpoints
    stubber.activate()
    monkeypatch.setattr(prices_module.PriceListPrices, "from_boto3", classmethod(lambda cls: cls(client)))
    report = run_json(capsys, "--config", str(stage_file(tmp_path)), "--price-source", "price-list")
    stubber.assert_no_pending_responses()
    assert report["price_source"].startswith("AWS Price List API")
    assert report["total_monthly_usd_min"] == pytest.approx(2 * 1.25 * HOURS)
    builds = report["gpu_builds"]["builds"]
    assert builds and all(b["compute_type"] == "BUILD_GENERAL1_SMALL" for b in builds)
    assert all(b["max_usd_per_build"] is None for b in builds) and report["gpu_builds"]["max_usd_all_builds"] is None
    assert any("no source confirms" in note for note in report["unknown_prices"])


@pytest.mark.filterwarnings("ignore")
def test_any_loadtest_document_is_read_or_refused_cleanly(tmp_path_factory) -> None:
    """Whatever JSON the load-test file holds, it is read or refused with InvalidInputError naming the file."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from endpoint_client.cost_loadtest import read_loadtest, sustainable_rate
    from endpoint_client.errors import InvalidInputError

    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
        max_leaves=20,
    )
    level = st.fixed_dictionaries(
        {"inferences_per_s": values, "ok": values, "errors": st.dictionaries(st.text(max_size=5), values, max_size=2)}
    )
    documents = values | st.fixed_dictionaries(
        {"schema_version": st.just(1), "instances": values, "levels": st.lists(level, max_size=3)}
    )
    folder = tmp_path_factory.mktemp("loadtests")

    @settings(max_examples=150, deadline=None)
    @given(documents)
    def check(document: object) -> None:
        path = folder / "loadtest.json"
        path.write_text(json.dumps(document))  # NaN/Infinity are written as JSON does and refused on reading
        try:
            test = read_loadtest(path)
        except InvalidInputError as error:
            assert str(path) in str(error)
            return
        rate = sustainable_rate(test)
        assert rate is None or rate > 0

    check()


def test_text_names_each_price_source(tmp_path: Path, capsys) -> None:
    """The issue: a snapshot price is printed with its source and date."""
    config = stage_file(tmp_path)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.5}, build_minute=0.25)
    assert main(["cost", "--config", str(config), "--price-snapshot", str(prices)]) == 0
    out = capsys.readouterr().out
    assert f"price snapshot {prices} (recorded 2026-11-27" in out
    assert "https://example.test/prices, recorded 2026-11-27" in out
    assert "https://example.test/codebuild, recorded 2026-11-27" in out
    assert "$1,095.00 - $2,190.00 a month" in out and "at most $30.00 per build" in out
