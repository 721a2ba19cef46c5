"""Stateless stack: the CodeBuild model builds and the ensure-artifact custom resources.

BUILD mode (default): one CodeBuild project per build environment the endpoints need (A10G,
V100, a fleet, CPU packaging) and one `Custom::TritonModelArtifact` per artifact key, which starts
a build only when the key is missing. PROMOTE mode (`promote_from` set, e.g. prod from dev): no
project at all; each missing artifact is copied from the source stage's bucket, never rebuilt.
Every endpoint stack depends on this stack (stacks/stage.py), so SageMaker models are created only
after their artifacts exist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from model_build.settings import ModelSource
from stacks.artifact_stack import ArtifactStack
from triton_cdk.artifact_keys import EndpointArtifacts
from triton_cdk.build.build_project import ModelBuildProject, retention
from triton_cdk.build.ensure_artifact import ArtifactResourceProps, EnsureArtifacts
from triton_cdk.build.requests import ArtifactRequest, artifact_requests, build_environment
from triton_cdk.config import AppConfig
from triton_cdk.config.loader import PROJECT_ROOT
from triton_cdk.images import TritonImageLookup
from triton_cdk.notifications import NotificationTopic

MODEL_BUILD_DIR = PROJECT_ROOT / "model_build"


class BuildStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        artifacts: ArtifactStack,
        endpoint_artifacts: Sequence[EndpointArtifacts],
        promotion_source_bucket: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # Strong (Export/ImportValue) references to the bucket, key and build role: the artifact
        # stack must not lose them while projects and artifact resources use them.
        cdk.CrossStackReferences.of(self).consume(cdk.ReferenceStrength.STRONG)
        self.config = config
        self.endpoint_artifacts = list(endpoint_artifacts)
        self.requests = artifact_requests(self.endpoint_artifacts)
        self.projects: dict[str, ModelBuildProject] = {}
        self.topic = None
        if bool(config.promote_from) != bool(promotion_source_bucket):
            raise ValueError("promotion_source_bucket is required exactly when config.promote_from is set")
        source_bucket = promotion_source_bucket

        if source_bucket is None and self.requests:
            self._add_build_projects(artifacts)
        self.ensure = None
        if self.requests:
            self.ensure = EnsureArtifacts(
                self,
                "EnsureArtifacts",
                bucket_name=artifacts.store.bucket.bucket_name,
                # Named exports: the handler's policy names them, and so must its cdk-nag acknowledgement.
                bucket_arn=artifacts.export_value(
                    artifacts.store.bucket.bucket_arn, name=f"{artifacts.stack_name}-ArtifactBucketArn"
                ),
                key_arn=artifacts.store.key.key_arn,
                project_arns=[p.project_arn for p in self.projects.values()],
                source_bucket=source_bucket,
                wait=cdk.Duration.minutes(config.build.artifact_wait_minutes),
                log_retention=retention(config.build.log_retention_days),
            )
            for request in self.requests:
                self._add_artifact(request)

    @property
    def artifact_resources(self) -> dict[str, cdk.CustomResource]:
        """Artifact key -> its ensure-artifact resource (GetAtt `Key` resolves once it exists)."""
        return self.ensure.resources if self.ensure else {}

    # -----------------------------------------------------------------------------------------
    # BUILD mode

    def _add_build_projects(self, artifacts: ArtifactStack) -> None:
        self.topic = NotificationTopic(self, "Notifications", emails=self.config.notifications.emails).topic
        images = TritonImageLookup(self, "TritonImage", release=self.config.triton_release)
        source = s3_assets.Asset(
            self, "ModelBuildSource", path=str(MODEL_BUILD_DIR), exclude=["__pycache__", "*.pyc", ".*"]
        )
        # Used as is: the artifact stack's bucket policy names this role; its extra rights live here.
        role = artifacts.build_role.without_policy_updates()
        self._model_sources = {}
        for request in self.requests:
            self._model_sources[request.key] = self._model_source(request)
        for environment in sorted({r.environment for r in self.requests}):
            members = [r for r in self.requests if r.environment == environment]
            readable = sorted({arn for r in members if (arn := self._model_sources[r.key][2])})
            self.projects[environment] = ModelBuildProject(
                self,
                f"Build{environment}",
                plan=members[0].plan,
                triton_release=self.config.triton_release,
                images=images,
                role=role,
                source=source,
                model_sources=readable,
                encryption_key=artifacts.store.key,
                settings=self.config.build,
                topic=self.topic,
            )

    def _model_source(self, request: ArtifactRequest) -> tuple[str, str, str | None]:
        """(SOURCE_KIND, SOURCE_URI, object ARN the build reads or None) for the buildspec."""
        source: ModelSource = request.artifact.model.source
        if source.export is not None:
            return "export", source.export, None
        if source.s3_uri is not None:
            bucket_and_key = source.s3_uri.removeprefix("s3://").split("?", 1)[0]
            return "s3", source.s3_uri, f"arn:{cdk.Aws.PARTITION}:s3:::{bucket_and_key}"
        path = (PROJECT_ROOT / source.path).resolve()
        asset_id = f"Source-{request.artifact.model.name}"
        asset = self.node.try_find_child(asset_id) or s3_assets.Asset(self, asset_id, path=str(path))
        kind = "zip" if path.is_dir() else "file"
        return kind, asset.s3_object_url, asset.bucket.arn_for_objects(asset.s3_object_key)

    def _add_artifact(self, request: ArtifactRequest) -> None:
        artifact = request.artifact
        props = ArtifactResourceProps(
            construct_id=request.construct_id,
            model_name=artifact.model.name,
            key=artifact.key,
            copy_to=tuple(request.copy_to),
            uncompressed_prefix=artifact.uncompressed_prefix if request.uncompressed else None,
        )
        if self.projects:
            kind, uri, _ = self._model_sources[request.key]
            props = dataclasses.replace(
                props,
                project_name=self.projects[request.environment].project_name,
                build_environment=build_environment(self.config.triton_release, artifact, kind, uri),
            )
        self.ensure.add_artifact(props)
