"""On-demand prices for `python -m endpoint_client cost`: the AWS Price List API, or the shipped snapshot.

Sources and rules:
- AWS Price List Query API (`pricing` client, GetProducts; botocore's `pricing` service model): the API is served
  from us-east-1 (also eu-central-1 and ap-south-1), whatever region is priced; `Filters` are TERM_MATCH on product
  attributes; every `PriceList` item is a JSON document (a string in the response) with `product.attributes` and
  `terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD`.
- SageMaker real-time hosting is service code `AmazonSageMaker`, attribute `component` = `Hosting`, `instanceName`
  = the `ml.*` type, `regionCode` = the region (one product per instance type and region, unit `Hrs`).
- CodeBuild is service code `CodeBuild`; an on-demand BUILD_GENERAL1_LARGE GPU build minute is the product whose
  `usagetype` ends with `LinuxGPU:g1.large`, as infracost's CodeBuild resource
  (internal/resources/aws/codebuild_project.go) matches it (/LinuxGPU:g1.large/). No source confirms the usage
  type of the GPU *small* minute (BUILD_GENERAL1_SMALL on LINUX_GPU_CONTAINER, "Linux GPU Small" in CodeBuild's
  "Build environment compute modes and types"), so the Price List path reports it as unknown instead of guessing
  a name (the snapshot may still carry it, with its source).
- SageMaker's filter stays `component` = `Hosting`: an unattributed sample filters on productFamily "ML Instance"
  and platoinstancetype "Hosting" instead, but no AWS document found states either, so nothing is changed on its
  word.
- A price that is missing, ambiguous (several different on-demand prices for one product) or not in USD is
  *unknown*: the report says so and never substitutes another figure.
- The snapshot (endpoint_client/data/prices-snapshot.json) holds only prices found in a published source, each
  entry with its URL and dates; it is printed as the price source whenever it is used.
- Snapshot `schema_version` 1: an optional field added later (`quote`; `published` as a month) keeps version 1, as
  every file written for version 1 still reads the same; removing or renaming a field, or changing what one means,
  raises it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field, ValidationError, model_validator

from endpoint_client.errors import EndpointClientError
from model_build.app_config import format_validation_error
from serving_facts.catalogue import INSTANCE_TYPES
from serving_facts.settings import StrictModel

SNAPSHOT_SCHEMA_VERSION = 1
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024
PRICING_API_REGION = "us-east-1"  # the Price List Query API's endpoint region (any region is priced from it)
MAX_UNIT_USD = 10_000.0  # HostingPrice.hourly_usd's bound: no on-demand unit price reaches it
REGION_PATTERN = r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]{1,2}$"
BuildCompute = Literal["BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_LARGE"]
# CodeBuild's price-list usage type of the GPU large minute (infracost, codebuild_project.go: /LinuxGPU:g1.large/).
# The small GPU minute's usage type is not confirmed by any source found: it has no entry, so its price is unknown.
CODEBUILD_USAGE_SUFFIX: dict[str, str] = {
    "BUILD_GENERAL1_LARGE": "LinuxGPU:g1.large",
}


class PriceError(EndpointClientError):
    """A price source cannot be read (a bad snapshot file, the Price List API refusing the call)."""


@dataclass(frozen=True)
class Price:
    """One price in USD, or None when unknown; `note` says where it came from or why it is unknown."""

    usd: float | None
    note: str


class PriceSource(Protocol):
    description: str

    def hosting_hourly(self, instance_type: str, region: str) -> Price: ...

    def gpu_build_minute(self, compute: str, region: str) -> Price: ...


# --- snapshot -------------------------------------------------------------------------------------------------


class _Sourced(StrictModel):
    region: str = Field(pattern=REGION_PATTERN, description="AWS region code, e.g. us-east-1.")
    source: str = Field(pattern=r"^https://\S+$", max_length=500, description="URL the price was read from.")
    published: str | None = Field(
        default=None,
        pattern=r"^[0-9]{4}-[0-9]{2}(-[0-9]{2})?$",
        description="Date the source states or was published: a day, or a month where the source names only a month "
        "(a bill for December 2023 is 2023-12).",
    )
    retrieved: str = Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", description="Date the price was recorded here.")
    quote: str | None = Field(
        default=None,
        pattern=r"^[^\x00-\x1f\x7f]{1,500}$",
        description="The source's own words around the figure (optional; one line, at most 500 characters).",
    )


class HostingPrice(_Sourced):
    instance_type: str = Field(max_length=64, description="An ml.* type of the instance catalogue.")
    hourly_usd: float = Field(gt=0, lt=10_000, description="On-demand real-time inference price per instance-hour.")

    @model_validator(mode="after")
    def _known_type(self) -> HostingPrice:
        if self.instance_type not in INSTANCE_TYPES:
            raise ValueError(f"instance_type {self.instance_type!r} is not in the instance catalogue")
        return self


class BuildPrice(_Sourced):
    compute_type: BuildCompute = Field(description="CodeBuild on-demand GPU compute type.")
    minute_usd: float = Field(gt=0, lt=1_000, description="On-demand price per build minute (LINUX_GPU_CONTAINER).")


class Snapshot(StrictModel):
    schema_version: Literal[1] = Field(description="Version of this file's layout.")
    currency: Literal["USD"] = Field(description="Currency of every price.")
    description: str = Field(max_length=1000, description="What the snapshot holds and how it was made.")
    sagemaker_hosting: list[HostingPrice] = Field(default_factory=list, max_length=10_000)
    codebuild_gpu: list[BuildPrice] = Field(default_factory=list, max_length=10_000)

    @model_validator(mode="after")
    def _once(self) -> Snapshot:
        for key, rows in (
            ("sagemaker_hosting", [(p.region, p.instance_type) for p in self.sagemaker_hosting]),
            ("codebuild_gpu", [(p.region, p.compute_type) for p in self.codebuild_gpu]),
        ):
            twice = sorted({row for row in rows if rows.count(row) > 1})
            if twice:
                raise ValueError(f"{key}: {twice} listed more than once; one price per region and type")
        return self


def default_snapshot_path() -> Path:
    return Path(str(resources.files("endpoint_client") / "data" / "prices-snapshot.json"))


def read_json_file(path: Path, what: str, limit: int = MAX_SNAPSHOT_BYTES) -> Any:
    """A JSON document of at most `limit` bytes; every failure is a PriceError naming the file."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(limit + 1)
    except OSError as error:
        raise PriceError(f"{path}: cannot read the {what} ({error.strerror or error})") from None
    if len(data) > limit:
        raise PriceError(f"{path}: the {what} is larger than {limit} bytes")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError as error:
        raise PriceError(f"{path}: the {what} is not UTF-8 ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise PriceError(
            f"{path}: the {what} is not JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    except (ValueError, RecursionError) as error:
        raise PriceError(f"{path}: the {what} is not usable JSON: {str(error)[:200]}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """RFC 8259 4: names within an object SHOULD be unique, and with duplicates behaviour is unpredictable; Python
    keeps the last silently. A key given twice is refused."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key {key[:80]!r} is given twice in one object")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class SnapshotPrices:
    """Prices from a snapshot file; a type or region it does not list is an unknown price."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_snapshot_path()
        document = read_json_file(self.path, "price snapshot")
        try:
            self.snapshot = Snapshot.model_validate(document)
        except ValidationError as error:
            raise PriceError(format_validation_error(str(self.path), error)) from None
        self._hosting = {(p.region, p.instance_type): p for p in self.snapshot.sagemaker_hosting}
        self._builds = {(p.region, p.compute_type): p for p in self.snapshot.codebuild_gpu}
        dates = sorted({p.retrieved for p in [*self.snapshot.sagemaker_hosting, *self.snapshot.codebuild_gpu]})
        when = f"recorded {dates[0]}" + (f" to {dates[-1]}" if len(dates) > 1 else "") if dates else "empty"
        self.description = f"price snapshot {self.path} ({when}; each price's source is listed with it)"

    def hosting_hourly(self, instance_type: str, region: str) -> Price:
        entry = self._hosting.get((region, instance_type))
        if entry is None:
            return Price(None, f"unknown price: the snapshot has no {instance_type} in {region}")
        return Price(entry.hourly_usd, _cite(entry))

    def gpu_build_minute(self, compute: str, region: str) -> Price:
        entry = self._builds.get((region, compute))
        if entry is None:
            return Price(None, f"unknown price: the snapshot has no CodeBuild GPU {compute} minute in {region}")
        return Price(entry.minute_usd, _cite(entry))


def _cite(entry: _Sourced) -> str:
    published = f", published {entry.published}" if entry.published else ""
    return f"{entry.source}{published}, recorded {entry.retrieved}"


# --- AWS Price List API ---------------------------------------------------------------------------------------


class PriceListPrices:
    """Prices from the AWS Price List Query API (GetProducts), one call per distinct product, cached per run."""

    description = "AWS Price List API (pricing:GetProducts, on-demand)"

    def __init__(self, client: Any) -> None:
        self.client = client
        self._cache: dict[tuple[str, ...], Price] = {}

    @classmethod
    def from_boto3(cls) -> PriceListPrices:
        import boto3

        return cls(boto3.client("pricing", region_name=PRICING_API_REGION))

    def hosting_hourly(self, instance_type: str, region: str) -> Price:
        key = ("hosting", instance_type, region)
        if key not in self._cache:
            filters = {"regionCode": region, "instanceName": instance_type, "component": "Hosting"}
            items = self._products("AmazonSageMaker", filters)
            what = f"SageMaker {instance_type} in {region}"
            self._cache[key] = _one_price(items, unit_words=("hr", "hour"), what=what)
        return self._cache[key]

    def gpu_build_minute(self, compute: str, region: str) -> Price:
        key = ("build", compute, region)
        if key not in self._cache:
            suffix = CODEBUILD_USAGE_SUFFIX.get(compute)
            if suffix is None:
                return Price(
                    None,
                    f"unknown price: no source confirms the Price List usage type of a CodeBuild GPU {compute} "
                    "minute (infracost matches LinuxGPU:g1.large only)",
                )
            items = self._products("CodeBuild", {"regionCode": region})
            chosen = [i for i in items if str(_attributes(i).get("usagetype", "")).endswith(suffix)]
            self._cache[key] = _one_price(chosen, unit_words=("min",), what=f"CodeBuild GPU {compute} in {region}")
        return self._cache[key]

    def _products(self, service: str, filters: dict[str, str]) -> list[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        request: dict[str, Any] = {
            "ServiceCode": service,
            "FormatVersion": "aws_v1",
            "Filters": [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in filters.items()],
        }
        items: list[dict[str, Any]] = []
        for _page in range(100):  # a product query returns a few items; 100 pages is a runaway guard
            try:
                response = self.client.get_products(**request)
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "?")
                raise PriceError(
                    f"AWS Price List API: GetProducts({service}) failed: {code}: "
                    f"{error.response.get('Error', {}).get('Message', '')[:300]}; "
                    "use --price-source snapshot to price from the shipped snapshot"
                ) from None
            except BotoCoreError as error:
                raise PriceError(
                    f"AWS Price List API: GetProducts({service}) failed: {error}; "
                    "use --price-source snapshot to price from the shipped snapshot"
                ) from None
            items += [_price_item(raw, service) for raw in response.get("PriceList", [])]
            token = response.get("NextToken")
            if not token:
                return items
            request["NextToken"] = token
        raise PriceError(f"AWS Price List API: GetProducts({service}) kept paging past 100 pages")


def _price_item(raw: Any, service: str) -> dict[str, Any]:
    """A PriceList item: a JSON document, sent as a string (botocore leaves it undecoded)."""
    if isinstance(raw, dict):
        return raw
    try:
        item = json.loads(raw)
    except (TypeError, ValueError):
        raise PriceError(f"AWS Price List API: GetProducts({service}) returned an item that is not JSON") from None
    if not isinstance(item, dict):
        raise PriceError(f"AWS Price List API: GetProducts({service}) returned an item that is not a JSON object")
    return item


def _attributes(item: dict[str, Any]) -> dict[str, Any]:
    product = item.get("product")
    attributes = product.get("attributes") if isinstance(product, dict) else None
    return attributes if isinstance(attributes, dict) else {}


def _on_demand_usd(item: dict[str, Any], unit_words: tuple[str, ...]) -> list[float]:
    terms = item.get("terms")
    on_demand = terms.get("OnDemand") if isinstance(terms, dict) else None
    found: list[float] = []
    for offer in (on_demand or {}).values() if isinstance(on_demand, dict) else []:
        dimensions = offer.get("priceDimensions") if isinstance(offer, dict) else None
        for dimension in (dimensions or {}).values() if isinstance(dimensions, dict) else []:
            if not isinstance(dimension, dict):
                continue
            unit = str(dimension.get("unit", "")).lower()
            per_unit = dimension.get("pricePerUnit")
            usd = per_unit.get("USD") if isinstance(per_unit, dict) else None
            if not any(word in unit for word in unit_words) or usd is None:
                continue
            try:
                value = float(usd)
            except (TypeError, ValueError):
                continue
            # 0.0 rows are free-tier or placeholder dimensions; a price at or above MAX_UNIT_USD (the snapshot's own
            # bound on an hourly price) is not a real on-demand rate and would overflow the monthly figures.
            if math.isfinite(value) and 0 < value < MAX_UNIT_USD:
                found.append(value)
    return found


def _one_price(items: list[dict[str, Any]], *, unit_words: tuple[str, ...], what: str) -> Price:
    prices = sorted({usd for item in items for usd in _on_demand_usd(item, unit_words)})
    if not prices:
        return Price(None, f"unknown price: the Price List API has no on-demand USD price for {what}")
    if len(prices) > 1:
        listed = ", ".join(f"{p:g}" for p in prices[:5])
        return Price(None, f"unknown price: the Price List API has several on-demand prices for {what} ({listed})")
    return Price(prices[0], "AWS Price List API")


def credentials_available() -> bool:
    """Whether boto3 finds credentials (environment, profile, SSO, instance role); no call is made."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return False
    try:
        return boto3.Session().get_credentials() is not None
    except BotoCoreError:  # a broken profile file: no credentials; the snapshot is used and named in the report
        return False
