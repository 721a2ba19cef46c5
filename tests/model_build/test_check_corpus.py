"""`check` measured against Triton's own model-config test suite (../shared/triton-configs).

Each repository is laid out the way Triton's harness does it (triton-inference-server/server
`qa/L0_model_config/test.sh`): for `noautofill_platform` (our `invalid-single/`) the case folder is
copied as a model, every `platform:` line is deleted (`sed -i '/platform:/d'`), `platform: "<p>"` is
appended and an empty version folder `1/` is created; for `autofill_noplatform/ensemble` (our
`invalid-ensemble/`) a case with a top-level config.pbtxt is one model, otherwise the case folder is
the repository. A case passes when the repository is refused and one printed problem contains one of
the case's `expected*` texts (grep patterns in Triton's harness: `\\[` is a literal `[`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT

from model_build.check import check_repository

SHARED = PROJECT_ROOT.parent / "shared"
CONFIGS = SHARED / "triton-configs"
SEED_CONFIGS = SHARED / "seed-configs"
# Triton's harness also runs each case as an ensemble: the `expected_ensemble` texts.
PLATFORMS = ("tensorrt_plan", "onnxruntime_onnx", "ensemble")


def _cases(kind: str) -> list[Path]:
    folder = CONFIGS / kind
    return sorted(path for path in folder.iterdir() if path.is_dir()) if folder.is_dir() else []


def _expected_texts(case: Path) -> list[str]:
    texts = [path.read_text().strip().replace("\\[", "[").replace("\\]", "]") for path in case.glob("expected*")]
    assert texts, f"{case} has no expected* file"
    return texts


def _single_model_repository(case: Path, platform: str, root: Path) -> Path:
    repo = root / "models"
    model = repo / case.name
    shutil.copytree(case, model)
    config = model / "config.pbtxt"
    kept = [line for line in config.read_text().splitlines(keepends=True) if "platform:" not in line]
    # `echo ... >> config.pbtxt`: appended as is, even after a last line without a newline.
    config.write_text("".join(kept) + f'platform: "{platform}"\n')
    (model / "1").mkdir()
    return repo


def _ensemble_repository(case: Path, root: Path) -> Path:
    repo = root / "models"
    if (case / "config.pbtxt").is_file():
        shutil.copytree(case, repo / case.name)
    else:
        shutil.copytree(case, repo)
    for model in repo.iterdir():
        if model.is_dir():
            (model / "1").mkdir(exist_ok=True)
    return repo


def _assert_refused_with(problems, case: Path) -> None:
    lines = [str(problem) for problem in problems]
    expected = _expected_texts(case)
    assert any(text in line for text in expected for line in lines), (
        f"{case.name}: none of {expected} in the problems printed:\n" + "\n".join(lines)
    )


def test_the_corpus_is_complete():
    """Guards the parametrized tests below against silently testing nothing."""
    assert len(_cases("invalid-single")) == 29
    assert len(_cases("invalid-ensemble")) == 16
    assert len(_cases("valid")) == 8
    assert sorted(path.name for path in SEED_CONFIGS.iterdir()) == ["bert", "t5_pytorch", "yolov5s"]


@pytest.mark.parametrize("configs_only", [True, False], ids=["configs-only", "with-files"])
@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("case", _cases("invalid-single"), ids=lambda case: case.name)
def test_invalid_single_model_is_refused_with_tritons_message(case, platform, configs_only, tmp_path):
    repo = _single_model_repository(case, platform, tmp_path)

    problems = check_repository(repo, configs_only=configs_only)

    _assert_refused_with(problems, case)
    assert {problem.model for problem in problems} == {case.name}


@pytest.mark.parametrize("instance_type", ["ml.g5.xlarge", "ml.g5.12xlarge", "ml.c5.xlarge"])
def test_invalid_cpu_is_refused_on_every_target(instance_type, tmp_path):
    """KIND_CPU with `gpus` is refused whatever the GPUs (ValidateInstanceGroup's KIND_CPU branch)."""
    case = CONFIGS / "invalid-single" / "invalid_cpu"
    repo = _single_model_repository(case, "onnxruntime_onnx", tmp_path)

    _assert_refused_with(check_repository(repo, configs_only=True, instance_type=instance_type), case)


@pytest.mark.parametrize("configs_only", [True, False], ids=["configs-only", "with-files"])
@pytest.mark.parametrize("case", _cases("invalid-ensemble"), ids=lambda case: case.name)
def test_invalid_ensemble_is_refused_with_tritons_message(case, configs_only, tmp_path):
    repo = _ensemble_repository(case, tmp_path)

    _assert_refused_with(check_repository(repo, configs_only=configs_only), case)


@pytest.mark.parametrize("instance_type", [None, "ml.g5.xlarge", "ml.m5.xlarge"])
def test_valid_configs_pass(instance_type):
    problems = check_repository(CONFIGS / "valid", configs_only=True, instance_type=instance_type)

    assert [str(problem) for problem in problems] == []


def test_valid_models_with_their_onnx_files_pass(tmp_path):
    """The examples that ship a real model.onnx pass the full check, model files included."""
    repo = tmp_path / "models"
    shipped = [model for model in _cases("valid") if (model / "1").is_dir()]
    assert {model.name for model in shipped} >= {"simple", "simple_string", "simple_sequence"}
    for model in shipped:
        shutil.copytree(model, repo / model.name)

    problems = check_repository(repo, configs_only=False, instance_type="ml.c5.xlarge")

    assert [str(problem) for problem in problems] == []


@pytest.mark.parametrize("instance_type", [None, "ml.g5.xlarge", "ml.g4dn.xlarge"])
def test_seed_configs_pass(instance_type):
    """The article configs (TensorRT and Python backend, no model files shipped) on GPU targets."""
    problems = check_repository(SEED_CONFIGS, configs_only=True, instance_type=instance_type)

    assert [str(problem) for problem in problems] == []


def test_seed_configs_are_refused_on_a_cpu_instance_type():
    problems = [
        str(problem) for problem in check_repository(SEED_CONFIGS, configs_only=True, instance_type="ml.c5.xlarge")
    ]

    assert (
        "bert: instance_group[0]: instance group bert_0 of model bert has kind KIND_GPU but no GPUs are available "
        "(instance type ml.c5.xlarge has no GPU) [gpu-count]"
    ) in problems
    assert any(line.startswith("yolov5s: platform: platform tensorrt_plan needs a GPU") for line in problems)
    assert any("t5_pytorch_0 of model t5_pytorch has kind KIND_GPU" in line for line in problems)
