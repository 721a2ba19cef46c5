"""TritonEndpoint: endpoint config + endpoint, with `grant_invoke` and `metric_*` helpers.

Metrics (../shared/README.md, "Metrics"): invocation metrics in `AWS/SageMaker` (latencies in
microseconds), instance utilisation in `/aws/sagemaker/Endpoints` (CPU, GPU and GPU memory are
0-100 x the number of CPUs/GPUs), all with the dimensions EndpointName and VariantName.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk.interfaces import aws_sagemaker as sagemaker_refs
from constructs import Construct, IValidation

from serving_facts.catalogue import INSTANCE_TYPES
from serving_facts.drivers import AMI_NAMES
from triton_cdk.api_limits import (
    ENDPOINT_NAME,
    MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS,
    SAMPLING_PERCENT,
    STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS,
    VARIANT_NAME,
    VOLUME_SIZE_GB,
)
from triton_cdk.errors import InvalidPropsError
from triton_cdk.serving.deployment import DeploymentPolicy, TrafficRouting
from triton_cdk.serving.metrics import INVOCATION_NAMESPACE, SageMakerInvocationMetrics, sagemaker_metric
from triton_cdk.serving.triton_model import TritonModel

if TYPE_CHECKING:
    from triton_cdk.serving.async_inference import AsyncOutput  # async_inference.py builds on this module
    from triton_cdk.serving.shadow import ShadowVariant

__all__ = [
    "DEFAULT_VARIANT_NAME",
    "INSTANCE_NAMESPACE",
    "INVOKE_ACTIONS",
    "METRIC_PUBLISH_FREQUENCIES",
    "DataCapture",
    "ImportedTritonEndpoint",
    "MetricsPublishing",
    "ProductionVariant",
    "TritonEndpoint",
    "endpoint_problems",
    "seconds_to_alarm",
]

INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
# What `grant_invoke` allows: InvokeEndpoint, as aws-cdk-lib's (sagemaker-alpha) Endpoint.grantInvoke. Triton's
# requests get one response; neither the client nor the pipeline's smoke test streams one
# (InvokeEndpointWithResponseStream), so no grant gives that.
INVOKE_ACTIONS = ("sagemaker:InvokeEndpoint",)
# The variant name SageMaker's own tools give a single-variant endpoint; the default where a name is optional.
DEFAULT_VARIANT_NAME = "AllTraffic"


@dataclass(frozen=True)
class ProductionVariant:
    """One fleet behind the endpoint. Timeouts and volume: Default: - SageMaker's defaults.

    inference_ami_version: the GPU host image (driver); pick it with `serving_facts.drivers.ami_for`.
    Default: - the host's default driver (too old for current Triton releases on g4dn/g5/p4d).
    """

    name: str
    instance_type: str
    initial_instance_count: int = 1
    initial_weight: float = 1.0
    volume_size_gb: int | None = None
    model_data_download_timeout_seconds: int | None = None
    container_startup_health_check_timeout_seconds: int | None = None
    inference_ami_version: str | None = None

    def problems(self) -> list[str]:
        found = []
        prefix = f"variant '{self.name}': "
        name_problem = VARIANT_NAME.name_problem("name", self.name)
        if name_problem:
            found.append(prefix + name_problem)
        if self.initial_instance_count < 1:
            found.append(f"{prefix}initial_instance_count must be at least 1, got {self.initial_instance_count}")
        if self.initial_weight < 0:
            found.append(f"{prefix}initial_weight must be >= 0, got {self.initial_weight}")
        for field, value, (low, high), unit in (
            ("volume_size_gb", self.volume_size_gb, VOLUME_SIZE_GB, "GB"),
            (
                "model_data_download_timeout_seconds",
                self.model_data_download_timeout_seconds,
                MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS,
                "s",
            ),
            (
                "container_startup_health_check_timeout_seconds",
                self.container_startup_health_check_timeout_seconds,
                STARTUP_HEALTH_CHECK_TIMEOUT_SECONDS,
                "s",
            ),
        ):
            if value is not None and not low <= value <= high:
                found.append(f"{prefix}{field} must be between {low} and {high} {unit}, got {value}")
        instance = INSTANCE_TYPES.get(self.instance_type)  # types outside the catalogue are not judged
        if self.volume_size_gb is not None and instance is not None and instance.nvme_storage_only:
            found.append(
                f"{prefix}volume_size_gb must be left out on {self.instance_type}: it has NVMe instance storage "
                "only and SageMaker refuses VolumeSizeInGB there"
            )
        if self.inference_ami_version is not None:
            if self.inference_ami_version not in AMI_NAMES:
                found.append(
                    f"{prefix}inference_ami_version {self.inference_ami_version!r} is not one of {', '.join(AMI_NAMES)}"
                )
            elif instance is not None and not instance.has_gpu:
                found.append(f"{prefix}inference_ami_version is for GPU hosts; {self.instance_type} has no GPU")
        return found


# SageMaker API MetricsConfig.MetricPublishFrequencyInSeconds: "Valid values: 10, 30, 60, 120, 180, 240, 300"
# (default 60; botocore's model states no enum). ../shared/README.md "Checked this round".
METRIC_PUBLISH_FREQUENCIES = (10, 30, 60, 120, 180, 240, 300)


@dataclass(frozen=True)
class MetricsPublishing:
    """The endpoint config's MetricsConfig: enhanced metrics (utilization and invocation data per instance and
    container) and how often metrics reach CloudWatch. With enhanced metrics off the frequency applies to the
    utilization metrics only; invocation metrics stay at 60 s (SageMaker API MetricsConfig).

    `detailed_observability` is EnableDetailedObservability, stated explicitly: SageMaker's default is True for new
    endpoint configurations (container Prometheus metrics, per-GPU and per-instance host metrics; botocore's
    MetricsConfig documentation), so leaving it out would turn it on without the user asking."""

    enhanced_metrics: bool = False
    publish_frequency_seconds: int = 60
    detailed_observability: bool = False

    def problems(self) -> list[str]:
        if self.publish_frequency_seconds not in METRIC_PUBLISH_FREQUENCIES:
            return [
                f"metrics publish_frequency_seconds must be one of {list(METRIC_PUBLISH_FREQUENCIES)}, "
                f"got {self.publish_frequency_seconds}"
            ]
        return []

    def render(self) -> sagemaker.CfnEndpointConfig.MetricsConfigProperty:
        return sagemaker.CfnEndpointConfig.MetricsConfigProperty(
            enable_enhanced_metrics=self.enhanced_metrics,
            metric_publish_frequency_in_seconds=self.publish_frequency_seconds,
            enable_detailed_observability=self.detailed_observability,
        )


@dataclass(frozen=True)
class DataCapture:
    """Request/response capture to `s3://<bucket>/<prefix>`, encrypted with `key`."""

    bucket: s3.IBucket
    prefix: str
    key: kms.IKey
    sampling_percent: int = 20
    capture_request: bool = True
    capture_response: bool = True

    def problems(self) -> list[str]:
        found = []
        low, high = SAMPLING_PERCENT
        if not low <= self.sampling_percent <= high:
            found.append(f"data capture sampling_percent must be between {low} and {high}, got {self.sampling_percent}")
        if not (self.capture_request or self.capture_response):
            found.append("data capture needs capture_request and/or capture_response")
        if not self.prefix.endswith("/") or self.prefix.startswith("/"):
            found.append(f"data capture prefix must be relative and end in '/', got {self.prefix!r}")
        return found

    @property
    def objects_arn(self) -> str:
        return self.bucket.arn_for_objects(f"{self.prefix}*")

    def grant_write(self, grantee: iam.IGrantable) -> list[iam.PolicyStatement]:
        """Give `grantee` (the endpoint's execution role: SageMaker writes the capture with it) what capture needs:
        s3:PutObject under the prefix only (Sid `WriteDataCapture`; SageMaker chooses the object keys) and
        kms:GenerateDataKey / kms:Encrypt on `key` (Sid `EncryptDataCapture`). Returns the statements, not an
        `iam.Grant`: `iam.Grant.add_to_principal` builds its statement without a Sid (and iam.Grant has no public
        constructor), which would change every deployed template that has these Sids."""
        statements = [
            iam.PolicyStatement(sid="WriteDataCapture", actions=["s3:PutObject"], resources=[self.objects_arn]),
            iam.PolicyStatement(
                sid="EncryptDataCapture", actions=["kms:GenerateDataKey", "kms:Encrypt"], resources=[self.key.key_arn]
            ),
        ]
        for statement in statements:
            grantee.grant_principal.add_to_principal_policy(statement)
        return statements

    def render(self) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty:
        modes = [mode for mode, on in (("Input", self.capture_request), ("Output", self.capture_response)) if on]
        return sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
            enable_capture=True,
            initial_sampling_percentage=self.sampling_percent,
            destination_s3_uri=self.bucket.s3_url_for_object(self.prefix.rstrip("/")),
            kms_key_id=self.key.key_arn,
            capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=m) for m in modes],
            # KServe v2 JSON is stored as text; binary+json bodies are stored base64-encoded.
            capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                json_content_types=["application/json"]
            ),
        )


@jsii.implements(sagemaker.IEndpoint)
class _EndpointBase(cdk.Resource, SageMakerInvocationMetrics):
    """What owned and imported endpoints share: grants and metrics (aws-cdk-lib style).

    A `cdk.Resource` implementing aws-cdk-lib's `aws_sagemaker.IEndpoint`, so whatever takes a SageMaker endpoint
    takes ours (e.g. `aws_apigateway.SagemakerIntegration`; aws-cdk-lib API reference, "IEndpoint").
    """

    variant_names: list[str]

    # A property, not a plain attribute: the jsii kernel reads `endpointName` through property getters only.
    @property
    def endpoint_name(self) -> str:
        return self._endpoint_name

    @endpoint_name.setter
    def endpoint_name(self, name: str) -> None:
        self._endpoint_name = name

    @property
    def endpoint_ref(self) -> sagemaker_refs.EndpointReference:
        """aws-cdk-lib's reference to this endpoint (`IEndpointRef`)."""
        return sagemaker_refs.EndpointReference(endpoint_arn=self.endpoint_arn)

    @property
    def endpoint_arn(self) -> str:
        # SageMaker lower-cases endpoint names in ARNs.
        name = self.endpoint_name if cdk.Token.is_unresolved(self.endpoint_name) else self.endpoint_name.lower()
        return cdk.Stack.of(self).format_arn(service="sagemaker", resource="endpoint", resource_name=name)

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow `grantee` to call InvokeEndpoint on this endpoint."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(INVOKE_ACTIONS), resource_arns=[self.endpoint_arn]
        )

    def metric(
        self,
        metric_name: str,
        *,
        variant: str | None = None,
        namespace: str = INVOCATION_NAMESPACE,
        statistic: str = "Average",
        period: cdk.Duration | None = None,
        **props,
    ) -> cloudwatch.Metric:
        """Any SageMaker endpoint metric, with EndpointName and VariantName filled in.

        variant: Default: - the first (primary) variant.
        """
        variant_name = variant or self.variant_names[0]
        if variant_name not in self.variant_names:
            raise InvalidPropsError(f"unknown variant {variant_name!r}; this endpoint has {self.variant_names}")
        dimensions = {"EndpointName": self.endpoint_name, "VariantName": variant_name}
        return sagemaker_metric(
            metric_name, dimensions, namespace=namespace, statistic=statistic, period=period, **props
        )

    # Invocation metrics (AWS/SageMaker): SageMakerInvocationMetrics, plus this one.
    def metric_invocations_per_instance(self, **props) -> cloudwatch.Metric:
        """Invocations normalised by instance count (the autoscaling metric). Default: Sum."""
        return self.metric("InvocationsPerInstance", **{"statistic": "Sum", **props})

    # Instance metrics (/aws/sagemaker/Endpoints).
    def metric_cpu_utilization(self, **props) -> cloudwatch.Metric:
        """0-100 x vCPUs. Default: Average."""
        return self.metric("CPUUtilization", namespace=INSTANCE_NAMESPACE, **props)

    def metric_memory_utilization(self, **props) -> cloudwatch.Metric:
        """0-100. Default: Average."""
        return self.metric("MemoryUtilization", namespace=INSTANCE_NAMESPACE, **props)

    def metric_gpu_utilization(self, **props) -> cloudwatch.Metric:
        """0-100 x GPUs. Default: Average."""
        return self.metric("GPUUtilization", namespace=INSTANCE_NAMESPACE, **props)

    def metric_gpu_memory_utilization(self, **props) -> cloudwatch.Metric:
        """0-100 x GPUs. Default: Average."""
        return self.metric("GPUMemoryUtilization", namespace=INSTANCE_NAMESPACE, **props)

    def metric_disk_utilization(self, **props) -> cloudwatch.Metric:
        """0-100; on multi-model endpoints the model cache lives on this disk. Default: Average."""
        return self.metric("DiskUtilization", namespace=INSTANCE_NAMESPACE, **props)

    # Multi-model loading metrics.
    def metric_model_loading_wait_time(self, **props) -> cloudwatch.Metric:
        """How long a request waited for its model to be downloaded/loaded, in microseconds.

        SageMaker publishes Average, Sum, Min, Max and SampleCount for it (no percentiles).
        Default: Average.
        """
        return self.metric("ModelLoadingWaitTime", **props)

    def metric_model_cache_hit(self, **props) -> cloudwatch.Metric:
        """Average = share (0-1) of requests whose model was already loaded. Default: Average."""
        return self.metric("ModelCacheHit", **props)

    def metric_loaded_model_count(self, **props) -> cloudwatch.Metric:
        """Models loaded in the containers. Default: Average."""
        return self.metric("LoadedModelCount", **props)


