"""The serving patterns' props (issue #23 review of items 7, 8): host AMIs filled in, every problem in one error,
one hardware kind per endpoint, components refused before jsii, monitoring and scaling derived from the endpoint,
immutable roles left alone.

Builds constructs only (no app synth), so each test takes well under a second.
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from synth_helpers import new_app
from test_serving_pattern import ROLE_ARN, archive, bucket, container, serving_endpoint

from serving_facts import drivers
from serving_facts.catalogue import INSTANCE_TYPES
from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving import (
    ProductionVariant,
    ServedComponent,
    TritonEndpoint,
    TritonModel,
    TritonModelData,
    TritonServingComponents,
)
from triton_cdk.serving.autoscaling import ScalingSettings, TritonEndpointScaling
from triton_cdk.serving.component_sizing import ComputeRequirements
from triton_cdk.serving.inference_components import ComponentVariant
from triton_cdk.serving.monitoring import AlarmThresholds, TritonEndpointMonitoring, VariantHardware
from triton_cdk.serving.serving_endpoint import ShadowModel
from triton_cdk.serving.triton_model import ModelVpc

RELEASE = "24.09"  # test_serving_pattern.container's image
REQUIREMENTS = ComputeRequirements(accelerators=1, cpu_cores=1, min_memory_mb=1024)


@pytest.fixture
def stack() -> cdk.Stack:
    return cdk.Stack(new_app(), "Test", env=cdk.Environment(account="111111111111", region="us-east-1"))


def rendered_amis(stack: cdk.Stack, resource_type: str = "AWS::SageMaker::EndpointConfig") -> dict[str, str | None]:
    (config,) = Template.from_stack(stack).find_resources(resource_type).values()
    props = config["Properties"]
    variants = props["ProductionVariants"] + props.get("ShadowProductionVariants", [])
    return {v["VariantName"]: v.get("InferenceAmiVersion") for v in variants}


def components(stack: cdk.Stack, served: list[tuple[str, str]], **props) -> TritonServingComponents:
    return TritonServingComponents(
        stack,
        "Default",
        endpoint_name="dev-ic",
        container=container(stack),
        variant=props.pop("variant", ComponentVariant(instance_type="ml.g5.xlarge", max_instances=2)),
        components=[
            ServedComponent(
                model_name=name,
                model_data=archive(stack),
                component_name=component_name,
                requirements=REQUIREMENTS,
            )
            for name, component_name in served
        ],
        **props,
    )


# --- H1: every GPU variant pins the host AMI whose driver runs the release ---


def test_a_gpu_endpoint_from_the_minimum_props_pins_the_release_s_ami(stack):
    """serving_facts/drivers.py (../shared/README.md "GPU drivers"): without InferenceAmiVersion g4dn/g5/p4d hosts
    keep driver 470 (CUDA 11.4), too old for every Triton release; the pattern fills in `ami_for(release, family)`
    for each GPU variant that has none and keeps a given one that runs the release."""
    expected_b = drivers.ami_for(RELEASE, "ml.g4dn").name
    serving_endpoint(
        stack,
        variants=[
            ProductionVariant("A", "ml.g5.xlarge"),
            ProductionVariant("B", "ml.g4dn.xlarge", initial_weight=0),
        ],
    )
    assert rendered_amis(stack) == {"A": drivers.ami_for(RELEASE, "ml.g5").name, "B": expected_b}


def test_a_given_ami_that_runs_the_release_is_kept(stack):
    fitting = [a.name for a in drivers.AMIS if drivers.runs(a, RELEASE, "ml.g5")]
    oldest_fitting = fitting[0]
    serving_endpoint(stack, variants=[ProductionVariant("A", "ml.g5.xlarge", inference_ami_version=oldest_fitting)])
    assert rendered_amis(stack) == {"A": oldest_fitting}


def test_a_cpu_variant_gets_no_ami(stack):
    serving_endpoint(stack, variants=[ProductionVariant("A", "ml.c6i.xlarge")])
    assert rendered_amis(stack) == {"A": None}


def test_the_shadow_variant_pins_its_ami_too(stack):
    shadow = ShadowModel(
        model_data=archive(stack),
        default_model_name="bert",
        variant=ProductionVariant("Shadow", "ml.g6.xlarge"),
        sampling_percent=10,
    )
    serving_endpoint(stack, shadow=shadow)
    expected = {"AllTraffic": drivers.ami_for(RELEASE, "ml.g5").name, "Shadow": drivers.ami_for(RELEASE, "ml.g6").name}
    assert rendered_amis(stack) == expected


def test_the_component_variant_pins_its_ami(stack):
    components(stack, [("a", "dev-ic-a")])
    assert rendered_amis(stack) == {"AllTraffic": drivers.ami_for(RELEASE, "ml.g5").name}


def test_a_given_ami_that_cannot_run_the_release_is_a_props_problem(stack):
    """drivers.ami_for(..., requested=) refuses gpu-2 (driver 535, CUDA 12.2) for 24.09 (CUDA 12.6): collected into
    the pattern's one InvalidPropsError with the other problems (here the endpoint name)."""
    with pytest.raises(InvalidPropsError) as raised:
        serving_endpoint(
            stack,
            endpoint_name="bad_name!",
            variants=[ProductionVariant("A", "ml.g5.xlarge", inference_ami_version=drivers.AMIS[0].name)],
        )
    message = str(raised.value)
    assert message.startswith("TritonServingEndpoint Test/Default: ")
    assert "variant 'A': al2-ami-sagemaker-inference-gpu-2 cannot run Triton 24.09" in message
    assert "endpoint_name" in message


