"""The endpoint config's MetricsConfig (issue #26 part 3, first bullet).

Sources: SageMaker API reference `MetricsConfig` (EnableEnhancedMetrics default false; MetricPublishFrequencyInSeconds
"Valid values: 10, 30, 60, 120, 180, 240, 300", default 60); botocore's sagemaker model (the members); the pinned
aws-cdk-lib's L1 CfnEndpointConfig `metrics_config`.
"""

from __future__ import annotations

import aws_cdk as cdk
import botocore.session
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from synth_helpers import new_app

from triton_cdk.serving import ProductionVariant, TritonEndpoint, TritonModel, TritonModelData
from triton_cdk.serving.endpoint import METRIC_PUBLISH_FREQUENCIES, MetricsPublishing


def _endpoint(metrics: MetricsPublishing | None) -> Template:
    stack = cdk.Stack(new_app(), "Test", env=cdk.Environment(account="111111111111", region="us-east-1"))
    role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::111111111111:role/sm")
    model = TritonModel(
        stack,
        "Model",
        image_uri="image",
        model_data=TritonModelData.from_archive(
            s3.Bucket.from_bucket_name(stack, "Bucket", "models-bucket"), "models/bert/abc/model.tar.gz"
        ),
        execution_role=role,
        default_model_name="bert",
    )
    TritonEndpoint(
        stack,
        "Endpoint",
        model=model,
        endpoint_name="dev-bert",
        variants=[ProductionVariant("AllTraffic", "ml.g5.xlarge")],
        metrics=metrics,
    )
    return Template.from_stack(stack)


def _config(template: Template) -> dict:
    (config,) = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    return config["Properties"]


def test_botocores_metrics_config_has_the_members_rendered():
    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("MetricsConfig")
    assert {"EnableEnhancedMetrics", "MetricPublishFrequencyInSeconds", "EnableDetailedObservability"} <= set(
        shape.members
    )


def test_metrics_render_as_the_endpoint_configs_metrics_config():
    config = _config(_endpoint(MetricsPublishing(enhanced_metrics=True, publish_frequency_seconds=10)))
    assert config["MetricsConfig"] == {
        "EnableEnhancedMetrics": True,
        "MetricPublishFrequencyInSeconds": 10,
        "EnableDetailedObservability": False,
    }


def test_without_metrics_the_endpoint_config_has_none():
    assert "MetricsConfig" not in _config(_endpoint(None))


def test_the_defaults_are_sagemakers():
    assert MetricsPublishing() == MetricsPublishing(enhanced_metrics=False, publish_frequency_seconds=60)
    assert METRIC_PUBLISH_FREQUENCIES == (10, 30, 60, 120, 180, 240, 300)


@pytest.mark.parametrize("seconds", [0, 15, 45, 301, 600])
def test_an_undocumented_frequency_is_refused(seconds):
    with pytest.raises(ValueError, match=r"publish_frequency_seconds must be one of \[10, 30, 60"):
        _endpoint(MetricsPublishing(publish_frequency_seconds=seconds))
