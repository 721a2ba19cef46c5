"""Benchmark: model_build's packager against `tar -czf` on incompressible weights.

    .venv/bin/python bench/package.py                 # 1 GiB, as in bench/PACKAGE.md
    .venv/bin/python bench/package.py --size-mib 256  # quicker

Writes a repository holding one model whose weights are os.urandom bytes (like a TensorRT plan:
deflate cannot shrink them), written once into a temp folder, then in the same run packages it
twice with model_build (each run in its own subprocess, so its peak RSS is its own) and once with
GNU `tar -czf`. Reports MB/s of input for each, the speed-up, the packager's peak RSS and whether
both packager runs produced the same sha256. Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
TARGET_SPEEDUP = 3.0
TARGET_PEAK_RSS_MIB = 200

# Runs in a fresh interpreter: packages, then reports its own wall time and ru_maxrss.
_PACKAGER = """
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from model_build.package import write_model_archive
start = time.perf_counter()
digest = write_model_archive(Path(sys.argv[2]), Path(sys.argv[3]))
seconds = time.perf_counter() - start
print(json.dumps({"sha256": digest, "seconds": seconds,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_repository(root: Path, size_mib: int) -> Path:
    model = root / "repo" / "weights_model"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('name: "weights_model"\nplatform: "tensorrt_plan"\nmax_batch_size: 8\n')
    with (model / "1" / "model.plan").open("wb") as stream:
        for _ in range(size_mib // 4):
            stream.write(os.urandom(4 * MIB))
        stream.write(os.urandom((size_mib % 4) * MIB))
    return model


def run_packager(model: Path, archive: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", _PACKAGER, str(ROOT), str(model), str(archive)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(result.stdout)


def run_tar(model: Path, archive: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["tar", "-czf", str(archive), "-C", str(model.parent), model.name], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="weights size in MiB. Default: %(default)s")
    parser.add_argument("--tmp", type=Path, default=None, help="scratch folder. Default: the system temp folder")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="bench-package-") as scratch:
        root = Path(scratch)
        model = make_repository(root, args.size_mib)
        input_mb = sum(p.stat().st_size for p in model.rglob("*") if p.is_file()) / 1e6
        first = run_packager(model, root / "a" / "model.tar.gz")
        tar_seconds = run_tar(model, root / "tar.tar.gz")
        second = run_packager(model, root / "b" / "model.tar.gz")
        archive_mib = (root / "a" / "model.tar.gz").stat().st_size / MIB
        tar_archive_mib = (root / "tar.tar.gz").stat().st_size / MIB

    # The mean of both packager runs: the machine may be shared, and one lucky run proves little.
    packager_seconds = (first["seconds"] + second["seconds"]) / 2
    report = {
        "input_mb": round(input_mb, 1),
        "cpus": os.cpu_count(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "packager_mb_s": round(input_mb / packager_seconds, 1),
        "packager_seconds": [round(first["seconds"], 2), round(second["seconds"], 2)],
        "tar_czf_mb_s": round(input_mb / tar_seconds, 1),
        "tar_czf_seconds": round(tar_seconds, 2),
        "speedup": round(tar_seconds / packager_seconds, 2),
        "packager_peak_rss_mib": round(max(first["peak_rss_mib"], second["peak_rss_mib"]), 1),
        "deterministic": first["sha256"] == second["sha256"],
        "sha256": first["sha256"],
        "archive_mib": round(archive_mib, 1),
        "tar_czf_archive_mib": round(tar_archive_mib, 1),
    }
    print(json.dumps(report, indent=2))
    ok = (
        report["speedup"] >= TARGET_SPEEDUP
        and report["deterministic"]
        and report["packager_peak_rss_mib"] < TARGET_PEAK_RSS_MIB
    )
    print(
        f"targets (>= {TARGET_SPEEDUP}x tar -czf, deterministic, peak RSS < {TARGET_PEAK_RSS_MIB} MiB): "
        f"{'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
