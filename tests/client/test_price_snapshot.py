"""The shipped price snapshot (endpoint_client/data/prices-snapshot.json): every price is an AWS publication's
figure for SageMaker real-time inference (hosting) or a CodeBuild GPU minute, with its source and dates, and
`cost` prints them when it prices from the snapshot.

Sources accepted (issue #24 part 2, brief "prices"): AWS's own publications only (aws.amazon.com, docs.aws.amazon.com,
repositories of the aws, aws-samples and awslabs organisations); third-party pages disagree with each other
(ml.g5.xlarge at $1.21/h on one, $1.41/h on another) and are not used.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from endpoint_client.cli import main
from endpoint_client.prices import REGION_PATTERN, PriceError, SnapshotPrices, default_snapshot_path
from serving_facts.catalogue import INSTANCE_TYPES

PROJECT = Path(__file__).resolve().parents[2]
AWS_SOURCE = re.compile(
    r"^https://(aws\.amazon\.com|docs\.aws\.amazon\.com)/\S+$|^https://github\.com/(aws|aws-samples|awslabs)/\S+$"
)
# AWS Machine Learning Blog, "Run multiple deep learning models on GPU with Amazon SageMaker multi-model endpoints".
MME_BLOG = "https://aws.amazon.com/blogs/machine-learning/run-multiple-deep-learning-models-on-gpu-with-amazon-sagemaker-multi-model-endpoints/"
# aws-samples/sagemaker-ssh-helper, Sample_Costs.md: its CI/CD account's SageMaker bill, EU (Ireland), December 2023.
SSH_HELPER_BILL = (
    "https://github.com/aws-samples/sagemaker-ssh-helper/blob/b6bf9ba39119784eb6ce6683ae9a6a2ed8ef4cd3/Sample_Costs.md"
)


def shipped() -> dict:
    return json.loads(default_snapshot_path().read_text(encoding="utf-8"))


def test_every_shipped_price_is_an_aws_publication_with_its_dates() -> None:
    """Each entry: a catalogue instance type (serving_facts/catalogue.py INSTANCE_TYPES), a region code, a source
    under an AWS domain or organisation, the date the source gives and the date it was recorded; a quote, where
    recorded, holds the figure and the instance type in the source's own words."""
    document = shipped()
    snapshot = SnapshotPrices()
    assert document["sagemaker_hosting"], "the snapshot holds no hosting price"
    for entry in snapshot.snapshot.sagemaker_hosting:
        assert entry.instance_type in INSTANCE_TYPES
        assert re.fullmatch(REGION_PATTERN, entry.region)
        assert AWS_SOURCE.match(entry.source), entry.source
        assert entry.published and entry.retrieved == "2026-11-27"
        if entry.quote is not None:
            assert f"${entry.hourly_usd:g}" in entry.quote and entry.instance_type in entry.quote
            assert "Hosting" in entry.quote  # the real-time inference line, not training, notebook or batch
    for entry in snapshot.snapshot.codebuild_gpu:
        assert re.fullmatch(REGION_PATTERN, entry.region)
        assert AWS_SOURCE.match(entry.source), entry.source
        assert entry.published and entry.retrieved


@pytest.mark.parametrize(
    ("region", "instance_type", "usd", "source", "published"),
    [
        ("us-east-1", "ml.g4dn.xlarge", 0.736, MME_BLOG, "2022-10-25"),
        ("us-east-1", "ml.g4dn.2xlarge", 0.94, MME_BLOG, "2022-10-25"),
        ("eu-west-1", "ml.m5.xlarge", 0.257, SSH_HELPER_BILL, "2023-12"),
        ("eu-west-1", "ml.g4dn.4xlarge", 1.678, SSH_HELPER_BILL, "2023-12"),
        ("eu-west-1", "ml.g4dn.12xlarge", 5.453, SSH_HELPER_BILL, "2023-12"),
        ("eu-west-1", "ml.g5.12xlarge", 7.91, SSH_HELPER_BILL, "2023-12"),
    ],
)
def test_shipped_prices_and_their_sources(
    region: str, instance_type: str, usd: float, source: str, published: str
) -> None:
    """The figures as their sources state them: the multi-model blog's us-east-1 prices, and the "per Hosting ...
    hour in EU (Ireland)" lines of the aws-samples/sagemaker-ssh-helper bill for December 2023."""
    price = SnapshotPrices().hosting_hourly(instance_type, region)
    assert price.usd == usd
    assert price.note == f"{source}, published {published}, recorded 2026-11-27"


