"""Propose a `models:` entry for an ONNX file: what `python -m model_build init` prints or appends.

The proposal is read from the graph (inputs, outputs, dynamic axes and their ONNX `dim_param` names)
and then proven the way the build will use it: the entry is validated by the same settings schema,
its config.pbtxt is generated and passed through `check`, and for TensorRT the trtexec command is
generated. A proposal that would fail in the build is never printed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from model_build import pbtxt
from model_build.app_config import format_validation_error
from model_build.catalogue import UnknownInstanceTypeError, instance_type
from model_build.check import check_model_config
from model_build.errors import ModelBuildError
from model_build.onnx_inspect import DYNAMIC, TensorSpec, inspect_model, load_model
from model_build.settings import ModelSettings
from model_build.trt import trtexec_argv

# A guess for a dynamic axis that is not the batch: the user must set the range their requests use.
DYNAMIC_AXIS_GUESS = {"min": 1, "opt": 128, "max": 512}
BATCHING_MAX_BATCH_SIZE = ModelSettings.model_fields["max_batch_size"].default  # the settings schema's default


@dataclass
class Proposal:
    entry: dict  # the `models:` entry, ready for YAML
    notes: list[str] = field(default_factory=list)  # why each choice was made; printed as comments
    adjust: list[str] = field(default_factory=list)  # values that are guesses the user must confirm


def _dim_params(onnx_path: Path) -> dict[str, tuple[str, ...]]:
    """Each graph input's ONNX dim_param per axis ("" where the axis has none)."""
    model = load_model(onnx_path)
    return {
        value_info.name: tuple(dim.dim_param for dim in value_info.type.tensor_type.shape.dim)
        for value_info in model.graph.input
    }


def _batch_axis_blocker(tensors: tuple[TensorSpec, ...]) -> TensorSpec | None:
    """The first tensor whose first axis is not dynamic (Triton batches on a dynamic first axis)."""
    return next((spec for spec in tensors if spec.rank == 0 or spec.dims[0] != DYNAMIC), None)


def _shape_ranges(inputs: tuple[TensorSpec, ...], batching: bool, dim_params: dict[str, tuple[str, ...]]):
    """tensorrt.shapes for every input with a dynamic axis besides the batch; shared dim_params agree."""
    shapes, guessed = [], []
    for spec in inputs:
        axes = spec.dims[1:] if batching else spec.dims
        params = dim_params.get(spec.name, ())[1:] if batching else dim_params.get(spec.name, ())
        if DYNAMIC not in axes:
            continue
        ranges: dict[str, list[int]] = {"min": [], "opt": [], "max": []}
        for position, dim in enumerate(axes):
            for which in ranges:
                ranges[which].append(DYNAMIC_AXIS_GUESS[which] if dim == DYNAMIC else dim)
            if dim == DYNAMIC:
                name = params[position] if position < len(params) and params[position] else f"axis {position}"
                guessed.append(f"{spec.name} {name}")
        shapes.append({"input": spec.name, **ranges})
    return shapes, guessed


def propose_model(
    onnx_path: Path, name: str, *, instance_type_name: str | None = None, triton_release: str | None = None
) -> Proposal:
    """A validated `models:` entry for `onnx_path`, named `name`, for serving on `instance_type_name`."""
    signature = inspect_model(onnx_path)
    gpu = True
    if instance_type_name:
        try:
            gpu = instance_type(instance_type_name).has_gpu
        except UnknownInstanceTypeError as error:
            raise ModelBuildError(f"--instance-type: {error}") from None
    proposal = Proposal(entry={"name": name, "source": {"path": str(onnx_path)}})
    entry = proposal.entry
    entry["platform"] = "tensorrt_plan" if gpu else "onnxruntime_onnx"
    proposal.notes.append(
        "platform: TensorRT engine built on the serving GPU"
        if gpu
        else f"platform: ONNX Runtime ({instance_type_name} has no GPU, so no TensorRT)"
    )
    blocker = _batch_axis_blocker(signature.inputs + signature.outputs)
    batching = blocker is None
    if batching:
        entry["max_batch_size"] = BATCHING_MAX_BATCH_SIZE
        proposal.notes.append("max_batch_size: every input and output has a dynamic first axis, so Triton batches")
    else:
        entry["max_batch_size"] = 0
        entry["dynamic_batching"] = {"enabled": False}
        shape = list(blocker.dims)
        proposal.notes.append(
            f"max_batch_size: 0 because {blocker.name!r} (shape {shape}) has no dynamic first axis to batch on"
        )
    entry["instance_groups"] = [{"count": 2, "kind": "KIND_GPU"} if gpu else {"count": 1, "kind": "KIND_CPU"}]
    if gpu:
        shapes, guessed = _shape_ranges(signature.inputs, batching, _dim_params(onnx_path))
        if shapes:
            entry["tensorrt"] = {"precision": "fp16", "shapes": shapes}
            proposal.adjust += [
                f"tensorrt.shapes: {axis} is dynamic; set min/opt/max to your requests" for axis in guessed
            ]
        else:
            entry["tensorrt"] = {"precision": "fp16"}
    _prove(proposal, onnx_path, signature, instance_type_name, triton_release)
    return proposal


def _prove(
    proposal: Proposal, onnx_path: Path, signature, instance_type_name: str | None, triton_release: str | None
) -> None:
    """The proposal passes the settings schema, `check` and (TensorRT) the trtexec command generator."""
    try:
        settings = ModelSettings.model_validate(proposal.entry)
    except ValidationError as error:
        raise ModelBuildError(format_validation_error(str(onnx_path), error)) from None
    text = pbtxt.generate(signature, settings, triton_release)
    problems = check_model_config(
        text, model_name=settings.name, instance_type=instance_type_name, triton_release=triton_release
    )
    if problems:
        raise ModelBuildError(
            f"{onnx_path}: no entry can be proposed; the generated config fails check: "
            + "; ".join(problem.message for problem in problems)
        )
    if settings.platform == "tensorrt_plan":
        trtexec_argv(signature, settings, engine_path=Path("model.plan"), timing_cache=Path("timing.cache"))
