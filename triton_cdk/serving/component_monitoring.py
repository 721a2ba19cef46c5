"""Alarms and a dashboard for an endpoint's inference components (one section per component).

Same shape as monitoring.py (alarms as `_AlarmSpec` data, widgets from the same metrics), on the
component's own metrics (triton_cdk/serving/inference_components.py): invocation metrics by
InferenceComponentName, utilisation normalised to 0-100 per copy, so thresholds are not scaled by the
device count. No metric reports the copy count; Invocations / InvocationsPerCopy gives it while
traffic flows. The wake-from-zero alarms belong to the scaling construct, not to the topic.
"""

from __future__ import annotations

from collections.abc import Iterable

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns
from constructs import Construct

from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving.inference_components import TritonComponentEndpoint, TritonInferenceComponent
from triton_cdk.serving.monitoring import (
    GT,
    AlarmThresholds,
    _AlarmSpec,
    invocation_alarm_specs,
    new_alarm,
)

__all__ = ["ALARM_KINDS", "TritonComponentMonitoring"]

ALARM_KINDS = ("latency", "errors_5xx", "errors_4xx", "cpu", "memory", "gpu_memory")


class TritonComponentMonitoring(Construct):
    """Per component: alarms (to `topic`, ALARM and OK) and a dashboard section.

    Kinds: latency, errors_5xx, errors_4xx, cpu, memory; gpu_memory on components that reserve GPUs.

    As TritonEndpointMonitoring, it asks for nothing the endpoint already states: the components and their
    reservations (GPUs, memory) come from `endpoint.components`; utilisation is per copy, so no vCPU or GPU count
    scales a threshold.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: TritonComponentEndpoint,
        thresholds: AlarmThresholds,
        topic: sns.ITopic | None = None,
        dashboard_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if thresholds.datapoints_to_alarm > thresholds.evaluation_periods:
            raise InvalidPropsError(
                f"TritonComponentMonitoring {self.node.path}: datapoints_to_alarm > evaluation_periods"
            )
        self.endpoint = endpoint
        self.thresholds = thresholds
        self.alarms: dict[str, dict[str, cloudwatch.Alarm]] = {}
        self.alarm_names: list[str] = []
        for component in endpoint.components:
            scope_ = Construct(self, component.component_name)
            self.alarms[component.component_name] = {
                spec.kind: self._alarm(scope_, component, spec, topic) for spec in self._specs(component)
            }
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=dashboard_name,
            default_interval=cdk.Duration.hours(3),
            widgets=self._widgets(),
        )

    def alarms_of(self, component: TritonInferenceComponent, kinds: Iterable[str]) -> list[cloudwatch.Alarm]:
        alarms = self.alarms[component.component_name]
        missing = [kind for kind in kinds if kind not in alarms]
        if missing:
            raise InvalidPropsError(
                f"no {missing} alarm on component {component.component_name}; it has {', '.join(alarms)}"
            )
        return [alarms[kind] for kind in kinds]

    def _specs(self, c: TritonInferenceComponent) -> list[_AlarmSpec]:
        t = self.thresholds
        period = cdk.Duration.seconds(t.period_seconds)
        specs = [
            *invocation_alarm_specs(t, c),
            _AlarmSpec(
                "cpu",
                f"CPUUtilizationNormalized above {t.cpu_percent:g} % of the reservation",
                lambda: c.metric_cpu_utilization(period=period),
                t.cpu_percent,
                GT,
            ),
            _AlarmSpec(
                "memory",
                f"memory above {t.memory_percent:g} % of the component's maximum ({_max_memory_mb(c)} MB)",
                lambda: c.metric_memory_utilization(period=period),
                # MemoryUtilizationNormalized is relative to MinMemoryRequiredInMb ("SageMaker AI metrics in
                # CloudWatch"), which a container may exceed up to its maximum: alarm on the share of the maximum.
                t.memory_percent * _max_memory_mb(c) / c.requirements.min_memory_mb,
                GT,
            ),
        ]
        if c.requirements.accelerators:
            specs.append(
                _AlarmSpec(
                    "gpu_memory",
                    f"GPUMemoryUtilizationNormalized above {t.gpu_memory_percent:g} %",
                    lambda: c.metric_gpu_memory_utilization(period=period),
                    t.gpu_memory_percent,
                    GT,
                )
            )
        return specs

    def _alarm(
        self, scope: Construct, c: TritonInferenceComponent, spec: _AlarmSpec, topic: sns.ITopic | None
    ) -> cloudwatch.Alarm:
        name = f"{c.component_name}-{spec.kind.replace('_', '-')}"
        self.alarm_names.append(name)
        return new_alarm(
            scope,
            spec,
            thresholds=self.thresholds,
            alarm_name=name,
            description_prefix=f"Triton inference component {c.component_name}",
            topic=topic,
        )

    def _widgets(self) -> list[list[cloudwatch.IWidget]]:
        e = self.endpoint
        names = [c.component_name for c in e.components]
        minute = cdk.Duration.minutes(1)
        all_alarms = [alarm for alarms in self.alarms.values() for alarm in alarms.values()]
        rows: list[list[cloudwatch.IWidget]] = [
            [
                cloudwatch.TextWidget(
                    markdown=f"# Triton endpoint `{e.endpoint_name}` (inference components)\n"
                    f"Components: {', '.join(names)}; instances {e.variant.min_instances}..{e.variant.max_instances}",
                    width=24,
                    height=2,
                )
            ],
            [cloudwatch.AlarmStatusWidget(alarms=all_alarms, title="Alarms", width=24, height=3)],
            [
                cloudwatch.GraphWidget(
                    title="instance reservations (%)",
                    left=[
                        e.metric(name, namespace="/aws/sagemaker/Endpoints", period=minute)
                        for name in ("CPUReservation", "MemoryReservation", "GPUReservation")
                    ],
                    width=24,
                    height=6,
                )
            ],
        ]
        for component in e.components:
            rows += self._component_widgets(component)
        return rows

    def _component_widgets(self, c: TritonInferenceComponent) -> list[list[cloudwatch.IWidget]]:
        alarms = self.alarms[c.component_name]
        minute = cdk.Duration.minutes(1)

        def graph(title: str, metrics: list[cloudwatch.IMetric], alarm: str | None = None):
            annotations = [alarms[alarm].to_annotation()] if alarm in alarms else None
            return cloudwatch.GraphWidget(
                title=f"{c.component_name}: {title}", left=metrics, left_annotations=annotations, width=8, height=6
            )

        copies = cloudwatch.MathExpression(
            expression="invocations / percopy",
            using_metrics={
                "invocations": c.metric_invocations(period=minute),
                "percopy": c.metric_invocations_per_copy(period=minute),
            },
            label="copies (while serving traffic)",
            period=minute,
        )
        row = [
            graph("invocations", [c.metric_invocations(period=minute), c.metric_invocations_per_copy(period=minute)]),
            graph(
                "latency (µs)",
                [
                    c.metric_model_latency(statistic="p50", period=minute),
                    c.metric_model_latency(statistic="p99", period=minute),
                    c.metric_overhead_latency(statistic="p99", period=minute),
                ],
                "latency",
            ),
            graph(
                "errors / no capacity",
                [
                    c.metric_invocation_4xx_errors(period=minute),
                    c.metric_invocation_5xx_errors(period=minute),
                    c.metric_no_capacity_invocation_failures(period=minute),
                ],
                "errors_5xx",
            ),
        ]
        usage = [
            graph("copy count", [copies]),
            graph("CPU (% of reservation)", [c.metric_cpu_utilization(period=minute)], "cpu"),
            graph("memory (%)", [c.metric_memory_utilization(period=minute)], "memory"),
        ]
        rows = [row, usage]
        if c.requirements.accelerators:
            rows.append(
                [
                    graph("GPU (%)", [c.metric_gpu_utilization(period=minute)]),
                    graph("GPU memory (%)", [c.metric_gpu_memory_utilization(period=minute)], "gpu_memory"),
                ]
            )
        return rows


def _max_memory_mb(component: TritonInferenceComponent) -> int:
    """The most memory a copy may use: its MaxMemoryRequiredInMb, else its reservation."""
    return component.requirements.max_memory_mb or component.requirements.min_memory_mb
