"""`build.concurrency` against the builds one deployment starts at once, counted as the build stack counts them.

The build stack (stacks/build_stack.py) has one CodeBuild project per build environment and one build per
distinct artifact (triton_cdk.artifact_build.requests.artifact_requests: one request per artifact key, an
ensemble's composing models included). The artifact key is the model's name and digest, and within one stage
the digest differs only by the GPU target the model is built for (serving_facts.content_address.artifact_digest; an
ensemble's by its composing models' digests). This module counts the same keys from the config alone, without
CDK or hashing the sources.
"""

from __future__ import annotations

from serving_facts.catalogue import UnknownInstanceTypeError, instance_type
from serving_facts.content_address import PORTABLE_TARGET
from serving_facts.matching import BuildMatchError, match_build
from serving_facts.settings import ModelSettings
from stage_config.app import AppConfig
from triton_cdk.artifact_build.requests import environment_name, packs_python_environment

ArtifactKey = tuple[str, object]


def builds_per_environment(config: AppConfig) -> dict[str, int]:
    """{build environment: number of distinct artifacts its project may build in one deployment}.
    Raises UnknownInstanceTypeError or BuildMatchError where the config names no buildable instance."""
    keys: dict[str, set[ArtifactKey]] = {}

    def add(model: ModelSettings, instance_type_name: str) -> ArtifactKey:
        if model.is_ensemble:
            composing = tuple(add(config.model(name), instance_type_name) for name in model.composing_models)
            key: ArtifactKey = (model.name, composing)
            keys.setdefault(environment_name(None, packs_python_environment(model)), set()).add(key)
            return key
        plan = None
        if model.needs_gpu_build:
            plan = match_build(instance_type(instance_type_name), config.triton_release, config.build.fleet)
        key = (model.name, plan.gpu_target if plan else PORTABLE_TARGET)
        keys.setdefault(environment_name(plan, packs_python_environment(model)), set()).add(key)
        return key

    for endpoint in config.endpoints:
        for name in endpoint.models:
            add(config.model(name), endpoint.instance_type)
        if endpoint.shadow:  # built for the shadow's own instance type (stacks/artifact_plan.py)
            add(config.model(endpoint.shadow.model), endpoint.shadow.instance_type)
    return {environment: len(found) for environment, found in keys.items()}


def concurrency_problems(config: AppConfig) -> list[tuple[str, str]]:
    """A project limit below the builds one deployment starts at once would fail that deployment: with a
    project ConcurrentBuildLimit, StartBuild over it returns an error instead of queueing (CodeBuild User Guide,
    "Builds in AWS CodeBuild"; CreateProject concurrentBuildLimit), and every ensure-artifact resource of a
    project may start its build at the same moment. A promoting stage builds nothing."""
    limit = config.build.concurrency
    if limit is None or config.promote_from is not None:
        return []
    try:
        counts = builds_per_environment(config)
    except (UnknownInstanceTypeError, BuildMatchError, KeyError):
        return []  # reported with its own field (cross_field_problems, the build preflight)
    return [
        (
            "build.concurrency",
            f"{limit} is below the {count} artifacts the {environment} build project may build at once in one "
            "deployment; CodeBuild fails builds over a project's limit instead of queueing them. Remove "
            f"build.concurrency (builds then queue under the account's limit) or set it to at least {count}",
        )
        for environment, count in sorted(counts.items())
        if count > limit
    ]