GPU_TYPES = sorted(name for name, i in INSTANCE_TYPES.items() if i.has_gpu and i.gpu_count == 1)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(GPU_TYPES))
@example(name="ml.g4dn.xlarge")
def test_every_single_gpu_type_pins_what_ami_for_picks(name):
    """Property: the pattern's AMI is exactly drivers.ami_for(release, family), or the type's refusal is a problem."""
    stack = cdk.Stack(new_app(), "Test", env=cdk.Environment(account="111111111111", region="us-east-1"))
    family = INSTANCE_TYPES[name].family
    try:
        expected = drivers.ami_for(RELEASE, family).name
    except drivers.DriverMatchError as error:
        with pytest.raises(InvalidPropsError, match="no SageMaker inference AMI"):
            serving_endpoint(stack, variants=[ProductionVariant("A", name)])
        assert str(error)
        return
    serving_endpoint(stack, variants=[ProductionVariant("A", name)])
    assert rendered_amis(stack) == {"A": expected}


# --- M1: every problem in one InvalidPropsError naming the construct path ---


def test_every_problem_is_collected_into_one_error(stack):
    """Unknown instance types (all of them), model, variant and endpoint problems in one message, before anything
    is built (aws-cdk-lib's collect-all validation; the pattern reads the instance catalogue)."""
    with pytest.raises(InvalidPropsError) as raised:
        serving_endpoint(
            stack,
            endpoint_name="bad_name!",
            default_model_name=None,
            variants=[
                ProductionVariant("A", "ml.zz.large", initial_instance_count=0),
                ProductionVariant("B", "ml.yy.large"),
            ],
        )
    message = str(raised.value)
    assert message.startswith("TritonServingEndpoint Test/Default: ")
    for part in (
        "variant 'A': ",
        "ml.zz.large",
        "variant 'B': ",
        "ml.yy.large",
        "serving_facts.catalogue",
        "default_model_name is required",
        "initial_instance_count must be at least 1",
        "endpoint_name",
    ):
        assert part in message, part
    assert stack.node.try_find_child("Default").node.children == []  # nothing was built


