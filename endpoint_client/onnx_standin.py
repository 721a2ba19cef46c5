"""ONNX models on the local endpoint: each ONNX Runtime model folder is served by a Python-backend stand-in.

The local Triton (nvidia-pytriton's CPU build, ../shared/README.md "Tooling facts") carries the Python
backend only, so an `onnxruntime_onnx` model would be refused ("unable to find backend library"). After an
archive is extracted, each such model's config.pbtxt is rewritten to `backend: "python"` with the same name,
inputs, outputs, batching and (CPU) instance groups, and the version folders get a model.py that runs the
same model.onnx with ONNX Runtime on the CPU (standins/onnx_runtime_model.py). TensorRT engines cannot run
without a GPU and are left as they are (Triton refuses them, saying why).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.errors import LocalEndpointError

RUNNER = Path(__file__).with_name("standins") / "onnx_runtime_model.py"
ONNX_FILE_PARAMETER = "LOCAL_ENDPOINT_ONNX_FILE"  # read by the runner


def _is_onnx_runtime(config: mc.ModelConfig) -> bool:
    return config.platform == "onnxruntime_onnx" or config.backend == "onnxruntime"


def substitute_onnx_models(repository: Path) -> list[str]:
    """Rewrite every ONNX Runtime model folder of `repository` in place; the names of those rewritten."""
    substituted = []
    for folder in sorted(p for p in repository.iterdir() if p.is_dir() and not p.is_symlink()):
        config_path = folder / "config.pbtxt"
        if not config_path.is_file():
            continue
        try:
            config = text_format.Parse(config_path.read_text(encoding="utf-8"), mc.ModelConfig())
        except (text_format.ParseError, DecodeError, UnicodeDecodeError):
            continue  # Triton itself reports a config it cannot read, with its own message
        if not _is_onnx_runtime(config):
            continue
        model_file = config.default_model_filename or "model.onnx"
        versions = [v for v in folder.iterdir() if v.is_dir() and v.name.isdigit() and (v / model_file).is_file()]
        if not versions:
            raise LocalEndpointError(f"model {folder.name!r}: no version folder holds {model_file}")
        for version in versions:
            shutil.copyfile(RUNNER, version / "model.py")
        config.platform = ""
        config.backend = "python"
        config.default_model_filename = ""
        config.ClearField("optimization")  # ONNX Runtime execution accelerators mean nothing to the stand-in
        config.parameters[ONNX_FILE_PARAMETER].string_value = model_file
        for group in config.instance_group:
            group.kind = mc.ModelInstanceGroup.Kind.KIND_CPU
            del group.gpus[:]
        config_path.write_text(text_format.MessageToString(config), encoding="utf-8")
        substituted.append(folder.name)
    return substituted


def substitution_notice(names: list[str]) -> str | None:
    """What the user is told: these models run substituted, locally only."""
    if not names:
        return None
    return (
        f"note: {', '.join(names)} run(s) on ONNX Runtime (CPU) in a Python-backend stand-in: the local Triton "
        "has the Python backend only. Same inputs and outputs; on SageMaker Triton's onnxruntime backend serves them."
    )
