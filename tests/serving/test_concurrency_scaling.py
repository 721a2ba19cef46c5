"""Fast scaling on concurrency (issue #26 part 2): the constructs' high-resolution target-tracking policies.

Sources: Application Auto Scaling API `MetricType` enum (botocore's service model in the venv) holds
`SageMakerVariantConcurrentRequestsPerModelHighResolution` and
`SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution`; SageMaker "Define a scaling policy",
"Specify a high-resolution predefined metric" (the metrics are emitted every 10 s, and a policy names only the
predefined metric type and the target value: no MetricsConfig).
"""

from __future__ import annotations

import aws_cdk as cdk
import botocore.session
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from synth_helpers import new_app

from triton_cdk.serving import (
    ProductionVariant,
    TritonEndpoint,
    TritonEndpointScaling,
    TritonModel,
    TritonModelData,
    component_sizing,
)
from triton_cdk.serving.autoscaling import ScalingSettings
from triton_cdk.serving.component_scaling import CopyScaling, TritonComponentScaling
from triton_cdk.serving.inference_components import ComponentVariant, TritonComponentEndpoint, TritonInferenceComponent

PER_MODEL = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
PER_COPY = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"


def _stack() -> tuple[cdk.Stack, iam.IRole, s3.IBucket]:
    stack = cdk.Stack(new_app(), "Test", env=cdk.Environment(account="111111111111", region="us-east-1"))
    role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::111111111111:role/sm")
    return stack, role, s3.Bucket.from_bucket_name(stack, "Bucket", "models-bucket")


def _model(stack: cdk.Stack, role: iam.IRole, bucket: s3.IBucket) -> TritonModel:
    return TritonModel(
        stack,
        "Model",
        image_uri="image",
        model_data=TritonModelData.from_archive(bucket, "models/bert/abc/model.tar.gz"),
        execution_role=role,
        default_model_name="bert",
    )


def _policies(template: Template) -> dict[str, dict]:
    return {
        p["Properties"]["PolicyName"]: p["Properties"]
        for p in template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    }


def _scaled_endpoint(settings: ScalingSettings) -> Template:
    stack, role, bucket = _stack()
    triton = TritonEndpoint(
        stack,
        "Endpoint",
        model=_model(stack, role, bucket),
        endpoint_name="dev-bert",
        variants=[ProductionVariant("AllTraffic", "ml.g5.xlarge")],
    )
    TritonEndpointScaling(stack, "Scaling", endpoint=triton, settings_by_variant={"AllTraffic": settings})
    return Template.from_stack(stack)


def _component(min_instances: int = 1) -> tuple[cdk.Stack, TritonInferenceComponent]:
    stack, role, bucket = _stack()
    endpoint = TritonComponentEndpoint(
        stack,
        "Endpoint",
        endpoint_name="ep",
        execution_role=role,
        variant=ComponentVariant(instance_type="ml.g5.xlarge", min_instances=min_instances, max_instances=2),
    )
    component = TritonInferenceComponent(
        stack,
        "Component",
        endpoint=endpoint,
        component_name="ep-m",
        model=_model(stack, role, bucket),
        requirements=component_sizing.ComputeRequirements(1, 2, 1024),
    )
    return stack, component


def test_the_metric_types_are_in_application_auto_scalings_enum():
    """botocore's application-autoscaling model: the MetricType enum holds both high-resolution types."""
    enum = botocore.session.get_session().get_service_model("application-autoscaling").shape_for("MetricType").enum
    assert PER_MODEL in enum and PER_COPY in enum


def test_a_variant_tracks_concurrent_requests_per_model_alone():
    template = _scaled_endpoint(
        ScalingSettings(min_capacity=1, max_capacity=4, gpu_count=1, concurrent_requests_per_model=4)
    )
    policies = _policies(template)
    assert set(policies) == {"ConcurrentRequestsPerModel"}
    tracking = policies["ConcurrentRequestsPerModel"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {"PredefinedMetricType": PER_MODEL}
    assert tracking["TargetValue"] == 4
    assert tracking["ScaleOutCooldown"] == 60 and tracking["ScaleInCooldown"] == 300


def test_concurrency_adds_a_policy_next_to_invocations_and_gpu():
    """Each target is its own policy on the one scalable target, as invocations and GPU already are."""
    template = _scaled_endpoint(
        ScalingSettings(
            min_capacity=1,
            max_capacity=4,
            gpu_count=1,
            invocations_per_instance=200,
            concurrent_requests_per_model=2.5,
            gpu_utilization_percent=70,
        )
    )
    assert set(_policies(template)) == {"InvocationsPerInstance", "ConcurrentRequestsPerModel", "GpuUtilization"}
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 1)


@pytest.mark.parametrize("value", [0, -1])
def test_a_variant_refuses_a_concurrency_target_not_above_zero(value):
    settings = ScalingSettings(min_capacity=1, max_capacity=2, gpu_count=1, concurrent_requests_per_model=value)
    with pytest.raises(ValueError, match="concurrent_requests_per_model must be above 0"):
        _scaled_endpoint(settings)


def test_a_variant_without_any_target_names_all_three():
    with pytest.raises(ValueError, match="invocations_per_instance, concurrent_requests_per_model and/or gpu"):
        _scaled_endpoint(ScalingSettings(min_capacity=1, max_capacity=2, gpu_count=1))


def test_copies_track_concurrent_requests_per_copy():
    stack, component = _component()
    TritonComponentScaling(
        stack,
        "Scaling",
        component=component,
        settings=CopyScaling(min_copies=1, max_copies=1, concurrent_requests_per_copy=4),
    )
    policies = _policies(Template.from_stack(stack))
    assert set(policies) == {"ConcurrentRequestsPerCopy"}
    tracking = policies["ConcurrentRequestsPerCopy"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {"PredefinedMetricType": PER_COPY}
    assert tracking["TargetValue"] == 4


def test_copies_track_both_invocations_and_concurrency():
    stack, component = _component()
    TritonComponentScaling(
        stack,
        "Scaling",
        component=component,
        settings=CopyScaling(1, 1, invocations_per_copy=300, concurrent_requests_per_copy=4),
    )
    assert set(_policies(Template.from_stack(stack))) == {"InvocationsPerCopy", "ConcurrentRequestsPerCopy"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (CopyScaling(1, 3), "set invocations_per_copy and/or concurrent_requests_per_copy"),
        (CopyScaling(1, 3, concurrent_requests_per_copy=0), "concurrent_requests_per_copy must be above 0"),
    ],
)
def test_copy_scaling_refuses_no_target_or_a_target_not_above_zero(settings, message):
    stack, component = _component()
    with pytest.raises(ValueError, match=message):
        TritonComponentScaling(stack, "Scaling", component=component, settings=settings)
