"""A stage synthesizes (and so deploys) without the pipeline: its own account/region are enough.

Issue: setting `account`/`region` in config/dev.yaml made `make synth` fail until config/pipeline.yaml
had an account too. app.py now reads the pipeline's file only for `-c pipeline=true`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from synth_helpers import PROJECT_ROOT

CDK_JSON_CONTEXT = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]


def run_app(config_dir: Path, outdir: Path, **context) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        # As the CDK CLI runs it: cdk.json's context (feature flags) plus the -c values.
        "CDK_CONTEXT_JSON": json.dumps({**CDK_JSON_CONTEXT, "config_dir": str(config_dir), **context}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    return subprocess.run([sys.executable, "app.py"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)


def test_a_stage_with_its_own_account_synthesizes_whatever_the_pipeline_file_says(tmp_path):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    dev = yaml.safe_load((PROJECT_ROOT / "config" / "dev.yaml").read_text())
    dev.update(account="222222222222", region="us-east-1")
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(dev, sort_keys=False))
    (config_dir / "pipeline.yaml").write_text("name: [this is not a pipeline\n")  # broken on purpose
    result = run_app(config_dir, tmp_path / "out", stage="dev")
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    stacks = {a.get("displayName", k) for k, a in manifest["artifacts"].items() if a["type"].endswith(":stack")}
    assert stacks and all(name.startswith("Triton-dev-") for name in stacks), stacks
    # The pipeline's problems surface when the pipeline itself is synthesized, as a clean refusal.
    result = run_app(config_dir, tmp_path / "out-pipeline", pipeline="true")
    assert result.returncode == 1
    assert "ERROR: invalid configuration" in result.stderr and "pipeline.yaml" in result.stderr
    assert "Traceback" not in result.stderr
