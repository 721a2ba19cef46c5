"""Asynchronous endpoints (issue #26 part 1), checked over every template of every shipped configuration.

Sources:
- SageMaker API reference `AsyncInferenceConfig`, `AsyncInferenceOutputConfig` (S3OutputPath, S3FailurePath, KmsKeyId,
  NotificationConfig), `AsyncInferenceClientConfig` (MaxConcurrentInvocationsPerInstance: botocore's sagemaker model,
  min 1, max 1000); the members are botocore's.
- SageMaker "Asynchronous inference: complete the prerequisites": SageMaker uses the execution role to "access your
  Amazon S3 bucket and Amazon SNS topics".
- SageMaker "Autoscale an asynchronous endpoint": target tracking on the CustomizedMetricSpecification
  ApproximateBacklogSizePerInstance (AWS/SageMaker, dimension EndpointName, Average); MinCapacity 0; the step policy
  on an alarm over HasBacklogWithoutCapacity that scales up from zero. "Auto scaling policy overview": "you must use
  step scaling if you want to enable an endpoint to scale out from zero active instances". Only asynchronous
  endpoints may scale a variant to zero (the same page: "Unlike other hosted models ... with Asynchronous Inference
  you can also scale down your asynchronous endpoints instances to zero").
- SNS: an AWS::SNS::TopicPolicy replaces the topic's default policy (../shared/README.md, "CloudWatch alarms -> SNS"),
  so the publisher must be allowed there.
"""

from __future__ import annotations

import re

import botocore.session
from contract_helpers import listed, resources_of, statements_of

ASYNC_PATH = re.compile(r"^/async-inference/(?P<name>[A-Za-z0-9-]+)/(?P<kind>input|output|failure)/?\*?$")


def _model(shape: str):
    return botocore.session.get_session().get_service_model("sagemaker").shape_for(shape)


def _async_configs(shipped_templates):
    for shipped in shipped_templates:
        for logical_id, config in resources_of(shipped.template, "AWS::SageMaker::EndpointConfig").items():
            a = config["Properties"].get("AsyncInferenceConfig")
            if a is not None:
                yield shipped, logical_id, a


def _import(value) -> str | None:
    return value.get("Fn::ImportValue") if isinstance(value, dict) else None


def _joined_path(value, export_suffix: str) -> str | None:
    """'/async-inference/<name>/output' of {"Fn::Join": ["", [<prefix>, {"Fn::ImportValue": ...<suffix>}, path]]}."""
    if not isinstance(value, dict) or "Fn::Join" not in value:
        return None
    parts = value["Fn::Join"][1]
    imports = [p for p in parts if _import(p)]
    if len(imports) != 1 or not _import(imports[0]).endswith(export_suffix) or not isinstance(parts[-1], str):
        return None
    return parts[-1]


def test_the_fixture_holds_an_asynchronous_endpoint(shipped_templates):
    """examples/config/async makes an asynchronous endpoint, so every gate sees one."""
    assert any(t.config == "examples/config/async" for t, _, _ in _async_configs(shipped_templates))


def test_async_config_uses_members_sagemaker_knows_and_its_limits(shipped_templates):
    """botocore's sagemaker model: AsyncInferenceConfig / OutputConfig / ClientConfig members, and
    MaxConcurrentInvocationsPerInstance 1-1000."""
    members = {name: set(_model(name).members) for name in ("AsyncInferenceConfig", "AsyncInferenceOutputConfig")}
    limit = _model("MaxConcurrentInvocationsPerInstance").metadata
    problems = []
    for shipped, logical_id, a in _async_configs(shipped_templates):
        where = f"{shipped.label}: {logical_id}"
        problems += [f"{where}: unknown member {m}" for m in set(a) - members["AsyncInferenceConfig"]]
        problems += [
            f"{where}: unknown OutputConfig member {m}"
            for m in set(a["OutputConfig"]) - members["AsyncInferenceOutputConfig"]
        ]
        value = a.get("ClientConfig", {}).get("MaxConcurrentInvocationsPerInstance")
        if value is not None and not limit["min"] <= value <= limit["max"]:
            problems.append(f"{where}: MaxConcurrentInvocationsPerInstance {value} outside {limit}")
    assert not problems, "\n".join(problems)


