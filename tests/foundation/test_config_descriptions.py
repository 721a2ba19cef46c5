"""Every field of the configuration schemas says what it does: config/<stage>.yaml (`AppConfig`, with the model
settings of serving_facts/settings.py) and config/pipeline.yaml (`PipelineConfig`), walked recursively through every
nested model, list, mapping and optional."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from stage_config import AppConfig
from stage_config.pipeline import PipelineConfig


def nested_models(annotation) -> list[type[BaseModel]]:
    """The pydantic models inside an annotation (`X | None`, `list[X]`, `dict[str, X]`, `Annotated[X, ...]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in typing.get_args(annotation) for model in nested_models(argument)]


def schema_fields(root: type[BaseModel]) -> dict[str, str | None]:
    """`Model.field` -> description, for every model reachable from `root`."""
    found: dict[str, str | None] = {}
    seen: set[type[BaseModel]] = set()
    pending = [root]
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            found[f"{model.__name__}.{name}"] = field.description
            pending.extend(nested_models(field.annotation))
    return found


@pytest.mark.parametrize("root", [AppConfig, PipelineConfig], ids=lambda m: m.__name__)
def test_every_field_has_a_description(root):
    fields = schema_fields(root)
    assert len(fields) > len(root.model_fields), "the walk did not reach the nested models"
    missing = sorted(name for name, description in fields.items() if not (description or "").strip())
    assert missing == [], f"fields without a description: {missing}"


def test_the_walk_reaches_the_model_settings_and_the_pipeline_stages():
    assert "TensorRTSettings.precision" in schema_fields(AppConfig)
    assert "ShapeRange.opt" in schema_fields(AppConfig)
    assert "ComponentSettings.max_copies" in schema_fields(AppConfig)
    assert "PipelineStageSettings.approval" in schema_fields(PipelineConfig)


@pytest.mark.parametrize("root", [AppConfig, PipelineConfig], ids=lambda m: m.__name__)
def test_the_json_schema_carries_the_descriptions(root):
    """Editors read the JSON schema (e.g. yaml-language-server): the descriptions reach it."""
    schema = root.model_json_schema()
    assert schema["properties"]["name" if root is PipelineConfig else "stage"]["description"]
