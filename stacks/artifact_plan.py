"""The one mapping from the app's config to the library's artifact values (triton_cdk.artifact_keys).

Read through the stage plan (stacks/stage_plan.py), which calls it once per endpoint and stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_build.key import calibration_fingerprint, source_fingerprint
from serving_facts.catalogue import instance_type
from serving_facts.content_address import PORTABLE_TARGET, artifact_digest, ensemble_source
from serving_facts.matching import match_build
from serving_facts.settings import ModelSettings
from stage_config import AppConfig
from stage_config.endpoint import EndpointSettings
from triton_cdk.artifact_keys import EndpointArtifacts, ModelArtifact


@dataclass(frozen=True, kw_only=True)
class PlannedEndpoint(EndpointArtifacts):
    """An endpoint's artifacts with the settings they were planned from (the endpoint stack reads both)."""

    endpoint: EndpointSettings


def model_artifact(config: AppConfig, model: ModelSettings, instance_type_name: str, base_dir: Path) -> ModelArtifact:
    """`model`'s artifact when served on `instance_type_name`: its GPU target is the build matcher's choice
    (serving_facts.matching, `build.fleet` included). The one computation of an artifact's key: the stacks and
    `python -m model_build key --instance-type` both call it."""
    if model.is_ensemble:
        # Composing models are built for the endpoint's instance like any model it serves; the ensemble's key
        # covers their digests, since its archive holds their folders (serving_facts.content_address.ensemble_source).
        composing = tuple(
            model_artifact(config, config.model(name), instance_type_name, base_dir) for name in model.composing_models
        )
        digest, source = _ensemble_digest(config, model, {a.model.name: a.digest for a in composing})
        return ModelArtifact(model=model, digest=digest, source=source, build_plan=None, composing=composing)
    plan = None
    if model.needs_gpu_build:
        plan = match_build(instance_type(instance_type_name), config.triton_release, config.build.fleet)
    digest, source = target_digest(config, model, plan.gpu_target if plan else PORTABLE_TARGET, base_dir)
    return ModelArtifact(model=model, digest=digest, source=source, build_plan=plan)


def target_digest(config: AppConfig, model: ModelSettings, gpu_target: str, base_dir: Path) -> tuple[str, str]:
    """(digest, source fingerprint) of `model`'s artifact built for `gpu_target` (an ensemble's: its composing
    models built for it). model_artifact asks it with the matcher's target; `python -m model_build key --gpu-target`
    asks it directly."""
    if model.is_ensemble:
        digests = {
            name: target_digest(config, config.model(name), gpu_target, base_dir)[0] for name in model.composing_models
        }
        return _ensemble_digest(config, model, digests)
    source = source_fingerprint(model.source, base_dir)
    calibration = calibration_fingerprint(model, base_dir)  # an INT8 engine's scales come from its cache
    digest = artifact_digest(
        model, source=source, triton_release=config.triton_release, gpu_target=gpu_target, calibration=calibration
    )
    return digest, source


def _ensemble_digest(config: AppConfig, model: ModelSettings, composing_digests: dict[str, str]) -> tuple[str, str]:
    source = ensemble_source(composing_digests)
    digest = artifact_digest(model, source=source, triton_release=config.triton_release, gpu_target=PORTABLE_TARGET)
    return digest, source


def endpoint_artifacts(config: AppConfig, endpoint: EndpointSettings, base_dir: Path) -> PlannedEndpoint:
    """`base_dir`: the folder model source paths in `config` are relative to."""
    models = [model_artifact(config, config.model(name), endpoint.instance_type, base_dir) for name in endpoint.models]
    return PlannedEndpoint(
        endpoint=endpoint,
        models=models,
        multi_model=endpoint.mode == "multi_model",
        uncompressed=endpoint.uncompressed_model_data,
        # The shadow's model is built for the shadow's instance type (stage_config/shadow.py).
        shadows=(
            (model_artifact(config, config.model(endpoint.shadow.model), endpoint.shadow.instance_type, base_dir),)
            if endpoint.shadow
            else ()
        ),
    )