def test_outputs_and_failures_lie_under_the_stage_bucket_encrypted_with_its_key(shipped_templates):
    """AsyncInferenceOutputConfig: S3OutputPath and S3FailurePath in the stage's artifact bucket (its name export),
    at stage_config/async_paths.py's prefixes of one endpoint; KmsKeyId the artifact key (its ARN export)."""
    problems = []
    for shipped, logical_id, a in _async_configs(shipped_templates):
        where = f"{shipped.label}: {logical_id}"
        out = a["OutputConfig"]
        paths = {
            kind: _joined_path(out.get(member), "-ArtifactBucketName")
            for kind, member in (("output", "S3OutputPath"), ("failure", "S3FailurePath"))
        }
        names = set()
        for kind, path in paths.items():
            match = ASYNC_PATH.match(path or "")
            if not match or match["kind"] != kind:
                problems.append(f"{where}: {kind} path {out.get(kind)!r} is not under async-inference/<name>/{kind}")
            else:
                names.add(match["name"])
        if len(names) > 1:
            problems.append(f"{where}: output and failure paths name different endpoints {names}")
        if not (_import(out.get("KmsKeyId")) or "").endswith("-ArtifactKeyArn"):
            problems.append(f"{where}: KmsKeyId {out.get('KmsKeyId')!r} is not the artifact key")
    assert not problems, "\n".join(problems)


def _topic_policies(template) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for policy in resources_of(template, "AWS::SNS::TopicPolicy").values():
        for topic in policy["Properties"]["Topics"]:
            found.setdefault(topic.get("Ref"), []).extend(statements_of(policy["Properties"]["PolicyDocument"]))
    return found


def test_notification_topics_let_the_execution_role_publish(shipped_templates):
    """Each success/error topic is an encrypted topic of the template whose topic policy allows the execution role
    (the role SageMaker acts as) sns:Publish, and the role's identity policy allows it too."""
    problems = []
    for shipped, logical_id, a in _async_configs(shipped_templates):
        where = f"{shipped.label}: {logical_id}"
        topics = shipped.template["Resources"]
        policies = _topic_policies(shipped.template)
        role_publishes = {
            listed_ref.get("Ref")
            for policy in resources_of(shipped.template, "AWS::IAM::Policy").values()
            if any((_import(r) or "").endswith("-ExecutionRoleArn") for r in _role_imports(policy))
            for s in statements_of(policy["Properties"]["PolicyDocument"])
            if "sns:Publish" in listed(s["Action"]) and s["Effect"] == "Allow"
            for listed_ref in listed(s["Resource"])
            if isinstance(listed_ref, dict)
        }
        for member, ref in a["OutputConfig"].get("NotificationConfig", {}).items():
            if member not in ("SuccessTopic", "ErrorTopic"):
                continue
            topic = ref.get("Ref") if isinstance(ref, dict) else None
            if topic not in topics or topics[topic]["Type"] != "AWS::SNS::Topic":
                problems.append(f"{where}: {member} is not a topic of this template")
                continue
            if "KmsMasterKeyId" not in topics[topic]["Properties"]:
                problems.append(f"{where}: {member} {topic} is not encrypted")
            allowed = [
                s
                for s in policies.get(topic, [])
                if s["Effect"] == "Allow"
                and "sns:Publish" in listed(s["Action"])
                and (_import(s.get("Principal", {}).get("AWS")) or "").endswith("-ExecutionRoleArn")
            ]
            if not allowed:
                problems.append(f"{where}: {member} {topic}'s topic policy does not let the execution role publish")
            if topic not in role_publishes:
                problems.append(f"{where}: the execution role's policy does not allow sns:Publish on {topic}")
    assert not problems, "\n".join(problems)


