"""Alarms and a dashboard per Triton endpoint, in cdk-monitoring-constructs' segment shape.

cdk-monitoring-constructs has no SageMaker module (../shared/README.md), so this is our own
"SageMaker segment": one metric source (the endpoint's own `metric_*` helpers), alarms as data
(`_AlarmSpec`), and widgets built from the same metrics. aws_cloudwatch L2s only.

Units: ModelLatency and ModelLoadingWaitTime are microseconds, so the configured milliseconds
are multiplied by 1000. CPU, GPU and GPU memory utilisation run 0-100 x the number of vCPUs/GPUs,
so per-device thresholds are multiplied by the variant's count. ModelCacheHit's Average is a
0-1 ratio. Missing data is NOT_BREACHING everywhere: an idle endpoint publishes no invocation
metrics and must not alarm.

Asynchronous endpoints (the endpoint has an AsyncInferenceConfig) publish only the metrics SageMaker lists in
"Alarms and logs for tracking metrics from asynchronous endpoints" ("Any metric not listed below is not published
if the endpoint is enabled for asynchronous inference", e.g. OverheadLatency, Invocations, InvocationsPerInstance),
plus host-level metrics. There the 4XX alarm counts Invocation4XXErrors (Sum >= ASYNC_ERRORS_4XX per period)
instead of its rate over Invocations, and the dashboard shows no Invocations, InvocationsPerInstance or
OverheadLatency: the instance count is CPUUtilization's SampleCount per minute (SageMaker "Troubleshooting"
asynchronous inference: "check the sample count statistic for a 1 minute period"), divided by the samples each
instance publishes per period when `MetricPublishFrequencyInSeconds` is not 60.
tests/contract/test_async_metrics_rules.py checks every shipped template against that list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from serving_facts.catalogue import INSTANCE_TYPES
from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving.endpoint import TritonEndpoint
from triton_cdk.serving.metrics import SageMakerInvocationMetrics

__all__ = [
    "ASYNC_ERRORS_4XX",
    "GT",
    "GTE",
    "LT",
    "MICROSECONDS_PER_MS",
    "AlarmThresholds",
    "TritonEndpointMonitoring",
    "VariantHardware",
    "invocation_alarm_specs",
    "new_alarm",
    "variant_hardware",
]

MICROSECONDS_PER_MS = 1000
GT = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
GTE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
LT = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
# Asynchronous endpoints: Invocation4XXErrors (Sum) per period that alarm; every failed asynchronous request alarms,
# as with the asynchronous failure alarms (triton_cdk/serving/async_inference.py, AsyncAlarmThresholds.failures).
ASYNC_ERRORS_4XX = 1


@dataclass(frozen=True)
class AlarmThresholds:
    latency_p99_ms: float = 1000
    errors_5xx: int = 1
    errors_4xx_rate_percent: float = 5
    gpu_memory_percent: float = 90
    cpu_percent: float = 90
    memory_percent: float = 90
    disk_percent: float = 85
    model_loading_wait_ms: float = 30000
    model_cache_hit_min_percent: float = 50
    period_seconds: int = 300
    evaluation_periods: int = 3
    datapoints_to_alarm: int = 2


@dataclass(frozen=True)
class VariantHardware:
    vcpus: int
    gpu_count: int


def variant_hardware(endpoint: TritonEndpoint) -> dict[str, VariantHardware]:
    """vCPUs and GPUs of each of `endpoint`'s variants whose instance type the catalogue knows."""
    found = {}
    for variant in endpoint.variants:
        instance = INSTANCE_TYPES.get(variant.instance_type)
        if instance is not None:
            found[variant.name] = VariantHardware(instance.vcpus, instance.gpu_count)
    return found


@dataclass(frozen=True)
class _AlarmSpec:
    kind: str
    description: str
    metric: Callable[[], cloudwatch.IMetric]
    threshold: float
    comparison: cloudwatch.ComparisonOperator


