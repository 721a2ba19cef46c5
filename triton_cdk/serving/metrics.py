"""The SageMaker invocation metrics an endpoint variant and an inference component share.

Both publish Invocations, ModelLatency, OverheadLatency and Invocation4XX/5XXErrors in `AWS/SageMaker`
("SageMaker AI metrics in CloudWatch"); only the dimensions differ (EndpointName + VariantName for a
variant, InferenceComponentName for a component). A class supplies `metric(name, **options)` with its
dimensions filled in; the named helpers here only pick the metric and its default statistic.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch

__all__ = ["INVOCATION_NAMESPACE", "SageMakerInvocationMetrics", "sagemaker_metric"]

INVOCATION_NAMESPACE = "AWS/SageMaker"


def sagemaker_metric(
    metric_name: str,
    dimensions: dict[str, str],
    *,
    namespace: str = INVOCATION_NAMESPACE,
    statistic: str = "Average",
    period: cdk.Duration | None = None,
    **props,
) -> cloudwatch.Metric:
    """One SageMaker metric. statistic Default: Average; period Default: 5 minutes."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=metric_name,
        dimensions_map=dimensions,
        statistic=statistic,
        period=period or cdk.Duration.minutes(5),
        **props,
    )


class SageMakerInvocationMetrics:
    """Named invocation metrics over the subclass's `metric(name, **options)`."""

    def metric(self, metric_name: str, **props) -> cloudwatch.Metric:
        raise NotImplementedError

    def metric_invocations(self, **props) -> cloudwatch.Metric:
        """Requests sent. Default statistic: Sum."""
        return self.metric("Invocations", **{"statistic": "Sum", **props})

    def metric_model_latency(self, **props) -> cloudwatch.Metric:
        """Time the container took to answer, in microseconds. Default: Average."""
        return self.metric("ModelLatency", **props)

    def metric_overhead_latency(self, **props) -> cloudwatch.Metric:
        """SageMaker's own overhead per request, in microseconds. Default: Average."""
        return self.metric("OverheadLatency", **props)

    def metric_invocation_4xx_errors(self, **props) -> cloudwatch.Metric:
        """Requests answered with a 4xx (bad payloads, unknown TargetModel). Default: Sum."""
        return self.metric("Invocation4XXErrors", **{"statistic": "Sum", **props})

    def metric_invocation_5xx_errors(self, **props) -> cloudwatch.Metric:
        """Requests answered with a 5xx (the container failed). Default: Sum."""
        return self.metric("Invocation5XXErrors", **{"statistic": "Sum", **props})
