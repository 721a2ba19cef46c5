"""Price sources of `cost`: the AWS Price List API (botocore Stubber, validated against the real `pricing` model)
and the shipped snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from endpoint_client.prices import (
    PRICING_API_REGION,
    PriceError,
    PriceListPrices,
    SnapshotPrices,
    default_snapshot_path,
)
from serving_facts.catalogue import INSTANCE_TYPES

ARTICLE = "https://aws.amazon.com/blogs/machine-learning/run-multiple-deep-learning-models-on-gpu-with-amazon-sagemaker-multi-model-endpoints/"


def price_item(attributes: dict, usd: str, unit: str = "Hrs") -> str:
    """One GetProducts PriceList item as the API sends it: a JSON document in a string (aws_v1 format)."""
    return json.dumps(
        {
            "product": {"productFamily": "ML Instance", "attributes": attributes, "sku": "SKU1"},
            "serviceCode": attributes.get("servicecode", "AmazonSageMaker"),
            "terms": {
                "OnDemand": {
                    "SKU1.JRTCKXETXF": {
                        "priceDimensions": {
                            "SKU1.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": unit,
                                "description": "per hour",
                                "pricePerUnit": {"USD": usd},
                                "beginRange": "0",
                                "endRange": "Inf",
                                "rateCode": "SKU1.JRTCKXETXF.6YS6EN2CT7",
                                "appliesTo": [],
                            }
                        },
                        "sku": "SKU1",
                        "effectiveDate": "2026-11-01T00:00:00Z",
                        "offerTermCode": "JRTCKXETXF",
                        "termAttributes": {},
                    }
                }
            },
            "version": "20261101000000",
            "publicationDate": "2026-11-01T00:00:00Z",
        }
    )


def hosting_request(instance_type: str, region: str) -> dict:
    return {
        "ServiceCode": "AmazonSageMaker",
        "FormatVersion": "aws_v1",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
            {"Type": "TERM_MATCH", "Field": "component", "Value": "Hosting"},
        ],
    }


@pytest.fixture
def pricing():
    client = boto3.client(
        "pricing", region_name=PRICING_API_REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_price_list_hosting_price(pricing) -> None:
    """GetProducts(AmazonSageMaker, component Hosting, instanceName, regionCode): the on-demand USD per hour; the
    request is validated by Stubber against botocore's `pricing` service model, PriceList items are JSON strings."""
    client, stubber = pricing
    attributes = {"instanceName": "ml.g5.xlarge", "regionCode": "eu-west-1", "component": "Hosting"}
    stubber.add_response(
        "get_products",
        {"FormatVersion": "aws_v1", "PriceList": [price_item(attributes, "1.5710000000")]},
        hosting_request("ml.g5.xlarge", "eu-west-1"),
    )
    prices = PriceListPrices(client)
    assert prices.hosting_hourly("ml.g5.xlarge", "eu-west-1").usd == pytest.approx(1.571)
    assert prices.hosting_hourly("ml.g5.xlarge", "eu-west-1").usd == pytest.approx(1.571)  # cached: one call


def test_price_list_follows_next_token(pricing) -> None:
    client, stubber = pricing
    attributes = {"instanceName": "ml.g4dn.xlarge", "regionCode": "us-east-1"}
    stubber.add_response(
        "get_products", {"PriceList": [], "NextToken": "page2"}, hosting_request("ml.g4dn.xlarge", "us-east-1")
    )
    stubber.add_response(
        "get_products",
        {"PriceList": [price_item(attributes, "0.7360000000")]},
        {**hosting_request("ml.g4dn.xlarge", "us-east-1"), "NextToken": "page2"},
    )
    assert PriceListPrices(client).hosting_hourly("ml.g4dn.xlarge", "us-east-1").usd == pytest.approx(0.736)


def test_price_list_missing_or_ambiguous_is_unknown(pricing) -> None:
    """No product, or two different on-demand prices for one product: unknown, never one of them."""
    client, stubber = pricing
    stubber.add_response("get_products", {"PriceList": []}, hosting_request("ml.g6.xlarge", "us-east-1"))
    stubber.add_response(
        "get_products",
        {"PriceList": [price_item({}, "1.0"), price_item({}, "1.2")]},
        hosting_request("ml.g5.xlarge", "us-east-1"),
    )
    prices = PriceListPrices(client)
    missing = prices.hosting_hourly("ml.g6.xlarge", "us-east-1")
    assert missing.usd is None and "unknown price" in missing.note
    ambiguous = prices.hosting_hourly("ml.g5.xlarge", "us-east-1")
    assert ambiguous.usd is None and "several" in ambiguous.note


