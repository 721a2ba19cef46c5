"""Review L3: `model_build check` passed an empty folder named `1/model.onnx` and `package` shipped it.

Sources: onnxruntime_backend src/onnxruntime.cc (LoadModel: "If the model path is a directory then the actual
model is <dir>/model.onnx", then "unable to find '<path>'" when that file is missing); tensorrt_backend
src/loader.cc (LoadPlan reads the plan with ReadTextFile, a file).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from model_fixtures import onnx_matching
from test_check_rules import onnx_config, write_model

from model_build.check import check_repository
from model_build.errors import ModelBuildError
from model_build.package import package_repository


def test_an_empty_folder_named_model_onnx_is_refused_naming_the_path(tmp_path: Path) -> None:
    """onnxruntime_backend LoadModel: a folder model is <dir>/model.onnx, which an empty folder lacks."""
    write_model(tmp_path, "m", onnx_config(), {"1/model.onnx/": ""})
    problems = check_repository(tmp_path)
    assert [(p.field, p.rule) for p in problems] == [("1/model.onnx", "model-file")]
    assert "1/model.onnx is a folder without a model.onnx file" in problems[0].message


def test_a_folder_holding_other_files_but_no_model_onnx_is_refused(tmp_path: Path) -> None:
    """onnxruntime_backend LoadModel: only <dir>/model.onnx is read, whatever else the folder holds."""
    write_model(tmp_path, "m", onnx_config(), {"1/model.onnx/weights.bin": "x"})
    assert [p.field for p in check_repository(tmp_path)] == ["1/model.onnx"]


@pytest.mark.parametrize("filename", ["model.onnx", "detector.onnx"])
def test_a_folder_model_holding_model_onnx_is_what_onnxruntime_loads(tmp_path: Path, filename: str) -> None:
    """onnxruntime_backend LoadModel: `<version>/<default_model_filename>/model.onnx` is a valid model, also
    under another default_model_filename (the inner file is always model.onnx)."""
    extra = f'default_model_filename: "{filename}"' if filename != "model.onnx" else ""
    config = onnx_config(extra=extra)
    write_model(tmp_path, "m", config, {f"1/{filename}/": ""})
    (tmp_path / "m" / "1" / filename / "model.onnx").write_bytes(onnx_matching(config))
    assert check_repository(tmp_path) == []


def test_a_folder_named_model_plan_is_refused(tmp_path: Path) -> None:
    """tensorrt_backend LoadPlan reads the engine with ReadTextFile: a folder is never a plan."""
    config = onnx_config().replace("onnxruntime_onnx", "tensorrt_plan")
    write_model(tmp_path, "m", config, {"1/model.plan/": ""})
    problems = check_repository(tmp_path)
    assert [(p.field, p.rule) for p in problems] == [("1/model.plan", "model-file")]
    assert "1/model.plan is a folder: tensorrt reads the model from a file" in problems[0].message


def test_package_refuses_an_empty_folder_named_model_onnx_and_writes_nothing(tmp_path: Path) -> None:
    """Review L3: `package` (which runs check first) shipped the empty folder; now it names it."""
    repo = tmp_path / "repo"
    write_model(repo, "m", onnx_config(), {"1/model.onnx/": ""})
    out = tmp_path / "out"
    with pytest.raises(ModelBuildError, match=r"1/model\.onnx is a folder without a model\.onnx file"):
        package_repository(repo, out)
    assert not out.exists() or not any(out.iterdir())
