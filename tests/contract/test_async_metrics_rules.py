"""An asynchronous endpoint is watched and scaled on metrics it publishes, over every template of every shipped config.

Source: SageMaker "Alarms and logs for tracking metrics from asynchronous endpoints"
(https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html): "The metrics below are an exhaustive
list of metrics for asynchronous endpoints and are in the AWS/SageMaker namespace. Any metric not listed below is not
published if the endpoint is enabled for asynchronous inference. Such metrics include (but are not limited to):
OverheadLatency, Invocations, InvocationsPerInstance". Its tables:
- "Common Endpoint Metrics": Invocation4XXErrors, Invocation5XXErrors, ModelLatency;
- "Asynchronous Inference Endpoint Metrics" with the EndpointName dimension: ApproximateBacklogSize,
  ApproximateBacklogSizePerInstance, ApproximateAgeOfOldestRequest, HasBacklogWithoutCapacity (also SageMaker
  "Autoscale an asynchronous endpoint", the scale-from-zero alarm's metric);
- with the EndpointName and VariantName dimensions: RequestDownloadFailures, ResponseUploadFailures,
  NotificationFailures, RequestDownloadLatency, ResponseUploadLatency, ExpiredRequests, InvocationFailures,
  InvocationsProcesssed (the page's spelling), TimeInBacklog, TotalProcessingTime.
The page adds: "Amazon SageMaker Asynchronous Inference also includes host-level metrics" (SageMaker "Monitor
SageMaker AI with Amazon CloudWatch", endpoint instance metrics in /aws/sagemaker/Endpoints: CPUUtilization,
MemoryUtilization, DiskUtilization, GPUUtilization, GPUMemoryUtilization).

Checked: every CloudWatch alarm (single metric or metric math), every dashboard graph metric and every scaling policy
whose metric carries the EndpointName of an endpoint whose EndpointConfig has an AsyncInferenceConfig, or whose
scalable target is a variant of such an endpoint. Metrics in a namespace of the model's own (not AWS/..., /aws/...)
are outside the page's scope and not checked.
"""

from __future__ import annotations

import json

from contract_helpers import logical_id_of, resources_of

PAGE = "SageMaker 'Alarms and logs for tracking metrics from asynchronous endpoints'"
ASYNC_METRICS = {
    "AWS/SageMaker": {
        # Common Endpoint Metrics
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "ModelLatency",
        # Asynchronous Inference Endpoint Metrics: EndpointName
        "ApproximateBacklogSize",
        "ApproximateBacklogSizePerInstance",
        "ApproximateAgeOfOldestRequest",
        "HasBacklogWithoutCapacity",
        # EndpointName and VariantName
        "RequestDownloadFailures",
        "ResponseUploadFailures",
        "NotificationFailures",
        "RequestDownloadLatency",
        "ResponseUploadLatency",
        "ExpiredRequests",
        "InvocationFailures",
        "InvocationsProcesssed",
        "TimeInBacklog",
        "TotalProcessingTime",
    },
    # "also includes host-level metrics"
    "/aws/sagemaker/Endpoints": {
        "CPUUtilization",
        "MemoryUtilization",
        "DiskUtilization",
        "GPUUtilization",
        "GPUMemoryUtilization",
    },
}
NOT_PUBLISHED = {"OverheadLatency", "Invocations", "InvocationsPerInstance"}  # the page's own examples


def _aws_namespace(namespace: str) -> bool:
    return namespace.startswith(("AWS/", "/aws/"))


def _async_endpoint_names(template: dict) -> set[str]:
    configs = {
        logical_id
        for logical_id, config in resources_of(template, "AWS::SageMaker::EndpointConfig").items()
        if "AsyncInferenceConfig" in config["Properties"]
    }
    names = set()
    for endpoint in resources_of(template, "AWS::SageMaker::Endpoint").values():
        properties = endpoint["Properties"]
        if logical_id_of(properties.get("EndpointConfigName")) in configs:
            assert isinstance(properties.get("EndpointName"), str), "an asynchronous endpoint's name is a literal"
            names.add(properties["EndpointName"])
    return names


def _dimension_endpoints(dimensions) -> set[str]:
    return {d["Value"] for d in dimensions or [] if d.get("Name") == "EndpointName" and isinstance(d["Value"], str)}


def _alarm_metrics(alarm: dict):
    """(namespace, metric name, endpoint names) of a CloudWatch alarm's metric(s)."""
    p = alarm["Properties"]
    if "MetricName" in p:
        yield p.get("Namespace"), p["MetricName"], _dimension_endpoints(p.get("Dimensions"))
    for query in p.get("Metrics", []):
        metric = query.get("MetricStat", {}).get("Metric")
        if metric:
            yield metric.get("Namespace"), metric["MetricName"], _dimension_endpoints(metric.get("Dimensions"))


def _dashboard_body(body) -> dict:
    """The dashboard JSON, tokens (region, alarm ARNs) replaced by a placeholder string."""
    if isinstance(body, dict) and "Fn::Join" in body:
        body = "".join(part if isinstance(part, str) else "TOKEN" for part in body["Fn::Join"][1])
    return json.loads(body)


