"""Fast scaling on concurrency (issue #26 part 2), checked over every template of every shipped configuration.

Every target-tracking policy on a high-resolution concurrency metric uses the predefined type for its kind of
scalable target: `SageMakerVariantConcurrentRequestsPerModelHighResolution` on a variant
(`endpoint/<endpoint>/variant/<variant>`, `sagemaker:variant:DesiredInstanceCount`),
`SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution` on an inference component
(`inference-component/<component>`, `sagemaker:inference-component:DesiredCopyCount`), naming an endpoint or
component of the same template, with nothing but the predefined type (SageMaker "Define a scaling policy",
"Specify a high-resolution predefined metric": the policy names only `PredefinedMetricType` and `TargetValue`).
Sources: botocore's application-autoscaling model (MetricType enum, ScalableDimension enum); Application Auto
Scaling User Guide "Amazon SageMaker AI and Application Auto Scaling" (the ResourceId formats).
"""

from __future__ import annotations

import botocore.session
import pytest
from contract_helpers import ShippedTemplate, logical_id_of, resources_of

PER_MODEL = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
PER_COPY = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
# metric type -> (scalable dimension, ResourceId prefix, resource type naming the resource, its name property)
TARGET_OF = {
    PER_MODEL: ("sagemaker:variant:DesiredInstanceCount", "endpoint/", "AWS::SageMaker::Endpoint", "EndpointName"),
    PER_COPY: (
        "sagemaker:inference-component:DesiredCopyCount",
        "inference-component/",
        "AWS::SageMaker::InferenceComponent",
        "InferenceComponentName",
    ),
}


def _concurrency_policies(shipped: ShippedTemplate) -> list[tuple[str, dict, dict]]:
    """(metric type, policy properties, its scalable target's properties) of every concurrency policy."""
    found = []
    resources = shipped.template.get("Resources", {})
    for policy in resources_of(shipped.template, "AWS::ApplicationAutoScaling::ScalingPolicy").values():
        props = policy["Properties"]
        tracking = props.get("TargetTrackingScalingPolicyConfiguration") or {}
        metric = (tracking.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType", "")
        if "ConcurrentRequests" in metric:
            target = resources[logical_id_of(props["ScalingTargetId"])]["Properties"]
            found.append((metric, props, target))
    return found


def test_the_metric_and_dimension_names_are_botocores():
    model = botocore.session.get_session().get_service_model("application-autoscaling")
    metric_types = model.shape_for("MetricType").enum
    dimensions = model.shape_for("ScalableDimension").enum
    for metric, (dimension, *_) in TARGET_OF.items():
        assert metric in metric_types and dimension in dimensions


def test_the_fixture_holds_both_kinds_of_concurrency_policy(shipped_templates):
    """examples/config/ensemble (a variant) and examples/config/components (copies) use them, so every gate
    sees both."""
    seen = {
        (shipped.config, metric) for shipped in shipped_templates for metric, _, _ in _concurrency_policies(shipped)
    }
    assert ("examples/config/ensemble", PER_MODEL) in seen
    assert ("examples/config/components", PER_COPY) in seen


def test_concurrency_policies_track_the_documented_metric_of_their_target(shipped_templates):
    problems = []
    for shipped in shipped_templates:
        names = {
            kind: {r["Properties"].get(prop) for r in resources_of(shipped.template, kind).values()}
            for _, _, kind, prop in TARGET_OF.values()
        }
        for metric, policy, target in _concurrency_policies(shipped):
            where = f"{shipped.label}: {policy.get('PolicyName')}"
            if metric not in TARGET_OF:
                problems.append(f"{where}: {metric} is not a documented high-resolution concurrency metric")
                continue
            dimension, prefix, kind, _ = TARGET_OF[metric]
            tracking = policy["TargetTrackingScalingPolicyConfiguration"]
            resource_id = target["ResourceId"]
            if policy["PolicyType"] != "TargetTrackingScaling":
                problems.append(f"{where}: PolicyType {policy['PolicyType']}")
            if target["ScalableDimension"] != dimension or target["ServiceNamespace"] != "sagemaker":
                problems.append(f"{where}: {metric} on {target['ScalableDimension']}, needs {dimension}")
            if not isinstance(resource_id, str) or not resource_id.startswith(prefix):
                problems.append(f"{where}: ResourceId {resource_id!r} is not {prefix}...")
            else:
                name = resource_id.removeprefix(prefix).split("/variant/")[0]
                if name not in names[kind]:
                    problems.append(f"{where}: {resource_id} names no {kind} of this template")
            if "CustomizedMetricSpecification" in tracking or not tracking.get("TargetValue", 0) > 0:
                problems.append(f"{where}: a predefined metric and a TargetValue above 0 only: {tracking}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("metric", sorted(TARGET_OF))
def test_a_concurrency_policy_is_one_per_scalable_target(shipped_templates, metric):
    """One policy per metric and target: a second would only fight the first."""
    for shipped in shipped_templates:
        targets = [policy["ScalingTargetId"] for m, policy, _ in _concurrency_policies(shipped) if m == metric]
        assert len(targets) == len({str(t) for t in targets}), shipped.label
