"""`python -m endpoint_client build-report` is the build check of endpoint_client/build_check_cli.py under the CLI's
name (docs/build.md "Build report"): the same options, the same run, errors as `ERROR: ...` and exit 1."""

from __future__ import annotations

import json
import subprocess
import sys

from endpoint_client import build_check_cli
from endpoint_client.cli import build_parser

ARGS = ["--config", "c.yaml", "--model", "m", "--repository", "repo", "--onnx", "m.onnx", "--out", "report.json"]


def test_the_subcommand_takes_the_checks_options_and_runs_it():
    args = build_parser().parse_args(["build-report", *ARGS, "--tritonserver", "/opt/tritonserver/bin/tritonserver"])
    alone = build_check_cli.build_parser().parse_args([*ARGS, "--tritonserver", "/opt/tritonserver/bin/tritonserver"])
    assert args.run is build_check_cli.run
    assert {k: v for k, v in vars(args).items() if k in vars(alone)} == vars(alone)


def test_the_subcommand_refuses_a_model_without_an_engine(tmp_path):
    config = tmp_path / "config.yaml"
    model = {
        "name": "m",
        "platform": "onnxruntime_onnx",
        "source": {"s3_uri": "s3://sources-bucket/m.onnx"},
        "max_batch_size": 4,
    }
    config.write_text(json.dumps({"triton_release": "24.09", "models": [model]}))
    argv = ["--config", str(config), "--model", "m", "--repository", str(tmp_path / "repo"), "--onnx", "m.onnx"]
    result = subprocess.run(
        [sys.executable, "-m", "endpoint_client", "build-report", *argv, "--out", str(tmp_path / "report.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("ERROR: ") and "build reports are for tensorrt_plan models" in result.stderr
    assert not (tmp_path / "report.json").exists()
