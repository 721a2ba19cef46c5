"""`model_build export`: argument handling, the refusal without torch, and the check of the ONNX it writes.

torch is not installed here (and must not be): the recipes' own exporters are replaced by small
writers that produce real ONNX graphs with onnx.helper, so the check and the atomic write run for real.
"""

from __future__ import annotations

import builtins
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from model_build import cli
from model_build import export as export_module
from model_build.errors import InvalidModelError, MissingToolError


def identity_graph(path: Path, inputs: tuple[str, ...], *, batch: int | str = "batch") -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", [name], [f"{name}_out"]) for name in inputs],
        "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, 3]) for name in inputs],
        [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [batch, 3]) for name in inputs],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.fixture
def without_torch(monkeypatch):
    real_import = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.split(".")[0] in {"torch", "torchvision", "ultralytics", "transformers"}:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)


@pytest.fixture
def fake_frameworks(monkeypatch):
    """Recipes' imports succeed (their exporters are replaced per test)."""
    monkeypatch.setattr(export_module, "import_module", lambda name: object())


def replace_exporter(monkeypatch, name: str, writer) -> None:
    original = export_module.RECIPES[name]
    monkeypatch.setitem(
        export_module.RECIPES,
        name,
        export_module.Recipe(original.name, original.modules, original.inputs, original.outputs, writer),
    )


@pytest.mark.parametrize(("model", "package"), [("resnet50", "torch"), ("yolov5s", "torch"), ("bert_base", "torch")])
def test_without_torch_the_export_names_the_pip_packages(without_torch, tmp_path, capsys, model, package):
    out = tmp_path / "model.onnx"
    assert cli.main(["export", model, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR: export {model} needs the Python package '{package}' (not installed here); ")
    assert "pip install " + " ".join(export_module.EXPORT_REQUIREMENTS[model]) in err
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_the_missing_framework_itself_is_named(monkeypatch, tmp_path):
    real = export_module.import_module

    def only_torch(name):
        if name == "torch":
            return object()
        if name == "ultralytics":
            raise ModuleNotFoundError(name)
        return real(name)

    monkeypatch.setattr(export_module, "import_module", only_torch)
    with pytest.raises(MissingToolError, match=r"export yolov5s needs the Python package 'ultralytics'"):
        export_module.export_model("yolov5s", tmp_path / "y.onnx")


def test_an_unknown_model_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as raised:
        cli.main(["export", "gpt2", "--out", "x.onnx"])
    assert raised.value.code == 2
    assert "invalid choice: 'gpt2'" in capsys.readouterr().err


def test_out_is_required_and_must_be_onnx(capsys, tmp_path):
    assert cli.main(["export", "resnet50"]) == 1
    assert "ERROR: --out FILE is required to export" in capsys.readouterr().err
    assert cli.main(["export", "resnet50", "--out", str(tmp_path / "model.pt")]) == 1
    assert f"ERROR: --out {tmp_path / 'model.pt'} must be an .onnx file" in capsys.readouterr().err


def test_print_requirements_lists_the_pins(capsys):
    assert cli.main(["export", "bert_base", "--print-requirements"]) == 0
    assert capsys.readouterr().out.split() == list(export_module.EXPORT_REQUIREMENTS["bert_base"])


@pytest.mark.parametrize("model", ["resnet50", "yolov5s", "bert_base"])
def test_a_good_export_is_checked_and_moved_into_place(fake_frameworks, monkeypatch, tmp_path, capsys, model):
    recipe = export_module.RECIPES[model]
    replace_exporter(monkeypatch, model, lambda path: identity_graph(path, recipe.inputs))
    out = tmp_path / "sub" / "model.onnx"
    assert cli.main(["export", model, "--out", str(out)]) == 0
    loaded = onnx.load(str(out))
    assert [i.name for i in loaded.graph.input] == list(recipe.inputs)
    assert f"exported {model} to {out}" in capsys.readouterr().err
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx"]  # no temp file left


def test_a_fixed_batch_axis_is_refused_and_nothing_is_written(fake_frameworks, monkeypatch, tmp_path):
    replace_exporter(monkeypatch, "resnet50", lambda path: identity_graph(path, ("input",), batch=1))
    out = tmp_path / "model.onnx"
    with pytest.raises(InvalidModelError, match=r"input 'input' has a fixed batch dimension \(1\); Triton's dynamic"):
        export_module.export_model("resnet50", out)
    assert list(tmp_path.iterdir()) == []


def test_wrong_input_names_are_refused(fake_frameworks, monkeypatch, tmp_path):
    replace_exporter(monkeypatch, "bert_base", lambda path: identity_graph(path, ("ids", "mask")))
    with pytest.raises(
        InvalidModelError, match=r"inputs are \['ids', 'mask'\], expected \['input_ids', 'attention_mask'\]"
    ):
        export_module.export_model("bert_base", tmp_path / "model.onnx")
    assert list(tmp_path.iterdir()) == []


def test_a_broken_file_is_refused(fake_frameworks, monkeypatch, tmp_path):
    replace_exporter(monkeypatch, "resnet50", lambda path: path.write_bytes(b"not onnx"))
    with pytest.raises(InvalidModelError, match="is not a valid ONNX model"):
        export_module.export_model("resnet50", tmp_path / "model.onnx")
    assert list(tmp_path.iterdir()) == []


def test_an_exporter_crash_leaves_nothing(fake_frameworks, monkeypatch, tmp_path):
    def crash(path):
        path.write_bytes(b"half")
        raise RuntimeError("exporter crashed")

    replace_exporter(monkeypatch, "yolov5s", crash)
    with pytest.raises(RuntimeError, match="exporter crashed"):
        export_module.export_model("yolov5s", tmp_path / "model.onnx")
    assert list(tmp_path.iterdir()) == []
