"""Stateful stack: key, buckets, bucket policy and the roles the policy names.

Everything the stage's other stacks take from this stack goes through an export this stack owns under a fixed
name (`<stack>-<Value>`), always present whatever the config, and imported by name (`Fn::ImportValue`) in the
consumer: `imports_for(scope)`. CloudFormation refuses to remove or change an export another stack imports
(CloudFormation User Guide, "Outputs" / "Get exported outputs from a deployed CloudFormation stack": "You can't
modify or remove an output value that is referenced by another stack"). With CDK's automatic cross-stack
references the set of exports followed what the consumers happened to reference: switching
`deployment.rollback_alarms` to `[]` dropped the execution role's name export (only the role policy named it)
while the deployed endpoint stacks still imported it, and the deploy failed (issue #22 A1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.async_endpoint import add_async_lifecycle_rules
from stage_config import AppConfig
from triton_cdk.artifact_build.gpu_regions import gpu_build_region_rule_description
from triton_cdk.artifacts import ArtifactStore
from triton_cdk.errors import InvalidPropsError
from triton_cdk.images import TritonImageLookup
from triton_cdk.roles import ModelBuildRole, SageMakerExecutionRole

# Output id -> export name suffix of every value the stage's other stacks take from this stack.
SHARED_EXPORTS = {
    "ArtifactBucketArnExport": "ArtifactBucketArn",
    "ArtifactBucketNameExport": "ArtifactBucketName",
    "ArtifactKeyArnExport": "ArtifactKeyArn",
    "ExecutionRoleArnExport": "ExecutionRoleArn",
    "BuildRoleArnExport": "BuildRoleArn",
}


@dataclass(frozen=True)
class ArtifactImports:
    """The artifact stack's resources as another stack of the stage sees them: each one built from a named
    export's `Fn::ImportValue`, so no reference can make CDK add an automatic export.

    `execution_role` is mutable (endpoint stacks attach their own policies to it); `build_role` is not (the
    build stack must not edit the stateful stack's role: its extra rights are a policy of its own)."""

    bucket: s3.IBucket
    key: kms.IKey
    execution_role: iam.IRole
    build_role: iam.IRole
    bucket_arn: str
    key_arn: str
    bucket_arn_export_name: str


class ArtifactStack(cdk.Stack):
    """Kept apart from the stateless stacks and termination-protected: deleting or replacing
    the bucket or key would lose every built model.

    `gpu_build_computes`: the CodeBuild GPU computes the stage's builds use (StagePlan.gpu_build_computes);
    with any, `gpu_build_regions` are the regions that have them all, and a CloudFormation rule refuses a deploy
    to any other region before this stack (the first of the stage) creates anything.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        gpu_build_computes: Sequence[str] = (),
        gpu_build_regions: Sequence[str] = (),
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, termination_protection=True, **kwargs)
        images = TritonImageLookup(self, "TritonImage", release=config.triton_release)
        self.store = ArtifactStore(
            self,
            "Artifacts",
            noncurrent_version_expiration=cdk.Duration.days(config.artifacts.noncurrent_version_expiration_days),
            access_log_expiration=cdk.Duration.days(config.artifacts.access_log_expiration_days),
            bucket_name=config.artifacts.bucket_name,
        )
        # Inputs, answers and failures of asynchronous endpoints expire (stacks/async_endpoint.py).
        add_async_lifecycle_rules(self.store.bucket, config)
        # The build stack's log groups (CodeBuild, the ensure-artifact functions) are encrypted with this key.
        self.store.allow_log_groups(f"Triton-{config.stage}-")
        for account in config.artifacts.reader_accounts:
            self.store.allow_account_read(account)
        self.execution_role = SageMakerExecutionRole(self, "ExecutionRole", store=self.store, images=images).role
        self.build_role = ModelBuildRole(self, "BuildRole", store=self.store).role

        cdk.CfnOutput(self, "ArtifactBucketName", value=self.store.bucket.bucket_name)
        cdk.CfnOutput(self, "ExecutionRoleArn", value=self.execution_role.role_arn)
        # One export per shared value, under a fixed name, made here and never by a consumer: CloudFormation
        # refuses a second export of a name (export names are unique per account and region). Consumers'
        # policies, and so their cdk-nag acknowledgements, name the bucket ARN's export.
        values = {
            "ArtifactBucketArnExport": self.store.bucket.bucket_arn,
            "ArtifactBucketNameExport": self.store.bucket.bucket_name,
            "ArtifactKeyArnExport": self.store.key.key_arn,
            "ExecutionRoleArnExport": self.execution_role.role_arn,
            "BuildRoleArnExport": self.build_role.role_arn,
        }
        self.exports = {
            output_id: cdk.CfnOutput(
                self, output_id, value=values[output_id], export_name=f"{self.stack_name}-{suffix}"
            )
            for output_id, suffix in SHARED_EXPORTS.items()
        }
        self.bucket_arn_export = self.exports["ArtifactBucketArnExport"]
        self.key_arn_export = self.exports["ArtifactKeyArnExport"]
        self._keep_legacy_exports()
        if gpu_build_computes:
            self._add_gpu_region_rule(gpu_build_computes, gpu_build_regions)

    def _keep_legacy_exports(self) -> None:
        """The automatic exports earlier versions of this app let CDK make (`<stack>:ExportsOutput...`), kept
        under their same names: endpoint and build stacks deployed by those versions still import them, and
        CloudFormation deploys this stack first and refuses to remove an export in use. Nothing synthesized
        now imports them (tests/contract/test_deploy_rules.py); remove them once every deployed stage has run
        a deploy of this version (then no deployed stack imports them)."""
        for value in (
            self.store.bucket.bucket_name,
            self.store.key.key_arn,
            self.execution_role.role_arn,
            self.execution_role.role_name,
            self.build_role.role_arn,
            self.build_role.role_name,
        ):
            self.export_value(value)

    def _add_gpu_region_rule(self, computes: Sequence[str], regions: Sequence[str]) -> None:
        """CloudFormation evaluates a template's Rules before it creates or updates any resource of the stack
        (CloudFormation User Guide, "Rules": "validate parameter values before creating or updating
        resources"; rule functions `Fn::Contains`), so a region-agnostic stage with a GPU build stops in a
        region without `LINUX_GPU_CONTAINER` before anything exists. Rules are per stack: this one, the first
        of the stage to deploy, carries it; the build stack repeats it for a deploy of that stack alone."""
        add_gpu_region_rule(self, computes, regions)

    def imports_for(self, scope: Construct) -> ArtifactImports:
        """This stack's shared resources, imported by export name into `scope` (a stack of the same stage)."""
        if cdk.Stack.of(scope) is self:
            raise InvalidPropsError("imports_for: the artifact stack uses its own resources, not its exports")
        # An import is no reference CDK sees: order the deploy (and the destroy) explicitly.
        cdk.Stack.of(scope).add_stack_dependency(self, "imports the artifact stack's named exports")
        names = {output_id: output.export_name for output_id, output in self.exports.items()}
        bucket_arn = cdk.Fn.import_value(names["ArtifactBucketArnExport"])
        key_arn = cdk.Fn.import_value(names["ArtifactKeyArnExport"])
        holder = Construct(scope, "ArtifactStackImports")
        return ArtifactImports(
            bucket=s3.Bucket.from_bucket_attributes(
                holder,
                "Bucket",
                bucket_arn=bucket_arn,
                bucket_name=cdk.Fn.import_value(names["ArtifactBucketNameExport"]),
            ),
            key=kms.Key.from_key_arn(holder, "Key", key_arn),
            execution_role=iam.Role.from_role_arn(
                holder, "ExecutionRole", cdk.Fn.import_value(names["ExecutionRoleArnExport"]), mutable=True
            ),
            build_role=iam.Role.from_role_arn(
                holder, "BuildRole", cdk.Fn.import_value(names["BuildRoleArnExport"]), mutable=False
            ),
            bucket_arn=bucket_arn,
            key_arn=key_arn,
            bucket_arn_export_name=names["ArtifactBucketArnExport"],
        )

    @property
    def bucket_arn_import(self) -> str:
        """`Fn::ImportValue` of the bucket's ARN, for the stage's other stacks."""
        return cdk.Fn.import_value(self.bucket_arn_export.export_name)

    @property
    def key_arn_import(self) -> str:
        """`Fn::ImportValue` of the key's ARN, for the stage's other stacks."""
        return cdk.Fn.import_value(self.key_arn_export.export_name)


def add_gpu_region_rule(stack: cdk.Stack, computes: Sequence[str], regions: Sequence[str]) -> cdk.CfnRule:
    """A `Rules` entry `GpuBuildRegion`: `Fn::Contains` [regions, {"Ref": "AWS::Region"}]."""
    if not regions:
        raise InvalidPropsError(f"{stack.stack_name}: no region offers every GPU build compute {sorted(computes)}")
    return cdk.CfnRule(
        stack,
        "GpuBuildRegion",
        assertions=[
            cdk.CfnRuleAssertion(
                assert_=cdk.Fn.condition_contains(list(regions), cdk.Aws.REGION),
                assert_description=gpu_build_region_rule_description(computes, regions),
            )
        ],
    )