class TritonEndpointMonitoring(Construct):
    """Per variant: alarms (to `topic`, ALARM and OK) and a dashboard section.

    Alarm kinds: latency, errors_5xx, errors_4xx, cpu, memory; gpu_memory on GPU instances;
    disk, model_loading_wait and model_cache_hit on multi-model endpoints.

    Props (keyword-only): endpoint, thresholds, topic (Default: - no alarm actions), dashboard_name (Default: -
    generated), and two overrides of what the endpoint already states:
    - hardware_by_variant: vCPUs and GPUs per variant. Default: - each variant's instance type in the instance
      catalogue (serving_facts.catalogue); a variant whose type is not there must be given.
    - multi_model: Default: - the endpoint's model is a multi-model one (TritonModelData.from_multi_model_prefix).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: TritonEndpoint,
        thresholds: AlarmThresholds,
        hardware_by_variant: Mapping[str, VariantHardware] | None = None,
        multi_model: bool | None = None,
        topic: sns.ITopic | None = None,
        dashboard_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        hardware_by_variant = {**variant_hardware(endpoint), **(hardware_by_variant or {})}
        if multi_model is None:
            multi_model = endpoint.model.mode == "MultiModel"
        missing = sorted(set(endpoint.variant_names) - set(hardware_by_variant))
        if missing:
            raise InvalidPropsError(
                f"TritonEndpointMonitoring {self.node.path}: variants {missing} have instance types outside the "
                "instance catalogue (serving_facts.catalogue): give their hardware_by_variant"
            )
        if thresholds.datapoints_to_alarm > thresholds.evaluation_periods:
            raise InvalidPropsError(
                f"TritonEndpointMonitoring {self.node.path}: datapoints_to_alarm {thresholds.datapoints_to_alarm} "
                f"> evaluation_periods {thresholds.evaluation_periods}"
            )
        self.endpoint = endpoint
        self.thresholds = thresholds
        self.multi_model = multi_model
        # Only the metrics of SageMaker's list exist for an asynchronous endpoint (module doc).
        self.asynchronous = endpoint.async_output is not None
        self.alarms: dict[str, dict[str, cloudwatch.Alarm]] = {}
        self.alarm_names: list[str] = []  # literal names (the L2's alarm_name is a Ref token)
        for variant in endpoint.variant_names:
            scope_ = Construct(self, variant)
            specs = self._specs(variant, hardware_by_variant[variant])
            self.alarms[variant] = {spec.kind: self._alarm(scope_, variant, spec, topic) for spec in specs}
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=dashboard_name,
            default_interval=cdk.Duration.hours(3),
            widgets=self._widgets(hardware_by_variant),
        )

    def alarms_of_kind(self, kinds: Iterable[str]) -> list[cloudwatch.Alarm]:
        """Every variant's alarms of the given kinds (e.g. for auto-rollback)."""
        found = []
        for kind in kinds:
            for variant, alarms in self.alarms.items():
                if kind not in alarms:
                    raise InvalidPropsError(
                        f"no {kind!r} alarm on variant {variant!r} of {self.endpoint.endpoint_name}; "
                        f"it has {', '.join(alarms)}"
                    )
                found.append(alarms[kind])
        return found

    def _specs(self, variant: str, hardware: VariantHardware) -> list[_AlarmSpec]:
        t, e, v = self.thresholds, self.endpoint, variant
        period = cdk.Duration.seconds(t.period_seconds)
        specs = [
            *invocation_alarm_specs(t, e, asynchronous=self.asynchronous, variant=v),
            _AlarmSpec(
                "cpu",
                f"CPUUtilization above {t.cpu_percent:g} % per vCPU ({hardware.vcpus} vCPUs)",
                lambda: e.metric_cpu_utilization(variant=v, period=period),
                t.cpu_percent * hardware.vcpus,
                GT,
            ),
            _AlarmSpec(
                "memory",
                f"MemoryUtilization above {t.memory_percent:g} %",
                lambda: e.metric_memory_utilization(variant=v, period=period),
                t.memory_percent,
                GT,
            ),
        ]
        if hardware.gpu_count:
            specs.append(
                _AlarmSpec(
                    "gpu_memory",
                    f"GPUMemoryUtilization above {t.gpu_memory_percent:g} % per GPU ({hardware.gpu_count} GPUs)",
                    lambda: e.metric_gpu_memory_utilization(variant=v, period=period),
                    t.gpu_memory_percent * hardware.gpu_count,
                    GT,
                )
            )
        if self.multi_model:
            specs += [
                _AlarmSpec(
                    "disk",
                    f"DiskUtilization above {t.disk_percent:g} % (model cache)",
                    lambda: e.metric_disk_utilization(variant=v, period=period),
                    t.disk_percent,
                    GT,
                ),
                _AlarmSpec(
                    "model_loading_wait",
                    f"ModelLoadingWaitTime average above {t.model_loading_wait_ms:g} ms",
                    lambda: e.metric_model_loading_wait_time(variant=v, period=period),
                    t.model_loading_wait_ms * MICROSECONDS_PER_MS,
                    GT,
                ),
                _AlarmSpec(
                    "model_cache_hit",
                    f"ModelCacheHit below {t.model_cache_hit_min_percent:g} % of requests",
                    lambda: e.metric_model_cache_hit(variant=v, period=period),
                    t.model_cache_hit_min_percent / 100,
                    LT,
                ),
            ]
        return specs

    def _alarm(self, scope: Construct, variant: str, spec: _AlarmSpec, topic: sns.ITopic | None) -> cloudwatch.Alarm:
        name = f"{self.endpoint.endpoint_name}-{variant}-{spec.kind.replace('_', '-')}"
        self.alarm_names.append(name)
        return new_alarm(
            scope,
            spec,
            thresholds=self.thresholds,
            alarm_name=name,
            description_prefix=f"Triton endpoint {self.endpoint.endpoint_name} ({variant})",
            topic=topic,
        )

    def _widgets(self, hardware_by_variant: dict[str, VariantHardware]) -> list[list[cloudwatch.IWidget]]:
        e = self.endpoint
        all_alarms = [alarm for alarms in self.alarms.values() for alarm in alarms.values()]
        rows: list[list[cloudwatch.IWidget]] = [
            [
                cloudwatch.TextWidget(
                    markdown=f"# Triton endpoint `{e.endpoint_name}`\nVariants: {', '.join(e.variant_names)}",
                    width=24,
                    height=2,
                )
            ],
            [cloudwatch.AlarmStatusWidget(alarms=all_alarms, title="Alarms", width=24, height=3)],
        ]
        for variant in e.variant_names:
            rows += self._variant_widgets(variant, hardware_by_variant[variant])
        return rows

    def _variant_widgets(self, variant: str, hardware: VariantHardware) -> list[list[cloudwatch.IWidget]]:
        e, v, alarms = self.endpoint, variant, self.alarms[variant]
        minute = cdk.Duration.minutes(1)

        def graph(title: str, metrics: list[cloudwatch.IMetric], alarm: str | None = None, **props):
            annotations = [alarms[alarm].to_annotation()] if alarm in alarms else None
            return cloudwatch.GraphWidget(
                title=f"{v}: {title}", left=metrics, left_annotations=annotations, width=8, height=6, **props
            )

        if self.asynchronous:
            return self._async_variant_widgets(v, hardware, graph)
        # No metric reports the instance count; Invocations / InvocationsPerInstance gives it
        # whenever the variant is serving traffic.
        instances = cloudwatch.MathExpression(
            expression="invocations / perinstance",
            using_metrics={
                "invocations": e.metric_invocations(variant=v, period=minute),
                "perinstance": e.metric_invocations_per_instance(variant=v, period=minute),
            },
            label="instances (while serving traffic)",
            period=minute,
        )
        rows: list[list[cloudwatch.IWidget]] = [
            [
                graph(
                    "invocations",
                    [
                        e.metric_invocations(variant=v, period=minute),
                        e.metric_invocations_per_instance(variant=v, period=minute),
                    ],
                ),
                graph(
                    "latency (µs)",
                    [
                        e.metric_model_latency(variant=v, statistic="p50", period=minute),
                        e.metric_model_latency(variant=v, statistic="p99", period=minute),
                        e.metric_overhead_latency(variant=v, statistic="p99", period=minute),
                    ],
                    alarm="latency",
                ),
                graph(
                    "errors",
                    [
                        e.metric_invocation_4xx_errors(variant=v, period=minute),
                        e.metric_invocation_5xx_errors(variant=v, period=minute),
                    ],
                    alarm="errors_5xx",
                ),
            ],
            [
                graph("instance count", [instances]),
                graph(f"CPU (0-{100 * hardware.vcpus} %)", [e.metric_cpu_utilization(variant=v, period=minute)], "cpu"),
                graph("memory (%)", [e.metric_memory_utilization(variant=v, period=minute)], "memory"),
            ],
        ]
        return rows + self._device_widgets(v, hardware, graph)

    def _async_instance_count(self, v: str) -> cloudwatch.IMetric:
        """Instances of an asynchronous variant: CPUUtilization's SampleCount (SageMaker "Troubleshooting"
        asynchronous inference: "check the sample count statistic for a 1 minute period"), which counts one sample
        per instance per publication: an instance publishes every `metrics.publish_frequency_seconds`
        (MetricsConfig MetricPublishFrequencyInSeconds, utilization metrics), so over a period P the count is
        divided by P / frequency (P: 1 minute, or the frequency when longer)."""
        e = self.endpoint
        frequency = e.metrics.publish_frequency_seconds if e.metrics else 60
        period = max(60, frequency)
        samples = e.metric_cpu_utilization(
            variant=v, period=cdk.Duration.seconds(period), statistic="SampleCount", label="instances"
        )
        per_instance = period // frequency
        if per_instance == 1:
            return samples
        return cloudwatch.MathExpression(
            expression=f"samples / {per_instance}",
            using_metrics={"samples": samples},
            label="instances",
            period=cdk.Duration.seconds(period),
        )

    def _async_variant_widgets(self, v: str, hardware: VariantHardware, graph) -> list[list[cloudwatch.IWidget]]:
        """An asynchronous variant's rows: only metrics it publishes (module doc), no Invocations or OverheadLatency."""
        e, minute = self.endpoint, cdk.Duration.minutes(1)
        rows: list[list[cloudwatch.IWidget]] = [
            [
                graph("instance count", [self._async_instance_count(v)]),
                graph(
                    "latency (µs)",
                    [
                        e.metric_model_latency(variant=v, statistic="p50", period=minute),
                        e.metric_model_latency(variant=v, statistic="p99", period=minute),
                    ],
                    alarm="latency",
                ),
                graph(
                    "errors",
                    [
                        e.metric_invocation_4xx_errors(variant=v, period=minute),
                        e.metric_invocation_5xx_errors(variant=v, period=minute),
                    ],
                    alarm="errors_5xx",
                ),
            ],
            [
                graph(f"CPU (0-{100 * hardware.vcpus} %)", [e.metric_cpu_utilization(variant=v, period=minute)], "cpu"),
                graph("memory (%)", [e.metric_memory_utilization(variant=v, period=minute)], "memory"),
            ],
        ]
        return rows + self._device_widgets(v, hardware, graph)

    def _device_widgets(self, v: str, hardware: VariantHardware, graph) -> list[list[cloudwatch.IWidget]]:
        """GPU rows on GPU instances, model-cache rows on multi-model endpoints."""
        e, minute = self.endpoint, cdk.Duration.minutes(1)
        rows: list[list[cloudwatch.IWidget]] = []
        if hardware.gpu_count:
            gpu_max = 100 * hardware.gpu_count
            rows.append(
                [
                    graph(f"GPU (0-{gpu_max} %)", [e.metric_gpu_utilization(variant=v, period=minute)]),
                    graph(
                        f"GPU memory (0-{gpu_max} %)",
                        [e.metric_gpu_memory_utilization(variant=v, period=minute)],
                        "gpu_memory",
                    ),
                ]
            )
        if self.multi_model:
            rows.append(
                [
                    graph("disk (%)", [e.metric_disk_utilization(variant=v, period=minute)], "disk"),
                    graph(
                        "model loading wait (µs)",
                        [e.metric_model_loading_wait_time(variant=v, period=minute)],
                        "model_loading_wait",
                    ),
                    graph(
                        "model cache hit ratio / loaded models",
                        [e.metric_model_cache_hit(variant=v, period=minute)],
                        "model_cache_hit",
                        right=[e.metric_loaded_model_count(variant=v, period=minute)],
                    ),
                ]
            )
        return rows


