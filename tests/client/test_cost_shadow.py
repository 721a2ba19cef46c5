"""The cost report counts a shadow variant (issue #26 part 4): its instances cost like any variant's, at its fixed
count (a shadow is not autoscaled: docs/serving.md "Shadow tests"), and its model's GPU build is one more build
when the shadow's instance type needs another GPU target. SageMaker bills a shadow variant's instances like the
production variant's ("Shadow tests": the shadow runs on its own instances)."""

from __future__ import annotations

from pathlib import Path

from test_cost import run_json, snapshot_file, stage_file

HOURS = 730


def _with_shadow(data: dict) -> None:
    bert = next(e for e in data["endpoints"] if e["name"] == "triton-bert")
    bert["shadow"] = {"model": "yolov5s", "instance_type": "ml.g6.xlarge", "initial_instance_count": 3,
                      "sampling_percent": 50}  # fmt: skip


def test_the_shadow_variant_is_a_row_at_its_fixed_count(tmp_path: Path, capsys) -> None:
    config = stage_file(tmp_path, _with_shadow)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.5, "ml.g6.xlarge": 1.0}, build_minute=0.25)
    report = run_json(capsys, "--config", str(config), "--price-source", "snapshot", "--price-snapshot", str(prices))
    bert = next(r for r in report["endpoints"] if r["name"] == "triton-bert")
    shadow = next(v for v in bert["variants"] if v["name"] == "Shadow")
    assert shadow["instance_type"] == "ml.g6.xlarge"
    assert shadow["instances_min"] == shadow["instances_max"] == 3
    assert shadow["monthly_usd_min"] == shadow["monthly_usd_max"] == 1.0 * 3 * HOURS
    assert bert["monthly_usd_min"] == 1.5 * 1 * HOURS + 1.0 * 3 * HOURS


def test_the_shadow_models_build_for_its_gpu_is_counted(tmp_path: Path, capsys) -> None:
    config = stage_file(tmp_path, _with_shadow)
    prices = snapshot_file(tmp_path, {"ml.g5.xlarge": 1.5, "ml.g6.xlarge": 1.0}, build_minute=0.25)
    report = run_json(capsys, "--config", str(config), "--price-source", "snapshot", "--price-snapshot", str(prices))
    targets = {(b["model"], b["gpu_target"]) for b in report["gpu_builds"]["builds"]}
    assert ("yolov5s", "sm86") in targets
    assert any(model == "yolov5s" and target != "sm86" for model, target in targets), targets
