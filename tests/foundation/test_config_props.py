"""The config schema is the props (issue #23 item 4): every schema model that becomes a construct's props does so
through one declared PropsMap (stage_config/props.py, stage_config/endpoint_props.py), and every field of each side
is accounted for."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import Field

from serving_facts.settings import StrictModel
from stage_config import endpoint_props
from stage_config.endpoint import AlarmSettings, CopyScalingSettings, MetricsSettings
from stage_config.props import PROPS_MAPS, PropsMap, unmapped
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
