"""Asynchronous inference on a Triton endpoint: outputs, notifications, grants, backlog scaling and alarms.

Sources (cited by the tests):
- SageMaker API `AsyncInferenceConfig` / `AsyncInferenceOutputConfig` (S3OutputPath, S3FailurePath, KmsKeyId,
  NotificationConfig SuccessTopic / ErrorTopic) and `AsyncInferenceClientConfig` (MaxConcurrentInvocationsPerInstance,
  1-1000 in botocore's sagemaker model; "If no value is provided, SageMaker chooses an optimal value").
- SageMaker "Asynchronous inference: complete the prerequisites": the execution role is what SageMaker uses to
  "access your Amazon S3 bucket and Amazon SNS topics", so the role reads the inputs, writes the outputs and
  publishes the notifications (and uses the KMS key of each).
- SageMaker "Autoscale an asynchronous endpoint": target tracking on the customized metric
  `ApproximateBacklogSizePerInstance` (namespace AWS/SageMaker, dimension EndpointName, statistic Average);
  `MinCapacity` 0 is allowed for asynchronous endpoints; the optional step scaling policy on a CloudWatch alarm over
  `HasBacklogWithoutCapacity` (Average >= 1, ChangeInCapacity +1 above the threshold) starts an instance when
  requests wait and none runs: without it the endpoint leaves zero only once the backlog exceeds the target.
  "Auto scaling policy overview": "you must use step scaling if you want to enable an endpoint to scale out from
  zero active instances".
- SageMaker "Alarms and logs for tracking metrics from asynchronous endpoints": ApproximateBacklogSize,
  ApproximateBacklogSizePerInstance, ApproximateAgeOfOldestRequest and HasBacklogWithoutCapacity carry the
  EndpointName dimension only; RequestDownloadFailures, ResponseUploadFailures, NotificationFailures,
  ExpiredRequests, InvocationFailures (Sum) and TimeInBacklog / TotalProcessingTime carry EndpointName and
  VariantName. Invocations and InvocationsPerInstance are not published for asynchronous endpoints ("Any metric not
  listed below is not published"): the endpoint's own alarms and dashboard follow that list too
  (triton_cdk/serving/monitoring.py; tests/contract/test_async_metrics_rules.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from triton_cdk.api_limits import MAX_CONCURRENT_INVOCATIONS  # botocore sagemaker MaxConcurrentInvocationsPerInstance
from triton_cdk.errors import InvalidPropsError
from triton_cdk.grants import grant_statements
from triton_cdk.serving.autoscaling import SCALABLE_DIMENSION, SERVICE_LINKED_ROLE
from triton_cdk.serving.endpoint import TritonEndpoint
from triton_cdk.serving.metrics import INVOCATION_NAMESPACE, sagemaker_metric

__all__ = [
    "BACKLOG_METRIC",
    "DEFAULT_BACKLOG_PER_INSTANCE",
    "DEFAULT_MAX_BACKLOG_AGE_SECONDS",
    "DEFAULT_OUTPUT_EXPIRATION_DAYS",
    "FAILURE_METRICS",
    "WAKE_METRIC",
    "AsyncAlarmThresholds",
    "AsyncInference",
    "AsyncOutput",
    "AsyncScalingSettings",
    "TritonAsyncMonitoring",
    "TritonAsyncScaling",
    "alarm_kinds",
    "endpoint_metric",
]

BACKLOG_METRIC = "ApproximateBacklogSizePerInstance"
WAKE_METRIC = "HasBacklogWithoutCapacity"
# Failure metrics of an asynchronous variant (Sum), by the alarm kind that watches each.
FAILURE_METRICS = {
    "invocation_failures": "InvocationFailures",
    "request_download_failures": "RequestDownloadFailures",
    "response_upload_failures": "ResponseUploadFailures",
    "notification_failures": "NotificationFailures",
    "expired_requests": "ExpiredRequests",
}
DEFAULT_BACKLOG_PER_INSTANCE = 5.0  # the value of SageMaker's own example policy ("Autoscale an asynchronous endpoint")
DEFAULT_MAX_BACKLOG_AGE_SECONDS = 900
DEFAULT_OUTPUT_EXPIRATION_DAYS = 7


def _prefix_problem(field: str, prefix: str) -> str | None:
    if cdk.Token.is_unresolved(prefix):
        return None
    if not prefix.endswith("/") or prefix.startswith("/"):
        return f"{field} must be relative and end in '/', got {prefix!r}"
    return None


@dataclass(frozen=True)
class AsyncOutput:
    """The endpoint config's AsyncInferenceConfig: where SageMaker writes answers and failures (under `bucket`,
    encrypted with `key`), which topics it notifies, how many requests each instance's container gets at once.

    max_concurrent_invocations_per_instance: Default: - SageMaker chooses ("an optimal value").
    success_topic / error_topic: Default: - no notification.
    """

    bucket: s3.IBucket
    key: kms.IKey
    output_prefix: str
    failure_prefix: str
    max_concurrent_invocations_per_instance: int | None = None
    success_topic: sns.ITopic | None = None
    error_topic: sns.ITopic | None = None

    def problems(self) -> list[str]:
        found = [
            p
            for p in (
                _prefix_problem("async output_prefix", self.output_prefix),
                _prefix_problem("async failure_prefix", self.failure_prefix),
            )
            if p
        ]
        if self.output_prefix == self.failure_prefix:
            found.append("async output_prefix and failure_prefix must differ (answers and failures apart)")
        low, high = MAX_CONCURRENT_INVOCATIONS
        value = self.max_concurrent_invocations_per_instance
        if value is not None and not low <= value <= high:
            found.append(f"async max_concurrent_invocations_per_instance must be between {low} and {high}, got {value}")
        return found

    def render(self) -> sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty:
        notification = None
        if self.success_topic or self.error_topic:
            notification = sagemaker.CfnEndpointConfig.AsyncInferenceNotificationConfigProperty(
                success_topic=self.success_topic.topic_arn if self.success_topic else None,
                error_topic=self.error_topic.topic_arn if self.error_topic else None,
            )
        client = None
        if self.max_concurrent_invocations_per_instance is not None:
            client = sagemaker.CfnEndpointConfig.AsyncInferenceClientConfigProperty(
                max_concurrent_invocations_per_instance=self.max_concurrent_invocations_per_instance
            )
        return sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
            output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                s3_output_path=self.bucket.s3_url_for_object(self.output_prefix.rstrip("/")),
                s3_failure_path=self.bucket.s3_url_for_object(self.failure_prefix.rstrip("/")),
                kms_key_id=self.key.key_arn,
                notification_config=notification,
            ),
            client_config=client,
        )


class AsyncInference(Construct):
    """An asynchronous endpoint's S3 locations and (optionally) its success and error topics.

    Props:
    - bucket, key: where inputs, answers and failures live and the key that encrypts them (and the topics).
    - input_prefix / output_prefix / failure_prefix: relative key prefixes ending in '/'.
    - notifications: success and error SNS topics, encrypted with `key`, TLS only. Default: True.
    - max_concurrent_invocations_per_instance: Default: - SageMaker chooses.

    `output` is the AsyncOutput to give TritonEndpoint (`async_output`); `grant_read_inputs`, `grant_write_results` and
    `grant_publish` are what the endpoint's execution role needs (SageMaker acts as that role).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        input_prefix: str,
        output_prefix: str,
        failure_prefix: str,
        notifications: bool = True,
        max_concurrent_invocations_per_instance: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = bucket
        self.key = key
        self.input_prefix = input_prefix
        problem = _prefix_problem("input_prefix", input_prefix)
        self.topics: dict[str, sns.Topic] = {}
        if notifications:
            for kind in ("Success", "Error"):
                self.topics[kind] = sns.Topic(
                    self, f"{kind}Topic", master_key=key, enforce_ssl=True, display_name=f"Async inference {kind}"
                )
        self.output = AsyncOutput(
            bucket=bucket,
            key=key,
            output_prefix=output_prefix,
            failure_prefix=failure_prefix,
            max_concurrent_invocations_per_instance=max_concurrent_invocations_per_instance,
            success_topic=self.topics.get("Success"),
            error_topic=self.topics.get("Error"),
        )
        problems = ([problem] if problem else []) + self.output.problems()
        if input_prefix in (output_prefix, failure_prefix):
            problems.append("input_prefix must differ from output_prefix and failure_prefix")
        if problems:
            raise InvalidPropsError(f"AsyncInference {self.node.path}: " + "; ".join(problems))

    def _objects(self, prefix: str) -> str:
        return self.bucket.arn_for_objects(f"{prefix}*")

    def grant_read_inputs(self, grantee: iam.IGrantable) -> iam.Grant:
        """s3:GetObject under the input prefix and kms:Decrypt: SageMaker downloads each request's input."""
        return grant_statements(
            grantee,
            [
                iam.PolicyStatement(
                    sid="ReadAsyncInputs", actions=["s3:GetObject"], resources=[self._objects(self.input_prefix)]
                ),
                iam.PolicyStatement(sid="DecryptAsyncInputs", actions=["kms:Decrypt"], resources=[self.key.key_arn]),
            ],
        )

    def grant_write_results(self, grantee: iam.IGrantable) -> iam.Grant:
        """s3:PutObject (and s3:AbortMultipartUpload of an upload SageMaker gives up) under exactly the output and
        failure prefixes, encrypted with the key (KmsKeyId). AWS's own example policy ("Asynchronous inference:
        complete the prerequisites", docs.aws.amazon.com/sagemaker/latest/dg/async-inference-create-endpoint-
        prerequisites.html) grants s3:AbortMultipartUpload beside s3:PutObject."""
        return grant_statements(
            grantee,
            [
                iam.PolicyStatement(
                    sid="WriteAsyncResults",
                    actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                    resources=[self._objects(self.output.output_prefix), self._objects(self.output.failure_prefix)],
                ),
                iam.PolicyStatement(
                    sid="EncryptAsyncResults",
                    actions=["kms:GenerateDataKey", "kms:Encrypt"],
                    resources=[self.key.key_arn],
                ),
            ],
        )

    def grant_publish(self, grantee: iam.IGrantable) -> list[iam.Grant]:
        """sns:Publish on the success and error topics (and their key), in the identity policy of `grantee` and in
        each topic's policy: `enforce_ssl` gives the topics an AWS::SNS::TopicPolicy, which replaces SNS's default
        policy, so the publisher is named there too."""
        grants = []
        for kind, topic in self.topics.items():
            grants.append(topic.grant_publish(grantee))
            principal = grantee.grant_principal
            topic.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=f"AllowSageMakerExecutionRoleToPublish{kind}",
                    principals=[principal],
                    actions=["sns:Publish"],
                    resources=[topic.topic_arn],
                )
            )
        return grants


