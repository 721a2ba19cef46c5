"""Synth time of the default configuration against a one-bucket CDK app, in the same run.

    .venv/bin/python bench/synth.py [--runs 5]

Runs each `python <app>` in a fresh process (as `cdk synth` does), alternating the two apps so
both see the same machine load; prints the median wall time of each and their ratio.
Target (issue 2): app.py at most 2x the one-bucket app.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = {"default config (app.py)": ROOT / "app.py", "one-bucket app": ROOT / "bench" / "one_bucket_app.py"}


def time_synth(app: Path) -> float:
    with tempfile.TemporaryDirectory() as outdir:
        env = {**os.environ, "CDK_OUTDIR": outdir, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
        started = time.perf_counter()
        subprocess.run([sys.executable, str(app)], cwd=ROOT, env=env, check=True, capture_output=True)
        return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in APPS}
    for _ in range(args.runs):
        for name, app in APPS.items():
            times[name].append(time_synth(app))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"{name:28s} median {median:6.2f} s  (runs: {runs})")
    ratio = medians["default config (app.py)"] / medians["one-bucket app"]
    print(f"ratio {ratio:.2f}x (target <= 2.00x): {'met' if ratio <= 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
