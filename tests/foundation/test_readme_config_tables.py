"""README's configuration tables name exactly the schema's keys, so the reference cannot drift from the code.

The schema is the pydantic models the loader validates with (triton_cdk/config, model_build/settings.py);
README's "Top level" and "Models" tables list one key per row (several as `a`, `b`; nested as `a.b`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from model_build.settings import ModelSettings
from triton_cdk.config import AppConfig

README = Path(__file__).resolve().parents[2] / "README.md"


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
