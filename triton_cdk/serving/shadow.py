"""A shadow variant: a model that receives a sampled copy of the endpoint's live requests and whose answers are
never returned (SageMaker "Shadow tests"; CreateEndpointConfig `ShadowProductionVariants`).

Sources (SageMaker API reference and developer guide):
- CreateEndpointConfig `ShadowProductionVariants`: "If you use this field, you can only specify one variant for
  ProductionVariants and one variant for ShadowProductionVariants" (botocore's sagemaker model states the same).
- "Create a shadow test": "SageMaker AI supports a maximum of one shadow variant per endpoint. For an endpoint with a
  shadow variant, there can be a maximum of one production variant." For each variant the model, instance type and
  instance count are the user's; the share of requests copied is the "traffic sampling percentage".
- "Testing models with shadow variants" (model-shadow-deployment): the shadow is a ProductionVariant with its own
  SageMaker Model, its own `InitialVariantWeight`.
- ProductionVariant `InitialVariantWeight`: traffic follows the ratio of a variant's weight to the others'. The
  share of the production variant's requests copied to the shadow is taken as the shadow's weight relative to the
  production variant's (`shadow_weight` below). Evidence: AWS's own example gives both variants weight 1 (every
  request copied); the ratio reading is the API's definition of the weight applied to the shadow and what public
  write-ups state; no AWS page says it in so many words, so check the copied share (the shadow's Invocations
  against production's, on the comparison dashboard) after the first deploy.
- "Shadow tests" dashboard: SageMaker compares invocation and instance metrics of the production and shadow
  variants side by side; the metrics carry the shadow's VariantName (`ShadowComparison`).

The shadow's alarms never roll production back: none is made here, and the shadow's metrics are not the
endpoint's `variant_names` (whose alarms feed `add_rollback_alarm`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving.endpoint import ProductionVariant
from triton_cdk.serving.metrics import sagemaker_metric
from triton_cdk.serving.triton_model import TritonModel

__all__ = [
    "DEFAULT_SHADOW_VARIANT_NAME",
    "MAX_PRODUCTION_VARIANTS_WITH_SHADOW",
    "MAX_SHADOW_VARIANTS",
    "SAMPLING_PERCENT",
    "ShadowComparison",
    "ShadowVariant",
    "shadow_weight",
]

# "Create a shadow test": at most one shadow variant per endpoint, and then at most one production variant.
MAX_SHADOW_VARIANTS = 1
MAX_PRODUCTION_VARIANTS_WITH_SHADOW = 1
# The traffic sampling percentage (InferenceExperiment ShadowModelVariantConfig.SamplingPercentage: "Maximum value
# of 100"); 0 would copy nothing.
SAMPLING_PERCENT = (1, 100)
DEFAULT_SHADOW_VARIANT_NAME = "Shadow"


def shadow_weight(production_weight: float, sampling_percent: int) -> float:
    """The shadow's InitialVariantWeight that copies `sampling_percent` % of the production variant's requests."""
    # The share first: production x (k / 100) never rounds above production (x <= 1), production x k / 100 can.
    return production_weight * (sampling_percent / 100)


@dataclass(frozen=True)
class ShadowVariant:
    """The shadow production variant and the model it runs.

    - model: the shadow's own TritonModel (another artifact, or the same model built for another instance type).
    - variant: its name, instance type and count, timeouts and GPU host image; `initial_weight` is ignored (the
      weight follows `sampling_percent`).
    - sampling_percent: share of the production variant's requests copied to the shadow, 1-100.
    """

    model: TritonModel
    variant: ProductionVariant
    sampling_percent: int

    def problems(self) -> list[str]:
        found = [f"shadow {p}" for p in self.variant.problems()]
        low, high = SAMPLING_PERCENT
        if not low <= self.sampling_percent <= high:
            found.append(f"shadow sampling_percent must be between {low} and {high}, got {self.sampling_percent}")
        return found

    def problems_with(self, variants: Sequence[ProductionVariant]) -> list[str]:
        """What SageMaker refuses about this shadow next to the endpoint's production `variants`."""
        found = self.problems()
        if len(variants) > MAX_PRODUCTION_VARIANTS_WITH_SHADOW:
            found.append(
                f"an endpoint with a shadow variant has at most {MAX_PRODUCTION_VARIANTS_WITH_SHADOW} production "
                f"variant (CreateEndpointConfig ShadowProductionVariants), got {len(variants)}"
            )
        if any(v.name == self.variant.name for v in variants):
            found.append(f"shadow variant name {self.variant.name!r} is also a production variant's name")
        return found

    def render(self, production: ProductionVariant) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        v = self.variant
        return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=v.name,
            model_name=self.model.model_name,
            instance_type=v.instance_type,
            initial_instance_count=v.initial_instance_count,
            initial_variant_weight=shadow_weight(production.initial_weight, self.sampling_percent),
            volume_size_in_gb=v.volume_size_gb,
            model_data_download_timeout_in_seconds=v.model_data_download_timeout_seconds,
            container_startup_health_check_timeout_in_seconds=v.container_startup_health_check_timeout_seconds,
            inference_ami_version=v.inference_ami_version,
        )