class ImportedTritonEndpoint(_EndpointBase):
    def __init__(self, scope: Construct, construct_id: str, *, endpoint_name: str, variant_names: Sequence[str]):
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_names = list(variant_names)


def seconds_to_alarm(alarm: cloudwatch.IAlarm) -> int | None:
    """Shortest time an alarm needs to reach ALARM: (datapoints to alarm + 1) x the metric's period; the extra
    period is the delay before CloudWatch sees a closed period's datapoint.

    None for alarms this construct cannot read (imported ones, composite alarms).
    """
    if not isinstance(alarm, cloudwatch.Alarm):
        return None
    cfn = alarm.node.default_child
    period = getattr(alarm.metric, "period", None)
    datapoints = cfn.datapoints_to_alarm or cfn.evaluation_periods
    if period is None or cdk.Token.is_unresolved(datapoints):
        return None
    return int(period.to_seconds()) * (int(datapoints) + 1)


@jsii.implements(IValidation)
class _RollbackAlarmsNeeded:
    def __init__(self, endpoint: TritonEndpoint) -> None:
        self._endpoint = endpoint

    def validate(self) -> list[str]:
        endpoint = self._endpoint
        if endpoint.deployment.needs_rollback_alarms and not endpoint.rollback_alarms:
            traffic = endpoint.deployment.traffic.type if endpoint.deployment.traffic else ""
            return [
                f"TritonEndpoint {endpoint.endpoint_name}: {traffic} traffic shifting needs at least one rollback "
                "alarm (add_rollback_alarm); without one a failing new fleet still receives all traffic"
            ]
        # SageMaker watches the alarms only while a step bakes (WaitIntervalInSeconds): an alarm slower than
        # that never rolls back (deployment guardrails; ../shared/README.md "Deployment guardrails").
        bake = endpoint.deployment.bake_seconds
        slow = [
            f"{alarm.node.path} ({needed} s)"
            for alarm in endpoint.rollback_alarms
            if (needed := seconds_to_alarm(alarm)) is not None and needed > bake
        ]
        if slow:
            return [
                f"TritonEndpoint {endpoint.endpoint_name}: rollback alarms need longer to reach ALARM than the "
                f"{bake} s bake time (wait_seconds): {', '.join(slow)}; raise the wait or shorten the alarms' "
                "period x datapoints to alarm"
            ]
        return []


