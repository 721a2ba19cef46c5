"""The GPU driver table (serving_facts/drivers.py) and who may publish to the notification topic."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_events as events
from aws_cdk.assertions import Template
from synth_helpers import new_app

from serving_facts import drivers, releases
from serving_facts.catalogue import INSTANCE_TYPES
from triton_cdk.notifications import NotificationTopic, rule_target


def _cfn_lint_schema(type_name: str) -> dict:
    import cfnlint

    folder = Path(cfnlint.__file__).parent / "data" / "schemas" / "resources"
    for path in folder.glob("*.json"):
        text = path.read_text()
        if f'"typeName": "{type_name}"' in text:
            return json.loads(text)
    raise AssertionError(f"cfn-lint has no schema for {type_name}")


def test_the_ami_table_names_exactly_what_cloudformation_accepts():
    """AWS::SageMaker::EndpointConfig ProductionVariant.InferenceAmiVersion is an enum (cfn-lint's bundled
    CloudFormation schema); every GPU AMI in it is in the table, and nothing else."""
    schema = _cfn_lint_schema("AWS::SageMaker::EndpointConfig")
    allowed = set(schema["definitions"]["ProductionVariant"]["properties"]["InferenceAmiVersion"]["enum"])
    assert set(drivers.AMI_NAMES) == {name for name in allowed if "-gpu-" in name}


def test_the_ami_table_matches_the_sagemaker_api_model():
    """Driver and CUDA versions as SageMaker documents them in ProductionVariant.InferenceAmiVersion (botocore's
    service model, the API reference's source)."""
    botocore_session = pytest.importorskip("botocore.session")
    model = botocore_session.get_session().get_service_model("sagemaker")
    text = model.shape_for("ProductionVariant").members["InferenceAmiVersion"].documentation
    for ami in drivers.AMIS:
        section = text.split(ami.name, 1)[1].split("</dd>", 1)[0]
        assert f"NVIDIA driver version: {ami.driver}" in section, ami.name
        assert f"CUDA version: {ami.cuda}" in section, ami.name
        assert ("disabled CUDA-compat mounting" in section) is (not ami.cuda_compat_mounting), ami.name


@pytest.mark.parametrize(
    ("release", "family", "expected"),
    [
        ("23.12", "ml.g5", "al2023-ami-sagemaker-inference-gpu-4-1"),
        ("24.09", "ml.g5", "al2023-ami-sagemaker-inference-gpu-4-1"),
        ("25.04", "ml.g4dn", "al2023-ami-sagemaker-inference-gpu-4-1"),
        ("25.09", "ml.p5", "al2023-ami-sagemaker-inference-gpu-4-1"),
    ],
)
def test_the_pinned_ami_runs_the_release_natively(release, family, expected):
    """A driver runs CUDA applications up to its own CUDA version (NVIDIA CUDA compatibility); the newest AMI
    that does is pinned."""
    ami = drivers.ami_for(release, family)
    assert ami.name == expected
    assert drivers._version(ami.cuda) >= drivers._version(drivers.release_cuda(release))


def test_the_default_470_driver_runs_no_known_release():
    """Without an AMI, g4dn/g5/p4d hosts run driver 470 (CUDA 11.4): too old for every release the SageMaker SDK
    knows (aws/deep-learning-containers#4990: 25.04 fails there), so an AMI is always pinned."""
    (old,) = [d for d in drivers.DEFAULT_DRIVERS if d.driver == 470]
    for release in releases.RELEASES:
        assert drivers._version(old.cuda) < drivers._version(drivers.release_cuda(release))


def test_a_release_newer_than_every_ami_is_refused_naming_what_works():
    with pytest.raises(drivers.DriverMatchError) as error:
        drivers.ami_for("26.05", "ml.g5")
    message = str(error.value)
    assert "no SageMaker inference AMI has a driver for Triton 26.05 (CUDA 13.2) on ml.g5" in message
    assert "al2023-ami-sagemaker-inference-gpu-4-1, has driver 580 (CUDA 13.0)" in message
    assert message.endswith("23.12, 24.01, 24.03, 24.05, 24.09, 25.04, 25.09")


def test_an_explicit_ami_is_checked_not_picked():
    assert drivers.ami_for("24.03", "ml.g5", requested="al2-ami-sagemaker-inference-gpu-3-1").driver == 550
    with pytest.raises(drivers.DriverMatchError, match=r"its driver 535 runs CUDA up to 12\.2"):
        drivers.ami_for("23.12", "ml.g5", requested="al2-ami-sagemaker-inference-gpu-2")
    with pytest.raises(drivers.DriverMatchError, match=r"it is not documented for ml\.g6e"):
        drivers.ami_for("23.12", "ml.g6e", requested="al2-ami-sagemaker-inference-gpu-2")


def test_every_gpu_family_of_the_catalogue_gets_an_ami_for_the_default_release():
    gpu_families = {i.family for i in INSTANCE_TYPES.values() if i.has_gpu}
    assert {f: drivers.ami_for("24.09", f).name for f in gpu_families} == dict.fromkeys(
        gpu_families, "al2023-ami-sagemaker-inference-gpu-4-1"
    )


@pytest.fixture
def stack() -> cdk.Stack:
    return cdk.Stack(new_app(), "Test", env=cdk.Environment(account="111111111111", region="us-east-1"))


def test_alarms_may_publish_under_confused_deputy_conditions(stack):
    """An AWS::SNS::TopicPolicy replaces SNS's default policy, so CloudWatch needs an explicit allow
    (aws-solutions/automated-security-response-on-aws#43), and on a KMS-encrypted topic the key must let
    cloudwatch.amazonaws.com kms:Decrypt + kms:GenerateDataKey* (SNS "Enable compatibility between event
    sources from AWS services and encrypted topics"); both conditioned on aws:SourceAccount / aws:SourceArn."""
    topic = NotificationTopic(stack, "Alarms")
    topic.allow_alarms(["dev-x-AllTraffic-latency", "dev-x-AllTraffic-errors-5xx"])
    template = Template.from_stack(stack).to_json()
    # A literal partition in a stack with a region: cdk.json's @aws-cdk/core:enablePartitionLiterals.
    arns = [
        f"arn:aws:cloudwatch:us-east-1:111111111111:alarm:dev-x-AllTraffic-{kind}" for kind in ("errors-5xx", "latency")
    ]
    expected = {
        "StringEquals": {"aws:SourceAccount": "111111111111"},
        "ArnLike": {"aws:SourceArn": arns},
    }

    def statements(resource_type: str, key: str) -> list[dict]:
        (resource,) = [r for r in template["Resources"].values() if r["Type"] == resource_type]
        return resource["Properties"][key]["Statement"]

    topic_statements = statements("AWS::SNS::TopicPolicy", "PolicyDocument")
    assert [s.get("Sid") for s in topic_statements] == ["AllowPublishThroughSSLOnly", "AllowAlarmsToPublish"]
    publish = topic_statements[1]
    assert publish["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and publish["Action"] == "sns:Publish"
    assert publish["Condition"] == expected
    key_statements = {s.get("Sid"): s for s in statements("AWS::KMS::Key", "KeyPolicy")}
    use = key_statements["AllowAlarmsToUseTheKey"]
    assert use["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert use["Condition"] == expected
    assert not [s for s in key_statements.values() if s["Principal"] == {"Service": "events.amazonaws.com"}]


def test_event_rules_publish_through_a_role_only_this_accounts_rules_assume(stack):
    """SNS documents that aws:SourceAccount / aws:SourceArn are not supported in a KMS key policy for
    EventBridge-to-encrypted-topic delivery (quoted in awslabs/landing-zone-accelerator-on-aws#407), so
    EventBridge publishes through a role whose trust carries the conditions, and no events.amazonaws.com
    statement goes on the topic or key."""
    topic = NotificationTopic(stack, "Builds")
    rule = events.Rule(stack, "Failed", event_pattern=events.EventPattern(source=["aws.codebuild"]))
    rule.add_target(rule_target(rule, topic.topic, message=events.RuleTargetInput.from_text("failed")))
    template = Template.from_stack(stack).to_json()
    text = json.dumps(
        [r for r in template["Resources"].values() if r["Type"] in ("AWS::SNS::TopicPolicy", "AWS::KMS::Key")]
    )
    assert "events.amazonaws.com" not in text
    (role,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "events.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": "111111111111"}
    assert "aws:SourceArn" in trust["Condition"]["ArnLike"]
    rule_resource = next(r for r in template["Resources"].values() if r["Type"] == "AWS::Events::Rule")
    (target,) = rule_resource["Properties"]["Targets"]
    assert "RoleArn" in target
