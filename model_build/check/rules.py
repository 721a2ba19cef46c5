"""Triton's semantic rules for one model config, with Triton's own wording.

Ported from triton-inference-server/core `src/model_config_utils.cc` (`ValidateModelConfig` and the
functions it calls). Triton stops at the first error; these rules report every independent problem
(one per tensor, per batch input, per instance group...) so one run shows everything to fix. Every
message contains Triton's text, so the problem printed is the line the server would log.
"""

from __future__ import annotations

from collections.abc import Iterator

from model_build.check.ensemble_structure import ensemble_scheduling_problems
from model_build.check.instance_groups import instance_group_problems, normalize_instance_groups, target_problems
from model_build.check.io_rules import io_problems
from model_build.check.paths import path_problems
from model_build.check.problems import Problem
from model_build.check.scheduling import dynamic_batching_problems, sequence_batching_problems
from model_build.check.schema import ENSEMBLE_PLATFORM, KNOWN_BACKEND_PLATFORMS, ModelConfig
from model_build.check.target import Target
from model_build.check.tensorrt import tensorrt_problems


def _platform_problems(config: ModelConfig) -> Iterator[Problem]:
    name = config.name
    if not config.backend:
        if config.platform != ENSEMBLE_PLATFORM:
            yield Problem(name, "platform", f"unexpected platform type '{config.platform}' for {name}", "platform")
            return
    elif config.platform == ENSEMBLE_PLATFORM:
        yield Problem(
            name,
            "backend",
            f"Ensemble model '{name}' must have platform type '{config.platform}' and empty backend type",
            "platform",
        )
        return
    platforms = KNOWN_BACKEND_PLATFORMS.get(config.backend)
    if platforms is not None and config.platform not in platforms:
        yield Problem(
            name,
            "platform",
            f"unexpected 'platform' and 'backend' pair, got:{config.platform}, {config.backend}",
            "platform",
        )


def validate_model_config(config: ModelConfig, target: Target | None = None) -> list[Problem]:
    """Every single-model rule on a completed config (see schema.autocomplete); the config is normalized in place."""
    target = target or Target()
    name = config.name
    if not name:
        return [Problem("(unnamed)", "name", "model configuration must specify 'name'", "name")]
    found: list[Problem] = list(_platform_problems(config))
    if not config.platform and not config.backend:
        found.append(Problem(name, "platform", f"must specify 'platform' or 'backend' for '{name}'", "platform"))
    if config.max_batch_size < 0:
        found.append(
            Problem(name, "max_batch_size", f"'max_batch_size' must be non-negative value for {name}", "max-batch-size")
        )
    found += dynamic_batching_problems(config)
    found += sequence_batching_problems(config)
    found += ensemble_scheduling_problems(config)
    if config.model_transaction_policy.decoupled and config.response_cache.enable:
        found.append(
            Problem(
                name,
                "response_cache.enable",
                f"Response Cache does not currently support model {name} with 'decoupled' transaction policy. "
                "Please disable the response cache.",
                "response-cache",
            )
        )
    found += _metrics_problems(config)
    found += path_problems(config)
    normalize_instance_groups(config, target)
    found += instance_group_problems(config, target)
    found += io_problems(config)
    found += target_problems(config, target)
    found += tensorrt_problems(config, target)
    return found


def _metrics_problems(config: ModelConfig) -> Iterator[Problem]:
    """Triton's ValidateModelMetrics."""
    for index, control in enumerate(config.model_metrics.metric_control):
        where = f"model_metrics.metric_control[{index}]"
        if not control.HasField("metric_identifier"):
            message = "metric control must specify 'metric_identifier'"
        elif not control.metric_identifier.family:
            message = "metric identifier must specify non-empty 'family'"
        elif not control.HasField("histogram_options"):
            message = "metric control must specify 'histogram_options'"
        elif not control.histogram_options.buckets:
            message = "histogram options must specify non-empty 'buckets'"
        else:
            continue
        yield Problem(config.name, where, message, "model-metrics")
