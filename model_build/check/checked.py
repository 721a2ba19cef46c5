"""A model of the repository after its own checks: what the repository-wide (ensemble) rules work from."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from model_build.check.problems import Problem
from model_build.check.schema import ModelConfig


@dataclass
class CheckedModel:
    """One model folder.

    `config` is the completed config (None when it could not be read); `problems` are the model's own;
    `versions` are the versions Triton would load under the version policy, None when not known
    (`--configs-only` on a folder without version folders).
    """

    name: str
    config: ModelConfig | None
    problems: list[Problem] = field(default_factory=list)
    versions: set[int] | None = None

    @property
    def is_ensemble(self) -> bool:
        return self.config is not None and self.config.HasField("ensemble_scheduling")


def versions_to_load(config: ModelConfig, available: Iterable[int]) -> set[int]:
    """Triton's VersionsToLoad: the version folders selected by `version_policy` (latest 1 by default)."""
    available = sorted(set(available), reverse=True)
    policy = config.version_policy
    if policy.HasField("specific"):
        return {version for version in policy.specific.versions if version in available}
    if policy.HasField("all"):
        return set(available)
    count = policy.latest.num_versions if policy.HasField("latest") else 1
    return set(available[:count])