def invocation_alarm_specs(
    t: AlarmThresholds, source: SageMakerInvocationMetrics, *, asynchronous: bool = False, **dimensions: str
) -> list[_AlarmSpec]:
    """The alarms every SageMaker hosting unit shares (latency, 5xx, 4xx rate), on AWS/SageMaker metrics.

    `source` is the endpoint (with `variant=` in `dimensions`) or the inference component: their metric
    helpers differ only in the dimensions they fill in (triton_cdk/serving/metrics.py). `asynchronous`: the 4xx
    alarm counts Invocation4XXErrors, because an asynchronous endpoint publishes no Invocations (module doc).
    """
    period = cdk.Duration.seconds(t.period_seconds)
    errors_4xx = (
        _AlarmSpec(
            "errors_4xx",
            f"{ASYNC_ERRORS_4XX} or more Invocation4XXErrors per {period.to_minutes()} min",
            lambda: source.metric_invocation_4xx_errors(statistic="Sum", period=period, **dimensions),
            ASYNC_ERRORS_4XX,
            GTE,
        )
        if asynchronous
        else _AlarmSpec(
            "errors_4xx",
            f"Invocation4XXErrors above {t.errors_4xx_rate_percent:g} % of invocations",
            lambda: cloudwatch.MathExpression(
                expression="IF(invocations > 0, 100 * errors / invocations, 0)",
                using_metrics={
                    "errors": source.metric_invocation_4xx_errors(period=period, **dimensions),
                    "invocations": source.metric_invocations(period=period, **dimensions),
                },
                label="4XX error rate (%)",
                period=period,
            ),
            t.errors_4xx_rate_percent,
            GT,
        )
    )
    return [
        _AlarmSpec(
            "latency",
            f"ModelLatency p99 above {t.latency_p99_ms:g} ms",
            lambda: source.metric_model_latency(statistic="p99", period=period, **dimensions),
            t.latency_p99_ms * MICROSECONDS_PER_MS,
            GT,
        ),
        _AlarmSpec(
            "errors_5xx",
            f"{t.errors_5xx} or more Invocation5XXErrors per {period.to_minutes()} min",
            lambda: source.metric_invocation_5xx_errors(period=period, **dimensions),
            t.errors_5xx,
            GTE,
        ),
        errors_4xx,
    ]


def new_alarm(
    scope: Construct,
    spec: _AlarmSpec,
    *,
    thresholds: AlarmThresholds,
    alarm_name: str,
    description_prefix: str,
    topic: sns.ITopic | None,
) -> cloudwatch.Alarm:
    """One alarm from its spec: shared evaluation settings, missing data NOT_BREACHING, ALARM and OK to `topic`."""
    alarm = cloudwatch.Alarm(
        scope,
        _construct_id(spec.kind),
        alarm_name=alarm_name,
        alarm_description=f"{description_prefix}: {spec.description}",
        metric=spec.metric(),
        threshold=spec.threshold,
        comparison_operator=spec.comparison,
        evaluation_periods=thresholds.evaluation_periods,
        datapoints_to_alarm=thresholds.datapoints_to_alarm,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    if topic is not None:
        alarm.add_alarm_action(actions.SnsAction(topic))
        alarm.add_ok_action(actions.SnsAction(topic))
    return alarm


def _construct_id(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_")) + "Alarm"
