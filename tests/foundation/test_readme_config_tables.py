"""The configuration reference cannot drift from the code: README's tables name exactly the schema's keys, and the
reference tables of docs/serving.md and docs/build.md name every field and state the schema's defaults.

The schema is the pydantic models the loader validates with (stage_config, serving_facts/settings.py);
README's "Top level" and "Models" tables list one key per row (several as `a`, `b`; nested as `a.b`).
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass

import pytest
import yaml
from pydantic import BaseModel
from synth_helpers import PROJECT_ROOT

from serving_facts.settings import ModelSettings
from stage_config import AppConfig
from stage_config.async_inference import AsyncInferenceSettings
from stage_config.build import BuildSettings
from stage_config.endpoint import (
    AlarmSettings,
    AutoscalingSettings,
    ComponentSettings,
    ContainerSettings,
    DataCaptureSettings,
    DeploymentSettings,
    EndpointSettings,
    InferenceComponentsSettings,
    MetricsSettings,
    VariantSettings,
)
from stage_config.shadow import ShadowSettings
from triton_cdk.serving import component_sizing

README = PROJECT_ROOT / "README.md"


def table_keys(heading: str) -> set[str]:
    text = README.read_text()
    section = text.split(f"### {heading}", 1)[1].split("\n#", 1)[0]
    keys = set()
    for row in re.findall(r"^\| (.+?) \|", section, flags=re.MULTILINE):
        keys |= set(re.findall(r"`([a-z_.]+)`", row))
    return keys


def schema_keys(model: type[BaseModel], keys: set[str]) -> set[str]:
    """Top-level fields, with documented dotted keys checked against the nested model."""
    fields = set(model.model_fields)
    for key in keys:
        head, _, rest = key.partition(".")
        if rest:
            nested = model.model_fields[head].annotation
            assert rest in nested.model_fields, f"README documents {key}, which {nested.__name__} does not have"
    return fields


@pytest.mark.parametrize(("heading", "model"), [("Top level", AppConfig), ("Models (`models:`)", ModelSettings)])
def test_every_field_is_documented_and_every_documented_key_exists(heading, model):
    documented = table_keys(heading)
    fields = schema_keys(model, documented)
    top = {key.split(".", 1)[0] for key in documented}
    assert fields - top == set(), f"{heading}: fields missing from README: {sorted(fields - top)}"
    assert top - fields == set(), f"{heading}: README keys the schema lacks: {sorted(top - fields)}"


# --- Reference tables with a Default column (docs/serving.md, docs/build.md): keys and stated defaults ---------------
#
# Each table lists one field per row in its first column (`a`, `a.b`, `a[].b`, `components.<model>`; several keys as
# `a.b` / `c`, where `c` inherits `a.`; `….x` continues the table's per-entry prefix) and the default in the column
# headed "Default": `required`; a literal in backticks, optionally followed by a remark in parentheses (`false`,
# `900`, `[latency, errors_5xx]`), or a bare number; several as `300` / `60`, one per key. Anything else is prose
# (none, SageMaker's, derived, ...): the schema's default must then be None, i.e. left to SageMaker, Triton or a
# rule, and a value the schema does set must be stated as a literal. A stated literal must equal the schema's
# default; where the schema leaves the value to a construct's rule (None), to `DERIVED`.

DOCS = README.parent / "docs"
REQUIRED, PROSE = object(), object()
LITERAL = re.compile(r"^`([^`]+)`(\s*\(.*\))?$")
BARE_NUMBER = re.compile(r"^(\d+(?:\.\d+)?)\b")


@dataclass(frozen=True)
class Table:
    page: str
    heading: str  # the heading line the table follows (its first table)
    model: type[BaseModel]
    ellipsis: str = ""  # what a leading `….` stands for


TABLES = [
    Table("serving.md", "### Endpoint", EndpointSettings),
    Table("serving.md", "### `extra_variants[]`", VariantSettings),
    Table("serving.md", "### `container` (the Triton container's environment)", ContainerSettings),
    Table("serving.md", "### `autoscaling` (leave out for a fixed instance count)", AutoscalingSettings),
    Table("serving.md", "### `deployment` (how an update shifts traffic)", DeploymentSettings),
    Table("serving.md", "### `alarms`", AlarmSettings),
    Table("serving.md", "### `metrics` (leave out for SageMaker's defaults)", MetricsSettings),
    Table("serving.md", "### `data_capture`", DataCaptureSettings),
    Table("serving.md", "## Shadow tests", ShadowSettings),
    Table("serving.md", "## Asynchronous endpoints", AsyncInferenceSettings),
    Table("serving.md", "## Inference components", InferenceComponentsSettings, ellipsis="components.<model>."),
    Table("build.md", "### Configuration (`build:` in `config/<stage>.yaml`)", BuildSettings),
]
# Left to a construct's rule in the schema (None), stated as a number in the docs.
DERIVED = {(ComponentSettings, "min_memory_mb"): component_sizing.DEFAULT_MIN_MEMORY_MB}


@dataclass(frozen=True)
class Row:
    key: str  # as the docs write it, prefixes expanded
    model: type[BaseModel]  # the model holding the field
    field: str
    entry: bool  # the key names a mapping's entry (`components.<model>`), not the field itself
    stated: object  # REQUIRED, PROSE or the literal


def table_rows(table: Table) -> list[tuple[list[str], str]]:
    """(keys, default text) per row of the first table after the heading."""
    text = (DOCS / table.page).read_text()
    assert f"\n{table.heading}\n" in text, f"{table.page}: no heading {table.heading!r}"
    section = text.split(f"\n{table.heading}\n", 1)[1]
    section = re.split(r"^#", section, maxsplit=1, flags=re.MULTILINE)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert "Default" in header, f"{table.page} {table.heading}: no Default column in {header}"
    default_column = header.index("Default")
    rows = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        keys = re.findall(r"`([^`]+)`", cells[0])
        first = keys[0].replace("….", table.ellipsis)
        prefix = first.rpartition(".")[0]
        keys = [first] + [f"{prefix}.{key}" if prefix and "." not in key else key for key in keys[1:]]
        rows.append((keys, cells[default_column]))
    return rows


def stated_default(text: str) -> object:
    if text == "required":
        return REQUIRED
    for pattern in (LITERAL, BARE_NUMBER):
        match = pattern.match(text)
        if match:
            return yaml.safe_load(match.group(1))
    return PROSE


def resolve(model: type[BaseModel], key: str) -> tuple[type[BaseModel], str, bool]:
    """(model, field, entry) a documented key names; fails on a key the schema lacks."""
    holder, name, parts = model, "", key.split(".")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "<model>":
            mapping = typing.get_origin(holder.model_fields[name].annotation) is dict
            assert mapping, f"{key}: {holder.__name__}.{name} is not a mapping"
            if last:
                return holder, name, True
            continue
        name = part.removesuffix("[]")
        assert name in model.model_fields, f"docs document {key}, but {model.__name__} has no field {name!r}"
        if last:
            return model, name, False
        nested = nested_models(model.model_fields[name].annotation)
        assert len(nested) == 1, f"{key}: {model.__name__}.{name} holds no settings of its own"
        holder, model = model, nested[0]
    raise AssertionError(key)


def nested_models(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in typing.get_args(annotation) for model in nested_models(argument)]


def documented(table: Table) -> list[Row]:
    rows = []
    for keys, text in table_rows(table):
        texts = [part.strip() for part in text.split(" / ")]
        if len(texts) != len(keys):
            texts = [text] * len(keys)  # one default for every key of the row
        for key, part in zip(keys, texts, strict=True):
            model, field, entry = resolve(table.model, key)
            rows.append(Row(key, model, field, entry, stated_default(part)))
    return rows


def same(documented_value: object, schema_value: object) -> bool:
    if isinstance(documented_value, bool) or isinstance(schema_value, bool):
        return type(documented_value) is type(schema_value) and documented_value == schema_value
    return documented_value == schema_value


def default_problem(row: Row) -> str | None:
    info = row.model.model_fields[row.field]
    if row.entry:
        return None  # a mapping's entry has no default of its own; its fields have rows of their own
    if info.is_required():
        return None if row.stated is REQUIRED else "the schema requires it; the docs must say `required`"
    if row.stated is REQUIRED:
        return "the docs say required, but the schema has a default"
    schema = info.get_default(call_default_factory=True)
    if row.stated is PROSE:
        return None if schema is None else f"the schema's default is {schema!r}; state it as a literal"
    expected = DERIVED.get((row.model, row.field), schema)
    if not same(row.stated, expected):
        return f"the docs state {row.stated!r}, the schema's default is {expected!r}"
    return None


@pytest.mark.parametrize("table", TABLES, ids=[f"{t.page}:{t.heading.lstrip('# ')}" for t in TABLES])
def test_documented_defaults_are_the_schemas(table):
    problems = [f"{row.key}: {problem}" for row in documented(table) if (problem := default_problem(row))]
    assert problems == [], f"{table.page} {table.heading}:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", sorted({t.page for t in TABLES}))
def test_every_field_has_a_row(page):
    """Every field of a documented model has a row, or a table of its own (`container`, `alarms`, ...)."""
    tables = [t for t in TABLES if t.page == page]
    rows = [row for table in tables for row in documented(table)]
    covered = {(row.model, row.field) for row in rows}
    own_table = {t.model for t in tables}
    missing = []
    for model in {t.model for t in tables} | {row.model for row in rows}:
        for name, info in model.model_fields.items():
            if (model, name) in covered or set(nested_models(info.annotation)) & own_table:
                continue
            missing.append(f"{model.__name__}.{name}")
    assert missing == [], f"docs/{page}: fields without a row: {sorted(missing)}"
