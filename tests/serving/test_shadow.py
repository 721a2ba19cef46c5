"""Shadow variants (issue #26 part 4): the construct, the endpoint stack's shadow model and dashboard, promotion.

Sources:
- SageMaker API reference / botocore CreateEndpointConfig `ShadowProductionVariants`: a list of ProductionVariant;
  "you can only specify one variant for ProductionVariants and one variant for ShadowProductionVariants".
- SageMaker "Testing models with shadow variants" (model-shadow-deployment): two SageMaker Models, one per
  variant; the shadow variant has its own ModelName, InstanceType, InitialInstanceCount, InitialVariantWeight.
- SageMaker "Create a shadow test": the traffic sampling percentage is the share of requests copied to the shadow;
  the shadow's responses are not returned; a dashboard compares invocation metrics of both variants.
- ProductionVariant InitialVariantWeight: traffic follows the ratio of the weights (the shadow's weight relative
  to the production variant's is the share copied).
- AWS/SageMaker invocation metrics carry EndpointName and VariantName (../shared/README.md "Metrics").
- CloudFormation AWS::SageMaker::Endpoint EndpointConfigName: "Update requires: No interruption"; the endpoint keeps
  its logical ID when the config changes, so a promotion is an endpoint update, not a replacement.
"""

from __future__ import annotations

import copy
import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from hypothesis import given, settings
from hypothesis import strategies as st
from serving_helpers import DEV_DOCUMENT
from synth_helpers import config_folder, new_app, synth_stage

from triton_cdk.serving import ProductionVariant, TritonEndpoint, TritonModel, TritonModelData
from triton_cdk.serving.shadow import ShadowComparison, ShadowVariant, shadow_weight


def _stack() -> cdk.Stack:
    return cdk.Stack(new_app(), "Test", env=cdk.Environment(account="111111111111", region="us-east-1"))


def _model(stack: cdk.Stack, construct_id: str, name: str) -> TritonModel:
    bucket = s3.Bucket.from_bucket_name(stack, f"{construct_id}Bucket", "models-bucket")
    return TritonModel(
        stack,
        construct_id,
        image_uri="image",
        model_data=TritonModelData.from_archive(bucket, f"models/{name}/abc/model.tar.gz"),
        execution_role=iam.Role.from_role_arn(stack, f"{construct_id}Role", "arn:aws:iam::111111111111:role/sm"),
        default_model_name=name,
    )


def _endpoint(
    variants: list[ProductionVariant] | None = None, sampling_percent: int = 10, shadow_name: str = "Shadow"
) -> Template:
    stack = _stack()
    shadow = ShadowVariant(
        model=_model(stack, "ShadowModel", "bert_v2"),
        variant=ProductionVariant(shadow_name, "ml.g6.xlarge"),
        sampling_percent=sampling_percent,
    )
    TritonEndpoint(
        stack,
        "Endpoint",
        model=_model(stack, "Model", "bert"),
        endpoint_name="dev-bert",
        variants=variants or [ProductionVariant("AllTraffic", "ml.g5.xlarge", initial_weight=2.0)],
        shadow=shadow,
    )
    return Template.from_stack(stack)


def _config(template: Template) -> dict:
    (config,) = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    return config["Properties"]


def test_the_shadow_renders_as_the_one_shadow_production_variant_with_its_own_model():
    config = _config(_endpoint())
    (production,) = config["ProductionVariants"]
    (shadow,) = config["ShadowProductionVariants"]
    assert shadow["VariantName"] == "Shadow" and shadow["InstanceType"] == "ml.g6.xlarge"
    assert shadow["ModelName"] != production["ModelName"]
    assert shadow["ModelName"]["Fn::GetAtt"][0].startswith("ShadowModel")


@pytest.mark.parametrize(("production", "percent", "weight"), [(1.0, 100, 1.0), (1.0, 10, 0.1), (2.0, 25, 0.5)])
def test_the_shadow_weight_relative_to_production_is_the_sampling_share(production, percent, weight):
    assert shadow_weight(production, percent) == pytest.approx(weight)


@settings(max_examples=100, deadline=None)
@given(
    production=st.floats(min_value=0.001, max_value=1000, allow_nan=False),
    percent=st.integers(min_value=1, max_value=100),
)
def test_the_shadow_weight_is_a_share_of_production_never_above_it(production, percent):
    weight = shadow_weight(production, percent)
    assert 0 < weight <= production
    assert weight / production == pytest.approx(percent / 100)


def test_the_rendered_weight_follows_the_production_variants_weight():
    (shadow,) = _config(_endpoint(sampling_percent=10))["ShadowProductionVariants"]
    assert shadow["InitialVariantWeight"] == pytest.approx(0.2)  # production weight 2.0 x 10 %


def test_a_shadow_beside_two_production_variants_is_refused():
    variants = [ProductionVariant("A", "ml.g5.xlarge"), ProductionVariant("B", "ml.g5.xlarge")]
    with pytest.raises(ValueError, match="at most 1 production variant"):
        _endpoint(variants=variants)


def test_a_shadow_named_like_the_production_variant_is_refused():
    with pytest.raises(ValueError, match="also a production variant's name"):
        _endpoint(shadow_name="AllTraffic")


@pytest.mark.parametrize("percent", [0, 101])
def test_a_sampling_percentage_outside_1_to_100_is_refused(percent):
    with pytest.raises(ValueError, match="sampling_percent must be between 1 and 100"):
        _endpoint(sampling_percent=percent)


