"""The config schema is the props (issue #23 item 4): every schema model that becomes a construct's props does so
through one declared PropsMap (stage_config/props.py, stage_config/endpoint_props.py), and every field of each side
is accounted for."""

from __future__ import annotations

import ast
import dataclasses

import botocore.session
import pytest
from pydantic import Field

from serving_facts.settings import StrictModel
from stage_config import endpoint_props
from stage_config.api_limits import COOLDOWN_SECONDS
from stage_config.async_inference import AsyncScalingConfig
from stage_config.endpoint import (
    AlarmSettings,
    AutoscalingSettings,
    CopyScalingSettings,
    DeploymentSettings,
    EndpointSettings,
    MetricsSettings,
)
from stage_config.loader import PROJECT_ROOT
from stage_config.props import PROPS_MAPS, PropsMap, unmapped
from stage_config.shadow import ShadowSettings
from triton_cdk.serving.endpoint import ProductionVariant
from triton_cdk.serving.monitoring import AlarmThresholds


def test_every_declared_pair_maps_every_field():
    """No props field without a schema field and no schema field without a props field, unless declared."""
    assert len(PROPS_MAPS) >= 7
    assert unmapped(PROPS_MAPS) == []


def test_the_stack_maps_alarms_metrics_and_copy_scaling_through_the_maps():
    """The pairs the issue names (AlarmSettings -> AlarmThresholds, MetricsSettings -> MetricsPublishing, copy
    scaling) are declared, and build their props from the YAML's values."""
    alarms = AlarmSettings(latency_p99_ms=250, evaluation_periods=5, datapoints_to_alarm=4)
    assert endpoint_props.ALARMS.build(alarms) == AlarmThresholds(
        latency_p99_ms=250, evaluation_periods=5, datapoints_to_alarm=4
    )
    metrics = endpoint_props.METRICS.build(MetricsSettings(enhanced=True, publish_frequency_seconds=10))
    assert (metrics.enhanced_metrics, metrics.publish_frequency_seconds) == (True, 10)
    copies = endpoint_props.COPY_SCALING.build(CopyScalingSettings(invocations_per_copy=7), min_copies=0, max_copies=3)
    assert (copies.min_copies, copies.max_copies, copies.invocations_per_copy) == (0, 3, 7)


def test_schema_defaults_are_the_props_defaults():
    """Each default lives once, in the construct: building from an empty schema model gives the props' defaults."""
    assert endpoint_props.ALARMS.build(AlarmSettings()) == AlarmThresholds()


class _Schema(StrictModel):
    a: int = Field(default=1)
    b: int = Field(default=2)


@dataclasses.dataclass(frozen=True)
class _Props:
    a: int
    c: int = 0


def test_a_field_on_one_side_only_fails_when_declared():
    """A field added to the schema or the props alone is refused at import, naming it."""
    with pytest.raises(TypeError, match=r"props field c has no schema field.*schema field b has no props field"):
        PropsMap(_Schema, _Props)
    assert PropsMap(_Schema, _Props, renames={"c": "b"}).build(_Schema(b=5)) == _Props(a=1, c=5)
    PROPS_MAPS.pop()


def test_build_takes_exactly_the_computed_fields():
    m = PropsMap(_Schema, _Props, computed=("c",), not_props=("b",))
    PROPS_MAPS.pop()
    assert m.build(_Schema(), c=3) == _Props(a=1, c=3)
    with pytest.raises(TypeError, match="computed fields"):
        m.build(_Schema())


def test_the_shadow_and_component_props_are_built_through_the_maps():
    """Issue #23 item 4 remnants: the shadow's ProductionVariant and ShadowModel, the component endpoint's
    ComponentVariant, ComponentRollingUpdate and each ServedComponent come from declared pairs."""
    pairs = {(m.schema.__name__, m.props.__name__) for m in PROPS_MAPS}
    assert {
        ("ShadowSettings", "ProductionVariant"),
        ("ShadowSettings", "ShadowModel"),
        ("InferenceComponentsSettings", "ComponentVariant"),
        ("DeploymentSettings", "ComponentRollingUpdate"),
        ("ComponentSettings", "ServedComponent"),
    } <= pairs
    shadow = ShadowSettings(model="bert", instance_type="ml.g5.xlarge", sampling_percent=30, variant_name="Try")
    variant = endpoint_props.SHADOW_VARIANT.build(
        shadow,
        inference_ami_version=None,
        model_data_download_timeout_seconds=None,
        container_startup_health_check_timeout_seconds=600,
    )
    assert variant == ProductionVariant(
        name="Try", instance_type="ml.g5.xlarge", container_startup_health_check_timeout_seconds=600
    )
    rolling = endpoint_props.COMPONENT_ROLLING.build(DeploymentSettings(wait_seconds=120))
    assert rolling.wait_seconds == 120


def test_every_cooldown_field_takes_the_one_bound():
    """Application Auto Scaling's `Cooldown` shape (botocore, application-autoscaling) states no min or max, so the
    bounds are one constant (stage_config/api_limits.py COOLDOWN_SECONDS, its reason there) used by every cooldown
    field of the schema. Should botocore state a range one day, this fails: take it from botocore then."""
    shape = botocore.session.get_session().get_service_model("application-autoscaling").shape_for("Cooldown")
    assert "min" not in shape.metadata and "max" not in shape.metadata
    models = [AutoscalingSettings, CopyScalingSettings, AsyncScalingConfig]
    fields = [(m, n) for m in models for n in m.model_fields if "cooldown" in n]
    assert len(fields) == 6
    for model, name in fields:
        bounds = {type(c).__name__: c for c in model.model_fields[name].metadata}
        assert (bounds["Ge"].ge, bounds["Le"].le) == COOLDOWN_SECONDS, f"{model.__name__}.{name}"


def test_every_endpoint_field_is_read_by_the_app() -> None:
    """EndpointSettings has no PropsMap: stacks/ passes its fields to the constructs by hand (docs/architecture.md,
    "A new config field"). A field no module of stacks/ names would be accepted and never deployed; each must appear
    there as an attribute (`endpoint.<field>`) or a string (a `computed` entry, a getattr)."""
    named: set[str] = set()
    for module in (PROJECT_ROOT / "stacks").glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Attribute):
                named.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named.add(node.value)
    assert set(EndpointSettings.model_fields) - named == set()
