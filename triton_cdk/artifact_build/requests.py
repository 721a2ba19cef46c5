"""What the build stack must make exist: one request per distinct artifact key.

Endpoints that serve the same model with the same build plan share one key (content address),
so they share one ensure-artifact resource; its extra outputs are merged: the multi-model copies
(`<prefix><name>.tar.gz`) and whether any endpoint needs the unpacked layout.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from serving_facts import releases
from serving_facts.build_variables import CALIBRATION_URI as CALIBRATION_VARIABLE
from serving_facts.build_variables import SAMPLES_URI
from serving_facts.matching import BuildPlan
from serving_facts.settings import ModelSettings
from triton_cdk.artifact_keys import EndpointArtifacts, ModelArtifact

__all__ = [
    "CPU_ENVIRONMENT",
    "PYTHON_ENVIRONMENT",
    "ArtifactRequest",
    "artifact_requests",
    "build_config_document",
    "build_environment",
    "effective_settings",
    "environment_name",
    "expected_tensorrt",
    "packs_python_environment",
]

# Build environments: one CodeBuild project each (compute type and image differ).
CPU_ENVIRONMENT = "Package"  # no GPU build: ONNX Runtime / Python backend models and ensembles are only packaged
# Python models whose execution environment the build packs: in the serving image, whose python3 is the one
# the python backend's stub runs (model_build/python_env.py), on CPU compute.
PYTHON_ENVIRONMENT = "PythonEnvironment"


@dataclass
class ArtifactRequest:
    artifact: ModelArtifact
    copy_to: list[str] = field(default_factory=list)
    uncompressed: bool = False

    @property
    def composing_keys(self) -> list[str]:
        """Keys of the artifacts an ensemble's build assembles: they must exist before it starts."""
        return [composing.key for composing in self.artifact.composing]

    @property
    def key(self) -> str:
        return self.artifact.key

    @property
    def plan(self) -> BuildPlan | None:
        return self.artifact.build_plan

    @property
    def construct_id(self) -> str:
        """Stable across digest changes (a changed model updates the resource, not replaces it); one per model
        and build target, ensembles by their composing models' targets (two artifacts never share an id)."""
        return f"{self.artifact.model.name}-{self.artifact.build_targets.replace('+', 'plus')}"

    @property
    def environment(self) -> str:
        return environment_name(self.plan, packs_python_environment(self.artifact.model))


def packs_python_environment(model: ModelSettings) -> bool:
    """The build packs this model's execution environment from locked requirements."""
    return model.environment is not None and model.environment.requirements is not None


def environment_name(plan: BuildPlan | None, python_environment: bool = False) -> str:
    if plan is None:
        return PYTHON_ENVIRONMENT if python_environment else CPU_ENVIRONMENT
    if plan.compute == "fleet":
        return f"Fleet{plan.build_gpu.model}"
    return plan.build_gpu.model  # "A10G" (SMALL) or "V100" (LARGE)


def artifact_requests(endpoints: Sequence[EndpointArtifacts]) -> list[ArtifactRequest]:
    requests: dict[str, ArtifactRequest] = {}
    for located in endpoints:
        for artifact in located.models:
            # An ensemble's composing models first: each is an artifact of its own, built once per key.
            for composing in artifact.with_composing()[:-1]:
                requests.setdefault(composing.key, ArtifactRequest(composing))
            request = requests.setdefault(artifact.key, ArtifactRequest(artifact))
            if located.multi_model:
                target = f"{located.multi_model_prefix}{artifact.model.name}.tar.gz"
                if target not in request.copy_to:
                    request.copy_to.append(target)
            if located.uncompressed:
                request.uncompressed = True
        for shadow in located.shadows:  # a shadow variant reads its model's archive (composing models first)
            for needed in shadow.with_composing():
                requests.setdefault(needed.key, ArtifactRequest(needed))
    return list(requests.values())


def effective_settings(artifact: ModelArtifact) -> ModelSettings:
    """The model's settings as the build must apply them: the matcher's hardware compatibility."""
    settings = artifact.model
    plan = artifact.build_plan
    if plan is not None and plan.hardware_compatibility == "ampere+":
        tensorrt = settings.tensorrt.model_copy(update={"hardware_compatibility": "ampere+"})
        settings = settings.model_copy(update={"tensorrt": tensorrt})
    return settings


def build_config_document(triton_release: str, artifact: ModelArtifact) -> str:
    """The one-model app config the build reads (`model_build config/build --config`), as JSON (valid YAML)."""
    document = {"triton_release": triton_release, "models": [effective_settings(artifact).model_dump(mode="json")]}
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def expected_tensorrt(triton_release: str) -> str:
    """major.minor.patch of the release's TensorRT: what trtexec's banner can show ("[TensorRT v100400]"
    is 10.4.0; the build number is not in it), so `build --expect-tensorrt` compares like with like."""
    return ".".join(releases.tensorrt_version(triton_release).split(".")[:3])


def build_environment(
    triton_release: str,
    artifact: ModelArtifact,
    source_kind: str,
    source_uri: str,
    calibration_uri: str | None = None,
    samples_uri: str | None = None,
) -> dict:
    """Environment-variable overrides of one build (besides MODEL_NAME/ARTIFACT_* set by the handler).

    `calibration_uri`: where an INT8 model's calibration cache is read from (the local cache's asset, or the
    configured s3:// object), as CALIBRATION_URI, which `model_build build` fetches and passes to trtexec
    --calib (model_build/calibration.py). Not set for any other model.
    `samples_uri`: where a TensorRT model's `tensorrt.accuracy.samples` is read from, as SAMPLES_URI, which the
    buildspec fetches and passes to the build check as --samples (docs/build.md "Build report").
    """
    plan = artifact.build_plan
    composing = {"COMPOSING_KEYS": " ".join(f"{a.model.name}={a.key}" for a in artifact.composing)}
    calibration = {CALIBRATION_VARIABLE: calibration_uri} if calibration_uri is not None else {}
    return {
        **(composing if artifact.composing else {}),
        **calibration,
        **({SAMPLES_URI: samples_uri} if samples_uri is not None else {}),
        "BUILD_CONFIG": build_config_document(triton_release, artifact),
        "PLATFORM": artifact.model.platform,
        "SOURCE_KIND": source_kind,
        "SOURCE_URI": source_uri,
        "GPU_TARGET": artifact.gpu_target,
        "EXPECT_TENSORRT": expected_tensorrt(triton_release) if plan else "",
        "EXPECT_COMPUTE_CAPABILITY": plan.expected_compute_capability if plan else "",
    }