def test_shadow_problems_are_collected_with_the_rest(stack):
    shadow = ShadowModel(
        model_data=archive(stack),
        default_model_name=None,
        variant=ProductionVariant("AllTraffic", "ml.qq.xlarge"),
        sampling_percent=0,
    )
    with pytest.raises(InvalidPropsError) as raised:
        serving_endpoint(stack, shadow=shadow, variants=[ProductionVariant("AllTraffic", "ml.zz.large")])
    message = str(raised.value)
    for part in (
        "variant 'AllTraffic': ",
        "ml.zz.large",
        "shadow variant 'AllTraffic': ",
        "ml.qq.xlarge",
        "shadow model: default_model_name is required",
        "shadow sampling_percent must be between",
        "is also a production variant's name",
    ):
        assert part in message, part


def test_scaling_problems_are_collected_too(stack):
    scaling = ScalingSettings(min_capacity=0, max_capacity=1, gpu_utilization_percent=70)
    with pytest.raises(InvalidPropsError, match="scaling of variant 'AllTraffic': min_capacity must be at least 1"):
        serving_endpoint(stack, scaling=scaling)


def test_a_scaling_gpu_count_other_than_the_variants_is_refused(stack):
    """The pattern scales every variant with its own GPU count (GPUUtilization runs 0-100 x GPU count,
    ../shared/README.md "Autoscaling"): a given count that is not the variant's would track a wrong target."""
    scaling = ScalingSettings(min_capacity=1, max_capacity=2, gpu_count=99, gpu_utilization_percent=50)
    with pytest.raises(InvalidPropsError, match=r"gpu_count 99 but ml\.g5\.xlarge has 1 GPUs"):
        serving_endpoint(stack, scaling=scaling)


def test_the_props_docstrings_say_instance_types_come_from_the_catalogue():
    from triton_cdk.serving import TritonServingEndpoint

    for pattern in (TritonServingEndpoint, TritonServingComponents):
        assert "serving_facts.catalogue" in pattern.__doc__, pattern.__name__


# --- M2: one hardware kind per endpoint ---


@pytest.mark.parametrize(("primary", "other"), [("ml.g5.xlarge", "ml.c6i.xlarge"), ("ml.c6i.xlarge", "ml.g5.xlarge")])
def test_a_variant_of_another_hardware_kind_is_refused(stack, primary, other):
    """The image (GPU or CPU Triton image) is chosen once, for the primary variant, and every production variant runs
    the same model: a GPU + CPU mix is refused in the pattern (stage_config/endpoint.py keeps its field-named
    message for the app's config)."""
    with pytest.raises(InvalidPropsError, match=f"variant 'B': {other} has .* but the primary variant 'A'"):
        serving_endpoint(stack, variants=[ProductionVariant("A", primary), ProductionVariant("B", other)])


# --- M3: components ---


@pytest.mark.parametrize(
    ("served", "expected"),
    [
        ([], "components: at least one served model"),
        ([("m", "dev-ic-m"), ("m", "dev-ic-m2")], "model_name must be unique, got m more than once"),
        ([("a", "dev-ic-x"), ("b", "dev-ic-x")], "component_name must be unique, got dev-ic-x more than once"),
    ],
)
def test_components_are_refused_before_jsii(stack, served, expected):
    """Duplicate construct ids raised a jsii RuntimeError (two children named alike under Components)."""
    with pytest.raises(InvalidPropsError, match=expected) as raised:
        components(stack, served)
    assert str(raised.value).startswith("TritonServingComponents Test/Default: ")


def test_component_problems_are_collected(stack):
    with pytest.raises(InvalidPropsError) as raised:
        components(
            stack,
            [("a", "dev-ic-a"), ("a", "dev-ic-a")],
            variant=ComponentVariant(instance_type="ml.zz.xlarge", min_instances=3, max_instances=1),
        )
    message = str(raised.value)
    for part in ("ml.zz.xlarge", "instances must satisfy", "model_name must be unique", "component_name must be"):
        assert part in message, part


# --- M4: monitoring and scaling derive from the endpoint ---


