"""`make deploy|diff|destroy STAGE=...` act on that stage's stacks only, never on the pipeline stack.

The targets select stacks with the pattern 'Triton-<stage>-*' from the synthesized assembly (Makefile);
the CDK CLI's own `cdk list --app <assembly> <pattern>` shows what that pattern selects, offline.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CDK = PROJECT_ROOT / "node_modules" / ".bin" / "cdk"


def make_dry_run(target: str, stage: str) -> str:
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", target, f"STAGE={stage}"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout


@pytest.mark.parametrize("target", ["deploy", "diff", "destroy"])
@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_stage_targets_select_only_that_stage(target, stage):
    commands = [line for line in make_dry_run(target, stage).splitlines() if re.search(rf"cdk {target}\b", line)]
    assert len(commands) == 1, commands
    assert f"'Triton-{stage}-*'" in commands[0]
    assert "Triton-Pipeline" not in commands[0] and "--all" not in commands[0]
    outdir = "cdk.out" if stage == "dev" else f"cdk.out-{stage}"
    assert f"--app {outdir} " in commands[0]  # deploys exactly the assembly that synth wrote and gated


@pytest.mark.skipif(not CDK.exists(), reason="the pinned CDK CLI is installed by `make` (node_modules)")
def test_the_stage_pattern_selects_the_stage_stacks_and_not_the_pipeline(shipped_assemblies):
    assembly = shipped_assemblies["config/dev"]
    env = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run(
        [str(CDK), "list", "--app", str(assembly), "Triton-dev-*", "--no-notices", "--ci"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split()
    assert listed and all(name.startswith("Triton-dev-") for name in listed), listed
    assert {"Triton-dev-Artifacts", "Triton-dev-Build"} <= set(listed)


def test_the_pipeline_has_its_own_targets():
    commands = [line for line in make_dry_run("deploy-pipeline", "dev").splitlines() if "cdk " in line]
    assert any("synth -c pipeline=true" in c and "-o cdk.out-pipeline" in c for c in commands), commands
    assert any("deploy --app cdk.out-pipeline Triton-Pipeline" in c for c in commands), commands
    stage_commands = make_dry_run("deploy", "dev")
    assert "pipeline=true" not in stage_commands  # deploying a stage never needs the pipeline's config
