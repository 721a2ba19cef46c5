"""EnsureArtifacts: one `Custom::TritonModelArtifact` per artifact key, behind one Provider.

The handler (lambda/ensure_artifact/index.py, standard library + boto3, so the asset needs no
bundling) returns at once when the key exists, otherwise starts the CodeBuild build (BUILD mode)
or copies the object from the source stage's bucket (PROMOTE mode), and the Provider framework
polls `is_complete` until the build ends, up to `build.artifact_wait_minutes` (CloudFormation
waits at most one hour for a custom resource). Endpoint stacks depend on the build stack, so
every SageMaker model is created after its artifact exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from model_build.key import MODEL_PREFIX
from triton_cdk.nag import acknowledge

HANDLER_DIR = Path(__file__).resolve().parents[2] / "lambda" / "ensure_artifact"
RESOURCE_TYPE = "Custom::TritonModelArtifact"
QUERY_INTERVAL = cdk.Duration.seconds(30)


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
    """The Provider and its resources.

    :param bucket_name: the artifact bucket (this stage's).
    :param bucket_arn: its ARN (an explicit export of the artifact stack: cdk-nag findings name it).
    :param key_arn: the artifact key; copies are re-encrypted with it.
    :param project_arns: CodeBuild projects the handler may start and poll (BUILD mode).
    :param source_bucket: PROMOTE mode: the source stage's bucket name; nothing is ever built.
    :param wait: how long a deployment waits for one artifact (at most 1 hour).
    :param log_retention: retention of the handler and framework log groups.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket_name: str,
        bucket_arn: str,
        key_arn: str,
        project_arns: Sequence[str] = (),
        source_bucket: str | None = None,
        wait: cdk.Duration,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        if bool(project_arns) == bool(source_bucket):
            raise ValueError("EnsureArtifacts needs either project_arns (build) or source_bucket (promote), not both")
        self.bucket_name = bucket_name
        self.bucket_arn = bucket_arn
        self.key_arn = key_arn
        self.source_bucket = source_bucket
        self.resources: dict[str, cdk.CustomResource] = {}

        self.role = iam.Role(
            self,
            "HandlerRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Ensure-artifact handler: check, build or promote model artifacts",
        )
        code = lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"])
        runtime = lambda_.Runtime.PYTHON_3_14
        functions = {}
        for name, handler, timeout in (
            # on_event may copy large objects server-side (promotion, multi-model copies).
            ("OnEvent", "index.on_event", cdk.Duration.minutes(14)),
            ("IsComplete", "index.is_complete", cdk.Duration.minutes(5)),
        ):
            group = logs.LogGroup(
                self, f"{name}Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY
            )
            functions[name] = lambda_.Function(
                self,
                name,
                runtime=runtime,
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
        self._grant(project_arns)

        framework_logs = logs.LogGroup(
            self, "ProviderLogs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=functions["OnEvent"],
            is_complete_handler=functions["IsComplete"],
            query_interval=QUERY_INTERVAL,
            total_timeout=wait,
            log_group=framework_logs,
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(
                destination=framework_logs, level=cdk.aws_stepfunctions.LogLevel.ALL
            ),
        )
        self._acknowledge()
        self._drop_repeated_role_dependencies(functions.values())

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
        waiter = self.provider.node.try_find_child("waiter-state-machine")
        if waiter is not None:
            pairs.append((waiter, waiter.node.find_child("Role")))
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
        if self.source_bucket:
            properties["SourceBucket"] = self.source_bucket
        else:
            if not props.project_name:
                raise ValueError(f"artifact {props.key}: a BUILD-mode resource needs the project that builds it")
            properties["ProjectName"] = props.project_name
            properties["BuildEnvironment"] = dict(props.build_environment or {})
        resource = cdk.CustomResource(
            self,
            props.construct_id,
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties=properties,
        )
        self.resources[props.key] = resource
        return resource

    def _grant(self, project_arns: Sequence[str]) -> None:
        models = f"{self.bucket_arn}/{MODEL_PREFIX}*"
        statements = [
            iam.PolicyStatement(sid="ReadWriteModels", actions=["s3:GetObject", "s3:PutObject"], resources=[models]),
            # Without ListBucket a missing key answers 403 instead of 404.
            iam.PolicyStatement(
                sid="ListModels",
                actions=["s3:ListBucket"],
                resources=[self.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{MODEL_PREFIX}*"]}},
            ),
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
                    actions=["codebuild:StartBuild", "codebuild:BatchGetBuilds"],
                    resources=list(project_arns),
                )
            )
        if self.source_bucket:
            source_arn = f"arn:{cdk.Aws.PARTITION}:s3:::{self.source_bucket}"
            statements += [
                iam.PolicyStatement(
                    sid="ReadSourceStageModels",
                    actions=["s3:GetObject", "s3:GetObjectVersion"],
                    resources=[f"{source_arn}/{MODEL_PREFIX}*"],
                ),
                iam.PolicyStatement(
                    sid="ListSourceStageModels",
                    actions=["s3:ListBucket"],
                    resources=[source_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{MODEL_PREFIX}*"]}},
                ),
                # The source stage's key is not known here (another stack, maybe another account): any
                # key, but only through S3 in this region.
                iam.PolicyStatement(
                    sid="DecryptSourceStageModels",
                    actions=["kms:Decrypt"],
                    resources=["*"],
                    conditions={"StringEquals": {"kms:ViaService": f"s3.{cdk.Aws.REGION}.amazonaws.com"}},
                ),
            ]
        for statement in statements:
            self.role.add_to_principal_policy(statement)

    def _acknowledge(self) -> None:
        stack = cdk.Stack.of(self)
        findings = [f"Resource::{_nag_name(stack.resolve(self.bucket_arn))}/{MODEL_PREFIX}*"]
        if self.source_bucket:
            findings += [f"Resource::arn:<AWS::Partition>:s3:::{self.source_bucket}/{MODEL_PREFIX}*", "Resource::*"]
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Artifact keys are content addresses computed per deployment, all under the model prefix; the "
            "source stage's key is not known here and is limited to S3 through kms:ViaService.",
            applies_to=findings,
        )
        acknowledge(
            self.provider,
            "AwsSolutions-IAM4",
            "The CDK Provider framework's own functions use AWSLambdaBasicExecutionRole.",
            applies_to=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
        )
        invoked = [self.node.find_child(name) for name in ("OnEvent", "IsComplete")] + [
            self.provider.node.find_child(f"framework-{name}") for name in ("isComplete", "onTimeout")
        ]
        acknowledge(
            self.provider,
            "AwsSolutions-IAM5",
            "The CDK Provider framework invokes its functions' versions (<function arn>:*); its state machine's "
            "log delivery actions have no resource type (Resource: *).",
            applies_to=[
                *(f"Resource::<{stack.get_logical_id(fn.node.default_child)}.Arn>:*" for fn in invoked),
                "Resource::*",
            ],
        )
        acknowledge(
            self.provider,
            "AwsSolutions-L1",
            "The CDK Provider framework picks its own functions' runtime (updated with aws-cdk-lib).",
        )
        acknowledge(
            self.provider,
            "AwsSolutions-SF2",
            "The Provider's waiter state machine only polls is_complete; its executions are logged (level ALL).",
        )


def _nag_name(resolved: object) -> str:
    """How cdk-nag writes a resolved ARN in a finding: an import by its name, a GetAtt as <Id.Arn>."""
    if isinstance(resolved, dict) and "Fn::ImportValue" in resolved:
        return str(resolved["Fn::ImportValue"])
    if isinstance(resolved, dict) and "Fn::GetAtt" in resolved:
        return f"<{resolved['Fn::GetAtt'][0]}.{resolved['Fn::GetAtt'][1]}>"
    return str(resolved)
