"""Where each endpoint's model artifacts live: the one mapping from config to S3 keys.

Keys are content addresses (model_build.key) computed at synth from the model's source, its
build settings, the Triton release and the GPU target the build/serve matcher picks, so an
unchanged model keeps its key (no rebuild, no endpoint update) and dev and prod share bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_build.catalogue import instance_type
from model_build.key import (
    PORTABLE_TARGET,
    artifact_digest,
    ensemble_source,
    model_artifact_key,
    multi_model_prefix,
    source_fingerprint,
    uncompressed_model_prefix,
)
from model_build.matching import BuildPlan, match_build
from model_build.settings import ModelSettings
from triton_cdk.config import AppConfig
from triton_cdk.config.endpoint import EndpointSettings


@dataclass(frozen=True)
class ModelArtifact:
    model: ModelSettings
    digest: str
    source: str  # source fingerprint
    build_plan: BuildPlan | None  # None: no GPU build (ONNX Runtime, Python backend, ensemble)
    # An ensemble's composing models: artifacts of their own, whose archives its build assembles.
    composing: tuple[ModelArtifact, ...] = ()

    @property
    def gpu_target(self) -> str:
        return self.build_plan.gpu_target if self.build_plan else PORTABLE_TARGET

    @property
    def key(self) -> str:
        """The single-model archive (model folder at the root); also an MME `<name>.tar.gz`."""
        return model_artifact_key(self.model.name, self.digest)

    @property
    def uncompressed_prefix(self) -> str:
        return uncompressed_model_prefix(self.model.name, self.digest)

    def with_composing(self) -> list[ModelArtifact]:
        """Every artifact this one needs, composing ones first (each before the ensemble that packs it)."""
        needed: list[ModelArtifact] = []
        for artifact in self.composing:
            needed.extend(a for a in artifact.with_composing() if a not in needed)
        return [*needed, self]


@dataclass(frozen=True)
class EndpointArtifacts:
    endpoint: EndpointSettings
    models: list[ModelArtifact]

    @property
    def multi_model_prefix(self) -> str:
        """Where a multi-model endpoint finds `<name>.tar.gz` for each of its models."""
        return multi_model_prefix({a.model.name: a.key for a in self.models})


def model_artifact(config: AppConfig, model: ModelSettings, instance_type_name: str, base_dir: Path) -> ModelArtifact:
    if model.is_ensemble:
        # Composing models are built for the endpoint's instance like any model it serves; the ensemble's key
        # covers their digests, since its archive holds their folders (model_build.key.ensemble_source).
        composing = tuple(
            model_artifact(config, config.model(name), instance_type_name, base_dir) for name in model.composing_models
        )
        source = ensemble_source({artifact.model.name: artifact.digest for artifact in composing})
        digest = artifact_digest(model, source=source, triton_release=config.triton_release, gpu_target=PORTABLE_TARGET)
        return ModelArtifact(model=model, digest=digest, source=source, build_plan=None, composing=composing)
    plan = None
    if model.needs_gpu_build:
        plan = match_build(instance_type(instance_type_name), config.triton_release, config.build.fleet)
    source = source_fingerprint(model.source, base_dir)
    gpu_target = plan.gpu_target if plan else PORTABLE_TARGET
    digest = artifact_digest(model, source=source, triton_release=config.triton_release, gpu_target=gpu_target)
    return ModelArtifact(model=model, digest=digest, source=source, build_plan=plan)


def endpoint_artifacts(config: AppConfig, endpoint: EndpointSettings, base_dir: Path) -> EndpointArtifacts:
    models = [model_artifact(config, config.model(name), endpoint.instance_type, base_dir) for name in endpoint.models]
    return EndpointArtifacts(endpoint=endpoint, models=models)
