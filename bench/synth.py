"""Synth time of the default stage against a one-bucket CDK app, in the same run.

    .venv/bin/python bench/synth.py [--runs 5]

Runs each `python <app>` in a fresh process (as `cdk synth` does, with cdk.json's context), alternating
the apps so all see the same machine load; prints the median wall time of each and the ratio.
Target (issue #23): the stage app (`app.py`, stage dev) at most 2.5x the one-bucket app, both with validation
registered the documented way (cdk-nag, the Guard rules, CloudFormation's default rules). The pipeline app is
timed beside it for the record.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# name -> (app, extra context). The stage app is what `make deploy STAGE=dev` synthesizes; the pipeline
# app (its own process in `make synth`) is timed beside it for the record, not against the target.
APPS = {
    "stage dev (app.py)": (ROOT / "app.py", {}),
    "pipeline (app.py, -c pipeline=true)": (ROOT / "app.py", {"pipeline": "true"}),
    "one-bucket app": (ROOT / "bench" / "one_bucket_app.py", {}),
}


def time_synth(app: Path, extra_context: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory() as outdir:
        # cdk.json's context (feature flags), as `cdk synth` passes it.
        context = json.loads((ROOT / "cdk.json").read_text())["context"]
        env = {
            **os.environ,
            "CDK_OUTDIR": outdir,
            "CDK_CONTEXT_JSON": json.dumps({**context, **extra_context}),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        }
        started = time.perf_counter()
        result = subprocess.run([sys.executable, str(app)], cwd=ROOT, env=env, capture_output=True)
        # The baseline's bare bucket fails validation after every plugin ran; the project's apps must pass.
        if result.returncode != 0 and app.parent.name != "bench":
            raise SystemExit(f"{app} failed:\n{result.stderr.decode(errors='replace')[-2000:]}")
        return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in APPS}
    for _ in range(args.runs):
        for name, (app, extra_context) in APPS.items():
            times[name].append(time_synth(app, extra_context))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"{name:36s} median {median:6.2f} s  (runs: {runs})")
    ratio = medians["stage dev (app.py)"] / medians["one-bucket app"]
    print(f"ratio {ratio:.2f}x (target <= 2.50x): {'met' if ratio <= 2.5 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