def test_price_list_codebuild_gpu_minute(pricing) -> None:
    """CodeBuild: the product whose usagetype ends with LinuxGPU:g1.large is BUILD_GENERAL1_LARGE (infracost's
    codebuild_project.go matches /LinuxGPU:g1.large/); other compute types in the same answer are ignored. The GPU
    small minute's usage type is confirmed by no source (review finding L8), so it is unknown, never guessed, and
    no Price List call is made for it."""
    client, stubber = pricing
    request = {
        "ServiceCode": "CodeBuild",
        "FormatVersion": "aws_v1",
        "Filters": [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"}],
    }
    items = [
        price_item({"servicecode": "CodeBuild", "usagetype": "USW2-Build-Min:LinuxGPU:g1.small"}, "0.1", "Minutes"),
        price_item({"servicecode": "CodeBuild", "usagetype": "USW2-Build-Min:LinuxGPU:g1.large"}, "0.65", "Minutes"),
        price_item({"servicecode": "CodeBuild", "usagetype": "USW2-Build-Min:Linux:g1.small"}, "0.005", "Minutes"),
    ]
    stubber.add_response("get_products", {"PriceList": items}, request)
    prices = PriceListPrices(client)
    assert prices.gpu_build_minute("BUILD_GENERAL1_LARGE", "us-west-2").usd == pytest.approx(0.65)
    small = prices.gpu_build_minute("BUILD_GENERAL1_SMALL", "us-west-2")
    assert small.usd is None and "no source confirms" in small.note
    stubber.assert_no_pending_responses()


def test_price_list_refusal_is_a_clean_error(pricing) -> None:
    client, stubber = pricing
    stubber.add_client_error(
        "get_products", "AccessDeniedException", "not authorized to perform pricing:GetProducts", 400
    )
    with pytest.raises(PriceError, match=r"AccessDeniedException.*--price-source snapshot"):
        PriceListPrices(client).hosting_hourly("ml.g5.xlarge", "us-east-1")


def test_price_list_item_not_json(pricing) -> None:
    client, stubber = pricing
    stubber.add_response("get_products", {"PriceList": ["{not json"]}, hosting_request("ml.g5.xlarge", "us-east-1"))
    with pytest.raises(PriceError, match="not JSON"):
        PriceListPrices(client).hosting_hourly("ml.g5.xlarge", "us-east-1")


def test_shipped_snapshot_is_sourced() -> None:
    """Every price in the shipped snapshot names its source URL and dates and is a catalogue type; among them the
    reference article's us-east-1 figures ($0.736/h ml.g4dn.xlarge, $0.94/h ml.g4dn.2xlarge; AWS ML blog
    'Run multiple deep learning models on GPU with Amazon SageMaker multi-model endpoints', ../shared/README.md).
    Every entry's figure and source: tests/client/test_price_snapshot.py."""
    snapshot = SnapshotPrices()
    assert snapshot.path == default_snapshot_path()
    for entry in snapshot.snapshot.sagemaker_hosting:
        assert entry.instance_type in INSTANCE_TYPES and entry.source.startswith("https://") and entry.retrieved
    assert snapshot.hosting_hourly("ml.g4dn.xlarge", "us-east-1").usd == 0.736
    assert snapshot.hosting_hourly("ml.g4dn.2xlarge", "us-east-1").usd == 0.94
    assert ARTICLE in snapshot.hosting_hourly("ml.g4dn.xlarge", "us-east-1").note
    assert snapshot.hosting_hourly("ml.g4dn.xlarge", "eu-west-1").usd is None  # no other region is guessed
    assert snapshot.gpu_build_minute("BUILD_GENERAL1_SMALL", "us-east-1").usd is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not JSON"),
        ("[]", "Input should be"),
        ('{"schema_version": 2, "currency": "USD", "description": "x"}', "schema_version"),
        (
            '{"schema_version": 1, "currency": "USD", "description": "x", "sagemaker_hosting": [{"region": '
            '"us-east-1", "instance_type": "ml.q9.huge", "hourly_usd": 1, "source": "https://x", "retrieved": '
            '"2026-01-01"}]}',
            "sagemaker_hosting[0]: instance_type 'ml.q9.huge' is not in the instance catalogue",
        ),
        (
            '{"schema_version": 1, "currency": "USD", "description": "x", "sagemaker_hosting": [{"region": '
            '"us-east-1", "instance_type": "ml.g5.xlarge", "hourly_usd": NaN, "source": "https://x", "retrieved": '
            '"2026-01-01"}]}',
            "NaN is not a JSON number",
        ),
    ],
)
def test_bad_snapshot_names_file_and_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(PriceError) as raised:
        SnapshotPrices(path)
    assert str(path) in str(raised.value) and message in str(raised.value)


def test_credentials_decide_the_default_source(monkeypatch, tmp_path: Path) -> None:
    """--price-source auto: the Price List API when boto3 finds credentials, else the snapshot."""
    from endpoint_client.prices import credentials_available

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE", raising=False)
    assert credentials_available() is False
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert credentials_available() is True


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=20,
)
HOSTING_ROW = st.fixed_dictionaries(
    {
        "region": st.sampled_from(["us-east-1", "eu-west-1", "moon"]),
        "instance_type": st.sampled_from(["ml.g5.xlarge", "ml.q9.huge", ""]),
        "hourly_usd": st.one_of(st.floats(allow_nan=False), st.integers(), st.text(max_size=5)),
        "source": st.sampled_from(["https://x", "http://x", ""]),
        "retrieved": st.sampled_from(["2026-11-27", "yesterday"]),
    },
    optional={
        "published": st.sampled_from(["2023-12", "2023-12-05", "December 2023", ""]),
        "quote": st.one_of(st.text(max_size=8), st.integers()),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    document=JSON_VALUES
    | st.fixed_dictionaries(
        {"schema_version": st.just(1), "currency": st.just("USD"), "description": st.text(max_size=10)},
        optional={"sagemaker_hosting": st.lists(HOSTING_ROW, max_size=3)},
    )
)
def test_any_snapshot_document_is_read_or_refused_cleanly(tmp_path: Path, document: object) -> None:
    """Whatever JSON a snapshot file holds, it is read or refused with a PriceError naming the file; never another
    exception."""
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(document))
    try:
        snapshot = SnapshotPrices(path)
    except PriceError as error:
        assert str(path) in str(error)
        return
    for row in snapshot.snapshot.sagemaker_hosting:
        assert row.hourly_usd > 0 and row.instance_type in INSTANCE_TYPES