def test_without_a_shadow_the_endpoint_config_has_none():
    stack = _stack()
    TritonEndpoint(
        stack,
        "Endpoint",
        model=_model(stack, "Model", "bert"),
        endpoint_name="dev-bert",
        variants=[ProductionVariant("AllTraffic", "ml.g5.xlarge")],
    )
    assert "ShadowProductionVariants" not in _config(Template.from_stack(stack))


def _dashboard_body(template: Template) -> str:
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    return json.dumps(dashboard["Properties"]["DashboardBody"])


def test_the_comparison_graphs_latency_and_errors_of_both_variants():
    stack = _stack()
    dashboard = cloudwatch.Dashboard(stack, "Dashboard")
    ShadowComparison(
        stack,
        "ShadowComparison",
        endpoint_name="dev-bert",
        production_variant="AllTraffic",
        shadow_variant="Shadow",
        dashboard=dashboard,
    )
    body = _dashboard_body(Template.from_stack(stack))
    for metric in ("ModelLatency", "OverheadLatency", "Invocation4XXErrors", "Invocation5XXErrors"):
        for variant in ("AllTraffic", "Shadow"):
            assert f'\\"{metric}\\",\\"EndpointName\\",\\"dev-bert\\",\\"VariantName\\",\\"{variant}\\"' in body, (
                metric,
                variant,
            )
    assert not Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm")


def test_the_comparison_needs_two_variants():
    stack = _stack()
    with pytest.raises(ValueError, match="the two variants must differ"):
        ShadowComparison(
            stack,
            "C",
            endpoint_name="e",
            production_variant="A",
            shadow_variant="A",
            dashboard=cloudwatch.Dashboard(stack, "D"),
        )


# The app: config/dev.yaml's triton-bert endpoint with a shadow, and the same endpoint after the shadow's promotion.

SHADOW = {"model": "yolov5s", "instance_type": "ml.g5.xlarge", "sampling_percent": 20}


def _bert_only(shadow: dict | None, model: str) -> dict:
    document = copy.deepcopy(DEV_DOCUMENT)
    (bert,) = [e for e in document["endpoints"] if e["name"] == "triton-bert"]
    bert["models"] = [model]
    if shadow:
        bert["shadow"] = shadow
    document["endpoints"] = [bert]
    return document


@pytest.fixture(scope="module")
def shadowed():
    return synth_stage("dev", config_folder("tests/serving:shadow", {"dev": _bert_only(SHADOW, "bert_base")}))


@pytest.fixture(scope="module")
def promoted():
    return synth_stage("dev", config_folder("tests/serving:shadow-promoted", {"dev": _bert_only(None, "yolov5s")}))


def _endpoint_template(synthesized) -> dict:
    return synthesized.template("Triton-dev-Endpoint-triton-bert")


def _resources(template: dict, kind: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def test_the_shadow_model_serves_the_shadow_models_archive(shadowed):
    models = _resources(_endpoint_template(shadowed), "AWS::SageMaker::Model")
    shadow = next(r for k, r in models.items() if k.startswith("ShadowModel"))
    container = shadow["Properties"]["PrimaryContainer"]
    assert container["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "yolov5s"
    assert "/models/yolov5s/" in json.dumps(container["ModelDataUrl"])


def test_the_execution_role_reads_the_shadow_archive(shadowed):
    """The shadow's archive lies under the model prefix the execution role reads (triton_cdk/artifacts.py
    grant_read_models), so no further grant is needed."""
    artifacts = json.dumps(shadowed.template("Triton-dev-Artifacts"))
    assert '"/models/*"' in artifacts


def test_the_build_stack_builds_the_shadow_archive(shadowed):
    build = json.dumps(shadowed.template("Triton-dev-Build"))
    assert "models/yolov5s/" in build and "models/bert_base/" in build


def test_no_rollback_alarm_watches_the_shadow(shadowed):
    """Nothing found says a shadow's alarm may roll production back: the rollback alarms are production's only."""
    template = _endpoint_template(shadowed)
    alarms = _resources(template, "AWS::CloudWatch::Alarm")
    assert all("Shadow" not in json.dumps(a["Properties"].get("Dimensions", [])) for a in alarms.values())
    (endpoint,) = _resources(template, "AWS::SageMaker::Endpoint").values()
    rollback = json.dumps(endpoint["Properties"].get("DeploymentConfig", {}))
    assert "Shadow" not in rollback


def test_the_dashboard_compares_the_shadow_with_production(shadowed):
    (dashboard,) = _resources(_endpoint_template(shadowed), "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "shadow vs production: model latency" in body and '\\"VariantName\\",\\"Shadow\\"' in body


def test_promotion_is_an_endpoint_update_with_the_shadows_model(shadowed, promoted):
    """docs/serving.md "Shadow tests": promoting = the shadow's model becomes the endpoint's, `shadow:` goes. The
    endpoint keeps its logical ID (an update: EndpointConfigName changes without interruption); the new endpoint
    config is a plain one whose production variant runs the former shadow's archive."""
    before, after = _endpoint_template(shadowed), _endpoint_template(promoted)
    assert set(_resources(before, "AWS::SageMaker::Endpoint")) == set(_resources(after, "AWS::SageMaker::Endpoint"))
    (config,) = _resources(after, "AWS::SageMaker::EndpointConfig").values()
    assert "ShadowProductionVariants" not in config["Properties"]
    (variant,) = config["Properties"]["ProductionVariants"]
    assert variant["VariantName"] == "AllTraffic"  # blue/green needs the same variant name
    model_id = variant["ModelName"]["Fn::GetAtt"][0]
    container = after["Resources"][model_id]["Properties"]["PrimaryContainer"]
    assert "/models/yolov5s/" in json.dumps(container["ModelDataUrl"])
    assert not [k for k in after["Resources"] if k.startswith("ShadowModel")]