@dataclass(frozen=True)
class AsyncScalingSettings:
    """Backlog scaling of an asynchronous endpoint's variant.

    min_capacity 0 scales to zero when no request waits; a step policy then starts one instance when a request
    arrives (HasBacklogWithoutCapacity). backlog_per_instance: the ApproximateBacklogSizePerInstance target.
    """

    min_capacity: int
    max_capacity: int
    backlog_per_instance: float = DEFAULT_BACKLOG_PER_INSTANCE
    scale_in_cooldown_seconds: int = 300
    scale_out_cooldown_seconds: int = 60
    wake_cooldown_seconds: int = 300  # the Cooldown of SageMaker's own example step policy

    def problems(self) -> list[str]:
        found = []
        if self.min_capacity < 0:
            found.append(f"min_capacity must be at least 0, got {self.min_capacity}")
        if self.max_capacity < max(self.min_capacity, 1):
            found.append(f"max_capacity must be at least 1 and min_capacity, got {self.max_capacity}")
        if self.backlog_per_instance <= 0:
            found.append(f"backlog_per_instance must be above 0, got {self.backlog_per_instance}")
        return found


def endpoint_metric(endpoint: TritonEndpoint, metric_name: str, statistic: str = "Average") -> cloudwatch.Metric:
    """An asynchronous-endpoint metric with the EndpointName dimension only (backlog, age, wake-up)."""
    return sagemaker_metric(
        metric_name,
        {"EndpointName": endpoint.endpoint_name},
        namespace=INVOCATION_NAMESPACE,
        statistic=statistic,
        period=cdk.Duration.minutes(1),
    )