def test_unsourced_prices_stay_unknown() -> None:
    """A type or region no AWS publication priced is unknown: the bill's "$0.821 for Endpoint ml.g4dn.xlarge" line
    does not say Hosting, so eu-west-1 ml.g4dn.xlarge is not listed; no region is derived from another, and no
    CodeBuild GPU minute price was found."""
    snapshot = SnapshotPrices()
    for instance_type, region in [
        ("ml.g4dn.xlarge", "eu-west-1"),
        ("ml.g5.xlarge", "us-east-1"),
        ("ml.g5.12xlarge", "us-east-1"),
        ("ml.m5.xlarge", "us-east-1"),
    ]:
        price = snapshot.hosting_hourly(instance_type, region)
        assert price.usd is None and "unknown price" in price.note
    for compute in ("BUILD_GENERAL1_LARGE", "BUILD_GENERAL1_SMALL"):
        assert snapshot.gpu_build_minute(compute, "us-east-1").usd is None


def stage_on(tmp_path: Path, region: str, instance_type: str) -> Path:
    """config/dev.yaml in `region` with three single-model endpoints on a T4 `instance_type`, its engines built on a
    reserved-capacity fleet of T4 hosts (as test_cost.py's multi-model comparison does)."""
    data = yaml.safe_load((PROJECT / "config" / "dev.yaml").read_text())
    data["region"] = region
    data["endpoints"] = [
        {"name": f"triton-{m.replace('_', '-')}", "mode": "single_model", "models": [m], "instance_type": instance_type}
        for m in ("resnet50", "yolov5s", "bert_base")
    ]
    data["build"] = {"fleet": {"arn": f"arn:aws:codebuild:{region}:111111111111:fleet/t4:1", "gpu": "T4"}}
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("region", "instance_type", "usd", "cited"),
    [
        ("us-east-1", "ml.g4dn.xlarge", 0.736, f"{MME_BLOG}, published 2022-10-25, recorded 2026-11-27"),
        ("eu-west-1", "ml.g4dn.4xlarge", 1.678, f"{SSH_HELPER_BILL}, published 2023-12, recorded 2026-11-27"),
    ],
)
def test_cost_prints_the_snapshot_source_and_date(
    tmp_path: Path, capsys, region: str, instance_type: str, usd: float, cited: str
) -> None:
    """Issue #24 part 2: without the Price List API, `cost` prices from the shipped snapshot and prints the
    snapshot, each price's source URL and the dates (text and --json `price_note`)."""
    config = stage_on(tmp_path, region, instance_type)
    assert main(["cost", "--config", str(config), "--price-source", "snapshot"]) == 0
    out = capsys.readouterr().out
    assert f"price snapshot {default_snapshot_path()}" in out and cited in out
    assert main(["cost", "--config", str(config), "--price-source", "snapshot", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    variants = [v for e in report["endpoints"] for v in e["variants"]]
    assert variants and all(v["hourly_usd"] == usd and v["price_note"] == cited for v in variants)


def write_snapshot(tmp_path: Path, **row: object) -> Path:
    entry = {
        "region": "eu-west-1",
        "instance_type": "ml.g5.12xlarge",
        "hourly_usd": 7.91,
        "source": "https://example.test/bill",
        "retrieved": "2026-11-27",
        **row,
    }
    document = {"schema_version": 1, "currency": "USD", "description": "x", "sagemaker_hosting": [entry]}
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    "row",
    [
        {},  # a version-1 file written before `quote` existed still reads
        {"published": "2023-12-05"},
        {"published": "2023-12", "quote": "$7.91 per Hosting ml.g5.12xlarge hour in Europe (Ireland)"},
        {"quote": "SageMaker \u2013 EU (Ireland)"},  # non-ASCII text (an en dash) is a quote like any other
    ],
)
def test_schema_version_1_reads_quote_and_month(tmp_path: Path, row: dict) -> None:
    """Snapshot schema_version 1 (endpoint_client/prices.py): `quote` is optional and `published` is a day or a month;
    both were added without raising the version, as every earlier version-1 file reads the same."""
    snapshot = SnapshotPrices(write_snapshot(tmp_path, **row))
    assert snapshot.hosting_hourly("ml.g5.12xlarge", "eu-west-1").usd == 7.91


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"published": "December 2023"}, "published"),
        ({"published": "2023-1"}, "published"),
        ({"quote": ""}, "quote"),
        ({"quote": "two\nlines"}, "quote"),
        ({"quote": "x" * 501}, "quote"),
        ({"quote": 7.91}, "quote"),
    ],
)
def test_bad_quote_or_date_names_file_and_field(tmp_path: Path, row: dict, message: str) -> None:
    path = write_snapshot(tmp_path, **row)
    with pytest.raises(PriceError) as raised:
        SnapshotPrices(path)
    assert str(path) in str(raised.value) and f"sagemaker_hosting[0].{message}" in str(raised.value)