class ShadowComparison(Construct):
    """Dashboard rows comparing the shadow with the production variant: model and overhead latency (p50/p99),
    4xx/5xx errors and invocations, one graph per measure with both variants (VariantName dimension).

    Props: endpoint_name, production_variant, shadow_variant, dashboard (the widgets are added to it).
    No alarm: the shadow's failures are the test's result, not production's (nothing may roll production back).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        production_variant: str,
        shadow_variant: str,
        dashboard: cloudwatch.Dashboard,
    ) -> None:
        super().__init__(scope, construct_id)
        if production_variant == shadow_variant:
            raise InvalidPropsError(f"ShadowComparison {self.node.path}: the two variants must differ")
        self.endpoint_name = endpoint_name
        self.variants = (production_variant, shadow_variant)
        for row in self.rows():
            dashboard.add_widgets(*row)

    def metric(self, metric_name: str, variant: str, **props) -> cloudwatch.Metric:
        """`metric_name` of one of the two variants (AWS/SageMaker; EndpointName, VariantName)."""
        if variant not in self.variants:
            raise InvalidPropsError(f"unknown variant {variant!r}; compared: {list(self.variants)}")
        dimensions = {"EndpointName": self.endpoint_name, "VariantName": variant}
        return sagemaker_metric(metric_name, dimensions, **{"label": f"{variant} {metric_name}", **props})

    def rows(self) -> list[list[cloudwatch.IWidget]]:
        production, shadow = self.variants
        minute = cdk.Duration.minutes(1)

        def both(metric_name: str, statistic: str) -> list[cloudwatch.IMetric]:
            return [
                self.metric(metric_name, v, statistic=statistic, period=minute, label=f"{v} {statistic}")
                for v in self.variants
            ]

        def graph(title: str, metrics: list[cloudwatch.IMetric]) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=f"shadow vs production: {title}", left=metrics, width=8, height=6)

        return [
            [
                cloudwatch.TextWidget(
                    markdown=f"## Shadow test\nProduction `{production}` vs shadow `{shadow}` (the shadow's answers "
                    "are not returned to callers).",
                    width=24,
                    height=2,
                )
            ],
            [
                graph("model latency (µs)", both("ModelLatency", "p50") + both("ModelLatency", "p99")),
                graph("overhead latency p99 (µs)", both("OverheadLatency", "p99")),
                graph("invocations", both("Invocations", "Sum")),
            ],
            [
                graph("4xx errors", both("Invocation4XXErrors", "Sum")),
                graph("5xx errors", both("Invocation5XXErrors", "Sum")),
            ],
        ]
