"""The endpoint config's MetricsConfig (issue #26 part 3), checked over every template of every shipped configuration.

Source: SageMaker API reference `MetricsConfig`: MetricPublishFrequencyInSeconds "Valid values: 10, 30, 60, 120, 180,
240, 300"; EnableEnhancedMetrics and EnableDetailedObservability are booleans; botocore's sagemaker model names
the members.
"""

from __future__ import annotations

import botocore.session
from contract_helpers import resources_of

FREQUENCIES = {10, 30, 60, 120, 180, 240, 300}


def test_every_metrics_config_uses_members_and_values_sagemaker_accepts(shipped_templates):
    members = set(botocore.session.get_session().get_service_model("sagemaker").shape_for("MetricsConfig").members)
    problems = []
    for shipped in shipped_templates:
        for logical_id, config in resources_of(shipped.template, "AWS::SageMaker::EndpointConfig").items():
            metrics = config["Properties"].get("MetricsConfig")
            if metrics is None:
                continue
            where = f"{shipped.label}: {logical_id}"
            if set(metrics) - members:
                problems.append(f"{where}: unknown members {sorted(set(metrics) - members)}")
            frequency = metrics.get("MetricPublishFrequencyInSeconds", 60)
            if frequency not in FREQUENCIES:
                problems.append(f"{where}: MetricPublishFrequencyInSeconds {frequency} not in {sorted(FREQUENCIES)}")
            for flag in ("EnableEnhancedMetrics", "EnableDetailedObservability"):
                if flag in metrics and not isinstance(metrics[flag], bool):
                    problems.append(f"{where}: {flag} {metrics[flag]!r} is not a boolean")
    assert not problems, "\n".join(problems)


def test_every_metrics_config_states_detailed_observability(shipped_templates):
    """botocore's MetricsConfig.EnableDetailedObservability: "The default value for new endpoint configurations is
    True" (container Prometheus metrics, per-GPU and per-instance host metrics). A MetricsConfig we write always
    states it, so the config's `detailed_observability` (default false) is what the endpoint gets."""
    stated = [
        (shipped.label, logical_id, config["Properties"]["MetricsConfig"].get("EnableDetailedObservability"))
        for shipped in shipped_templates
        for logical_id, config in resources_of(shipped.template, "AWS::SageMaker::EndpointConfig").items()
        if "MetricsConfig" in config["Properties"]
    ]
    assert stated and all(isinstance(value, bool) for _, _, value in stated), stated


def test_the_fixture_holds_a_metrics_config(shipped_templates):
    """examples/config/ensemble sets `metrics:`, so every gate sees a MetricsConfig."""
    assert any(
        "MetricsConfig" in c["Properties"]
        for t in shipped_templates
        if t.config == "examples/config/ensemble"
        for c in resources_of(t.template, "AWS::SageMaker::EndpointConfig").values()
    )
