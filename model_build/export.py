"""Export the default config's reference models to ONNX: resnet50, yolov5s, bert_base.

Runs inside the CodeBuild model build, where the internet is reachable and the buildspec installs
the recipe's packages (pinned in EXPORT_REQUIREMENTS). Each framework is imported only when its
recipe runs, so everything else in model_build works without torch; without it the export stops
with MissingToolError naming the pip packages.

Every export has a dynamic batch axis (Triton's dynamic batcher and TensorRT's optimisation
profile vary it) and the input names the project's clients send (endpoint_client.presets):
- resnet50 (torchvision, ImageNet weights): input  FP32 [N, 3, 224, 224] -> output  FP32 [N, 1000]
- yolov5s (ultralytics `yolov5su.pt`):       images FP32 [N, 3, 640, 640] -> output0 FP32 [N, 84, 8400]
- bert_base (transformers bert-base-uncased): input_ids, attention_mask INT32 [N, 128]
  -> last_hidden_state FP32 [N, 128, 768], pooler_output FP32 [N, 768]
The ONNX file is written to a temporary file beside the target, checked (names, dynamic batch
axis, onnx.checker), and only then moved into place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from model_build.atomic import atomic_path
from model_build.errors import InvalidModelError, MissingToolError, ModelBuildError

OPSET = 17
BERT_SEQUENCE_LENGTH = 128
BATCH_AXIS = "batch"
# Installed by the buildspec for export sources only (Python 3.10 in the Triton 24.x images).
EXPORT_REQUIREMENTS = {
    "resnet50": ("torch==2.5.1", "torchvision==0.20.1"),
    "yolov5s": ("torch==2.5.1", "torchvision==0.20.1", "ultralytics==8.3.40"),
    "bert_base": ("torch==2.5.1", "transformers==4.46.3"),
}


@dataclass(frozen=True)
class Recipe:
    name: str
    modules: tuple[str, ...]  # imported lazily; the first missing one is reported
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    export: Callable[[Path], None]  # writes the ONNX file at the given path

    @property
    def pip_install(self) -> str:
        return "pip install " + " ".join(EXPORT_REQUIREMENTS[self.name])


def _import(module: str, recipe: str):
    try:
        return import_module(module)
    except ImportError:
        packages = " ".join(EXPORT_REQUIREMENTS[recipe])
        raise MissingToolError(
            f"export {recipe} needs the Python package '{module.split('.')[0]}' (not installed here); "
            f"run `pip install {packages}` first. The CodeBuild model build installs it for export sources."
        ) from None


def _dynamic_batch(names: tuple[str, ...]) -> dict[str, dict[int, str]]:
    return {name: {0: BATCH_AXIS} for name in names}


def _export_resnet50(path: Path) -> None:
    torch = _import("torch", "resnet50")
    models = _import("torchvision.models", "resnet50")
    model = models.resnet50(weights=models.ResNet50_Weights.DEFAULT).eval()
    sample = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.onnx.export(
            model,
            (sample,),
            str(path),
            input_names=list(RECIPES["resnet50"].inputs),
            output_names=list(RECIPES["resnet50"].outputs),
            dynamic_axes=_dynamic_batch(RECIPES["resnet50"].inputs + RECIPES["resnet50"].outputs),
            opset_version=OPSET,
        )


def _export_yolov5s(path: Path) -> None:
    _import("torch", "yolov5s")
    ultralytics = _import("ultralytics", "yolov5s")
    with tempfile.TemporaryDirectory() as work:
        # Ultralytics downloads the weights into the working folder and writes the ONNX beside them.
        previous = Path.cwd()
        os.chdir(work)
        try:
            model = ultralytics.YOLO("yolov5su.pt")
            exported = Path(model.export(format="onnx", dynamic=True, opset=OPSET, simplify=False, imgsz=640))
        finally:
            os.chdir(previous)
        # Copied, not renamed: `path` is export_model's temp beside the target (model_build.atomic),
        # which renames it into place once checked; the work folder may be on another file system.
        shutil.copyfile(exported if exported.is_absolute() else Path(work) / exported, path)


def _export_bert_base(path: Path) -> None:
    torch = _import("torch", "bert_base")
    transformers = _import("transformers", "bert_base")
    model = transformers.BertModel.from_pretrained("bert-base-uncased", torchscript=True).eval()
    # INT32 ids: what the clients send (TensorRT and Triton take INT32 natively).
    ids = torch.ones(1, BERT_SEQUENCE_LENGTH, dtype=torch.int32)
    mask = torch.ones(1, BERT_SEQUENCE_LENGTH, dtype=torch.int32)
    recipe = RECIPES["bert_base"]
    with torch.no_grad():
        torch.onnx.export(
            model,
            (ids, mask),
            str(path),
            input_names=list(recipe.inputs),
            output_names=list(recipe.outputs),
            dynamic_axes=_dynamic_batch(recipe.inputs + recipe.outputs),
            opset_version=OPSET,
        )


RECIPES: dict[str, Recipe] = {
    "resnet50": Recipe("resnet50", ("torch", "torchvision"), ("input",), ("output",), _export_resnet50),
    "yolov5s": Recipe("yolov5s", ("torch", "ultralytics"), ("images",), ("output0",), _export_yolov5s),
    "bert_base": Recipe(
        "bert_base",
        ("torch", "transformers"),
        ("input_ids", "attention_mask"),
        ("last_hidden_state", "pooler_output"),
        _export_bert_base,
    ),
}


def recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ModelBuildError(f"no export recipe {name!r}; available: {', '.join(RECIPES)}") from None


def check_exported(path: Path, expected: Recipe) -> None:
    """The exported graph is valid ONNX with the expected input names and a dynamic batch axis."""
    import onnx

    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as error:  # onnx raises several unrelated types for a broken file
        raise InvalidModelError(f"export {expected.name}: {path} is not a valid ONNX model: {error}") from None
    initializers = {init.name for init in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    names = tuple(i.name for i in inputs)
    if names != expected.inputs:
        raise InvalidModelError(
            f"export {expected.name}: inputs are {list(names)}, expected {list(expected.inputs)} "
            "(the names the config and the clients use)"
        )
    for tensor in inputs:
        dims = tensor.type.tensor_type.shape.dim
        if not dims or dims[0].HasField("dim_value"):
            first = dims[0].dim_value if dims else "none"
            raise InvalidModelError(
                f"export {expected.name}: input {tensor.name!r} has a fixed batch dimension ({first}); "
                "Triton's dynamic batching needs a dynamic first axis"
            )


def export_model(name: str, out: Path) -> Path:
    """Export recipe `name` to `out` (an .onnx file); nothing is left at `out` on failure."""
    chosen = recipe(name)
    for module in chosen.modules:
        _import(module, name)  # fail before any work, naming the missing package
    with atomic_path(out) as temp:
        chosen.export(temp)
        check_exported(temp, chosen)
    return out
