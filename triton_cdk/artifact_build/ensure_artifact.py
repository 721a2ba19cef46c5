"""EnsureArtifacts: one `Custom::TritonModelArtifact` per artifact key, behind one Provider.

The handler (`index.py` in the folder the `handler_dir` prop names, by default `HANDLER_DIR`, handlers/ensure_artifact/;
standard library + boto3, so the asset needs no bundling) returns at once when the key exists, otherwise
starts the CodeBuild build (BUILD mode) or copies the object from the source stage's bucket (PROMOTE mode).

Waiting for a build. A custom resource gets at most one hour (its ServiceTimeout: 1..3600 s), a
GPU build with a cold ~10 GB image pull can take longer (CodeBuild allows up to 36 h). So in BUILD
mode the resource only starts the build, and the deployment waits on an
`AWS::CloudFormation::WaitCondition` (Timeout up to 43200 s = 12 h; CloudFormation template
reference) for the build's queue + run time + a margin. An EventBridge rule on the projects' "CodeBuild
Build State Change" events invokes `on_build_state`, which signals the wait condition: SUCCESS once
the key exists, FAILURE with the build id, phase and logs link otherwise (including builds CodeBuild
timed out or stopped, which never run their own last command). A wait condition cannot be updated
and its handle must be new for every wait (template reference: "Anytime you add a WaitCondition
resource during a stack update, you must associate the wait condition with a new
WaitConditionHandle"), so both carry a digest of what the build must produce in their logical IDs.
If the deployment gives up (the wait times out, another resource fails, the stack is deleted),
CloudFormation deletes the resource that started the build, and its Delete stops that build.

Endpoint stacks depend on the build stack, so every SageMaker model is created after its artifact
exists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from serving_facts.content_address import MODEL_PREFIX
from triton_cdk.artifacts import list_models_statement
from triton_cdk.errors import InvalidPropsError
from triton_cdk.nag import acknowledge

__all__ = [
    "BUILD_END_STATES",
    "HANDLER_DIR",
    "MAX_WAIT",
    "ON_EVENT_TIMEOUT",
    "RESOURCE_TYPE",
    "SERVICE_TIMEOUT",
    "ArtifactResourceProps",
    "EnsureArtifacts",
    "PromotionSource",
]

RESOURCE_TYPE = "Custom::TritonModelArtifact"
# The handler ships with the construct (package data; pyproject.toml): a folder, not a Python package.
HANDLER_DIR = Path(__file__).resolve().parent / "handlers" / "ensure_artifact"
# on_event copies objects server-side (promotion, multi-model copies): its own limit, below the
# Provider framework function's 15 minutes, so its own error reaches CloudFormation.
ON_EVENT_TIMEOUT = cdk.Duration.minutes(14)
# The resource's ServiceTimeout: above the framework function's 15 minutes (which reports our
# handler's error), so CloudFormation's generic "did not stabilize" timeout never comes first.
SERVICE_TIMEOUT = cdk.Duration.minutes(20)
MAX_WAIT = cdk.Duration.hours(12)  # AWS::CloudFormation::WaitCondition Timeout: at most 43200 s
BUILD_END_STATES = ("SUCCEEDED", "FAILED", "FAULT", "STOPPED", "TIMED_OUT")


@dataclass(frozen=True)
class PromotionSource:
    """The stage artifacts are copied from: its bucket, and its region and account where the config fixes them."""

    bucket_name: str
    region: str | None = None
    account: str | None = None


@dataclass(frozen=True)
class ArtifactResourceProps:
    """What one resource ensures; `build_environment` and `project` only in BUILD mode."""

    construct_id: str
    model_name: str
    key: str
    copy_to: Sequence[str] = ()
    uncompressed_prefix: str | None = None
    project_name: str | None = None
    build_environment: Mapping[str, str] | None = None


class EnsureArtifacts(Construct):
    """The Provider, its resources and, in BUILD mode, their wait conditions.

    :param bucket_name: the artifact bucket (this stage's).
    :param bucket_arn: its ARN (an explicit export of the artifact stack: cdk-nag findings name it).
    :param key_arn: the artifact key; copies are re-encrypted with it.
    :param projects: CodeBuild projects the handler may start, poll and stop (BUILD mode).
    :param promotion: PROMOTE mode: the stage artifacts are copied from; nothing is ever built.
    :param build_wait: BUILD mode: how long a deployment waits for one build (at most 12 hours).
    :param log_retention: retention of the handler and framework log groups.
    :param handler_dir: the folder holding the handler's `index.py` (`on_event`, `on_build_state`), shipped as
        the functions' asset as it is (no bundling). Default: - the handler shipped with this construct (package
        data: triton_cdk/artifact_build/handlers/ensure_artifact/).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket_name: str,
        bucket_arn: str,
        key_arn: str,
        projects: Sequence[codebuild.IProject] = (),
        promotion: PromotionSource | None = None,
        build_wait: cdk.Duration | None = None,
        log_retention: logs.RetentionDays,
        log_encryption_key: kms.IKey | None = None,
        handler_dir: Path | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if bool(projects) == bool(promotion):
            raise InvalidPropsError("EnsureArtifacts needs either projects (build) or promotion (promote), not both")
        if projects and build_wait is None:
            raise InvalidPropsError("EnsureArtifacts in build mode needs build_wait")
        if build_wait is not None and build_wait.to_seconds() > MAX_WAIT.to_seconds():
            raise InvalidPropsError(
                f"build_wait {build_wait.to_minutes()} min exceeds CloudFormation's 12-hour WaitCondition"
            )
        self.bucket_name = bucket_name
        self.bucket_arn = bucket_arn
        self.key_arn = key_arn
        self.promotion = promotion
        self.build_wait = build_wait
        self.resources: dict[str, cdk.CustomResource] = {}
        self.wait_conditions: dict[str, cdk.CfnWaitCondition] = {}

        self.role = iam.Role(
            self,
            "HandlerRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Ensure-artifact handler: check, build or promote model artifacts",
        )
        code = lambda_.Code.from_asset(str(handler_dir or HANDLER_DIR), exclude=["__pycache__", "*.pyc"])
        handlers = [("OnEvent", "index.on_event", ON_EVENT_TIMEOUT)]
        if projects:
            handlers.append(("OnBuildState", "index.on_build_state", cdk.Duration.minutes(14)))
        functions = {}
        for name, handler, timeout in handlers:
            group = logs.LogGroup(
                self,
                f"{name}Logs",
                retention=log_retention,
                encryption_key=log_encryption_key,
                removal_policy=cdk.RemovalPolicy.DESTROY,
            )
            functions[name] = lambda_.Function(
                self,
                name,
                runtime=lambda_.Runtime.PYTHON_3_14,
                handler=handler,
                code=code,
                timeout=timeout,
                memory_size=256,
                role=self.role,
                log_group=group,
                description=f"Custom::TritonModelArtifact {handler}",
            )
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[group.log_group_arn]
                )
            )
        self.functions = functions
        self._grant([p.project_arn for p in projects])
        if projects:
            self._route_build_ends(projects, functions["OnBuildState"])

        framework_logs = logs.LogGroup(
            self,
            "ProviderLogs",
            retention=log_retention,
            encryption_key=log_encryption_key,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        # No is_complete: the Provider answers as soon as on_event returns; builds are waited for by
        # the wait conditions (module doc).
        self.provider = cr.Provider(self, "Provider", on_event_handler=functions["OnEvent"], log_group=framework_logs)
        self._acknowledge()
        self._drop_repeated_role_dependencies(functions.values())

    def _route_build_ends(self, projects: Sequence[codebuild.IProject], function: lambda_.IFunction) -> None:
        rule = events.Rule(
            self,
            "BuildEnded",
            description="Model build ended: signal the wait condition of the deployment that started it",
            event_pattern=events.EventPattern(
                source=["aws.codebuild"],
                detail_type=["CodeBuild Build State Change"],
                detail={
                    "build-status": list(BUILD_END_STATES),
                    "project-name": [p.project_name for p in projects],
                },
            ),
        )
        rule.add_target(targets.LambdaFunction(function, retry_attempts=8))

    def _drop_repeated_role_dependencies(self, functions) -> None:
        """cfn-lint W3005: CDK's DependsOn on a role repeats the GetAtt that names it.

        The dependency that matters, on the role's policy (granted before first use), is kept.
        """
        pairs = [(fn, fn.role) for fn in functions]
        pairs += [
            (fn, fn.role)
            for name in ("framework-onEvent", "framework-isComplete", "framework-onTimeout")
            if (fn := self.provider.node.try_find_child(name)) is not None
        ]
        stack = cdk.Stack.of(self)
        for resource, role in pairs:
            policy = role.node.find_child("DefaultPolicy").node.default_child
            resource.node.default_child.add_override("DependsOn", [stack.get_logical_id(policy)])

    def add_artifact(self, props: ArtifactResourceProps) -> cdk.CustomResource:
        properties = {
            "Bucket": self.bucket_name,
            "Key": props.key,
            "ModelName": props.model_name,
            "KmsKeyArn": self.key_arn,
            "CopyTo": list(props.copy_to),
        }
        if props.uncompressed_prefix:
            properties["UncompressedPrefix"] = props.uncompressed_prefix
        wait = None
        if self.promotion:
            properties["SourceBucket"] = self.promotion.bucket_name
            if self.promotion.region:
                properties["SourceRegion"] = self.promotion.region
        else:
            if not props.project_name:
                raise InvalidPropsError(f"artifact {props.key}: a BUILD-mode resource needs the project that builds it")
            properties["ProjectName"] = props.project_name
            properties["BuildEnvironment"] = dict(props.build_environment or {})
            # A new handle and wait condition whenever a build may be needed (module doc).
            timeout = str(int(self.build_wait.to_seconds()))
            digest = hashlib.sha256(f"{props.key}|{props.uncompressed_prefix or ''}|{timeout}".encode()).hexdigest()
            handle = cdk.CfnWaitConditionHandle(self, f"{props.construct_id}-Handle-{digest[:12]}")
            properties["WaitHandle"] = handle.ref
            wait = cdk.CfnWaitCondition(
                self, f"{props.construct_id}-Built-{digest[:12]}", handle=handle.ref, timeout=timeout, count=1
            )
        resource = cdk.CustomResource(
            self,
            props.construct_id,
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties=properties,
            service_timeout=SERVICE_TIMEOUT,
        )
        if wait is not None:
            wait.node.add_dependency(resource)
            self.wait_conditions[props.key] = wait
        self.resources[props.key] = resource
        return resource

    def completion_of(self, key: str) -> Construct:
        """What finishes once the artifact under `key` exists: its wait condition (BUILD) or its resource."""
        return self.wait_conditions.get(key) or self.resources[key]

    @property
    def completions(self) -> list[Construct]:
        """What must finish before an artifact can be used: the wait conditions (BUILD) or the resources."""
        return list(self.wait_conditions.values()) or list(self.resources.values())

    def _grant(self, project_arns: Sequence[str]) -> None:
        models = f"{self.bucket_arn}/{MODEL_PREFIX}*"
        statements = [
            # PutObject covers CopyObject and the multipart copy of objects over 5 GB; Abort cleans up after one.
            iam.PolicyStatement(
                sid="ReadWriteModels",
                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[models],
            ),
            # Without ListBucket a missing key answers 403 instead of 404.
            list_models_statement(self.bucket_arn, MODEL_PREFIX),
            iam.PolicyStatement(
                sid="UseArtifactKey",
                actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=[self.key_arn],
            ),
        ]
        if project_arns:
            statements.append(
                iam.PolicyStatement(
                    sid="RunModelBuilds",
                    actions=["codebuild:StartBuild", "codebuild:BatchGetBuilds", "codebuild:StopBuild"],
                    resources=list(project_arns),
                )
            )
        if self.promotion:
            source_arn = f"arn:{cdk.Aws.PARTITION}:s3:::{self.promotion.bucket_name}"
            statements += [
                iam.PolicyStatement(
                    sid="ReadSourceStageModels",
                    actions=["s3:GetObject", "s3:GetObjectVersion"],
                    resources=[f"{source_arn}/{MODEL_PREFIX}*"],
                ),
                list_models_statement(source_arn, MODEL_PREFIX, sid="ListSourceStageModels"),
                self._decrypt_source_statement(source_arn),
            ]
        for statement in statements:
            self.role.add_to_principal_policy(statement)

    def _decrypt_source_statement(self, source_arn: str) -> iam.PolicyStatement:
        """kms:Decrypt of the source stage's objects, as narrow as IAM can say it without the key's ARN.

        The source key is generated in the source stage's artifact stack (maybe another account and
        region), so its ARN is unknown here. What is known narrows it: keys of the source account and
        region when the source config fixes them; only S3 of the source bucket's region may use it
        (kms:ViaService: S3 calls KMS in the region of the bucket it reads, so a cross-region copy
        decrypts through s3.<source region>, never this stage's region); and only for objects of the
        source bucket (S3 passes the bucket ARN, or with bucket keys disabled the object ARN, as the
        `aws:s3:arn` encryption context; AWS KMS developer guide, "kms:EncryptionContext:context-key",
        and the S3 user guide, "Encryption context").
        """
        source = self.promotion
        partition = cdk.Aws.PARTITION
        if source.region and source.account:
            key_arn = f"arn:{partition}:kms:{source.region}:{source.account}:key/*"
        else:
            key_arn = "*"
        via = (
            {"StringEquals": {"kms:ViaService": f"s3.{source.region}.amazonaws.com"}}
            if source.region
            else {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}}
        )
        conditions = {**via}
        conditions.setdefault("StringLike", {})["kms:EncryptionContext:aws:s3:arn"] = [
            source_arn,
            f"{source_arn}/{MODEL_PREFIX}*",
        ]
        return iam.PolicyStatement(
            sid="DecryptSourceStageModels", actions=["kms:Decrypt"], resources=[key_arn], conditions=conditions
        )

    def _acknowledge(self) -> None:
        stack = cdk.Stack.of(self)
        findings = [f"Resource::{_nag_name(stack.resolve(self.bucket_arn))}/{MODEL_PREFIX}*"]
        reason = "Artifact keys are content addresses computed per deployment, all under the model prefix."
        if self.promotion:
            source = self.promotion
            key = (
                f"Resource::arn:<AWS::Partition>:kms:{source.region}:{source.account}:key/*"
                if source.region and source.account
                else "Resource::*"
            )
            findings += [f"Resource::arn:<AWS::Partition>:s3:::{source.bucket_name}/{MODEL_PREFIX}*", key]
            reason += (
                " kms:Decrypt of the source stage's objects cannot name its key: the key's ARN is generated in the "
                "source stage's artifact stack (another stack, possibly another account and region) and is not known "
                "when this stage is synthesized. It is limited to S3 in the source bucket's region "
                "(kms:ViaService) decrypting that bucket's objects (kms:EncryptionContext:aws:s3:arn), and to the "
                "source account's keys in its region where the config fixes them."
            )
        acknowledge(self.role, "AwsSolutions-IAM5", reason, applies_to=findings)
        acknowledge(
            self.provider,
            "AwsSolutions-IAM4",
            "The CDK Provider framework's own functions use AWSLambdaBasicExecutionRole.",
            applies_to=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
        )
        invoked = [self.functions["OnEvent"]]  # the framework invokes only on_event
        acknowledge(
            self.provider,
            "AwsSolutions-IAM5",
            "The CDK Provider framework invokes its functions' versions (<function arn>:*).",
            applies_to=[f"Resource::<{stack.get_logical_id(fn.node.default_child)}.Arn>:*" for fn in invoked],
        )
        acknowledge(
            self.provider,
            "AwsSolutions-L1",
            "The CDK Provider framework picks its own functions' runtime (updated with aws-cdk-lib).",
        )


def _nag_name(resolved: object) -> str:
    """How cdk-nag writes a resolved ARN in a finding: an import by its name, a GetAtt as <Id.Arn>."""
    if isinstance(resolved, dict) and "Fn::ImportValue" in resolved:
        return str(resolved["Fn::ImportValue"])
    if isinstance(resolved, dict) and "Fn::GetAtt" in resolved:
        return f"<{resolved['Fn::GetAtt'][0]}.{resolved['Fn::GetAtt'][1]}>"
    return str(resolved)
