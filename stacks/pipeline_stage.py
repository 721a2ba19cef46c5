"""One pipeline stage: the stage's artifact, build and endpoint stacks, plus the smoke-test access role.

Environment: a stage deploys to its config's account/region; where those are unset it inherits the
pipeline's (config/pipeline.yaml), and where both are unset it stays environment-agnostic and CDK
Pipelines deploys it into the pipeline's own account and region (docs/pipeline.md, "Environments").
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.artifact_stack import ArtifactStack
from stacks.stage import StageStacks, add_stage_stacks, stack_prefix
from stacks.stage_plan import StagePlan
from stage_config import AppConfig
from stage_config.async_paths import AsyncPrefixes, async_prefixes
from stage_config.endpoint import component_name
from triton_cdk.artifacts import ArtifactStore
from triton_cdk.grants import grant_statements
from triton_cdk.nag import acknowledge, add_checks_to_stage
from triton_cdk.serving import TritonEndpoint, TritonInferenceComponent


def smoke_role_name(stage: str, region: str) -> str:
    """Fixed so the pipeline (another account, possibly) can name it in its policy before it exists.

    The region is part of it: a wave deploys the same stage to several regions of one account.
    """
    return f"triton-{stage}-smoke-{region}"


class SmokeAccessStack(cdk.Stack):
    """In the stage's account: the only role that may invoke this stage's endpoints for the smoke test.

    The pipeline's smoke step assumes it (trusted: the pipeline's account, whose own policy gives
    sts:AssumeRole on this role to that step only). It may invoke the stage's endpoints and read the
    archives of the stage's models (their config.pbtxt gives the sample request), nothing else.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        artifacts: ArtifactStack,
        plan: StagePlan,
        pipeline_account: str | None,
        load_tested_models: list[str] | None = None,
        **kwargs,
    ) -> None:
        """`load_tested_models`: models the performance gate measures (config/pipeline.yaml `performance`):
        their load-test results may be listed, read and written. Default: none, no such grant."""
        super().__init__(scope, construct_id, **kwargs)
        self.role = iam.Role(
            self,
            "Role",
            role_name=smoke_role_name(config.stage, self.region),
            assumed_by=iam.AccountPrincipal(pipeline_account or self.account),
            description=f"Pipeline smoke test of stage {config.stage}: invoke its endpoints, read model configs",
            max_session_duration=cdk.Duration.hours(1),
        )
        # Grants from the stage's endpoints, components and store, imported by name: the smoke test is the
        # role's only user, and it needs InvokeEndpoint and the served archives, nothing more.
        asynchronous: dict[str, TritonEndpoint] = {}
        for settings in config.endpoints:
            deployed = config.deployed_endpoint_name(settings)
            endpoint = TritonEndpoint.from_endpoint_name(self, f"Endpoint-{settings.name}", deployed)
            endpoint.grant_invoke(self.role)
            if getattr(settings, "async_inference", None) is not None:
                asynchronous[settings.name] = endpoint
            if settings.mode == "inference_components":
                # InvokeEndpoint with InferenceComponentName acts on the component too (Service Authorization
                # Reference: InvokeEndpoint's resource types are endpoint and inference-component).
                for model in settings.models:
                    TritonInferenceComponent.from_component_name(
                        endpoint, model, component_name(deployed, model), endpoint=endpoint
                    ).grant_invoke(self.role)
        keys = plan.artifact_keys()
        if keys:
            store = ArtifactStore.from_store_attributes(
                self,
                "Artifacts",
                # Through the artifact stack's own named exports: a reference to the bucket or key would add
                # an automatic export that `make deploy` of the same-named stack would then try to delete.
                bucket_arn=artifacts.bucket_arn_import,
                key_arn=artifacts.key_arn_import,
            )
            store.grant_read_archives(self.role, keys)
            for index, (name, endpoint) in enumerate(asynchronous.items()):
                prefixes = async_prefixes(name)
                grant_async_smoke(self.role, store, endpoint.endpoint_arn, prefixes, index)
                shown = f"{artifacts.bucket_arn_export.export_name}/"
                acknowledge(
                    self.role,
                    "AwsSolutions-IAM5",
                    f"The smoke test of asynchronous endpoint {name} writes one request object per run under its "
                    "input prefix (a fresh key each) and reads the answer or failure SageMaker names: objects only "
                    "under those three prefixes.",
                    applies_to=[
                        f"Resource::{shown}{prefix}*" for prefix in (prefixes.input, prefixes.output, prefixes.failure)
                    ],
                )
            if load_tested_models:
                models = sorted(set(load_tested_models))
                grant_load_test_results(self.role, store, models)
                # cdk-nag names an imported bucket ARN by its export name.
                shown = f"{artifacts.bucket_arn_export.export_name}/{store.model_prefix}"
                acknowledge(
                    self.role,
                    "AwsSolutions-IAM5",
                    "The performance gate writes a new load-test JSON per run and reads the newest of another "
                    "build: only under models/<model>/<any digest>/loadtest/ of the measured models.",
                    applies_to=[f"Resource::{shown}{model}/*/loadtest/*" for model in models],
                )
        cdk.CfnOutput(self, "RoleArn", value=self.role.role_arn)