def _role_imports(policy: dict) -> list:
    """The `Fn::ImportValue`s inside a policy's Roles (an imported role's name is split out of its ARN import)."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            if "Fn::ImportValue" in value:
                found.append(value)
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(policy["Properties"].get("Roles", []))
    return found


def test_the_execution_role_reads_the_inputs_and_writes_exactly_the_output_and_failure_prefixes(shipped_templates):
    """Least privilege on the bucket: s3:GetObject under input/, s3:PutObject and s3:AbortMultipartUpload under
    output/ and failure/ only (AWS's example policy in "Asynchronous inference: complete the prerequisites",
    docs.aws.amazon.com/sagemaker/latest/dg/async-inference-create-endpoint-prerequisites.html, grants
    s3:AbortMultipartUpload beside s3:PutObject)."""
    problems = []
    for shipped, logical_id, _ in _async_configs(shipped_templates):
        where = f"{shipped.label}: {logical_id}"
        granted: dict[str, set[str]] = {}
        for policy in resources_of(shipped.template, "AWS::IAM::Policy").values():
            if not any((_import(r) or "").endswith("-ExecutionRoleArn") for r in _role_imports(policy)):
                continue
            for s in statements_of(policy["Properties"]["PolicyDocument"]):
                for action in listed(s["Action"]):
                    for resource in listed(s["Resource"]):
                        path = _joined_path(resource, "-ArtifactBucketArn")
                        if path and path.startswith("/async-inference/"):
                            granted.setdefault(action, set()).add(ASYNC_PATH.match(path)["kind"])
        if granted.get("s3:GetObject") != {"input"}:
            problems.append(f"{where}: s3:GetObject on {granted.get('s3:GetObject')}, expected the input prefix")
        if granted.get("s3:PutObject") != {"output", "failure"}:
            problems.append(f"{where}: s3:PutObject on {granted.get('s3:PutObject')}, expected output and failure")
        if granted.get("s3:AbortMultipartUpload") != {"output", "failure"}:
            problems.append(
                f"{where}: s3:AbortMultipartUpload on {granted.get('s3:AbortMultipartUpload')}, expected output and "
                "failure"
            )
        extra = set(granted) - {"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"}
        if extra:
            problems.append(f"{where}: further actions on the async prefixes: {sorted(extra)}")
    assert not problems, "\n".join(problems)


def test_a_variant_scales_to_zero_only_when_asynchronous_and_then_wakes_on_backlog(shipped_templates):
    """MinCapacity 0 on sagemaker:variant:DesiredInstanceCount only beside an AsyncInferenceConfig; such a target
    tracks ApproximateBacklogSizePerInstance (AWS/SageMaker, EndpointName) and has a step policy whose alarm
    watches HasBacklogWithoutCapacity (>= 1) so it leaves zero when a request waits."""
    problems = []
    seen = 0
    for shipped in shipped_templates:
        is_async = any(
            "AsyncInferenceConfig" in c["Properties"]
            for c in resources_of(shipped.template, "AWS::SageMaker::EndpointConfig").values()
        )
        policies = resources_of(shipped.template, "AWS::ApplicationAutoScaling::ScalingPolicy")
        for target_id, target in resources_of(shipped.template, "AWS::ApplicationAutoScaling::ScalableTarget").items():
            props = target["Properties"]
            if props["ScalableDimension"] != "sagemaker:variant:DesiredInstanceCount" or props["MinCapacity"] != 0:
                continue
            seen += 1
            where = f"{shipped.label}: {target_id}"
            if not is_async:
                problems.append(f"{where}: MinCapacity 0 on a real-time endpoint's variant")
                continue
            endpoint_name = props["ResourceId"].split("/")[1]
            mine = {
                k: p["Properties"]
                for k, p in policies.items()
                if p["Properties"]["ScalingTargetId"] == {"Ref": target_id}
            }
            tracking = [
                p["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"]
                for p in mine.values()
                if "CustomizedMetricSpecification" in p.get("TargetTrackingScalingPolicyConfiguration", {})
            ]
            if not any(
                m["MetricName"] == "ApproximateBacklogSizePerInstance"
                and m["Namespace"] == "AWS/SageMaker"
                and m["Dimensions"] == [{"Name": "EndpointName", "Value": endpoint_name}]
                for m in tracking
            ):
                problems.append(f"{where}: no target tracking on ApproximateBacklogSizePerInstance of {endpoint_name}")
            steps = {k for k, p in mine.items() if p["PolicyType"] == "StepScaling"}
            wakes = [
                a["Properties"]
                for a in resources_of(shipped.template, "AWS::CloudWatch::Alarm").values()
                if a["Properties"].get("MetricName") == "HasBacklogWithoutCapacity"
                and any(action.get("Ref") in steps for action in a["Properties"].get("AlarmActions", []))
            ]
            if not any(
                w["Namespace"] == "AWS/SageMaker"
                and w["Threshold"] == 1
                and w["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
                and w["Dimensions"] == [{"Name": "EndpointName", "Value": endpoint_name}]
                for w in wakes
            ):
                problems.append(f"{where}: no step policy on a HasBacklogWithoutCapacity >= 1 alarm wakes it from zero")
            for k in steps:
                adjustments = mine[k]["StepScalingPolicyConfiguration"]["StepAdjustments"]
                if not any(a["ScalingAdjustment"] >= 1 for a in adjustments):
                    problems.append(f"{where}: step policy {k} adds no instance")
    assert seen, "no shipped configuration scales a variant to zero"
    assert not problems, "\n".join(problems)


def test_async_prefixes_expire_by_a_lifecycle_rule_of_the_stage_bucket(shipped_templates):
    """Every asynchronous endpoint's async-inference/<name>/ prefix has an expiry rule on the artifact bucket of its
    configuration (S3 lifecycle Expiration), so inputs, answers and failures do not pile up."""
    problems = []
    by_config: dict[str, set[str]] = {}
    for shipped in shipped_templates:
        for bucket in resources_of(shipped.template, "AWS::S3::Bucket").values():
            for rule in bucket["Properties"].get("LifecycleConfiguration", {}).get("Rules", []):
                if rule.get("Status") == "Enabled" and rule.get("ExpirationInDays") and rule.get("Prefix"):
                    by_config.setdefault(shipped.config, set()).add(rule["Prefix"])
    for shipped, logical_id, a in _async_configs(shipped_templates):
        path = _joined_path(a["OutputConfig"]["S3OutputPath"], "-ArtifactBucketName")
        root = "/".join(path.strip("/").split("/")[:2]) + "/"
        if root not in by_config.get(shipped.config, set()):
            problems.append(f"{shipped.label}: {logical_id}: no expiry rule on {root}")
    assert not problems, "\n".join(problems)


def test_expired_async_objects_leave_the_versioned_bucket_within_a_day(shipped_templates):
    """The artifact bucket is versioned, and S3 "Expiring objects": "Object expiration applies only to an object's
    current version"; so each async expiry rule also sets NoncurrentVersionExpiration (1 day), and a rule on the same
    prefix removes expired-object delete markers (ExpiredObjectDeleteMarker, which S3 takes only in a rule without
    Days in its Expiration)."""
    problems, seen = [], 0
    for shipped in shipped_templates:
        for logical_id, bucket in resources_of(shipped.template, "AWS::S3::Bucket").items():
            rules = bucket["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
            expiring = [r for r in rules if str(r.get("Id", "")).startswith("ExpireAsyncInference-")]
            for rule in expiring:
                seen += 1
                where = f"{shipped.label}: {logical_id}: {rule['Id']}"
                days = rule.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays")
                if days != 1:
                    problems.append(f"{where}: NoncurrentVersionExpiration {days}, expected 1 day")
                markers = [
                    r
                    for r in rules
                    if r.get("Prefix") == rule["Prefix"]
                    and r.get("ExpiredObjectDeleteMarker") is True
                    and r.get("Status") == "Enabled"
                    and "ExpirationInDays" not in r
                ]
                if not markers:
                    problems.append(f"{where}: no rule removes expired-object delete markers under {rule['Prefix']}")
    assert seen, "no shipped configuration has an async expiry rule"
    assert not problems, "\n".join(problems)