def _dashboard_metrics(dashboard: dict):
    """(namespace, metric name, endpoint names) of every metric line of a dashboard's widgets."""
    for widget in _dashboard_body(dashboard["Properties"]["DashboardBody"]).get("widgets", []):
        for line in widget.get("properties", {}).get("metrics", []):
            fields = [f for f in line if isinstance(f, str)]
            if len(fields) < 2:
                continue  # a math expression line: its inputs are lines of their own
            dimensions = dict(zip(fields[2::2], fields[3::2], strict=False))
            endpoint = {dimensions["EndpointName"]} if "EndpointName" in dimensions else set()
            yield fields[0], fields[1], endpoint


def _scaling_metrics(template: dict):
    """(namespace, metric name, endpoint names) of every target tracking policy; a predefined metric type stands as
    its own name in namespace 'predefined'."""
    targets = resources_of(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    for policy in resources_of(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values():
        p = policy["Properties"]
        tracking = p.get("TargetTrackingScalingPolicyConfiguration")
        if not tracking:
            continue  # step scaling: its alarm is checked with the alarms
        target = targets.get(logical_id_of(p.get("ScalingTargetId")), {}).get("Properties", {})
        resource_id = target.get("ResourceId", p.get("ResourceId"))
        endpoints = set()
        if isinstance(resource_id, str) and resource_id.startswith("endpoint/"):
            endpoints.add(resource_id.split("/")[1])
        if "PredefinedMetricSpecification" in tracking:
            yield "predefined", tracking["PredefinedMetricSpecification"]["PredefinedMetricType"], endpoints
        custom = tracking.get("CustomizedMetricSpecification")
        if custom and "MetricName" in custom:
            watched = endpoints | _dimension_endpoints(custom.get("Dimensions"))
            yield custom.get("Namespace"), custom["MetricName"], watched
        for query in (custom or {}).get("Metrics", []):
            metric = query.get("MetricStat", {}).get("Metric")
            if metric:
                yield (
                    metric.get("Namespace"),
                    metric["MetricName"],
                    endpoints | _dimension_endpoints(metric.get("Dimensions")),
                )


def unpublished_metric_uses(template: dict) -> tuple[list[str], int]:
    """(problems, metrics checked) of one template: every use of a metric an asynchronous endpoint does not publish."""
    asynchronous = _async_endpoint_names(template)
    if not asynchronous:
        return [], 0
    uses = []
    for logical_id, alarm in resources_of(template, "AWS::CloudWatch::Alarm").items():
        uses += [(f"alarm {logical_id}", *m) for m in _alarm_metrics(alarm)]
    for logical_id, dashboard in resources_of(template, "AWS::CloudWatch::Dashboard").items():
        uses += [(f"dashboard {logical_id}", *m) for m in _dashboard_metrics(dashboard)]
    uses += [("scaling policy", *m) for m in _scaling_metrics(template)]
    problems, checked = [], 0
    for where, namespace, name, endpoints in uses:
        watched = sorted(endpoints & asynchronous)
        if not watched or (namespace != "predefined" and not _aws_namespace(namespace or "")):
            continue
        checked += 1
        if name not in ASYNC_METRICS.get(namespace, set()):
            problems.append(
                f"{where}: {namespace} {name} of asynchronous endpoint {watched[0]} is not published ({PAGE})"
            )
    return problems, checked


def test_asynchronous_endpoints_are_watched_and_scaled_on_published_metrics_only(shipped_templates):
    """Every alarm, dashboard metric and scaling policy of an asynchronous endpoint uses a metric of the page's list
    (module doc), and the shipped configs exercise it (examples/config/async: alarms, dashboard, backlog scaling)."""
    problems, checked = [], 0
    for shipped in shipped_templates:
        found, count = unpublished_metric_uses(shipped.template)
        problems += [f"{shipped.label}: {p}" for p in found]
        checked += count
    assert not problems, "\n".join(problems)
    assert checked >= 10, f"only {checked} metrics of asynchronous endpoints found; is examples/config/async shipped?"


def _template(alarm_properties: dict, *, asynchronous: bool = True) -> dict:
    config = {"ProductionVariants": [], **({"AsyncInferenceConfig": {}} if asynchronous else {})}
    return {
        "Resources": {
            "Config": {"Type": "AWS::SageMaker::EndpointConfig", "Properties": config},
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": "e",
                    "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
                },
            },
            "Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": alarm_properties},
        }
    }


def _invocations(endpoint: str) -> dict:
    return {
        "Namespace": "AWS/SageMaker",
        "MetricName": "Invocations",
        "Dimensions": [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "v"}],
    }


def test_the_check_finds_an_unpublished_metric_in_an_alarm_and_in_metric_math():
    """The page's examples (Invocations) are refused on an asynchronous endpoint, alone or inside metric math; the
    same alarm on a real-time endpoint, or on another endpoint, is not this rule's business."""
    assert NOT_PUBLISHED.isdisjoint(set().union(*ASYNC_METRICS.values()))
    single = _invocations("e")
    math = {"Metrics": [{"Id": "m", "MetricStat": {"Metric": _invocations("e"), "Period": 60, "Stat": "Sum"}}]}
    for properties in (single, math):
        problems, checked = unpublished_metric_uses(_template(properties))
        assert checked == 1 and "Invocations of asynchronous endpoint e is not published" in problems[0]
    assert unpublished_metric_uses(_template(single, asynchronous=False)) == ([], 0)
    assert unpublished_metric_uses(_template(_invocations("other"))) == ([], 0)