def grant_load_test_results(role: iam.IGrantable, store: ArtifactStore, models: list[str]) -> iam.Grant:
    """The performance gate (endpoint_client/perf_gate.py): write each run's JSON, find and read the newest one
    of another build. Objects only under `models/<model>/<digest>/loadtest/`, listing only under
    `models/<model>/`; the key encrypts what is written (kms:GenerateDataKey) and decrypts what is read."""
    prefix = store.model_prefix
    return grant_statements(
        role,
        [
            iam.PolicyStatement(
                sid="LoadTestResults",
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[f"{store.bucket_arn}/{prefix}{model}/*/loadtest/*" for model in models],
            ),
            iam.PolicyStatement(
                sid="ListLoadTestResults",
                actions=["s3:ListBucket"],
                resources=[store.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}{model}/*" for model in models]}},
            ),
            iam.PolicyStatement(
                sid="LoadTestResultsKey", actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[store.key_arn]
            ),
        ],
    )


def grant_async_smoke(
    role: iam.IGrantable, store: ArtifactStore, endpoint_arn: str, prefixes: AsyncPrefixes, index: int
) -> iam.Grant:
    """The smoke test of an asynchronous endpoint (endpoint_client.async_invoke): InvokeEndpointAsync on it (IAM action
    sagemaker:InvokeEndpointAsync, resource type endpoint: Service Authorization Reference), s3:PutObject of the
    request under the input prefix, s3:GetObject of the answer or failure, s3:ListBucket under those two prefixes
    (the s3:prefix condition key is a ListBucket request's Prefix, so the client polls with ListObjectsV2 on the
    exact key: endpoint_client/async_invoke.py AsyncInvoker._exists; HeadObject carries no prefix), and the
    artifact key for the objects it writes (kms:GenerateDataKey) and reads (kms:Decrypt)."""
    bucket = store.bucket_arn
    return grant_statements(
        role,
        [
            iam.PolicyStatement(
                sid=f"SmokeAsyncInvoke{index}", actions=["sagemaker:InvokeEndpointAsync"], resources=[endpoint_arn]
            ),
            iam.PolicyStatement(
                sid=f"SmokeAsyncRequests{index}", actions=["s3:PutObject"], resources=[f"{bucket}/{prefixes.input}*"]
            ),
            iam.PolicyStatement(
                sid=f"SmokeAsyncAnswers{index}",
                actions=["s3:GetObject"],
                resources=[f"{bucket}/{prefixes.output}*", f"{bucket}/{prefixes.failure}*"],
            ),
            iam.PolicyStatement(
                sid=f"SmokeAsyncList{index}",
                actions=["s3:ListBucket"],
                resources=[bucket],
                conditions={"StringLike": {"s3:prefix": [f"{prefixes.output}*", f"{prefixes.failure}*"]}},
            ),
            iam.PolicyStatement(
                sid=f"SmokeAsyncKey{index}", actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[store.key_arn]
            ),
        ],
    )


class TritonStage(cdk.Stage):
    """What the pipeline deploys for one stage (and, in a wave, for one region of it)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        pipeline_account: str | None,
        promotion_source: AppConfig | None = None,
        plan: StagePlan | None = None,
        source_plan: StagePlan | None = None,
        load_tested: bool = False,
        **kwargs,
    ) -> None:
        """`plan` / `source_plan`: the stage plans of `config` / `promotion_source` (computed when not given);
        `load_tested`: the performance gate measures this stage (its smoke role gets the results' prefix)."""
        super().__init__(scope, construct_id, **kwargs)
        add_checks_to_stage(self)
        self.config = config
        self.stacks: StageStacks = add_stage_stacks(
            self, config, promotion_source=promotion_source, plan=plan, source_plan=source_plan
        )
        load_tested_models = (
            [self.stacks.plan.endpoint_artifacts(e.name).models[0].model.name for e in config.endpoints]
            if load_tested
            else None
        )
        self.smoke_access = SmokeAccessStack(
            self,
            f"{stack_prefix(config)}-SmokeAccess",
            stack_name=f"{stack_prefix(config)}-SmokeAccess",  # as add_stage_stacks names the others
            config=config,
            artifacts=self.stacks.artifacts,
            plan=self.stacks.plan,
            pipeline_account=pipeline_account,
            load_tested_models=load_tested_models,
            env=_stack_env(config),
            tags={"triton-stage": config.stage},
        )
        self.smoke_access.add_stack_dependency(self.stacks.artifacts, "reads the artifact bucket and key")

    @property
    def artifact_bucket_output(self) -> cdk.CfnOutput:
        output = self.stacks.artifacts.node.try_find_child("ArtifactBucketName")
        if not isinstance(output, cdk.CfnOutput):
            raise TypeError("the artifact stack no longer has the CfnOutput 'ArtifactBucketName' the smoke step reads")
        return output


def _stack_env(config: AppConfig) -> cdk.Environment | None:
    """The same env add_stage_stacks gives the stage's stacks (None: inherit the Stage's)."""
    if config.account or config.region:
        return cdk.Environment(account=config.account, region=config.region)
    return None
