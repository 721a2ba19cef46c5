"""The promotion pipeline (CDK Pipelines, self-mutating): source -> synth (tests first) -> dev -> approval -> prod.

Each stage deploys its artifact, build and endpoint stacks (stacks/stage.py) and is then smoke-tested.
A stage with `promote_from` reuses the artifacts of that earlier stage: checked here at synth
(equal content-addressed keys), copied by its build stack at deploy, never rebuilt.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_codecommit as codecommit
from aws_cdk import aws_codepipeline as codepipeline
from aws_cdk import pipelines
from constructs import Construct

from stacks.pipeline_stage import TritonStage
from stacks.pipeline_steps import approval_step, performance_step, smoke_step, synth_step
from stacks.promotion import check_promotion
from stacks.stage_plan import plan_stage
from stage_config import AppConfig
from stage_config.loader import PROJECT_ROOT
from stage_config.pipeline import PipelineConfig, PipelineStageSettings
from triton_cdk.guard import restrict_grants_to_aws_services
from triton_cdk.pipeline.logs import PipelineLogs
from triton_cdk.pipeline.nag import acknowledge_pipeline_findings
from triton_cdk.pipeline.scoping import scope_pipeline_wildcards
from triton_cdk.pipeline.source import match_connection_prefix


class PipelineStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline_config: PipelineConfig,
        stage_configs: Mapping[str, AppConfig],
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.pipeline_config = pipeline_config
        # Refuse a promotion that would need a rebuild before any pipeline construct exists.
        # Each stage planned once (artifacts and keys); its stacks, promotion check and smoke test read it.
        self.plans = {name: plan_stage(config, PROJECT_ROOT) for name, config in stage_configs.items()}
        for name, config in stage_configs.items():
            if config.promote_from:
                check_promotion(
                    config,
                    stage_configs[config.promote_from],
                    self.plans[name].stage_artifacts(),
                    self.plans[config.promote_from].stage_artifacts(),
                )

        self.source = self._source(pipeline_config)
        self.logs = PipelineLogs(self, "BuildLogs", log_group_name=f"/aws/codebuild/{pipeline_config.name}")
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name=pipeline_config.name,
            # V2: stage rollback to an earlier execution (docs/pipeline.md, "Roll back").
            pipeline_type=codepipeline.PipelineType.V2,
            synth=synth_step(self.source),
            # A customer-managed key on the artifact bucket (CDK also makes it TLS-only and blocks
            # public access): needed to hand artifacts to other accounts' CDK bootstrap roles.
            cross_account_keys=True,
            enable_key_rotation=True,
            self_mutation=True,
            # Every project: synth, self-mutation, asset publishing, smoke tests.
            code_build_defaults=pipelines.CodeBuildOptions(logging=self.logs.options),
        )
        self.stages: dict[str, list[TritonStage]] = {}
        self.smoke_steps: dict[str, list[pipelines.CodeBuildStep]] = {}
        self.performance_steps: list[pipelines.CodeBuildStep] = []
        previous: PipelineStageSettings | None = None
        for stage in pipeline_config.stages:
            config = stage_configs[stage.name]
            source = stage_configs[config.promote_from] if config.promote_from else None
            self._add_stage(stage, config, source, previous)
            previous = stage

        self.pipeline.build_pipeline()
        # CT.KMS.PR.3 on CodePipeline's own keys: the artifact bucket's, and each cross-region replication bucket's.
        restrict_grants_to_aws_services(self.pipeline.pipeline.artifact_bucket.encryption_key)
        for support in self.pipeline.pipeline.cross_region_support.values():
            restrict_grants_to_aws_services(support.replication_bucket.encryption_key)
        # CDK Pipelines' own "*" grants, narrowed to the projects, stacks and buckets they act on.
        scope_pipeline_wildcards(self.pipeline)
        if pipeline_config.source.connection_arn:
            # CDK grants codestar-connections:UseConnection whatever the ARN's prefix (triton_cdk/pipeline/source.py).
            match_connection_prefix(self.pipeline.pipeline, pipeline_config.source.connection_arn)
        # cfn-lint on what CDK Pipelines writes into the pipeline resource (not ours to change):
        # Fn::Join for the deploy roles' ARNs (E3703) and a DependsOn on the role it also GetAtts (W3005).
        self.pipeline.pipeline.node.default_child.add_metadata(
            "cfn-lint", {"config": {"ignore_checks": ["E3703", "W3005"]}}
        )
        acknowledge_pipeline_findings(self, self.pipeline)

    def _source(self, config: PipelineConfig) -> pipelines.CodePipelineSource:
        source = config.source
        if source.codecommit_repository:
            repository = codecommit.Repository.from_repository_name(self, "Repository", source.codecommit_repository)
            return pipelines.CodePipelineSource.code_commit(repository, source.branch)
        return pipelines.CodePipelineSource.connection(
            source.repository, source.branch, connection_arn=source.connection_arn, trigger_on_push=True
        )

    def _add_stage(
        self,
        stage: PipelineStageSettings,
        config: AppConfig,
        promotion_source: AppConfig | None,
        previous: PipelineStageSettings | None,
    ) -> None:
        pre = []
        if stage.approval:
            previous_steps = self.smoke_steps.get(previous.name, []) if previous else []
            pre.append(approval_step(stage.name, self.pipeline_config, previous_steps, previous and previous.name))
        pipeline_account = self.pipeline_config.account
        performance = self.pipeline_config.performance
        load_tested = performance is not None and performance.stage == stage.name
        if not stage.regions:
            triton_stage = TritonStage(
                self,
                stage.name,
                config=config,
                pipeline_account=pipeline_account,
                promotion_source=promotion_source,
                plan=self.plans[stage.name],
                source_plan=self.plans[config.promote_from] if config.promote_from else None,
                env=self._stage_env(config),
                load_tested=load_tested,
            )
            smoke = smoke_step(triton_stage, self.pipeline_config, self.source)
            self.pipeline.add_stage(triton_stage, pre=pre, post=self._post_steps(triton_stage, smoke, load_tested))
            self.stages[stage.name] = [triton_stage]
            self.smoke_steps[stage.name] = [smoke]
            return
        wave = self.pipeline.add_wave(stage.name, pre=pre)
        self.stages[stage.name], self.smoke_steps[stage.name] = [], []
        for region in stage.regions:
            regional = config.model_copy(update={"region": region})
            triton_stage = TritonStage(
                self,
                f"{stage.name}-{region}",
                config=regional,
                pipeline_account=pipeline_account,
                promotion_source=promotion_source,
                # Artifacts do not depend on the region (keys: model, source, release, GPU target).
                plan=self.plans[stage.name],
                source_plan=self.plans[config.promote_from] if config.promote_from else None,
                env=self._stage_env(regional),
                load_tested=load_tested,
            )
            smoke = smoke_step(triton_stage, self.pipeline_config, self.source)
            wave.add_stage(triton_stage, post=self._post_steps(triton_stage, smoke, load_tested))
            self.stages[stage.name].append(triton_stage)
            self.smoke_steps[stage.name].append(smoke)

    def _post_steps(
        self, triton_stage: TritonStage, smoke: pipelines.CodeBuildStep, load_tested: bool
    ) -> list[pipelines.Step]:
        """The smoke test, then (config/pipeline.yaml `performance`, this stage only) the performance gate."""
        if not load_tested:
            return [smoke]
        gate = performance_step(triton_stage, self.pipeline_config, self.source)
        gate.add_step_dependency(smoke)
        self.performance_steps.append(gate)
        return [smoke, gate]

    def _stage_env(self, config: AppConfig) -> cdk.Environment | None:
        """The stage's own account/region, else the pipeline's; None keeps it environment-agnostic."""
        account = config.account or self.pipeline_config.account
        region = config.region or self.pipeline_config.region
        return cdk.Environment(account=account, region=region) if account or region else None


def add_pipeline_stack(
    app: cdk.App, pipeline_config: PipelineConfig, stage_configs: Mapping[str, AppConfig]
) -> PipelineStack:
    env = (
        cdk.Environment(account=pipeline_config.account, region=pipeline_config.region)
        if pipeline_config.account or pipeline_config.region
        else None
    )
    return PipelineStack(app, "Triton-Pipeline", pipeline_config=pipeline_config, stage_configs=stage_configs, env=env)
