"""Differential tests: `check` against a real Triton (the CPU tritonserver 2.51 of nvidia-pytriton).

Started with `--strict-model-config=true`, Triton validates every config while polling the repository
and logs `Poll failed for model directory '<model>': <message>` for each one it refuses
(../shared/README.md, "Tooling facts"). Its models here all need ONNX Runtime or TensorRT, which
that build lacks, so every model fails one way or the other and the server exits by itself; no
HTTP, gRPC or metrics port is opened. For every model, Triton's verdict on the config (refused, with
which message, or passed on to loading) must be ours too.

Needs `.venv-triton` (made by `make .venv-triton/.stamp`); skipped without it.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT

from model_build.check import check_repository

CONFIGS = PROJECT_ROOT.parent / "shared" / "triton-configs"
TRITON = next(
    iter(sorted((PROJECT_ROOT / ".venv-triton").glob("lib/python3*/site-packages/pytriton/tritonserver"))), None
)
POLL_FAILED = re.compile(r"Poll failed for model directory '(?P<model>[^']+)': (?P<message>.*)\"$")

pytestmark = [
    pytest.mark.triton,
    pytest.mark.skipif(TRITON is None, reason="no CPU Triton: run `make .venv-triton/.stamp`"),
]


def triton_refusals(repo: Path) -> dict[str, str]:
    """Model -> the message Triton logs when its config is refused; models it went on to load are absent."""
    command = [
        str(TRITON / "bin" / "tritonserver"),
        f"--model-repository={repo}",
        "--strict-model-config=true",
        f"--backend-directory={TRITON / 'backends'}",
        "--allow-http=false",
        "--allow-grpc=false",
        "--allow-metrics=false",
        "--exit-on-error=true",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    log = result.stdout + result.stderr
    assert result.returncode != 0, f"Triton accepted {repo}; the test needs every model to fail:\n{log}"
    assert "failed to load all models" in log or "Poll failed" in log, log
    return {match["model"]: match["message"] for match in map(POLL_FAILED.search, log.splitlines()) if match}


# Triton validates instance groups only after the backend is found (and this build has none but
# Python), and the TensorRT backend's own rules run when the model is created, so these rules never
# show at the poll stage: the corpus and the rule tests cover them.
AFTER_POLL_RULES = {"instance-group", "gpu-count", "gpu-platform", "tensorrt-device", "tensorrt-data-type"}


def our_refusals(repo: Path) -> dict[str, list[str]]:
    refused: dict[str, list[str]] = {}
    for problem in check_repository(repo, configs_only=True):
        if problem.rule not in AFTER_POLL_RULES:
            refused.setdefault(problem.model, []).append(problem.message)
    return refused


def assert_same_verdicts(repo: Path) -> None:
    theirs, ours = triton_refusals(repo), our_refusals(repo)
    models = sorted(path.name for path in repo.iterdir() if path.is_dir())
    for model in models:
        if model in theirs:
            assert theirs[model] in ours.get(model, []), (
                f"{model}: Triton said {theirs[model]!r}, we said {ours.get(model)}"
            )
        else:
            assert model not in ours, f"{model}: Triton accepted the config, we said {ours[model]}"


OUTPUT = 'output [ { name: "y" data_type: TYPE_FP32 dims: [1] } ]'


def write_model(repo: Path, name: str, body: str) -> None:
    model = repo / name
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(f'name: "{name}"\nplatform: "onnxruntime_onnx"\n{body}\n')


@pytest.mark.parametrize("platform", ["tensorrt_plan", "onnxruntime_onnx"])
def test_invalid_single_cases_get_tritons_message(platform, tmp_path):
    repo = tmp_path / "models"
    for case in sorted((CONFIGS / "invalid-single").iterdir()):
        shutil.copytree(case, repo / case.name)
        config = repo / case.name / "config.pbtxt"
        kept = [line for line in config.read_text().splitlines(keepends=True) if "platform:" not in line]
        config.write_text("".join(kept) + f'platform: "{platform}"\n')
        (repo / case.name / "1").mkdir()

    assert_same_verdicts(repo)
    # Not vacuous: Triton refused (nearly) every case at the config stage.
    assert len(triton_refusals(repo)) >= 28


def test_the_valid_examples_pass_config_validation_in_both(tmp_path):
    repo = tmp_path / "models"
    shutil.copytree(CONFIGS / "valid", repo)
    for model in repo.iterdir():
        (model / "1").mkdir(exist_ok=True)

    assert triton_refusals(repo) == {}
    assert our_refusals(repo) == {}


def test_generated_dims_and_reshapes_get_the_same_verdict(tmp_path):
    """Every combination of a few dims, reshapes and batching: the rules most easily got wrong."""
    repo = tmp_path / "models"
    dims_choices = [[-1], [2], [0], [1], [4], [2, -1], [2, 2], [-1, 2, 2]]
    reshape_choices = [None, [], [1], [4], [0], [2, 2], [2, -1], [-1, 2], [2, -1, 2], [-1, 4], [-1, -1]]
    for index, (dims, reshape, batch) in enumerate(itertools.product(dims_choices, reshape_choices, (0, 4))):
        reshape_text = "" if reshape is None else f" reshape {{ shape: {reshape} }}"
        tensor = f'name: "x" data_type: TYPE_FP32 dims: {dims}{reshape_text}'
        write_model(repo, f"shape_{index:03d}", f"max_batch_size: {batch}\ninput [ {{ {tensor} }} ]\n{OUTPUT}")

    assert_same_verdicts(repo)
    assert 40 < len(triton_refusals(repo)) < len(list(repo.iterdir()))


def test_generated_batching_options_get_the_same_verdict(tmp_path):
    repo = tmp_path / "models"
    io = f'input [ {{ name: "x" data_type: TYPE_FP32 dims: [1] }} ]\n{OUTPUT}'
    options = itertools.product((0, 1, 3), (0, 1, 3, 5), (False, True), ([], [4], [16], [0]), (None, 0, 2, 4))
    for index, (levels, default, ordering, preferred, policy_level) in enumerate(options):
        policy = (
            ""
            if policy_level is None
            else (
                f"priority_queue_policy {{ key: {policy_level} value: {{ timeout_action: DELAY "
                "default_timeout_microseconds: 100 } }"
            )
        )
        batching = (
            f"dynamic_batching {{ priority_levels: {levels} default_priority_level: {default} "
            f"preserve_ordering: {str(ordering).lower()} preferred_batch_size: {preferred} {policy} }}"
        )
        write_model(repo, f"batching_{index:03d}", f"max_batch_size: 8\n{io}\n{batching}")

    assert_same_verdicts(repo)
    assert 50 < len(triton_refusals(repo)) < len(list(repo.iterdir()))


ENSEMBLE_ERROR = re.compile(r"\] \"Invalid argument: (?P<message>(?:ensemble|circular dependency) .*)\"$")
# These are checked by Triton only once the composing models load, which needs the identity or
# repeat backend this Triton lacks: it stops at "depends on ... which has no loaded version".
NEEDS_LOADED_MODELS = {
    "inconsistent_shape",
    "invalid_batch_size",
    "invalid_decoupled_branching_2",
    "invalid_output_map",
    "no_required_version_2",
}


@pytest.mark.parametrize(
    "case",
    [case for case in sorted((CONFIGS / "invalid-ensemble").iterdir()) if case.name not in NEEDS_LOADED_MODELS],
    ids=lambda case: case.name,
)
def test_ensemble_cases_get_tritons_message(case, tmp_path):
    repo = tmp_path / "models"
    shutil.copytree(case, repo / case.name if (case / "config.pbtxt").is_file() else repo)
    for model in repo.iterdir():
        if model.is_dir():
            (model / "1").mkdir(exist_ok=True)
    result = subprocess.run(
        [
            str(TRITON / "bin" / "tritonserver"),
            f"--model-repository={repo}",
            "--strict-model-config=true",
            f"--backend-directory={TRITON / 'backends'}",
            "--allow-http=false",
            "--allow-grpc=false",
            "--allow-metrics=false",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = (result.stdout + result.stderr).splitlines()
    theirs = [match["message"] for match in map(POLL_FAILED.search, lines) if match]
    theirs += [match["message"] for match in map(ENSEMBLE_ERROR.search, lines) if match]
    ours = [problem.message for problem in check_repository(repo, configs_only=True)]

    assert theirs, "\n".join(lines)
    for message in theirs:
        assert message in ours


def test_configs_the_generator_writes_pass_tritons_own_validation(tmp_path):
    """Issue #11.5: every config `config` writes passes `check`, and Triton agrees: none of these is refused
    at the config stage (the ONNX Runtime backend this Triton lacks fails them later, at load)."""
    import export_like_models
    from onnx_fixtures import fixed_model, sequence_model, settings

    from model_build import pbtxt
    from model_build.onnx_inspect import inspect_model

    sources = tmp_path / "onnx"
    sources.mkdir()
    cases = [
        (export_like_models.bert_like(sources / "bert.onnx"), {"max_batch_size": 8}),
        (export_like_models.tf_style(sources / "tf.onnx"), {"max_batch_size": 4, "warmup": True}),
        (sequence_model(sources / "seq.onnx"), {"max_batch_size": 16, "response_cache": True}),
        # ONNX Runtime batches only on a dynamic first dim (onnxruntime_utils.cc), so a fixed 1 is served unbatched.
        (fixed_model(sources / "yolo.onnx", 1), {"max_batch_size": 0, "dynamic_batching": {"enabled": False}}),
        (fixed_model(sources / "fixed.onnx", 4), {"max_batch_size": 0, "dynamic_batching": {"enabled": False}}),
    ]
    repo = tmp_path / "models"
    for path, fields in cases:
        model_settings = settings(
            path.stem, platform="onnxruntime_onnx", instance_groups=[{"kind": "KIND_CPU"}], **fields
        )
        (repo / path.stem / "1").mkdir(parents=True)
        (repo / path.stem / "config.pbtxt").write_text(pbtxt.generate(inspect_model(path), model_settings, "24.09"))

    assert triton_refusals(repo) == {}
    assert our_refusals(repo) == {}
