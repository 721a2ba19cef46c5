"""Cost per million inferences from a load-test JSON (`cost --loadtest FILE`).

The fields read (docs/performance.md, "Load-test fields read by cost"); every other key is ignored, so the full
output of `python -m endpoint_client loadtest --json` can be passed as it is:

    {"schema_version": 1,
     "target": {"endpoint": "dev-triton-bert", "instances": 1},      # both optional
     "levels": [{"throughput_inferences_per_second": 812.5, "errors": 0}, ...]}

`errors` is a count, or an object of counts by status ({"500": 2}). The sustainable rate is the highest
`throughput_inferences_per_second` of a level with no errors. Cost per million inferences =
hourly price x instances / (rate x 3600) x 1,000,000, on the instance type of the endpoint under test.
"""

from __future__ import annotations

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
    instances: int | None = Field(default=None, ge=1, le=1000)


class Level(_Loose):
    throughput_inferences_per_second: float = Field(ge=0, allow_inf_nan=False)
    errors: int | dict[str, int] = 0

    @field_validator("errors")
    @classmethod
    def _errors(cls, value: int | dict[str, int]) -> int | dict[str, int]:
        counts = value.values() if isinstance(value, dict) else [value]
        if any(count < 0 for count in counts):
            raise ValueError("error counts are whole numbers >= 0")
        return value

    @property
    def error_count(self) -> int:
        return sum(self.errors.values()) if isinstance(self.errors, dict) else self.errors


class LoadTest(_Loose):
    schema_version: int = Field(ge=1, le=1)
    target: Target = Target()
    levels: list[Level] = Field(min_length=1, max_length=MAX_LEVELS)


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
    clean = [level.throughput_inferences_per_second for level in test.levels if level.error_count == 0]
    best = max(clean, default=0.0)
    return best if best > 0 else None


def cost_per_million(hourly_usd: float | None, instances: int, rate: float | None) -> float | None:
    if hourly_usd is None or rate is None:
        return None
    return hourly_usd * instances / (rate * 3600) * 1_000_000
