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
import posixpath
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from model_build.key import int8_calibration_cache
from model_build.model_tree import SKIPPED_DIRS
from model_build.onnx_external import external_data
from serving_facts.settings import ModelSource
from stacks.artifact_stack import ArtifactImports, ArtifactStack, add_gpu_region_rule
from stage_config import AppConfig
from stage_config.loader import PROJECT_ROOT
from triton_cdk.artifact_build.build_project import ModelBuildProject, retention
from triton_cdk.artifact_build.ensure_artifact import ArtifactResourceProps, EnsureArtifacts, PromotionSource
from triton_cdk.artifact_build.requests import (
    PYTHON_ENVIRONMENT,
    ArtifactRequest,
    artifact_requests,
    build_environment,
)
from triton_cdk.artifact_keys import EndpointArtifacts
from triton_cdk.errors import TritonCdkError
from triton_cdk.images import TritonImageLookup
from triton_cdk.notifications import NotificationTopic

MODEL_BUILD_DIR = PROJECT_ROOT / "model_build"
# The build check (endpoint_client/build_check_cli.py) runs in TensorRT builds; model_build may not import
# endpoint_client (docs/architecture.md), so the package goes to the build as a secondary source of its own.
CHECK_SOURCE_DIR = PROJECT_ROOT / "endpoint_client"
# The facts model_build shares with the constructs (issue #23 item 1): every build imports them.
FACTS_SOURCE_DIR = PROJECT_ROOT / "serving_facts"


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
        promotion_source_region: str | None = None,
        promotion_source_account: str | None = None,
        gpu_build_computes: Sequence[str] = (),
        gpu_build_regions: Sequence[str] = (),
        **kwargs,
    ) -> None:
        """`promotion_source_*`: the stage named by `config.promote_from` (bucket required then; its
        region and account where its config fixes them, so a cross-region copy decrypts through S3
        of the source's region). `gpu_build_*`: as the artifact stack's (its region rule, repeated here)."""
        super().__init__(scope, construct_id, **kwargs)
        # The bucket, key and build role through the artifact stack's named exports (Fn::ImportValue): the
        # artifact stack cannot lose them while projects and artifact resources use them, and no config edit
        # changes which exports exist (stacks/artifact_stack.py).
        # Any reference to another stack's resource that slips in becomes a plain automatic export, which the
        # deploy rules refuse (tests/contract/test_deploy_rules.py), not a weak reference nobody checks. Set
        # before any child is added (it is node context).
        cdk.CrossStackReferences.of(self).consume(cdk.ReferenceStrength.STRONG)
        shared = artifacts.imports_for(self)
        self.config = config
        self.endpoint_artifacts = list(endpoint_artifacts)
        self.requests = artifact_requests(self.endpoint_artifacts)
        self.projects: dict[str, ModelBuildProject] = {}
        self.topic = None
        if bool(config.promote_from) != bool(promotion_source_bucket):
            raise ValueError("promotion_source_bucket is required exactly when config.promote_from is set")
        promotion = (
            PromotionSource(promotion_source_bucket, promotion_source_region, promotion_source_account)
            if promotion_source_bucket
            else None
        )

        if gpu_build_computes:
            # Rules run per stack: a deploy of this stack alone stops in a region without GPU builds too.
            add_gpu_region_rule(self, gpu_build_computes, gpu_build_regions)
        if promotion is None and self.requests:
            self._add_build_projects(shared)
            self._check_concurrency()
        self.ensure = None
        if self.requests:
            self.ensure = EnsureArtifacts(
                self,
                "EnsureArtifacts",
                bucket_name=shared.bucket.bucket_name,
                # Named exports: the handler's policy names them, and so must its cdk-nag acknowledgement.
                bucket_arn=shared.bucket_arn,
                key_arn=shared.key_arn,
                projects=[p.project for p in self.projects.values()],
                promotion=promotion,
                build_wait=cdk.Duration.minutes(config.build.wait_minutes) if promotion is None else None,
                log_retention=retention(config.build.log_retention_days),
                log_encryption_key=shared.key,
            )
            for request in self.requests:
                self._add_artifact(request)
            # An ensemble's build fetches its composing archives: it starts once they exist (and on delete
            # it goes first).
            for request in self.requests:
                for key in request.composing_keys:
                    self.ensure.resources[request.key].node.add_dependency(self.ensure.completion_of(key))

    @property
    def artifact_resources(self) -> dict[str, cdk.CustomResource]:
        """Artifact key -> its ensure-artifact resource (GetAtt `Key` resolves once it exists)."""
        return self.ensure.resources if self.ensure else {}

    # -----------------------------------------------------------------------------------------
    # BUILD mode

    def _add_build_projects(self, shared: ArtifactImports) -> None:
        self.topic = NotificationTopic(self, "Notifications", emails=self.config.notifications.emails).topic
        images = TritonImageLookup(self, "TritonImage", release=self.config.triton_release)
        source = s3_assets.Asset(
            self, "ModelBuildSource", path=str(MODEL_BUILD_DIR), exclude=["__pycache__", "*.pyc", ".*"]
        )
        facts_source = s3_assets.Asset(
            self, "ServingFactsSource", path=str(FACTS_SOURCE_DIR), exclude=["__pycache__", "*.pyc", ".*"]
        )
        # Only projects that build engines (a plan) run the build check; a CPU-only stage ships no check source.
        check_source = (
            s3_assets.Asset(
                self, "BuildCheckSource", path=str(CHECK_SOURCE_DIR), exclude=["__pycache__", "*.pyc", ".*"]
            )
            if any(r.plan is not None for r in self.requests)
            else None
        )
        # Used as is (imported immutable): the artifact stack's bucket policy names this role; its extra rights
        # live here.
        role = shared.build_role
        self._model_sources = {}
        self._calibrations: dict[str, tuple[str, str]] = {}
        self._samples_objects: dict[str, tuple[str, str]] = {}
        for request in self.requests:
            self._model_sources[request.key] = self._model_source(request)
            calibration = self._calibration(request)
            if calibration is not None:
                self._calibrations[request.key] = calibration
            samples = self._samples(request)
            if samples is not None:
                self._samples_objects[request.key] = samples
        build = self.config.build  # the app's settings -> the construct's props, here only
        for environment in sorted({r.environment for r in self.requests}):
            members = [r for r in self.requests if r.environment == environment]
            readable = sorted(
                {arn for r in members if (arn := self._model_sources[r.key][2])}
                | {self._calibrations[r.key][1] for r in members if r.key in self._calibrations}
                | {self._samples_objects[r.key][1] for r in members if r.key in self._samples_objects}
            )
            self.projects[environment] = ModelBuildProject(
                self,
                f"Build{environment}",
                plan=members[0].plan,
                triton_release=self.config.triton_release,
                images=images,
                role=role,
                source=source,
                model_sources=readable,
                encryption_key=shared.key,
                topic=self.topic,
                timeout=cdk.Duration.minutes(build.timeout_minutes),
                queued_timeout=cdk.Duration.minutes(build.queue_timeout_minutes),
                log_retention=retention(build.log_retention_days),
                concurrency=build.concurrency,
                fleet_compute_type=build.fleet.compute_type if build.fleet else None,
                in_serving_image=environment == PYTHON_ENVIRONMENT,
                check_source=check_source if members[0].plan is not None else None,
                facts_source=facts_source,
            )

    def _check_concurrency(self) -> None:
        """A project limit below the builds one deployment starts at once would fail that deployment.

        With a project ConcurrentBuildLimit, StartBuild over it returns an error instead of queueing
        ("Builds in AWS CodeBuild"), and every ensure-artifact resource of a project may start its
        build at the same moment.

        The config loader refuses this first, naming the file and line (stage_config/build_concurrency.py,
        the same count); this stays for a config built in code, as a TritonCdkError app.py prints cleanly.
        """
        limit = self.config.build.concurrency
        if limit is None:
            return
        for environment in sorted(self.projects):
            count = sum(1 for r in self.requests if r.environment == environment)
            if count > limit:
                raise TritonCdkError(
                    f"stage {self.config.stage!r}: build.concurrency: {limit} is below the {count} artifacts "
                    f"the {environment} build project may build at once in one deployment; CodeBuild fails builds "
                    "over a project's limit instead of queueing them. Remove build.concurrency (builds then queue "
                    f"under the account's limit) or set it to at least {count}"
                )

    def _model_source(self, request: ArtifactRequest) -> tuple[str, str, str | None]:
        """(SOURCE_KIND, SOURCE_URI, object ARN the build reads or None) for the buildspec."""
        source: ModelSource | None = request.artifact.model.source
        if source is None:  # an ensemble: its build assembles the composing models' archives (COMPOSING_KEYS)
            return "none", "", None
        if source.export is not None:
            return "export", source.export, None
        if source.s3_uri is not None:
            bucket_and_key = source.s3_uri.removeprefix("s3://").split("?", 1)[0]
            return "s3", source.s3_uri, f"arn:{cdk.Aws.PARTITION}:s3:::{bucket_and_key}"
        path = (PROJECT_ROOT / source.path).resolve()
        asset_id = f"Source-{request.artifact.model.name}"
        data_files = [] if path.is_dir() else [d.location for d in external_data(path)]
        if data_files:
            # The ONNX file and the files its tensors live in, as one zip: the build needs all of them
            # (`model_build config` copies them beside the model; onnxruntime and trtexec read them).
            asset = self.node.try_find_child(asset_id) or s3_assets.Asset(
                self, asset_id, path=str(path.parent), exclude=only_these(path.name, data_files)
            )
            return "onnx-zip", f"{asset.s3_object_url}#{path.name}", asset.bucket.arn_for_objects(asset.s3_object_key)
        excluded = SOURCE_FOLDER_EXCLUDE if path.is_dir() else []
        asset = self.node.try_find_child(asset_id) or s3_assets.Asset(self, asset_id, path=str(path), exclude=excluded)
        kind = "zip" if path.is_dir() else "file"
        return kind, asset.s3_object_url, asset.bucket.arn_for_objects(asset.s3_object_key)

    def _calibration(self, request: ArtifactRequest) -> tuple[str, str] | None:
        """(CALIBRATION_URI, object ARN the build reads) of an INT8 model's calibration cache, else None.

        trtexec only reads a cache (--calib, model_build/calibration.py), and the build host has neither the
        project's files nor the config's s3:// object: a local cache is shipped as an asset of its own (its
        object key is its content hash), an s3:// one is passed as configured. Either way the project's role may
        read exactly that object (ReadBuildSources, build_project.py), as it reads the model sources.
        """
        model = request.artifact.model
        cache = int8_calibration_cache(model)
        if cache is None:
            return None
        if cache.startswith("s3://"):
            bucket_and_key = cache.removeprefix("s3://").split("?", 1)[0]  # ?versionId= pins; the ARN names the key
            return cache, f"arn:{cdk.Aws.PARTITION}:s3:::{bucket_and_key}"
        asset_id = f"Calibration-{model.name}"
        asset = self.node.try_find_child(asset_id) or s3_assets.Asset(
            self, asset_id, path=str((PROJECT_ROOT / cache).resolve())
        )
        return asset.s3_object_url, asset.bucket.arn_for_objects(asset.s3_object_key)

    def _samples(self, request: ArtifactRequest) -> tuple[str, str] | None:
        """(SAMPLES_URI, object ARN the build reads) of a TensorRT model's `tensorrt.accuracy.samples`, else None.

        As `_calibration`: the build check runs on the build host, which has neither the project's files nor the
        config's s3:// object; a local .npz is shipped as an asset of its own, an s3:// one passed as configured, and
        the role may read exactly that object. The file decides what the check compares, not the archive's bytes:
        it is not part of the artifact's key (ModelSettings.build_fingerprint leaves tensorrt.accuracy out).
        """
        model = request.artifact.model
        accuracy = model.tensorrt.accuracy
        if request.plan is None or not model.needs_gpu_build or accuracy is None or accuracy.samples is None:
            return None
        if accuracy.samples.startswith("s3://"):
            bucket_and_key = accuracy.samples.removeprefix("s3://").split("?", 1)[0]
            return accuracy.samples, f"arn:{cdk.Aws.PARTITION}:s3:::{bucket_and_key}"
        asset_id = f"Samples-{model.name}"
        asset = self.node.try_find_child(asset_id) or s3_assets.Asset(
            self, asset_id, path=str((PROJECT_ROOT / accuracy.samples).resolve())
        )
        return asset.s3_object_url, asset.bucket.arn_for_objects(asset.s3_object_key)

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
                build_environment=build_environment(
                    self.config.triton_release,
                    artifact,
                    kind,
                    uri,
                    calibration_uri=self._calibrations[request.key][0] if request.key in self._calibrations else None,
                    samples_uri=self._samples_objects[request.key][0] if request.key in self._samples_objects else None,
                ),
            )
        self.ensure.add_artifact(props)


# What a model folder holds that is not the model (its bytecode, once its model.py has run): the folders the packager
# and the artifact key (model_build.key.tree_sha256) leave out too.
SOURCE_FOLDER_EXCLUDE = sorted(SKIPPED_DIRS)


def only_these(onnx_name: str, data_files: Sequence[str]) -> list[str]:
    """Asset exclude patterns (glob, .gitignore-like) that keep only the model file and its data files."""
    keep = {onnx_name}
    for location in data_files:
        parts = posixpath.normpath(location).split("/")
        keep |= {"/".join(parts[: i + 1]) for i in range(len(parts))}  # a kept file's folders are kept too
    return ["*", *(f"!{name}" for name in sorted(keep))]
