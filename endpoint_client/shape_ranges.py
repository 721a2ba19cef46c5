"""A TensorRT model's shape ranges for the local endpoint, from the stage config its engine is built from.

The engine's optimisation profile is what the build passes to trtexec (--minShapes / --maxShapes):
model_build.trt.shape_profiles, from the model's `tensorrt` settings and `max_batch_size` in the stage
config. The local endpoint runs the ONNX file instead of the engine (onnx_standin.py) and, given these
ranges, refuses what the engine would (issue 22 B5).
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.errors import LocalEndpointError
from endpoint_client.onnx_standin import ONNX_FOR_ENGINE, TENSORRT, ShapeRanges


def _tensorrt_folders(repository: Path) -> list[Path]:
    found = []
    for folder in sorted(p for p in repository.iterdir() if p.is_dir() and not p.is_symlink()):
        try:
            config = text_format.Parse((folder / "config.pbtxt").read_text(encoding="utf-8"), mc.ModelConfig())
        except (OSError, text_format.ParseError, DecodeError, UnicodeDecodeError):
            continue
        if config.platform == TENSORRT or config.backend == "tensorrt":
            found.append(folder)
    return found


def tensorrt_shape_ranges(stage_config: Path, repository: Path) -> dict[str, ShapeRanges]:
    """Model folder name -> {input: (min, max)} for every TensorRT model of `repository` (before substitution),
    as `stage_config` builds its engine; refuses a TensorRT model the stage config does not describe."""
    from model_build.app_config import load_model_settings  # the CDK-free build tooling, needed only here
    from model_build.errors import ToolError
    from model_build.onnx_inspect import inspect_model
    from model_build.trt import shape_profiles

    ranges: dict[str, ShapeRanges] = {}
    for folder in _tensorrt_folders(repository):
        onnx = next(iter(sorted(folder.glob(f"[0-9]*/{ONNX_FOR_ENGINE}"))), None)
        if onnx is None:
            continue  # onnx_standin refuses it, saying what to add
        try:
            settings, _ = load_model_settings(stage_config, folder.name)
            if settings.platform != TENSORRT:
                raise LocalEndpointError(
                    f"--stage-config {stage_config}: model {folder.name!r} is {settings.platform} there, but the "
                    f"archive's config.pbtxt says {TENSORRT}: give the stage config the archive was packaged from"
                )
            profiles = shape_profiles(inspect_model(onnx), settings)
        except ToolError as error:
            if isinstance(error, LocalEndpointError):
                raise
            raise LocalEndpointError(f"--stage-config: model {folder.name!r}: {error}") from None
        ranges[folder.name] = {profile.input: (profile.min, profile.max) for profile in profiles}
    return ranges
