"""Held-out measure of `check` against Triton's own model-config suite (qa/L0_model_config).

The cases live in tests/model_build/data/triton_qa_l0_model_config/ (copied from the Triton server
repository; SOURCE.md says which, from which commit, and why the others are left out). They are run
the way Triton's harness `qa/L0_model_config/test.sh` runs them: `noautofill_platform` once per
platform of its TRIALS with `platform:` rewritten, the ensemble repositories whole, one GPU visible
(`CUDA_VISIBLE_DEVICES=0`; here ml.g5.xlarge, one A10G). A case matches when a printed problem
matches one of its `expected*` files as grep's basic regular expression, as the harness greps the
server log. The issue's goal: Triton's own wording for >= 95% of the cases, every case refused.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from model_build.check import check_repository

DATA = Path(__file__).parent / "data" / "triton_qa_l0_model_config"
TRIALS = ("tensorrt_plan", "onnxruntime_onnx", "pytorch_libtorch")  # test.sh: TRIALS=...
GPU_CASES = ("invalid_cpu", "invalid_gpu", "negative_gpu")  # test.sh makes 1/ for these only
ONE_GPU = "ml.g5.xlarge"
RELEASE = "25.09"  # a release whose minimum compute capability (7.5) the A10G (8.6) meets


def grep_pattern(text: str) -> re.Pattern[str]:
    """grep's basic regular expression as Python's: `.`, `*`, `[...]`, `^`, `$` special, `\\x` literal."""
    out, index = "", 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            out += re.escape(text[index + 1])
            index += 2
            continue
        out += char if char in ".*[]^$" else re.escape(char)
        index += 1
    return re.compile(out)


@dataclass(frozen=True)
class Case:
    label: str
    folder: Path  # holds the expected* files
    build: object  # (case folder, repository path) -> None


def _noautofill(case: Path, platform: str, repo: Path) -> None:
    model = repo / case.name
    shutil.copytree(case, model)
    config = model / "config.pbtxt"
    kept = [line for line in config.read_text().splitlines(keepends=True) if "platform:" not in line]
    config.write_text("".join(kept) + f'platform: "{platform}"\n')
    if case.name in GPU_CASES:
        (model / "1").mkdir()


def _repository(case: Path, repo: Path) -> None:
    """test.sh: a case with a top-level config.pbtxt is one model, else the case is the repository."""
    if (case / "config.pbtxt").is_file():
        shutil.copytree(case, repo / case.name)
    else:
        shutil.copytree(case, repo)
    for path in list(repo.rglob("expected*")):
        path.unlink()
    for model in repo.iterdir():
        (model / "1").mkdir(exist_ok=True)


def _model_metrics(case: Path, repo: Path) -> None:
    model = repo / case.name
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("")  # test.sh copies the Python model; its content is not read here
    base = (DATA / "python_models" / "async_execute_decouple" / "config.pbtxt").read_text()
    (model / "config.pbtxt").write_text(base + (case / "partial.pbtxt").read_text())


def _folders(relative: str) -> list[Path]:
    return sorted(path for path in (DATA / relative).iterdir() if path.is_dir())


def refused_cases() -> list[Case]:
    cases = [
        Case(f"noautofill_platform/{case.name}/{platform}", case, lambda c, r, p=platform: _noautofill(c, p, r))
        for case in _folders("noautofill_platform")
        for platform in TRIALS
    ]
    cases += [Case(f"ensemble/{case.name}", case, _repository) for case in _folders("autofill_noplatform/ensemble")]
    metrics = _folders("model_metrics/invalid_config")
    cases += [Case(f"model_metrics/{case.name}", case, _model_metrics) for case in metrics]
    for relative in ("autofill_noplatform/custom/no_delimiter", "special_cases/invalid_platform"):
        cases.append(Case(relative, DATA / relative, _repository))
    return cases


def run_case(case: Case, root: Path) -> tuple[bool, list[str]]:
    """(matched Triton's text, the problems printed) for one case."""
    repo = root / case.label.replace("/", "__") / "models"
    repo.parent.mkdir(parents=True)
    case.build(case.folder, repo)
    lines = [str(p) for p in check_repository(repo, instance_type=ONE_GPU, triton_release=RELEASE)]
    patterns = [grep_pattern(path.read_text().strip()) for path in sorted(case.folder.glob("expected*"))]
    assert patterns, f"{case.folder} has no expected* file"
    return any(pattern.search(line) for pattern in patterns for line in lines), lines


def test_the_copied_suite_is_complete():
    """Guards the measure below against silently shrinking: the counts of SOURCE.md."""
    assert len(_folders("noautofill_platform")) == 58
    assert len(_folders("autofill_noplatform/ensemble")) == 32
    assert len(_folders("model_metrics/invalid_config")) == 6
    assert len(_folders("autofill_noplatform_success/ensemble")) == 4
    assert len(refused_cases()) == 58 * 3 + 32 + 6 + 2


def test_check_speaks_tritons_words_for_at_least_95_percent_of_its_own_cases(tmp_path):
    cases = refused_cases()
    results = {case.label: run_case(case, tmp_path) for case in cases}

    unrefused = [label for label, (_, lines) in results.items() if not lines]
    misses = {label: lines for label, (matched, lines) in results.items() if not matched}
    rate = 1 - len(misses) / len(cases)
    assert unrefused == [], f"accepted although Triton refuses: {unrefused}"
    assert rate >= 0.95, f"Triton's wording for {rate:.1%} of {len(cases)} cases; misses: {misses}"


@pytest.mark.parametrize("case", _folders("autofill_noplatform_success/ensemble"), ids=lambda path: path.name)
def test_ensembles_triton_accepts_pass(case, tmp_path):
    repo = tmp_path / "models"
    _repository(case, repo)

    problems = check_repository(repo, configs_only=True, instance_type=ONE_GPU, triton_release=RELEASE)

    assert [str(problem) for problem in problems] == []
