"""Alarm thresholds have one default, the construct's (`AlarmThresholds`); the app schema reads it from there."""

from __future__ import annotations

import dataclasses

from triton_cdk.config.endpoint import AlarmSettings
from triton_cdk.serving.monitoring import AlarmThresholds


def test_schema_defaults_are_the_constructs() -> None:
    construct = AlarmThresholds()
    schema = AlarmSettings()
    assert {f.name for f in dataclasses.fields(AlarmThresholds)} == set(AlarmSettings.model_fields)
    for field in dataclasses.fields(AlarmThresholds):
        assert getattr(schema, field.name) == getattr(construct, field.name), field.name
