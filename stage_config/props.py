"""One generic step from a config schema model to a construct's frozen dataclass props (issue #23 item 4).

A `PropsMap` declares, once, how a schema model (pydantic, `stage_config`) becomes a construct's props
(`triton_cdk`): fields map by name; a props field named differently in the YAML is given in `renames`
(props field -> schema field; the YAML key users write never changes); a props field the config does not hold
(derived by the stack, e.g. from the instance catalogue) is named in `computed` and passed to `build`; a props field
left to the construct's default is named in `construct_defaults`; a schema field the props do not take (it switches
something on or is read elsewhere) is named in `not_props`.

Every field of both sides must be accounted for: a declaration that misses one raises `TypeError` when it is made
(at import), so a field added to one side only fails every test run; tests/foundation/test_config_props.py checks
every declared pair.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

P = TypeVar("P")

PROPS_MAPS: list[PropsMap[Any]] = []


@dataclasses.dataclass(frozen=True)
class PropsMap(Generic[P]):
    """How `schema` validates into `props` (see the module docstring); registered in PROPS_MAPS."""

    schema: type[BaseModel]
    props: type[P]
    renames: Mapping[str, str] = dataclasses.field(default_factory=dict)
    computed: tuple[str, ...] = ()
    construct_defaults: tuple[str, ...] = ()
    not_props: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        found = self.problems()
        if found:
            raise TypeError(f"PropsMap {self.schema.__name__} -> {self.props.__name__}: " + "; ".join(found))
        PROPS_MAPS.append(self)

    @property
    def _props_fields(self) -> dict[str, dataclasses.Field[Any]]:
        if not dataclasses.is_dataclass(self.props):
            raise TypeError(f"{self.props.__name__} is not a dataclass")
        return {f.name: f for f in dataclasses.fields(self.props)}

    def schema_field(self, props_field: str) -> str:
        return self.renames.get(props_field, props_field)

    def problems(self) -> list[str]:
        """Props fields with no schema field and schema fields with no props field, neither declared."""
        props_fields = self._props_fields
        schema_fields = set(self.schema.model_fields)
        found = []
        if not self.props.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            found.append(f"{self.props.__name__} is not a frozen dataclass")
        declared = set(self.computed) | set(self.construct_defaults)
        for name in sorted(set(self.renames) | declared):
            if name not in props_fields:
                found.append(f"{name} is declared but is no field of {self.props.__name__}")
        for name in self.construct_defaults:
            f = props_fields.get(name)
            if f is not None and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                found.append(f"{name} is left to the construct's default, but it has none")
        # A computed props field named as a schema field is derived from it (e.g. scheduled actions).
        mapped = {self.schema_field(n) for n in props_fields}
        for name in sorted(props_fields):
            if name not in declared and self.schema_field(name) not in schema_fields:
                found.append(
                    f"props field {name} has no schema field {self.schema_field(name)!r} "
                    "(rename it, or declare it computed / construct_defaults)"
                )
        for name in sorted(schema_fields - mapped - set(self.not_props)):
            found.append(f"schema field {name} has no props field (map it, or declare it in not_props)")
        for name in self.not_props:
            if name not in schema_fields:
                found.append(f"not_props names {name}, no field of {self.schema.__name__}")
        return found

    def build(self, settings: BaseModel, **computed: Any) -> P:
        """The props from `settings`, plus the `computed` fields (exactly those declared)."""
        if not isinstance(settings, self.schema):
            raise TypeError(f"expected {self.schema.__name__}, got {type(settings).__name__}")
        if set(computed) != set(self.computed):
            raise TypeError(
                f"{self.props.__name__}: computed fields {sorted(computed)} given, {sorted(self.computed)} declared"
            )
        skipped = set(self.computed) | set(self.construct_defaults)
        values = {n: getattr(settings, self.schema_field(n)) for n in self._props_fields if n not in skipped}
        return self.props(**values, **computed)


def unmapped(maps: Iterable[PropsMap[Any]]) -> list[str]:
    """Every declared pair's problems (empty when all are complete); the test over every pair."""
    return [f"{m.schema.__name__} -> {m.props.__name__}: {p}" for m in maps for p in m.problems()]