def plain_endpoint(stack: cdk.Stack, variants: list[ProductionVariant], model_data: TritonModelData | None = None):
    data = model_data or archive(stack)
    model = TritonModel(
        stack,
        "Model",
        image_uri="image",
        model_data=data,
        execution_role=iam.Role.from_role_arn(stack, "Role", ROLE_ARN),
        default_model_name=None if data.mode == "MultiModel" else "bert",
    )
    return TritonEndpoint(stack, "Endpoint", model=model, endpoint_name="dev-bert", variants=variants)


def test_monitoring_derives_hardware_and_multi_model_from_the_endpoint(stack):
    data = TritonModelData.from_multi_model_prefix(bucket(stack), "models/_multi-model/abc/")
    endpoint = plain_endpoint(
        stack, [ProductionVariant("One", "ml.g5.xlarge"), ProductionVariant("Four", "ml.g5.12xlarge")], data
    )
    monitoring = TritonEndpointMonitoring(stack, "Monitoring", endpoint=endpoint, thresholds=AlarmThresholds())
    assert monitoring.multi_model is True
    assert "disk" in monitoring.alarms["One"]
    cpu = {v: stack.resolve(a["cpu"].node.default_child.threshold) for v, a in monitoring.alarms.items()}
    assert cpu == {"One": 90 * 4, "Four": 90 * 48}  # 0-100 x vCPUs: 4 on g5.xlarge, 48 on g5.12xlarge


def test_monitoring_overrides_win_and_cover_types_outside_the_catalogue(stack):
    endpoint = plain_endpoint(stack, [ProductionVariant("A", "ml.zz.large")])
    with pytest.raises(InvalidPropsError, match="outside the instance catalogue"):
        TritonEndpointMonitoring(stack, "Bad", endpoint=endpoint, thresholds=AlarmThresholds())
    monitoring = TritonEndpointMonitoring(
        stack,
        "Monitoring",
        endpoint=endpoint,
        thresholds=AlarmThresholds(),
        hardware_by_variant={"A": VariantHardware(vcpus=2, gpu_count=1)},
        multi_model=True,
    )
    assert "gpu_memory" in monitoring.alarms["A"] and "disk" in monitoring.alarms["A"]


def test_scaling_gpu_count_defaults_to_the_variants(stack):
    """GPUUtilization runs 0-100 x GPU count (../shared/README.md "Autoscaling"): gpu_count left out is the
    variant's own (4 on ml.g5.12xlarge); a given one is kept."""
    endpoint = plain_endpoint(stack, [ProductionVariant("Four", "ml.g5.12xlarge")])
    scaling = TritonEndpointScaling(
        stack,
        "Scaling",
        endpoint=endpoint,
        settings_by_variant={"Four": ScalingSettings(min_capacity=1, max_capacity=2, gpu_utilization_percent=50)},
    )
    policies = Template.from_stack(stack).find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    (policy,) = policies.values()
    assert policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 200
    assert scaling.targets["Four"]


# --- LOW: the role the additions go to ---


def test_the_additions_attach_to_the_given_role_as_an_iam_policy_does(stack):
    """RolePolicy attaches its policy as aws-cdk-lib's iam.Policy(roles=[...]) does, also to a role imported with
    mutable=False (aws-cdk-lib exports no way to tell such a role apart; nothing is guessed from construct ids)."""
    role = iam.Role.from_role_arn(stack, "Imported", ROLE_ARN, mutable=False)
    vpc = ModelVpc(subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"])
    pattern = serving_endpoint(stack, container=container(stack, execution_role=role, vpc=vpc))
    assert pattern.role_additions is not None
    reference = iam.Policy(
        stack, "Reference", roles=[role], statements=[iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"])]
    )
    template = Template.from_stack(stack)
    roles = {k: v["Properties"]["Roles"] for k, v in template.find_resources("AWS::IAM::Policy").items()}
    additions = [v for k, v in roles.items() if k.startswith("ExecutionRoleAdditions")]
    assert additions == [roles[stack.get_logical_id(reference.node.default_child)]]
