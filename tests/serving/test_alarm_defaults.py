"""Each default lives once, in the construct; the app's config schema reads it from there.

Alarm thresholds come from `AlarmThresholds`; cooldowns, data capture, bake time, execution timeout, variant names,
instance counts and weights, component instances, routing and copies, network isolation from the construct that
takes them (`stage_config.endpoint.construct_default`). The pairs below are every place where a schema model
and a construct prop (or keyword argument) mean the same thing; wherever both have a default they must agree.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from stage_config.build import BuildSettings
from stage_config.endpoint import (
    AlarmSettings,
    AutoscalingSettings,
    ComponentSettings,
    CopyScalingSettings,
    DataCaptureSettings,
    DeploymentSettings,
    EndpointSettings,
    InferenceComponentsSettings,
    ScheduledScaling,
    VariantSettings,
    rollback_alarm_seconds,
)
from triton_cdk.artifact_build.build_project import ModelBuildProject
from triton_cdk.serving import component_scaling, component_sizing
from triton_cdk.serving.autoscaling import ScalingSettings, ScheduledCapacity
from triton_cdk.serving.deployment import DEFAULT_BAKE_SECONDS, DeploymentPolicy, TrafficRouting
from triton_cdk.serving.endpoint import DataCapture, ProductionVariant, TritonEndpoint
from triton_cdk.serving.inference_components import (
    ComponentRollingUpdate,
    ComponentVariant,
    TritonComponentEndpoint,
    TritonInferenceComponent,
)
from triton_cdk.serving.monitoring import AlarmThresholds
from triton_cdk.serving.triton_model import TritonModel

# (schema model, construct: a dataclass or a callable, {schema field: construct prop} where the names differ)
PAIRS: list[tuple[type[BaseModel], type | Callable[..., Any], dict[str, str]]] = [
    (AlarmSettings, AlarmThresholds, {}),
    (AutoscalingSettings, ScalingSettings, {}),
    (ScheduledScaling, ScheduledCapacity, {}),
    (CopyScalingSettings, component_scaling.CopyScaling, {}),
    (DataCaptureSettings, DataCapture, {}),
    (DeploymentSettings, ComponentRollingUpdate, {}),
    (DeploymentSettings, DeploymentPolicy.blue_green, {}),
    (DeploymentSettings, DeploymentPolicy.rolling, {}),
    (DeploymentSettings, TrafficRouting.all_at_once, {}),
    (EndpointSettings, ProductionVariant, {}),
    (EndpointSettings, ComponentVariant, {"variant_name": "name"}),
    (EndpointSettings, TritonModel.__init__, {}),
    (EndpointSettings, TritonComponentEndpoint.__init__, {}),
    (EndpointSettings, TritonEndpoint.from_endpoint_name, {"variant_name": "variant_names"}),
    (VariantSettings, ProductionVariant, {}),
    (InferenceComponentsSettings, ComponentVariant, {}),
    (ComponentSettings, TritonInferenceComponent.__init__, {}),
    (ComponentSettings, component_sizing.resolve, {}),
    (BuildSettings, ModelBuildProject.__init__, {}),
]

# Where the app deliberately chooses otherwise than the construct (whose default is SageMaker's), and why.
APP_CHOICES = {
    (DeploymentSettings, DeploymentPolicy.blue_green, "termination_wait_seconds"): (
        "the app keeps the old fleet 300 s for a rollback; the construct, like SageMaker, keeps none"
    ),
    (DeploymentSettings, TrafficRouting.all_at_once, "wait_seconds"): (
        "the app bakes 900 s so its default rollback alarms can act; the construct, like SageMaker, bakes none"
    ),
}


def construct_defaults(construct: type | Callable[..., Any]) -> dict[str, Any]:
    """The props with a default, read independently of the schema's own helper."""
    if dataclasses.is_dataclass(construct):
        return {f.name: f.default for f in dataclasses.fields(construct) if f.default is not dataclasses.MISSING}
    return {
        name: parameter.default
        for name, parameter in inspect.signature(construct).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def normal(value: Any) -> Any:
    """Sequences compare as lists: a construct's `()` is the schema's `[]`."""
    return list(value) if isinstance(value, tuple | list) else value


def same(schema: Any, construct: Any) -> bool:
    if isinstance(schema, bool) or isinstance(construct, bool):
        return type(schema) is type(construct) and schema == construct
    return normal(schema) == normal(construct)


def shared_defaults(model: type[BaseModel], construct, renames: dict[str, str]):
    defaults = construct_defaults(construct)
    for field, info in model.model_fields.items():
        prop = renames.get(field, field)
        if prop in defaults and not info.is_required():
            yield field, info.get_default(call_default_factory=True), defaults[prop]


def _id(pair) -> str:
    model, construct, _ = pair
    return f"{model.__name__}-{getattr(construct, '__qualname__', construct)}"


@pytest.mark.parametrize("pair", PAIRS, ids=[_id(p) for p in PAIRS])
def test_schema_defaults_are_the_constructs(pair) -> None:
    model, construct, renames = pair
    shared = list(shared_defaults(model, construct, renames))
    assert shared, f"{_id(pair)}: no shared default (a stale pair?)"
    for field, schema, default in shared:
        if (model, construct, field) in APP_CHOICES:
            assert not same(schema, default), f"{model.__name__}.{field} now equals the construct's: drop APP_CHOICES"
            continue
        if field == "variant_name" and isinstance(default, tuple):
            default = default[0]  # from_endpoint_name: the one variant an imported endpoint has by default
        assert same(schema, default), f"{model.__name__}.{field}: schema {schema!r}, construct {default!r}"


def test_alarm_settings_have_every_threshold_of_the_construct() -> None:
    construct = AlarmThresholds()
    schema = AlarmSettings()
    assert {f.name for f in dataclasses.fields(AlarmThresholds)} == set(AlarmSettings.model_fields)
    for field in dataclasses.fields(AlarmThresholds):
        assert getattr(schema, field.name) == getattr(construct, field.name), field.name


def test_the_default_bake_lets_the_default_alarms_roll_back() -> None:
    """900 s: (datapoints_to_alarm 2 + 1) x period 300 s of the default alarms."""
    assert rollback_alarm_seconds(AlarmSettings()) <= DEFAULT_BAKE_SECONDS
    assert DeploymentSettings().wait_seconds == DEFAULT_BAKE_SECONDS


def test_documented_derived_defaults_are_the_sizing_rules() -> None:
    """The component memory reservation the schema describes is component_sizing's."""
    description = ComponentSettings.model_fields["min_memory_mb"].description or ""
    assert f"Default: {component_sizing.DEFAULT_MIN_MEMORY_MB}" in description
