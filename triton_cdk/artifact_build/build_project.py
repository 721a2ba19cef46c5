"""ModelBuildProject: the CodeBuild project that builds one kind of model artifact.

GPU builds run in the SageMaker Triton image of the serving release (`LINUX_GPU_CONTAINER`), so
the TensorRT that builds the engine is the TensorRT that serves it (../shared/README.md: engines
only load on the TensorRT version that built them); `model_build build --expect-tensorrt` checks
it again and records TensorRT and GPU in build-info.json. Compute follows the build plan:
`BUILD_GENERAL1_SMALL` = 1 x A10G, `BUILD_GENERAL1_LARGE` = 4 x V100, or a reserved-capacity fleet.
Models that need no GPU build are packaged in a plain CPU project, except Python models whose execution
environment the build packs: those run in the serving image on CPU compute, so the environment is made by the
python3 the backend stub runs (same Python ABI and glibc; model_build/python_env.py).

The role comes from the artifact stack (it is named in the bucket policy) and is used here without
policy updates, so nothing in this stack edits the stateful stack; everything else the build
needs is one explicit policy below.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from constructs import Construct

from serving_facts.matching import BuildPlan
from triton_cdk.errors import InvalidPropsError
from triton_cdk.images import TritonImageLookup, pull_image_statements
from triton_cdk.nag import acknowledge
from triton_cdk.notifications import rule_target

__all__ = [
    "BUILDSPEC",
    "CHECK_SOURCE_IDENTIFIER",
    "FACTS_SOURCE_IDENTIFIER",
    "FAILED_BUILD_STATES",
    "RETENTION",
    "ModelBuildProject",
    "retention",
]

BUILDSPEC = "buildspec.yml"  # at the root of the model_build source asset
# The secondary source holding endpoint_client (the build check). CodeBuild installs each secondary source in its own
# directory, named by the built-in variable CODEBUILD_SRC_DIR_<sourceIdentifier> ("Multiple input sources and output
# artifacts sample", CodeBuild User Guide); the buildspec links $CODEBUILD_SRC_DIR_endpoint_client as the package.
CHECK_SOURCE_IDENTIFIER = "endpoint_client"
# The secondary source holding serving_facts, the facts model_build shares with the constructs (issue #23 item 1):
# every build imports it; the buildspec links $CODEBUILD_SRC_DIR_serving_facts as the package.
FACTS_SOURCE_IDENTIFIER = "serving_facts"
FAILED_BUILD_STATES = ("FAILED", "FAULT", "STOPPED", "TIMED_OUT")
RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


def retention(days: int) -> logs.RetentionDays:
    return RETENTION[days]


class ModelBuildProject(Construct):
    """One CodeBuild project running model_build/buildspec.yml for one build environment.

    :param plan: the build plan (GPU, compute, fleet); None for a CPU project.
    :param in_serving_image: a CPU project that runs in the serving release's image (Python environments).
    :param role: CodeBuild role; used without policy updates (see module doc).
    :param source: the model_build folder as an S3 asset (CodeBuild source; holds the buildspec).
    :param model_sources: S3 object ARNs the build reads model sources from (assets, s3_uri sources).
    :param encryption_key: the artifact key (build artifacts and logs at rest).
    :param topic: receives a message for every failed, timed-out or stopped build.
    :param timeout: how long one build may run (CodeBuild TimeoutInMinutes).
    :param queued_timeout: how long one build may wait in CodeBuild's queue (QueuedTimeoutInMinutes).
    :param log_retention: how long the build logs are kept.
    :param concurrency: the project's concurrent build limit. Default: none, so builds over the account's
        limit queue (with a project limit, StartBuild fails over it instead; "Builds in AWS CodeBuild").
    :param fleet_compute_type: the reserved fleet's compute type, for a plan that builds on a fleet.
    :param check_source: the endpoint_client folder as an S3 asset, shipped as the secondary source
        `endpoint_client` (CHECK_SOURCE_IDENTIFIER): a TensorRT build runs its build check (report.json, docs/build.md
        "Build report") before anything is uploaded. None: no secondary source (a project that builds no engine).
    :param facts_source: the serving_facts folder as an S3 asset, shipped as the secondary source `serving_facts`
        (FACTS_SOURCE_IDENTIFIER): model_build imports the facts it shares with the constructs from it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: BuildPlan | None,
        triton_release: str,
        images: TritonImageLookup,
        role: iam.IRole,
        source: s3_assets.Asset,
        model_sources: Sequence[str],
        encryption_key: kms.IKey,
        topic: sns.ITopic,
        timeout: cdk.Duration,
        queued_timeout: cdk.Duration,
        log_retention: logs.RetentionDays,
        concurrency: int | None = None,
        fleet_compute_type: str | None = None,
        in_serving_image: bool = False,
        check_source: s3_assets.Asset | None = None,
        facts_source: s3_assets.Asset,
    ) -> None:
        super().__init__(scope, construct_id)
        self.plan = plan
        self.in_serving_image = in_serving_image or plan is not None
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention,
            encryption_key=encryption_key,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.project = codebuild.Project(
            self,
            "Resource",
            description=self._description(plan, triton_release, self.in_serving_image),
            source=codebuild.Source.s3(bucket=source.bucket, path=source.s3_object_key),
            secondary_sources=[
                codebuild.Source.s3(
                    bucket=facts_source.bucket, path=facts_source.s3_object_key, identifier=FACTS_SOURCE_IDENTIFIER
                ),
                *(
                    [
                        codebuild.Source.s3(
                            bucket=check_source.bucket,
                            path=check_source.s3_object_key,
                            identifier=CHECK_SOURCE_IDENTIFIER,
                        )
                    ]
                    if check_source is not None
                    else []
                ),
            ],
            build_spec=codebuild.BuildSpec.from_source_filename(BUILDSPEC),
            environment=self._environment(plan, triton_release, images, self.in_serving_image),
            role=role,
            encryption_key=encryption_key,
            timeout=timeout,
            queued_timeout=queued_timeout,
            # No limit unless configured: without one, builds over CodeBuild's account limit queue; with
            # one, StartBuild fails over it ("Builds in AWS CodeBuild"). The build stack refuses a limit
            # below the number of artifacts one deployment may build at once on this project.
            concurrent_build_limit=concurrency,
            grant_report_group_permissions=False,
        )
        # The log group goes in through the L1 property, not `logging=`: given a log group, codebuild.Project grants
        # it to the role with Grant.addToPrincipalOrResource, and an imported role's account is unresolved, so once
        # the stage sets an account CDK also adds an account-level AWS::Logs::ResourcePolicy per project (at most
        # 10 per account and Region: CloudFormation reference, AWS::Logs::ResourcePolicy). The role's own
        # WriteOwnLogs statement (below) is the grant; the rendered LogsConfig is what `logging=` rendered.
        project_resource = self.project.node.default_child
        project_resource.add_property_override(
            "LogsConfig", {"CloudWatchLogs": {"Status": "ENABLED", "GroupName": self.log_group.log_group_name}}
        )
        if plan is not None and plan.compute == "fleet":
            if fleet_compute_type is None:
                raise InvalidPropsError(f"{construct_id}: a build on a reserved fleet needs fleet_compute_type")
            # aws-cdk-lib lets GPU images declare only SMALL/LARGE; a fleet build takes the fleet's type.
            project_resource.add_property_override("Environment.ComputeType", fleet_compute_type)
        sources = [source, facts_source] if check_source is None else [source, facts_source, check_source]
        self.policy = self._policy(role, plan, images, sources, model_sources)
        self._notify_failures(topic)
        acknowledge(
            self,
            "AwsSolutions-CB5",
            "GPU builds must run in the SageMaker Triton image of the serving release: its TensorRT is the one "
            "that loads the engines (a CodeBuild-provided image carries no TensorRT).",
        )

    @property
    def project_name(self) -> str:
        return self.project.project_name

    @property
    def project_arn(self) -> str:
        return self.project.project_arn

    @staticmethod
    def _description(plan: BuildPlan | None, release: str, in_serving_image: bool) -> str:
        if plan is None and in_serving_image:
            return f"Triton {release} Python execution environments (serving image, no GPU)"
        if plan is None:
            return f"Triton {release} model packaging (no GPU build)"
        how = "fleet" if plan.compute == "fleet" else plan.compute
        return f"Triton {release} TensorRT engine build on {plan.build_gpu.model} ({how}, target {plan.gpu_target})"

    def _environment(
        self, plan: BuildPlan | None, release: str, images: TritonImageLookup, in_serving_image: bool
    ) -> codebuild.BuildEnvironment:
        if plan is None and in_serving_image:
            # The GPU image of the release (the one GPU endpoints serve with; its -cpu sibling carries the same
            # Python) on a CPU container: packing an environment needs its python3, not a GPU.
            repository = ecr.Repository.from_repository_attributes(
                self,
                "TritonImageRepository",
                repository_arn=images.repository_arn,
                repository_name=images.repository_name,
            )
            return codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.from_ecr_repository(repository, f"{release}-py3"),
                compute_type=codebuild.ComputeType.SMALL,
                privileged=False,
            )
        if plan is None:
            return codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                compute_type=codebuild.ComputeType.SMALL,
                privileged=False,
            )
        # The image's registry account differs by region (resolved at deploy time when env-agnostic).
        image = codebuild.LinuxGpuBuildImage.aws_deep_learning_containers_image(
            images.repository_name, f"{release}-py3", images.account
        )
        fleet = None
        if plan.compute == "fleet":
            fleet = codebuild.Fleet.from_fleet_arn(cdk.Stack.of(images), f"Fleet{plan.build_gpu.model}", plan.fleet_arn)
        compute = codebuild.ComputeType.LARGE if plan.compute == "BUILD_GENERAL1_LARGE" else codebuild.ComputeType.SMALL
        return codebuild.BuildEnvironment(build_image=image, compute_type=compute, fleet=fleet, privileged=False)

    def _policy(
        self,
        role: iam.IRole,
        plan: BuildPlan | None,
        images: TritonImageLookup,
        sources: Sequence[s3_assets.Asset],
        model_sources: Sequence[str],
    ) -> iam.Policy:
        """`sources`: the primary source asset, then the secondary one (the check) where there is one."""
        statements = [
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            ),
            iam.PolicyStatement(
                sid="ReadBuildSources",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=sorted(
                    {*(source.bucket.arn_for_objects(source.s3_object_key) for source in sources), *model_sources}
                ),
            ),
            # CodeBuild reads an S3 source only with these on its bucket (the "S3BucketIdentity" statement
            # of the service-role policy in "Allow CodeBuild to interact with other AWS services").
            iam.PolicyStatement(
                sid="LocateBuildSource",
                actions=["s3:GetBucketAcl", "s3:GetBucketLocation"],
                resources=sorted({source.bucket.bucket_arn for source in sources}),
            ),
        ]
        if self.in_serving_image:
            statements += pull_image_statements(images.repository_arn)
        policy = iam.Policy(self, "Policy", roles=[role], statements=statements)
        # The project must not start before its role may pull the image and write its logs.
        self.project.node.add_dependency(policy)
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "ecr:GetAuthorizationToken has no resource type: it can only be granted on *.",
            applies_to=["Resource::*"],
        )
        return policy

    def _notify_failures(self, topic: sns.ITopic) -> None:
        rule = events.Rule(
            self,
            "BuildFailed",
            description="Model build failed, timed out or was stopped",
            event_pattern=events.EventPattern(
                source=["aws.codebuild"],
                detail_type=["CodeBuild Build State Change"],
                detail={"build-status": list(FAILED_BUILD_STATES), "project-name": [self.project.project_name]},
            ),
        )
        rule.add_target(
            rule_target(  # publishes through a role only this rule may assume (triton_cdk/notifications.py)
                rule,
                topic,
                message=events.RuleTargetInput.from_text(
                    f"Triton model build {events.EventField.from_path('$.detail.build-id')} ended "
                    f"{events.EventField.from_path('$.detail.build-status')}. Logs: "
                    f"{events.EventField.from_path('$.detail.additional-information.logs.deep-link')}"
                ),
            )
        )
