"""`make deploy|diff|destroy STAGE=...` act on that stage's stacks only, never on the pipeline stack.

The targets select stacks with the pattern 'Triton-<stage>-*' from the synthesized assembly (Makefile);
the CDK CLI's own `cdk list --app <assembly> <pattern>` shows what that pattern selects, offline.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from synth_helpers import PROJECT_ROOT

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


def make_dry_run_lines(*args: str) -> list[str]:
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def _index(lines: list[str], text: str) -> int:
    found = [i for i, line in enumerate(lines) if text in line]
    assert len(found) == 1, (text, lines)
    return found[0]


@pytest.mark.parametrize("target", ["deploy", "diff", "destroy"])
def test_stage_targets_check_first_and_synthesize_only_a_stale_assembly(target):
    """Issue #27 items 1, 3, 4: the preflight (placeholders, credentials) runs before anything else; the
    assembly is synthesized again only when its recorded input fingerprint differs (stacks/assembly_fingerprint.py),
    so a dry run shows no unconditional `cdk synth`."""
    lines = make_dry_run_lines(target, "STAGE=prod")
    preflight = _index(lines, f"-m stacks.deploy_preflight --config-dir config --cdk-args='' {target} --stage prod")
    check = _index(lines, "-m stacks.assembly_fingerprint check --app cdk.out-prod --stage prod --config-dir config ||")
    assert "synth-stage STAGE=prod CONFIG_DIR=config" in lines[check]
    action = _index(lines, f"cdk {target} --app cdk.out-prod 'Triton-prod-*'")
    assert preflight < check < action
    assert not any("cdk synth" in line for line in lines), lines


def test_destroy_falls_back_to_the_last_assembly_or_the_deployed_stacks():
    """Issue #27 item 3: a config that no longer synthesizes does not block `make destroy`: it destroys from the
    stage's last assembly (`cdk destroy --app` needs no synth) or, without one, from CloudFormation's list
    (stacks/stage_teardown.py), asking first unless CDK_ARGS has --force."""
    lines = make_dry_run_lines("destroy", "STAGE=dev", "CDK_ARGS=--profile p")
    check = _index(lines, "-m stacks.assembly_fingerprint check --app cdk.out ")
    assert "|| echo" in lines[check + 1] or "|| echo" in lines[check]  # a failed synth goes on to the fallback
    branch = _index(lines, "if test -f cdk.out/manifest.json; then")
    assert "cdk destroy --app cdk.out 'Triton-dev-*'" in lines[branch + 1] and "--profile p" in lines[branch + 1]
    assert "-m stacks.stage_teardown --stage dev --config-dir config --cdk-args='--profile p'" in lines[branch + 2]


def test_deploy_pipeline_checks_before_it_synthesizes():
    lines = make_dry_run_lines("deploy-pipeline")
    preflight = _index(lines, "-m stacks.deploy_preflight --config-dir config --cdk-args='' deploy-pipeline")
    synth = _index(lines, "synth -c pipeline=true")
    assert preflight < synth < _index(lines, "deploy --app cdk.out-pipeline Triton-Pipeline")


EXAMPLE_STAGES = sorted(p.stem for p in (PROJECT_ROOT / "examples" / "config").glob("*.yaml"))


@pytest.mark.parametrize("stage", EXAMPLE_STAGES)
def test_every_example_stage_has_its_own_assembly_and_targets(stage):
    """Issue #27 item 5: CONFIG_DIR=examples/config reaches synth (`-c config_dir=`, app.py) and the
    deploy targets, into the folder `make synth-all` uses (cdk.out-example-<stage>)."""
    out = f"cdk.out-example-{stage}"
    synth = make_dry_run_lines("synth-stage", f"STAGE={stage}", "CONFIG_DIR=examples/config/")
    assert any(f"synth -c stage={stage} -c config_dir=examples/config " in line for line in synth), synth
    assert any(line.strip() == f"-o {out}" for line in synth), synth
    deploy = make_dry_run_lines("deploy", f"STAGE={stage}", "CONFIG_DIR=examples/config")
    assert any(
        f"deploy_preflight --config-dir examples/config --cdk-args='' deploy --stage {stage}" in x for x in deploy
    )
    assert any(f"cdk deploy --app {out} 'Triton-{stage}-*'" in line for line in deploy), deploy
    synth_all = make_dry_run_lines("synth-all")
    assert any(line.strip() == f"-o {out}" for line in synth_all)


def test_the_readme_documents_the_example_commands_and_synth_all():
    """Issue #27 item 5: synth, deploy and, where a model has a local source, the local run of every example
    stage are in the README; a stage whose models are all exported inside the build says it has no local run."""
    import yaml

    readme = (PROJECT_ROOT / "README.md").read_text()
    assert "make synth-all" in readme
    for stage in EXAMPLE_STAGES:
        assert f"make synth-stage STAGE={stage} CONFIG_DIR=examples/config" in readme, stage
        assert f"make deploy STAGE={stage} CONFIG_DIR=examples/config" in readme, stage
        config = yaml.safe_load((PROJECT_ROOT / "examples" / "config" / f"{stage}.yaml").read_text())
        if any("path" in (model.get("source") or {}) for model in config["models"]):
            assert f"make local LOCAL_CONFIG=examples/config/{stage}.yaml LOCAL_MODEL=" in readme, stage
        else:
            row = next(line for line in readme.splitlines() if line.startswith(f"| `{stage}` |"))
            assert "no local run" in row, stage
