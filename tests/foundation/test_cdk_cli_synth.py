"""`cdk synth` through the pinned CDK CLI, as `make synth` runs it: the CLI starts cdk.json's `app`, passes the
context, reads the cloud assembly back and checks its schema version against its own. The other tests synthesize
in-process (tests/synth_helpers.py) or run `python app.py`; this one keeps the CLI-to-library handshake in
`make test` (it used to run there through `make synth-all`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT

CDK = PROJECT_ROOT / "node_modules" / ".bin" / "cdk"


@pytest.mark.skipif(not CDK.exists(), reason="the pinned CDK CLI is installed by `make` (node_modules)")
def test_the_cdk_cli_synthesizes_the_dev_stage(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{PROJECT_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    outdir = tmp_path / "cdk.out"
    result = subprocess.run(
        [str(CDK), "synth", "-c", "stage=dev", "--no-notices", "--no-version-reporting", "--ci", "--quiet",
         "-o", str(outdir)],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-5000:]
    manifest = json.loads((outdir / "manifest.json").read_text())
    stacks = {a.get("displayName") for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"}
    assert {"Triton-dev-Artifacts", "Triton-dev-Build"} <= stacks, stacks
    assert all((outdir / f"{name}.template.json").is_file() for name in stacks), sorted(outdir.iterdir())
