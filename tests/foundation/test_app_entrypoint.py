"""app.py refuses a bad configuration before writing anything, with a message a user can act on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from synth_helpers import PROJECT_ROOT


def test_bad_config_fails_synth_before_any_template_is_written(tmp_path: Path) -> None:
    config = yaml.safe_load((PROJECT_ROOT / "config" / "dev.yaml").read_text())
    config["endpoints"][0]["autoscaling"]["min_capacity"] = 5
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(config))
    outdir = tmp_path / "cdk.out"
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps({"stage": "dev", "config_dir": str(config_dir)}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run([sys.executable, "app.py"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "ERROR: invalid configuration" in result.stderr
    assert f"{config_dir / 'dev.yaml'}: endpoints[0].autoscaling: min_capacity 5 > max_capacity 2" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(outdir.glob("*.template.json")) if outdir.exists() else True


def test_plain_python_app_py_reads_cdk_json_like_the_cli(tmp_path: Path) -> None:
    """`python app.py` without the CDK CLI (which passes cdk.json's context in CDK_CONTEXT_JSON) gets the same
    feature flags: without them aws-cdk-lib applies other defaults and the Guard rules would not be errors."""
    outdir = tmp_path / "cdk.out"
    env = {k: v for k, v in os.environ.items() if k != "CDK_CONTEXT_JSON"}
    env.update({"CDK_OUTDIR": str(outdir), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"})
    result = subprocess.run([sys.executable, "app.py"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in outdir.glob("*.template.json")) == [
        "Triton-dev-Artifacts.template.json",
        "Triton-dev-Build.template.json",
        "Triton-dev-Endpoint-triton-bert.template.json",
        "Triton-dev-Endpoint-triton-mme.template.json",
    ]
