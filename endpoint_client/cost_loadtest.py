"""Cost per million inferences from a load-test JSON (`cost --loadtest FILE`).

It reads the JSON of `python -m endpoint_client loadtest --json` (schema_version 1, endpoint_client/loadtest_report.py;
docs/performance.md, "Load tests"), and of it only these fields; every other key is ignored:

    {"schema_version": 1,
     "target": {"endpoint": "dev-triton-bert",                # optional: the SageMaker endpoint under test
                "region": "us-east-1", "variant": "AllTraffic",  # optional: where it ran, the variant it drove
                "inference_component": "dev-...-bert", ...},   # optional: set when it invoked a component
     "instances": 1,                                          # instances (or component copies) that served it
     "levels": [{"inferences_per_s": 812.5, "ok": 4875, "errors": {"500": 0}}, ...],
     "sustainable": {"inferences_per_s": 812.5, ...} | null}

The sustainable rate is `sustainable.inferences_per_s` when the file has one (the SLO's level with --slo-p99-ms,
else the error-free level with the highest throughput), otherwise the highest `inferences_per_s` of a level with
successful requests and no errors. Cost per million inferences = hourly price x instances / (rate x 3600) x
1,000,000, on the instance type of the variant under test (target.variant). On an inference-component endpoint
`instances` counts copies ("instances (or inference component copies)", loadtest --instances), so the caller
supplies the endpoint's instance count (endpoint_client/cost.py). The figure is finite and above zero, or None.
A key given twice in the file is refused (JSON leaves duplicates undefined; Python would keep the last silently).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from endpoint_client.errors import InvalidInputError
from endpoint_client.prices import PriceError, read_json_file
from model_build.app_config import format_validation_error

MAX_LOADTEST_BYTES = 16 * 1024 * 1024
MAX_LEVELS = 10_000


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class Target(_Loose):
    endpoint: str | None = Field(default=None, max_length=200)
    region: str | None = Field(default=None, max_length=64)
    variant: str | None = Field(default=None, max_length=200)
    inference_component: str | None = Field(default=None, max_length=200)


class Level(_Loose):
    inferences_per_s: float | None = Field(ge=0, allow_inf_nan=False)
    ok: int = Field(ge=0)
    errors: dict[str, int] = Field(max_length=1000)

    @field_validator("errors")
    @classmethod
    def _errors(cls, value: dict[str, int]) -> dict[str, int]:
        if any(count < 0 for count in value.values()):
            raise ValueError("error counts are whole numbers >= 0")
        return value


class Sustainable(_Loose):
    inferences_per_s: float = Field(ge=0, allow_inf_nan=False)


class LoadTest(_Loose):
    schema_version: int = Field(ge=1, le=1)
    target: Target = Target()
    instances: int = Field(ge=1, le=1000)
    levels: list[Level] = Field(min_length=1, max_length=MAX_LEVELS)
    sustainable: Sustainable | None = None


def read_loadtest(path: Path) -> LoadTest:
    try:
        document: Any = read_json_file(path, "load-test JSON", MAX_LOADTEST_BYTES)
    except PriceError as error:
        raise InvalidInputError(str(error)) from None
    try:
        return LoadTest.model_validate(document)
    except ValidationError as error:
        raise InvalidInputError(format_validation_error(str(path), error)) from None


def sustainable_rate(test: LoadTest) -> float | None:
    if test.sustainable is not None:
        best = test.sustainable.inferences_per_s
    else:
        clean = [lv.inferences_per_s for lv in test.levels if lv.ok and not any(lv.errors.values())]
        best = max((rate for rate in clean if rate is not None), default=0.0)
    return best if best > 0 else None


SIGNIFICANT_DIGITS = 6  # not cents: a cost per million can be far below a cent, and must not round to 0.0


def cost_per_million(hourly_usd: float | None, instances: int, rate: float | None) -> float | None:
    """USD per million inferences to SIGNIFICANT_DIGITS, or None when unknown or not a finite figure above zero
    (a subnormal rate overflows to infinity, a huge one underflows to 0.0: neither is a cost)."""
    if hourly_usd is None or rate is None:
        return None
    try:
        value = hourly_usd * instances / (rate * 3600) * 1_000_000
    except (OverflowError, ZeroDivisionError):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    rounded = float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return rounded if math.isfinite(rounded) and rounded > 0 else None
