"""The `check` command: exit codes, one line per problem on stdout, a summary on stderr."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
from cli_runner import run_cli
from synth_helpers import PROJECT_ROOT

from model_build.commands import check
from model_build.errors import InvalidModelError, ModelBuildError

SHARED = PROJECT_ROOT.parent / "shared"
VALID = SHARED / "triton-configs" / "valid"


def run_check(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    return check.run(parser.parse_args([str(arg) for arg in argv]))


def broken_repository(root: Path) -> Path:
    repo = root / "models"
    model = repo / "reshape_elementcount0"
    shutil.copytree(SHARED / "triton-configs" / "invalid-single" / "reshape_elementcount0", model)
    with (model / "config.pbtxt").open("a") as config:
        config.write('platform: "onnxruntime_onnx"\n')
    (model / "1").mkdir()
    (repo / "config.pbtxt").write_text("")
    return repo


def test_a_valid_repository_exits_0_and_prints_no_problem(capsys):
    assert run_check(VALID, "--configs-only") == 0

    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"check: {VALID} is a valid model repository (configs only)\n"


def test_problems_are_printed_one_per_line_and_exit_1(tmp_path, capsys):
    repo = broken_repository(tmp_path)

    assert run_check(repo) == 1

    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "(repository): config.pbtxt: config.pbtxt at the repository root: SageMaker's Triton refuses to start; "
        "move it into its model folder (REPO/<model>/config.pbtxt) [root-config]",
        "reshape_elementcount0: input[0].reshape: model input 'input' has different size for dims and reshape for "
        "reshape_elementcount0 [io]",
        "reshape_elementcount0: 1/model.onnx: version folder 1/ has no model.onnx: onnxruntime_onnx expects it "
        "(set default_model_filename in config.pbtxt to use another file name) [model-file]",
    ]
    assert err == f"check: 3 problems in {repo}\n"


def test_configs_only_skips_the_model_files(tmp_path, capsys):
    repo = broken_repository(tmp_path)

    assert run_check(repo, "--configs-only") == 1

    out, _ = capsys.readouterr()
    assert len(out.splitlines()) == 2
    assert "model.onnx" not in out


def test_the_instance_type_decides_the_gpu_rules(capsys):
    seeds = SHARED / "seed-configs"

    assert run_check(seeds, "--configs-only", "--instance-type", "ml.g5.xlarge") == 0
    assert run_check(seeds, "--configs-only", "--instance-type", "ml.c5.xlarge") == 1

    out, _ = capsys.readouterr()
    assert "bert: instance_group[0]: instance group bert_0 of model bert has kind KIND_GPU but no GPUs" in out


def test_an_unknown_instance_type_is_a_user_error(tmp_path):
    with pytest.raises(ModelBuildError, match=r"--instance-type: unknown instance type 'ml\.g5'"):
        run_check(VALID, "--instance-type", "ml.g5")


def test_a_missing_repository_is_a_user_error(tmp_path):
    with pytest.raises(InvalidModelError, match="is not a folder"):
        run_check(tmp_path / "nowhere")


def test_the_check_command_end_to_end(tmp_path):
    """End to end through cli.main: problems on stdout, summary on stderr, exit 1; ERROR: for user errors."""
    repo = broken_repository(tmp_path)

    result = run_cli("check", str(repo), "--configs-only")
    assert result.returncode == 1, result.stderr
    assert len(result.stdout.splitlines()) == 2
    assert result.stderr == f"check: 2 problems in {repo}\n"

    result = run_cli("check", str(VALID), "--instance-type", "ml.x")
    assert result.returncode == 1
    assert result.stderr.startswith("ERROR: --instance-type: unknown instance type 'ml.x'")

    result = run_cli("check", str(VALID), "--configs-only")
    assert (result.returncode, result.stdout) == (0, "")


def test_the_release_decides_tensorrt_data_types(tmp_path, capsys):
    """BERT's INT64 ids: refused for Triton 23.12 (TensorRT backend r23.12 maps no TYPE_INT64), fine for 24.09."""
    model = tmp_path / "models" / "bert"
    model.mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'name: "bert"\nplatform: "tensorrt_plan"\nmax_batch_size: 8\n'
        'input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]\n'
        'output [ { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
    )

    assert run_check(tmp_path / "models", "--configs-only", "--triton-release", "24.09") == 0
    capsys.readouterr()
    assert run_check(tmp_path / "models", "--configs-only", "--triton-release", "23.12") == 1
    out = capsys.readouterr().out
    assert out.startswith(
        "bert: input[0].data_type: unsupported datatypeTYPE_INT64 for input 'input_ids' for model 'bert' ("
    )
    assert out.rstrip().endswith("[tensorrt-data-type]")
