"""The serving patterns (TritonServingEndpoint, TritonServingComponents) on their own, and the grants they use.

The shipped endpoint stacks are built through them; that every endpoint stack keeps its logical ids is checked over
every shipped stage in tests/contract/test_endpoint_logical_ids.py.
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from constructs import Construct
from synth_helpers import new_app

import triton_cdk.serving as serving
from endpoint_client import recommend
from serving_facts.vpc import VPC_NETWORK_INTERFACE_ACTIONS
from triton_cdk.images import TritonImageLookup
from triton_cdk.serving import (
    DataCapture,
    ProductionVariant,
    ServedComponent,
    ServingContainer,
    TritonModelData,
    TritonServingComponents,
    TritonServingEndpoint,
)
from triton_cdk.serving.autoscaling import ScalingSettings
from triton_cdk.serving.component_sizing import ComputeRequirements
from triton_cdk.serving.inference_components import ComponentVariant
from triton_cdk.serving.role_policy import RolePolicy
from triton_cdk.serving.triton_model import ModelVpc

ROLE_ARN = "arn:aws:iam::111111111111:role/sm"
VPC = ModelVpc(subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"])


@pytest.fixture
def stack() -> cdk.Stack:
    return cdk.Stack(new_app(), "Test", env=cdk.Environment(account="111111111111", region="us-east-1"))


def container(stack: cdk.Stack, **overrides) -> ServingContainer:
    props = {
        "image": stack.node.try_find_child("TritonImage") or TritonImageLookup(stack, "TritonImage", release="24.09"),
        "execution_role": stack.node.try_find_child("Role") or iam.Role.from_role_arn(stack, "Role", ROLE_ARN),
    }
    props.update(overrides)
    return ServingContainer(**props)


def bucket(stack: cdk.Stack) -> s3.IBucket:
    return stack.node.try_find_child("Bucket") or s3.Bucket.from_bucket_name(stack, "Bucket", "models-bucket")


def archive(stack: cdk.Stack) -> TritonModelData:
    return TritonModelData.from_archive(bucket(stack), "models/bert/abc/model.tar.gz")


def serving_endpoint(stack: cdk.Stack, construct_id: str = "Default", **overrides) -> TritonServingEndpoint:
    props = {
        "endpoint_name": "dev-bert",
        "container": container(stack),
        "model_data": archive(stack),
        "default_model_name": "bert",
        "variants": [ProductionVariant("AllTraffic", "ml.g5.xlarge")],
    }
    props.update(overrides)
    return TritonServingEndpoint(stack, construct_id, **props)


def logical_ids(stack: cdk.Stack, resource_type: str, prefix: str = "") -> list[str]:
    return sorted(i for i in Template.from_stack(stack).find_resources(resource_type) if i.startswith(prefix))


def role_additions(stack: cdk.Stack) -> list[dict]:
    (policy_id,) = logical_ids(stack, "AWS::IAM::Policy", "ExecutionRoleAdditions")
    policy = Template.from_stack(stack).find_resources("AWS::IAM::Policy")[policy_id]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_the_default_id_leaves_the_pattern_out_of_logical_ids(stack):
    """aws-cdk-lib core/lib/private/uniqueid.ts (venv's jsii bundle 2.275.0): HIDDEN_ID = "Default" is filtered out
    of the path before the logical id and its hash are made, so the pattern's children have the ids they would have
    as children of the stack; under any other id they carry it."""
    serving_endpoint(stack)
    other = cdk.Stack(new_app(), "Other")
    serving_endpoint(other, "Serving")
    reference = cdk.Stack(new_app(), "Reference")
    ref_endpoint = cdk.CfnResource(Construct(reference, "Endpoint"), "Resource", type="AWS::SageMaker::Endpoint")
    (endpoint_id,) = logical_ids(stack, "AWS::SageMaker::Endpoint")
    assert endpoint_id == reference.get_logical_id(ref_endpoint)  # as if the endpoint were the stack's child
    assert logical_ids(stack, "AWS::SageMaker::Model")[0].startswith("Model")
    assert all(i.startswith("Serving") for i in logical_ids(other, "AWS::SageMaker::Endpoint"))


def test_monitoring_derives_hardware_from_each_variants_instance_type(stack):
    """Per-variant alarms follow the instance catalogue without being told: GPU memory runs 0-100 x the GPU count
    (monitoring.py), so the per-GPU 90 % is 90 on ml.g5.xlarge (1 GPU) and 360 on ml.g5.12xlarge (4 GPUs). Every
    variant has the primary's hardware kind (a GPU + CPU mix is refused: test_serving_pattern_props.py)."""
    pattern = serving_endpoint(
        stack,
        variants=[ProductionVariant("One", "ml.g5.xlarge"), ProductionVariant("Four", "ml.g5.12xlarge")],
    )
    thresholds = {
        v: stack.resolve(a["gpu_memory"].node.default_child.threshold) for v, a in pattern.monitoring.alarms.items()
    }
    assert thresholds == {"One": 90, "Four": 360}
    assert pattern.monitoring.multi_model is False


def test_monitoring_derives_multi_model_from_the_model_data(stack):
    data = TritonModelData.from_multi_model_prefix(bucket(stack), "models/_multi-model/abc/")
    pattern = serving_endpoint(stack, model_data=data, default_model_name=None)
    assert pattern.monitoring.multi_model is True
    assert "disk" in pattern.monitoring.alarms["AllTraffic"]


def test_the_image_follows_the_primary_variants_hardware(stack):
    """The GPU image on a GPU instance, the CPU image on a CPU one (TritonImageLookup's two columns)."""
    pattern = serving_endpoint(stack, variants=[ProductionVariant("AllTraffic", "ml.c6i.xlarge")])
    image = stack.resolve(pattern.model.resource.primary_container)["image"]
    assert image["Fn::FindInMap"][2] == "cpu"


def test_scaling_takes_each_variants_gpu_count_from_the_catalogue(stack):
    """GPUUtilization runs 0-100 x GPU count (../shared/README.md "Autoscaling"): the per-GPU target is multiplied by
    the variant's own GPU count, here 4 on ml.g5.12xlarge and 1 on ml.g5.xlarge (ScalingSettings.gpu_count left out)."""
    settings = ScalingSettings(min_capacity=1, max_capacity=2, gpu_utilization_percent=70)  # gpu_count: derived
    serving_endpoint(
        stack,
        variants=[ProductionVariant("One", "ml.g5.xlarge"), ProductionVariant("Four", "ml.g5.12xlarge")],
        scaling=settings,
    )
    policies = Template.from_stack(stack).find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    targets = sorted(
        p["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for p in policies.values()
    )
    assert targets == [70, 280]


def test_data_capture_and_vpc_permissions_come_from_the_resources_grants(stack):
    """DataCapture.grant_write: s3:PutObject under the prefix, kms:GenerateDataKey/Encrypt on the key; then
    TritonModel.grant_vpc_access: serving_facts/vpc.py's EC2 actions on "*" (SageMaker's VPC documentation, via
    aws-cdk-lib's SageMakerCreateModel); one policy, ExecutionRoleAdditions, that the model and endpoint wait for."""
    key = kms.Key.from_key_arn(
        stack, "Key", "arn:aws:kms:us-east-1:111111111111:key/12345678-1234-1234-1234-123456789012"
    )
    capture = DataCapture(bucket=bucket(stack), prefix="data-capture/dev-bert/", key=key)
    pattern = serving_endpoint(stack, container=container(stack, vpc=VPC), data_capture=capture)
    statements = role_additions(stack)
    assert [s["Sid"] for s in statements] == ["WriteDataCapture", "EncryptDataCapture", "VpcNetworkInterfaces"]
    assert statements[0]["Action"] == "s3:PutObject"
    assert sorted(statements[1]["Action"]) == ["kms:Encrypt", "kms:GenerateDataKey"]
    assert sorted(statements[2]["Action"]) == sorted(VPC_NETWORK_INTERFACE_ACTIONS)
    assert statements[2]["Resource"] == "*"
    (policy_id,) = logical_ids(stack, "AWS::IAM::Policy", "ExecutionRoleAdditions")
    template = Template.from_stack(stack)
    for resource_type in ("AWS::SageMaker::Model", "AWS::SageMaker::Endpoint"):
        (resource,) = template.find_resources(resource_type).values()
        assert policy_id in resource["DependsOn"], resource_type
    assert pattern.role_additions is not None


def test_without_grants_there_is_no_policy(stack):
    pattern = serving_endpoint(stack)
    assert pattern.role_additions is None
    assert logical_ids(stack, "AWS::IAM::Policy", "ExecutionRoleAdditions") == []


def test_grants_work_on_any_grantee(stack):
    """The grant methods take an iam.IGrantable (here a role: its default policy), as aws-cdk-lib's do."""
    role = iam.Role(stack, "Own", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    key = kms.Key.from_key_arn(
        stack, "Key", "arn:aws:kms:us-east-1:111111111111:key/12345678-1234-1234-1234-123456789012"
    )
    DataCapture(bucket=bucket(stack), prefix="capture/", key=key).grant_write(role)
    model = serving.TritonModel(
        stack, "M", image_uri="image", model_data=archive(stack), execution_role=role, default_model_name="m", vpc=VPC
    )
    assert model.grant_vpc_access(role) is not None
    (policy_id,) = logical_ids(stack, "AWS::IAM::Policy", "OwnDefaultPolicy")
    policy = Template.from_stack(stack).find_resources("AWS::IAM::Policy")[policy_id]
    sids = [s["Sid"] for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    assert sids == ["WriteDataCapture", "EncryptDataCapture", "VpcNetworkInterfaces"]


def test_a_model_without_vpc_grants_nothing(stack):
    grants = RolePolicy(stack, "Additions", iam.Role.from_role_arn(stack, "R", ROLE_ARN, mutable=True))
    model = serving.TritonModel(
        stack, "M", image_uri="image", model_data=archive(stack), execution_role=grants.role, default_model_name="m"
    )
    assert model.grant_vpc_access(grants) is None
    assert grants.policy is None


def test_components_share_one_vpc_statement(stack):
    requirements = ComputeRequirements(accelerators=None, cpu_cores=1, min_memory_mb=1024)
    components = [
        ServedComponent(
            model_name=name, model_data=archive(stack), component_name=f"dev-ic-{name}", requirements=requirements
        )
        for name in ("a", "b")
    ]
    pattern = TritonServingComponents(
        stack,
        "Default",
        endpoint_name="dev-ic",
        container=container(stack, vpc=VPC),
        variant=ComponentVariant(instance_type="ml.c6i.4xlarge"),
        components=components,
    )
    assert [s["Sid"] for s in role_additions(stack)] == ["VpcNetworkInterfaces"]
    assert sorted(pattern.components) == ["a", "b"]
    template = Template.from_stack(stack)
    (policy_id,) = logical_ids(stack, "AWS::IAM::Policy", "ExecutionRoleAdditions")
    for resource in template.find_resources("AWS::SageMaker::InferenceComponent").values():
        assert policy_id in resource["DependsOn"]
    assert logical_ids(stack, "AWS::SageMaker::Endpoint")[0].startswith("Endpoint")


def test_the_recommend_client_and_the_constructs_share_one_vpc_action_list():
    assert recommend.VPC_ROLE_ACTIONS is VPC_NETWORK_INTERFACE_ACTIONS


def test_the_patterns_are_public_api():
    for name in ("TritonServingEndpoint", "TritonServingComponents", "ServingContainer", "ServedComponent"):
        assert name in serving.__all__
        assert getattr(serving, name).__doc__
