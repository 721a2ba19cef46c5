"""Read a `config.pbtxt` with Triton's `ModelConfig` schema and fill in what Triton fills before validating.

Triton reads the file with protobuf's text parser (`ReadTextProto`), then runs
`AutoCompleteBackendFields` and `NormalizeModelConfig` (triton-inference-server/core
`src/model_config_utils.cc`) even with `--strict-model-config=true`: the model name from the folder,
`backend` from `platform` or from the model file in the first version folder, `default_model_filename`,
the default version policy. Later rules see the filled-in config, exactly as Triton's do.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from model_build.check.problems import Problem

ModelConfig = model_config_pb2.ModelConfig

ENSEMBLE_PLATFORM = "ensemble"
TENSORRT_PLATFORM = "tensorrt_plan"
ONNX_PLATFORM = "onnxruntime_onnx"
LIBTORCH_PLATFORM = "pytorch_libtorch"
SAVEDMODEL_PLATFORM = "tensorflow_savedmodel"
GRAPHDEF_PLATFORM = "tensorflow_graphdef"

TENSORRT_BACKEND = "tensorrt"
ONNX_BACKEND = "onnxruntime"
PYTORCH_BACKEND = "pytorch"
TENSORFLOW_BACKEND = "tensorflow"
OPENVINO_BACKEND = "openvino"
PYTHON_BACKEND = "python"

PLAN_FILE = "model.plan"
ONNX_FILE = "model.onnx"
LIBTORCH_FILE = "model.pt"
SAVEDMODEL_FILE = "model.savedmodel"
GRAPHDEF_FILE = "model.graphdef"
OPENVINO_FILE = "model.xml"
PYTHON_FILE = "model.py"

# Triton's GetBackendType / GetBackendTypeFromPlatform: the backends whose platform must agree.
KNOWN_BACKEND_PLATFORMS = {
    TENSORRT_BACKEND: {TENSORRT_PLATFORM},
    ONNX_BACKEND: {ONNX_PLATFORM},
    PYTORCH_BACKEND: {LIBTORCH_PLATFORM},
    TENSORFLOW_BACKEND: {SAVEDMODEL_PLATFORM, GRAPHDEF_PLATFORM},
}


def parse_config(text: str, *, model: str, source: str = "config.pbtxt") -> tuple[ModelConfig | None, list[Problem]]:
    """Parse `text` strictly: unknown fields, bad enum values and repeated singular fields are refused.

    `text_format.Parse` (not `Merge`) matches Triton's C++ `TextFormat::ParseFromString`, which
    forbids a singular field given twice.
    """
    config = ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as error:
        return None, [Problem(model, "config.pbtxt", f"failed to read text proto from {source}: {error}", "schema")]
    return config, []


def _is_file(folder: Path | None, name: str) -> bool:
    return folder is not None and (folder / name).is_file()


def _is_dir(folder: Path | None, name: str) -> bool:
    return folder is not None and (folder / name).is_dir()


def _exists(folder: Path | None, name: str) -> bool:
    return folder is not None and (folder / name).exists()


def autocomplete(config: ModelConfig, *, folder_name: str, first_version: Path | None = None) -> list[Problem]:
    """Triton's `AutoCompleteBackendFields`, in place.

    `first_version` is the first version folder (Triton takes the first of the sorted folder names)
    whose files may reveal the backend; None when there is none or files are not being looked at.
    """
    if not config.name:
        config.name = folder_name
    platform, backend, filename = config.platform, config.backend, config.default_model_filename

    # TensorFlow: the platform is needed, so it is derived first.
    if not platform and backend in ("", TENSORFLOW_BACKEND):
        if filename == SAVEDMODEL_FILE or (not filename and _is_dir(first_version, SAVEDMODEL_FILE)):
            config.platform = SAVEDMODEL_PLATFORM
        elif filename == GRAPHDEF_FILE or (not filename and _is_file(first_version, GRAPHDEF_FILE)):
            config.platform = GRAPHDEF_PLATFORM
    if config.platform in (SAVEDMODEL_PLATFORM, GRAPHDEF_PLATFORM):
        config.backend = config.backend or TENSORFLOW_BACKEND
        if not config.default_model_filename:
            config.default_model_filename = SAVEDMODEL_FILE if config.platform == SAVEDMODEL_PLATFORM else GRAPHDEF_FILE
        return []

    # Without a backend, a config belongs to a backend through its platform, its default_model_filename,
    # or (nothing of either given) the model file found in the first version folder.
    nothing_given = not config.platform and not config.default_model_filename

    def claimed(platform: str | None, model_file: str, found: bool) -> bool:
        by_name = (platform is not None and config.platform == platform) or filename == model_file
        return not config.backend and (by_name or (nothing_given and found))

    if claimed(TENSORRT_PLATFORM, PLAN_FILE, _is_file(first_version, PLAN_FILE)):
        config.backend = TENSORRT_BACKEND
    if config.backend == TENSORRT_BACKEND:
        config.platform = config.platform or TENSORRT_PLATFORM
        config.default_model_filename = config.default_model_filename or PLAN_FILE
        return []

    # An ONNX model may be a file or, for models over 2 GB, a folder.
    if claimed(ONNX_PLATFORM, ONNX_FILE, _exists(first_version, ONNX_FILE)):
        config.backend = ONNX_BACKEND
    if config.backend == ONNX_BACKEND:
        config.platform = config.platform or ONNX_PLATFORM
        config.default_model_filename = config.default_model_filename or ONNX_FILE
        return []

    if claimed(None, OPENVINO_FILE, _exists(first_version, OPENVINO_FILE)):
        config.backend = OPENVINO_BACKEND
    if config.backend == OPENVINO_BACKEND:
        config.default_model_filename = config.default_model_filename or OPENVINO_FILE
        return []

    if claimed(LIBTORCH_PLATFORM, LIBTORCH_FILE, _is_file(first_version, LIBTORCH_FILE)):
        config.backend = PYTORCH_BACKEND
    if config.backend == PYTORCH_BACKEND:
        if not config.platform:
            config.platform = LIBTORCH_PLATFORM
            config.default_model_filename = config.default_model_filename or LIBTORCH_FILE
        return []

    if claimed(None, PYTHON_FILE, _exists(first_version, PYTHON_FILE)):
        config.backend = PYTHON_BACKEND
    if config.backend == PYTHON_BACKEND:
        config.default_model_filename = config.default_model_filename or PYTHON_FILE
        return []

    if not config.backend and not config.platform and not config.default_model_filename:
        # Custom backend: Triton reads the backend name from a folder named "model.<backend>".
        _, dot, backend_name = config.name.partition(".")
        if not dot:
            return [
                Problem(
                    config.name,
                    "backend",
                    f"Invalid model name: Could not determine backend for model '{config.name}' with no backend in "
                    "model configuration. Expected model name of the form 'model.<backend_name>'.",
                    "backend-required",
                )
            ]
        config.backend = backend_name
        config.default_model_filename = f"model.{backend_name}"
    return []


def normalize(config: ModelConfig) -> None:
    """Triton's `NormalizeModelConfig` parts that later rules read: the default version policy."""
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1


def expected_model_file(config: ModelConfig, *, compute_capability: str | None = None) -> str | None:
    """The file (or folder) each version folder must hold for this completed config; None when not known.

    Ensembles have no model file. A custom backend decides for itself, so nothing is required of it.
    `cc_model_filenames` (TensorRT engines per GPU compute capability) wins when the target GPU's
    capability is listed.
    """
    if config.platform == ENSEMBLE_PLATFORM:
        return None
    if compute_capability and compute_capability in config.cc_model_filenames:
        return config.cc_model_filenames[compute_capability]
    if config.default_model_filename:
        return config.default_model_filename
    defaults = {
        TENSORRT_BACKEND: PLAN_FILE,
        ONNX_BACKEND: ONNX_FILE,
        PYTORCH_BACKEND: LIBTORCH_FILE,
        OPENVINO_BACKEND: OPENVINO_FILE,
        PYTHON_BACKEND: PYTHON_FILE,
    }
    return defaults.get(config.backend)
