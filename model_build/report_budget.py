"""The build report's worst-case time in the CodeBuild build (docs/build.md "Build report", "Tuning").

The build check starts a Triton on the engine and the ONNX reference (bounded by STARTUP_SECONDS), compares them,
load-tests the engine at CHECK_CONCURRENCY for CHECK_SECONDS each after a warm-up of at most WARMUP_SECONDS
(endpoint_client.loadtest's plan), and, with `tune:`, load-tests every candidate at each of `tune.concurrency` for
`tune.seconds` after the same warm-up. All of it runs inside the one CodeBuild build, whose timeout
(`build.timeout_minutes`, CodeBuild's TimeoutInMinutes) ends the build, the artifact unbuilt: a config whose
measurement alone cannot fit is refused when it is loaded, with the numbers.

Kept free of endpoint_client so stage_config may import it (docs/architecture.md); endpoint_client.build_check
takes its defaults from here.
"""

from __future__ import annotations

from pathlib import Path

from serving_facts.settings import ModelSettings

CHECK_CONCURRENCY = (1, 2, 4)
CHECK_SECONDS = 5.0
WARMUP_SECONDS = 1.0  # loadtest's warm-up per level in the build: min(1 s, seconds)
STARTUP_SECONDS = 300.0  # build_check_cli --startup-timeout's default: both models loaded within it


def tune_candidate_count(settings: ModelSettings) -> int:
    if settings.tune is None:
        return 0
    grid = settings.tune.candidates
    if not settings.dynamic_batching.enabled:
        return len(grid.instance_counts)
    return (
        len(grid.instance_counts)
        * max(len(grid.max_queue_delay_microseconds), 1)
        * max(len(grid.preferred_batch_sizes), 1)
    )


def worst_case_seconds(settings: ModelSettings) -> tuple[float, float]:
    """(check seconds, tuning seconds) at most: check = startup + levels x (seconds + warm-up); tuning =
    candidates x levels x (seconds + warm-up)."""
    check = STARTUP_SECONDS + len(CHECK_CONCURRENCY) * (CHECK_SECONDS + min(WARMUP_SECONDS, CHECK_SECONDS))
    if settings.tune is None:
        return check, 0.0
    tune = settings.tune
    per_level = tune.seconds + min(WARMUP_SECONDS, tune.seconds)
    return check, tune_candidate_count(settings) * len(tune.concurrency) * per_level


def budget_problem(settings: ModelSettings, timeout_minutes: int) -> str | None:
    """Why the model's build report cannot fit `build.timeout_minutes`, or None."""
    if not settings.needs_gpu_build:
        return None
    check, tuning = worst_case_seconds(settings)
    limit = timeout_minutes * 60
    if check + tuning <= limit:
        return None
    tune = settings.tune
    detail = (
        f"tuning {tune_candidate_count(settings)} candidates x {len(tune.concurrency)} levels x "
        f"({tune.seconds:g} + {min(WARMUP_SECONDS, tune.seconds):g}) s = {tuning:g} s"
        if tune is not None
        else "no tuning"
    )
    return (
        f"the build report takes up to {check + tuning:g} s (check {check:g} s: startup {STARTUP_SECONDS:g} s + "
        f"{len(CHECK_CONCURRENCY)} levels x ({CHECK_SECONDS:g} + {WARMUP_SECONDS:g}) s; {detail}), more than "
        f"build.timeout_minutes {timeout_minutes} ({limit} s), before the engine is even built; fewer tune "
        "candidates, tune.concurrency levels or tune.seconds, or a longer build.timeout_minutes"
    )


def samples_problem(settings: ModelSettings, base_dir: Path) -> str | None:
    """Why `tensorrt.accuracy.samples` cannot ship with the build, or None (an s3:// URI is read as configured)."""
    accuracy = settings.tensorrt.accuracy
    if not settings.needs_gpu_build or accuracy is None or accuracy.samples is None:
        return None
    if accuracy.samples.startswith("s3://"):
        return None
    root = base_dir.resolve()
    path = (root / accuracy.samples).resolve()
    if not path.is_relative_to(root):
        return f"{accuracy.samples!r} lies outside the project ({root}); the build stack ships files of the project"
    if not path.is_file():
        return f"{accuracy.samples!r}: no such file in the project (an .npz holding every input by name)"
    return None
