"""Where model artifacts live: plain values the build and serving constructs read, made by the app.

Keys are content addresses (model_build.key) computed at synth from the model's source, its build
settings, the Triton release and the GPU target the build/serve matcher picks, so an unchanged model
keeps its key (no rebuild, no endpoint update) and dev and prod share bytes. The app maps its config
to these values once per stage (stacks/artifact_plan.py, read through stacks/stage_plan.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from serving_facts.content_address import (
    PORTABLE_TARGET,
    model_artifact_key,
    multi_model_prefix,
    uncompressed_model_prefix,
)
from serving_facts.matching import BuildPlan
from serving_facts.settings import ModelSettings

__all__ = ["EndpointArtifacts", "ModelArtifact"]


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
    def build_targets(self) -> str:
        """What the bytes were built for: the GPU target, or for an ensemble its composing models' targets
        ("sm86", "ampere+sm86", "portable"). An ensemble's key follows those targets (the archive holds their
        engines), so the same ensemble served on two GPU families is two artifacts with two labels."""
        if not self.composing:
            return self.gpu_target
        built = sorted({a.gpu_target for a in self.with_composing()[:-1] if a.build_plan})
        return "+".join(built) or PORTABLE_TARGET

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


@dataclass(frozen=True, kw_only=True)
class EndpointArtifacts:
    """The artifacts one endpoint serves, and the layouts it reads them in.

    - models: the served models' artifacts, in the endpoint's order.
    - multi_model: the endpoint loads each model as `<multi_model_prefix><name>.tar.gz`.
      Default: False (it serves its one model's archive).
    - uncompressed: it reads the unpacked model folder (`ModelArtifact.uncompressed_prefix`).
      Default: False (the compressed archive).
    - shadows: the artifacts its shadow variant serves, each from its compressed archive
      (triton_cdk/serving/shadow.py). Default: none.
    """

    models: list[ModelArtifact]
    multi_model: bool = False
    uncompressed: bool = False
    shadows: tuple[ModelArtifact, ...] = ()

    @property
    def multi_model_prefix(self) -> str:
        """Where a multi-model endpoint finds `<name>.tar.gz` for each of its models."""
        return multi_model_prefix({a.model.name: a.key for a in self.models})