class TritonAsyncScaling(Construct):
    """Scales the variant `variant` of an asynchronous `endpoint` on its backlog, to zero and back."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: TritonEndpoint,
        variant: str,
        settings: AsyncScalingSettings,
    ) -> None:
        super().__init__(scope, construct_id)
        problems = settings.problems()
        if variant not in endpoint.variant_names:
            problems.append(f"unknown variant {variant!r}; the endpoint has {endpoint.variant_names}")
        if endpoint.async_output is None:
            problems.append("the endpoint has no AsyncInferenceConfig; backlog scaling is for asynchronous endpoints")
        if problems:
            raise InvalidPropsError(f"TritonAsyncScaling {self.node.path}: " + "; ".join(problems))
        role_arn = cdk.Stack.of(self).format_arn(
            service="iam", region="", resource="role", resource_name=SERVICE_LINKED_ROLE
        )
        role = iam.Role.from_role_arn(self, "ServiceLinkedRole", role_arn, mutable=False)
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"endpoint/{endpoint.endpoint_name}/variant/{variant}",
            scalable_dimension=SCALABLE_DIMENSION,
            min_capacity=settings.min_capacity,
            max_capacity=settings.max_capacity,
            role=role,
        )
        # A plain-string resource id: CloudFormation must register after, and deregister before, the endpoint.
        self.target.node.add_dependency(endpoint.resource)
        self.target.scale_to_track_metric(
            "BacklogPerInstance",
            policy_name=BACKLOG_METRIC,
            target_value=settings.backlog_per_instance,
            custom_metric=endpoint_metric(endpoint, BACKLOG_METRIC),
            scale_in_cooldown=cdk.Duration.seconds(settings.scale_in_cooldown_seconds),
            scale_out_cooldown=cdk.Duration.seconds(settings.scale_out_cooldown_seconds),
        )
        self.wake_policy: appscaling.StepScalingPolicy | None = None
        if settings.min_capacity == 0:
            # SageMaker's example: HasBacklogWithoutCapacity Average >= 1 for 2 of 2 one-minute periods, +1 instance.
            self.wake_policy = self.target.scale_on_metric(
                "WakeFromZero",
                metric=endpoint_metric(endpoint, WAKE_METRIC),
                scaling_steps=[
                    appscaling.ScalingInterval(upper=1, change=0),
                    appscaling.ScalingInterval(lower=1, change=1),
                ],
                adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
                metric_aggregation_type=appscaling.MetricAggregationType.AVERAGE,
                cooldown=cdk.Duration.seconds(settings.wake_cooldown_seconds),
                evaluation_periods=2,
                datapoints_to_alarm=2,
            )
            # A fixed name, as TritonEndpointScaling's policies: a generated one follows the construct path, which
            # differs between `make deploy` and the pipeline's stage (PutScalingPolicy names are per target).
            policy = self.wake_policy.upper_action
            assert policy is not None
            policy.node.default_child.policy_name = WAKE_METRIC  # type: ignore[union-attr]
        endpoint.retain_instance_counts()


@dataclass(frozen=True)
class AsyncAlarmThresholds:
    """Failures (Sum per period) at or above `failures` alarm; so does a request as old as `max_backlog_age_seconds`."""

    failures: int = 1
    max_backlog_age_seconds: int = DEFAULT_MAX_BACKLOG_AGE_SECONDS
    period_seconds: int = 300
    evaluation_periods: int = 1
    datapoints_to_alarm: int = 1  # M of 'M out of N' (evaluation_periods), as TritonEndpointMonitoring's alarms

    def problems(self) -> list[str]:
        if not 1 <= self.datapoints_to_alarm <= self.evaluation_periods:
            return [
                f"datapoints_to_alarm {self.datapoints_to_alarm} must be 1-evaluation_periods {self.evaluation_periods}"
            ]
        return []


class TritonAsyncMonitoring(Construct):
    """Alarms on an asynchronous endpoint's failures and backlog age, and dashboard widgets of its queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: TritonEndpoint,
        thresholds: AsyncAlarmThresholds,
        topic: sns.ITopic | None = None,
        notifications: bool = True,
        dashboard: cloudwatch.Dashboard | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if thresholds.problems():
            raise InvalidPropsError(f"TritonAsyncMonitoring {self.node.path}: " + "; ".join(thresholds.problems()))
        self._endpoint_name = endpoint.endpoint_name
        self.alarm_names: list[str] = []  # literal names (the L2's alarm_name is a Ref token)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        period = cdk.Duration.seconds(thresholds.period_seconds)
        name = endpoint.endpoint_name
        for variant in endpoint.variant_names:
            for kind, metric_name in FAILURE_METRICS.items():
                if kind == "notification_failures" and not notifications:
                    continue
                metric = endpoint.metric(metric_name, variant=variant, statistic="Sum", period=period)
                self._alarm(
                    f"{variant}-{kind}",
                    metric,
                    thresholds.failures,
                    f"{metric_name} (Sum) >= {thresholds.failures} per {thresholds.period_seconds} s",
                    thresholds,
                    topic,
                )
        age = sagemaker_metric(
            "ApproximateAgeOfOldestRequest", {"EndpointName": name}, statistic="Maximum", period=period
        )
        self._alarm(
            "backlog-age",
            age,
            thresholds.max_backlog_age_seconds,
            f"the oldest queued request is {thresholds.max_backlog_age_seconds} s old or older",
            thresholds,
            topic,
        )
        self.widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title="Async backlog",
                left=[
                    endpoint_metric(endpoint, "ApproximateBacklogSize"),
                    endpoint_metric(endpoint, BACKLOG_METRIC),
                ],
                right=[endpoint_metric(endpoint, WAKE_METRIC, statistic="Maximum")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Async oldest request (s)",
                left=[age],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(value=thresholds.max_backlog_age_seconds, label="alarm")
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Async failures",
                left=[
                    endpoint.metric(m, variant=v, statistic="Sum", period=period)
                    for v in endpoint.variant_names
                    for k, m in FAILURE_METRICS.items()
                    if notifications or k != "notification_failures"
                ],
                width=24,
            ),
        ]
        if dashboard is not None:
            dashboard.add_widgets(*self.widgets)

    def _alarm(
        self,
        kind: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        what: str,
        thresholds: AsyncAlarmThresholds,
        topic: sns.ITopic | None,
    ) -> None:
        endpoint_name = self._endpoint_name
        # <endpoint>-<variant>-<kind> / <endpoint>-backlog-age: the kinds differ from TritonEndpointMonitoring's.
        name = f"{endpoint_name}-{kind.replace('_', '-')}"
        alarm = cloudwatch.Alarm(
            self,
            "".join(p[:1].upper() + p[1:] for p in kind.replace("-", "_").split("_")) + "Alarm",
            alarm_name=name,
            alarm_description=f"Asynchronous Triton endpoint {endpoint_name}: {what}",
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=thresholds.evaluation_periods,
            datapoints_to_alarm=thresholds.datapoints_to_alarm,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if topic is not None:
            alarm.add_alarm_action(actions.SnsAction(topic))
            alarm.add_ok_action(actions.SnsAction(topic))
        self.alarm_names.append(name)
        self.alarms[kind] = alarm


def alarm_kinds(variants: Sequence[str], notifications: bool) -> list[str]:
    """The alarm kinds TritonAsyncMonitoring creates (for tests and docs)."""
    kinds = [f"{v}-{k}" for v in variants for k in FAILURE_METRICS if notifications or k != "notification_failures"]
    return [*kinds, "backlog-age"]
