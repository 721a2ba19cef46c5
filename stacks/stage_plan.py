"""One stage's plan: models -> artifacts -> keys -> endpoints, computed once per stage and passed down.

The stage's stacks (build, endpoints), the promotion check and the pipeline (smoke plan, smoke role) all
read this plan instead of recomputing content digests (which hash every model's source files).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stacks.artifact_plan import PlannedEndpoint, endpoint_artifacts
from stacks.promotion import collect_stage_artifacts
from stage_config import AppConfig
from triton_cdk.artifact_keys import ModelArtifact


@dataclass(frozen=True)
class StagePlan:
    config: AppConfig
    # By endpoint name, in the config's order.
    endpoints: dict[str, PlannedEndpoint]

    def endpoint_artifacts(self, name: str) -> PlannedEndpoint:
        return self.endpoints[name]

    def stage_artifacts(self) -> dict[str, list[ModelArtifact]]:
        """Every model artifact the stage's endpoints need, by model name (one per distinct key)."""
        return collect_stage_artifacts(self.endpoints.values())

    def artifact_keys(self) -> list[str]:
        return sorted({a.key for artifacts in self.stage_artifacts().values() for a in artifacts})

    def gpu_build_computes(self) -> list[str]:
        """The CodeBuild GPU computes (BuildPlan.compute) this stage's builds use; none on a promoting stage,
        which copies its artifacts instead of building them."""
        if self.config.promote_from:
            return []
        return sorted(
            {a.build_plan.compute for artifacts in self.stage_artifacts().values() for a in artifacts if a.build_plan}
        )


def plan_stage(config: AppConfig, base_dir: Path) -> StagePlan:
    """`base_dir`: the folder model source paths in `config` are relative to (the app's PROJECT_ROOT)."""
    return StagePlan(
        config=config,
        endpoints={endpoint.name: endpoint_artifacts(config, endpoint, base_dir) for endpoint in config.endpoints},
    )
