"""Build once: a stage that promotes from another must need only artifacts that stage builds.

Artifact keys are content addresses (triton_cdk.artifact_keys): equal model settings, source,
Triton release and GPU target give equal keys. The target stage never builds (its ensure-artifact
resources only copy from the source stage's bucket), so every key it needs must be one the source
stage produces; otherwise synth fails here, naming the model and what differs.

The artifacts come in already computed (the app's stage plan, stacks/stage_plan.py: `collect_stage_artifacts`
over each stage's endpoint artifacts): nothing here hashes a model source again. Part of the app, not the
construct library: it reads and names the stages' configs.
"""

from __future__ import annotations

from collections.abc import Iterable

from stage_config import AppConfig
from triton_cdk.artifact_keys import EndpointArtifacts, ModelArtifact
from triton_cdk.errors import TritonCdkError


class PromotionError(TritonCdkError, ValueError):
    """The target stage needs an artifact the source stage never builds."""


def collect_stage_artifacts(located: Iterable[EndpointArtifacts]) -> dict[str, list[ModelArtifact]]:
    """Every model artifact the endpoints need (composing ones too), by model name (one per distinct key)."""
    by_model: dict[str, list[ModelArtifact]] = {}
    for endpoint in located:
        served = [*endpoint.models, *endpoint.shadows]
        for artifact in (needed for served_artifact in served for needed in served_artifact.with_composing()):
            known = by_model.setdefault(artifact.model.name, [])
            if all(a.key != artifact.key for a in known):
                known.append(artifact)
    return by_model


def _differences(wanted: ModelArtifact, built: ModelArtifact, target: AppConfig, source: AppConfig) -> list[str]:
    found = []
    if target.triton_release != source.triton_release:
        found.append(f"triton_release {source.triton_release!r} -> {target.triton_release!r}")
    if wanted.gpu_target != built.gpu_target:
        found.append(f"GPU target {built.gpu_target!r} -> {wanted.gpu_target!r} (instance type or build fleet)")
    if wanted.source != built.source:
        found.append(
            f"source {built.model.source.model_dump(exclude_none=True)} -> "
            f"{wanted.model.source.model_dump(exclude_none=True)}"
        )
    before, after = built.model.build_fingerprint(), wanted.model.build_fingerprint()
    for field in sorted(set(before) | set(after)):
        if before.get(field) != after.get(field):
            found.append(f"{field} {before.get(field)!r} -> {after.get(field)!r}")
    return found or ["the artifact digest"]


def promotion_problems(
    target: AppConfig,
    source: AppConfig,
    needed: dict[str, list[ModelArtifact]],
    built: dict[str, list[ModelArtifact]],
) -> list[str]:
    """One message per artifact `needed` (target's) that `built` (source's) lacks; empty: build once holds.

    `needed` / `built`: `collect_stage_artifacts` of each stage (the stage plans' `stage_artifacts()`).
    """
    built_keys = {a.key for artifacts in built.values() for a in artifacts}
    problems = []
    for name, wanted_list in needed.items():
        for wanted in wanted_list:
            if wanted.key in built_keys:
                continue
            if name not in built:
                problems.append(
                    f"model {name!r}: stage {target.stage!r} serves it but stage {source.stage!r} builds no "
                    f"artifact for it (no {source.stage} endpoint serves {name!r}); serve it in "
                    f"{source.stage} first so it is built and tested there"
                )
                continue
            candidates = built[name]
            closest = min(candidates, key=lambda b: len(_differences(wanted, b, target, source)))
            differs = "; ".join(_differences(wanted, closest, target, source))
            problems.append(
                f"model {name!r}: stage {target.stage!r} needs {wanted.key} but stage {source.stage!r} builds "
                f"{', '.join(b.key for b in candidates)}; differs ({source.stage} -> {target.stage}): {differs}. "
                f"Make config/{target.stage}.yaml match config/{source.stage}.yaml for this model, or deploy the "
                f"change to {source.stage} first"
            )
    return problems


def check_promotion(
    target: AppConfig,
    source: AppConfig,
    needed: dict[str, list[ModelArtifact]],
    built: dict[str, list[ModelArtifact]],
) -> None:
    """Raise `PromotionError` listing every artifact in `needed` (target's) that `built` (source's) lacks."""
    problems = promotion_problems(target, source, needed, built)
    if problems:
        raise PromotionError(
            f"stage {target.stage!r} promotes from {source.stage!r} but would need artifacts "
            f"{source.stage!r} never builds (prod never rebuilds):\n" + "\n".join(f"  {p}" for p in problems)
        )


def promotion_source_bucket(target: AppConfig, source: AppConfig) -> str:
    """The bucket `target` copies artifacts from; refused when the source stage has no fixed name."""
    if not source.artifacts.bucket_name:
        raise PromotionError(
            f"stage {target.stage!r} promotes from {source.stage!r}, whose artifacts.bucket_name is not set; "
            f"set artifacts.bucket_name in config/{source.stage}.yaml (and list this stage's account in its "
            "artifacts.reader_accounts when it deploys elsewhere)"
        )
    return source.artifacts.bucket_name