class TritonEndpoint(_EndpointBase):
    """An endpoint config (one production variant per `variants` entry) and the endpoint.

    Props:
    - model: the TritonModel every variant runs.
    - endpoint_name: the endpoint's name (the endpoint is updated in place, so a fixed name is
      safe). The endpoint config's name is generated: variant changes replace it.
    - variants: at least one ProductionVariant.
    - deployment: Default: - blue/green, all traffic at once, no bake time.
    - data_capture: Default: - no capture.
    - metrics: the endpoint config's MetricsConfig. Default: - none (SageMaker's defaults).
    - async_output: the endpoint config's AsyncInferenceConfig (triton_cdk/serving/async_inference.py). Default: - a
      real-time endpoint.
    - shadow: a shadow variant (triton_cdk/serving/shadow.py). Default: - none.

    Auto-rollback alarms are attached with `add_rollback_alarm` (alarms are built on this
    endpoint's metrics, so they come after it). `retain_instance_counts()` is called by
    TritonEndpointScaling so that an update keeps the autoscaler's instance count.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model: TritonModel,
        endpoint_name: str,
        variants: Sequence[ProductionVariant],
        deployment: DeploymentPolicy | None = None,
        data_capture: DataCapture | None = None,
        metrics: MetricsPublishing | None = None,
        async_output: AsyncOutput | None = None,
        shadow: ShadowVariant | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.model = model
        self.endpoint_name = endpoint_name
        self.variants = list(variants)
        self.variant_names = [v.name for v in self.variants]
        self.deployment = deployment or DeploymentPolicy.blue_green(TrafficRouting.all_at_once())
        self.data_capture = data_capture
        self.metrics = metrics
        self.async_output = async_output
        self.shadow = shadow
        self.rollback_alarms: list[cloudwatch.IAlarm] = []
        self._check()

        self.config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=v.name,
                    model_name=model.model_name,
                    instance_type=v.instance_type,
                    initial_instance_count=v.initial_instance_count,
                    initial_variant_weight=v.initial_weight,
                    volume_size_in_gb=v.volume_size_gb,
                    model_data_download_timeout_in_seconds=v.model_data_download_timeout_seconds,
                    container_startup_health_check_timeout_in_seconds=v.container_startup_health_check_timeout_seconds,
                    inference_ami_version=v.inference_ami_version,
                )
                for v in self.variants
            ],
            data_capture_config=data_capture.render() if data_capture else None,
            metrics_config=metrics.render() if metrics else None,
            async_inference_config=async_output.render() if async_output else None,
            shadow_production_variants=[shadow.render(self.variants[0])] if shadow else None,
        )
        self.resource = sagemaker.CfnEndpoint(
            self,
            "Resource",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.config.attr_endpoint_config_name,
            deployment_config=self.deployment.render([]),
        )
        self.node.add_validation(_RollbackAlarmsNeeded(self))

    @classmethod
    def from_endpoint_name(
        cls,
        scope: Construct,
        construct_id: str,
        endpoint_name: str,
        *,
        variant_names: Sequence[str] = (DEFAULT_VARIANT_NAME,),
    ) -> ImportedTritonEndpoint:
        """An endpoint defined elsewhere, for `grant_invoke` and `metric_*`."""
        return ImportedTritonEndpoint(scope, construct_id, endpoint_name=endpoint_name, variant_names=variant_names)

    def add_rollback_alarm(self, alarm: cloudwatch.IAlarm) -> None:
        """An alarm that, while in ALARM during a deployment, rolls it back."""
        self.rollback_alarms.append(alarm)
        self.resource.deployment_config = self.deployment.render([a.alarm_name for a in self.rollback_alarms])

    def grant_data_capture(self, grantee: iam.IGrantable) -> list[iam.PolicyStatement]:
        """Let `grantee` (the model's execution role) write this endpoint's data capture (`DataCapture.grant_write`);
        nothing without data capture. Returns the statements granted."""
        return self.data_capture.grant_write(grantee) if self.data_capture else []

    def describe_rollback_alarms_statement(self) -> iam.PolicyStatement | None:
        """What the role SageMaker uses (the model's execution role) needs for auto-rollback:
        "Ensure that your IAM execution role has permission to perform the cloudwatch:DescribeAlarms
        action on the auto-rollback alarms you specify" (SageMaker "Auto-Rollback Configuration and
        Monitoring"). DescribeAlarms is scoped by alarm ARN (IAM: resource type `alarm`).
        """
        if not self.rollback_alarms:
            return None
        return iam.PolicyStatement(
            sid="DescribeRollbackAlarms",
            actions=["cloudwatch:DescribeAlarms"],
            resources=[alarm.alarm_arn for alarm in self.rollback_alarms],
        )

    def retain_instance_counts(self) -> None:
        """Updates keep each variant's current instance count (set by the autoscaler).

        `RetainAllVariantProperties` false (CloudFormation's default) resets every variant to its
        initial count on each update and fights the autoscaler (../shared/README.md); weights and
        data capture still follow the new config.
        """
        self.resource.retain_all_variant_properties = True
        self.resource.exclude_retained_variant_properties = [
            sagemaker.CfnEndpoint.VariantPropertyProperty(variant_property_type=kind)
            for kind in ("DesiredWeight", "DataCaptureConfig")
        ]

    def _check(self) -> None:
        problems = endpoint_problems(
            self.endpoint_name, self.variants, self.deployment, data_capture=self.data_capture, metrics=self.metrics
        )
        if self.async_output:
            problems.extend(self.async_output.problems())
        if self.shadow:
            problems.extend(self.shadow.problems_with(self.variants))
        if problems:
            raise InvalidPropsError(f"TritonEndpoint {self.node.path}: " + "; ".join(problems))


def endpoint_problems(
    endpoint_name: str,
    variants: Sequence[ProductionVariant],
    deployment: DeploymentPolicy,
    *,
    data_capture: DataCapture | None = None,
    metrics: MetricsPublishing | None = None,
) -> list[str]:
    """What TritonEndpoint refuses about these props (the shadow and asynchronous output aside), as messages: the
    serving patterns collect them with their own problems before building anything."""
    problems = []
    unresolved = cdk.Token.is_unresolved(endpoint_name)
    name_problem = None if unresolved else ENDPOINT_NAME.name_problem("endpoint_name", endpoint_name)
    if name_problem:
        problems.append(name_problem)
    if not variants:
        problems.append("at least one production variant is required")
    names = [v.name for v in variants]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(f"variant names must be unique, got {duplicates} twice")
    for variant in variants:
        problems.extend(variant.problems())
    if variants and not any(v.initial_weight > 0 for v in variants):
        problems.append("at least one variant needs an initial_weight above 0")
    problems.extend(deployment.validate(variant_count=len(variants)))
    if data_capture:
        problems.extend(data_capture.problems())
    if metrics:
        problems.extend(metrics.problems())
    return problems
