"""The shipped configs' "replace me" placeholders: found in one place, for the deploy preflight (which refuses them)
and for the pipeline loader (an unconfigured pipeline is synthesized for checking only, issue #27 item 2)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# `replace-me`, `REPLACE_ME`, `Replace Me` inside a value; not a word such as "replacement".
PLACEHOLDER = re.compile(r"(?<![a-z])replace[-_ ]?me(?![a-z])", re.IGNORECASE)


def string_values(value: Any, loc: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """Every string inside a YAML document (or a model dump) with its location (keys and list indexes)."""
    if isinstance(value, str):
        yield loc, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from string_values(item, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from string_values(item, (*loc, index))


def field_name(loc: tuple) -> str:
    """`stages[0].name` for ("stages", 0, "name")."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def placeholder_fields(document: Any) -> list[str]:
    """The fields of `document` (a YAML document or a model dump) whose string value holds a placeholder."""
    return [field_name(loc) for loc, value in string_values(document) if PLACEHOLDER.search(value)]
