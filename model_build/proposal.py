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
from model_build.check import check_model_config
from model_build.errors import ModelBuildError
from model_build.onnx_inspect import DYNAMIC, ModelSignature, TensorSpec, inspect_model, load_model
from model_build.trt import trtexec_argv
from serving_facts.catalogue import V100, UnknownInstanceTypeError, instance_type
from serving_facts.matching import BuildMatchError, ReservedFleet, match_build
from serving_facts.settings import ModelSettings

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


def _tensorrt_blocker(signature: ModelSignature, triton_release: str | None) -> str | None:
    """Why TensorRT cannot serve this graph (operators it cannot import, scalar tensors), or None."""
    from model_build.tensorrt_ops import unsupported_operators
    from serving_facts.releases import release

    found = unsupported_operators(signature.operators, release(triton_release).tensorrt if triton_release else None)
    if found:
        return "; ".join(f"{op_type} ({domain}) is {why}" for domain, op_type, why in found)
    scalar = next((spec for spec in (*signature.inputs, *signature.outputs) if spec.rank == 0), None)
    if scalar is not None:
        return f"{scalar.name!r} is a scalar, which a TensorRT config cannot describe (ONNX Runtime serves it as [1])"
    return None


def _build_blocker(instance_type_name: str, triton_release: str | None, fleet: ReservedFleet | None) -> str | None:
    """Why no CodeBuild build can make a TensorRT engine for this serving GPU, or None.

    An engine runs only on the GPU architecture that built it; CodeBuild's on-demand GPU builds offer only A10G
    (SMALL) and V100 (LARGE), so ml.g4dn's T4 needs `build.fleet` (../shared/README.md, serving_facts/matching.py).
    Proposing TensorRT there would write a config that synth refuses. Without a release every known one is tried
    (ml.p3's V100 builds only up to 24.09)."""
    from serving_facts.releases import RELEASES

    candidates = [triton_release] if triton_release else list(RELEASES)
    error: BuildMatchError | None = None
    for candidate in candidates:
        try:
            match_build(instance_type(instance_type_name), candidate, fleet)
            return None
        except BuildMatchError as refused:
            error = refused
    return str(error)


def _no_build_note(instance_type_name: str, fleet: ReservedFleet | None, refusal: str) -> str:
    """Why TensorRT is not proposed when no build matches, and what would make it possible."""
    gpu = instance_type(instance_type_name).gpu
    if fleet is None and gpu is not None and gpu != V100:
        return (
            f"TensorRT on {instance_type_name} ({gpu.model}) needs build.fleet, a CodeBuild reserved-capacity fleet "
            f"of {gpu.model} hosts: CodeBuild's on-demand GPU builds offer only A10G and V100 (with a fleet, set "
            "platform: tensorrt_plan)"
        )
    return f"no TensorRT build matches: {refusal}"


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


def _verify_ranges(
    onnx_path: Path, signature: ModelSignature, shapes: list[dict], batching: bool, proposal: Proposal
) -> None:
    """Run ONNX Runtime on zero inputs at the min, opt and max of `shapes` (batch 1; an axis is named when it
    alone, at min or max with every other axis at opt, fails): a guess that a real graph
    refuses (a detector's Concat, an OCR model that needs height 48) is refused here, naming the axis, instead of
    failing in the GPU build. Without an ONNX Runtime that loads the graph nothing can be proven: said as an
    ADJUST line."""
    from model_build.ort_shapes import run_zeros

    if not shapes:
        return
    if signature.ort_error is not None:
        proposal.adjust.append(
            f"tensorrt.shapes: not verified (ONNX Runtime cannot load the model: {signature.ort_error})"
        )
        return
    ranges = {shape["input"]: shape for shape in shapes}

    def point(which: str, override: tuple[str, int, int] | None = None) -> dict[str, tuple[int, ...]]:
        feeds = {}
        for spec in signature.inputs:
            dims = (
                list(ranges[spec.name][which])
                if spec.name in ranges
                else [max(d, 1) for d in spec.dims[1 if batching else 0 :]]
            )
            if override and override[0] == spec.name:
                dims[override[1]] = override[2]
            feeds[spec.name] = tuple([1, *dims] if batching else dims)
        return feeds

    for which in ("min", "opt", "max"):
        error = run_zeros(onnx_path, point(which))
        if error is None:
            continue
        culprits = [
            (name, axis, values[which][axis])
            for name, values in ranges.items()
            for axis in range(len(values[which]))
            if which != "opt"
            and values[which][axis] != values["opt"][axis]
            and run_zeros(onnx_path, point("opt", (name, axis, values[which][axis]))) is not None
        ]
        named = "; ".join(
            f"input {name!r} axis {axis + (1 if batching else 0)} = {value}" for name, axis, value in culprits
        ) or "; ".join(f"input {name!r} {which} {values[which]}" for name, values in ranges.items())
        raise ModelBuildError(
            f"{onnx_path}: no entry can be proposed: the guessed tensorrt.shapes {which} ({named}) fails in ONNX "
            f"Runtime: {error}. Write the entry by hand with the min/opt/max extents your requests use "
            "(TensorRT builds its engine for every shape between min and max)"
        )


def propose_model(
    onnx_path: Path,
    name: str,
    *,
    instance_type_name: str | None = None,
    triton_release: str | None = None,
    fleet: ReservedFleet | None = None,
) -> Proposal:
    """A validated `models:` entry for `onnx_path`, named `name`, for serving on `instance_type_name`.

    `fleet` is the stage's `build.fleet` (a CodeBuild reserved-capacity fleet), when it has one: without it a
    GPU that CodeBuild's on-demand builds cannot build for (ml.g4dn's T4) gets ONNX Runtime, and the note says
    what TensorRT would need."""
    signature = inspect_model(onnx_path)
    gpu = True
    if instance_type_name:
        try:
            gpu = instance_type(instance_type_name).has_gpu
        except UnknownInstanceTypeError as error:
            raise ModelBuildError(f"--instance-type: {error}") from None
    proposal = Proposal(entry={"name": name, "source": {"path": str(onnx_path)}})
    entry = proposal.entry
    why_not_tensorrt = _tensorrt_blocker(signature, triton_release) if gpu else None
    if gpu and not why_not_tensorrt and instance_type_name:
        no_build = _build_blocker(instance_type_name, triton_release, fleet)
        if no_build:
            why_not_tensorrt = _no_build_note(instance_type_name, fleet, no_build)
    entry["platform"] = "tensorrt_plan" if gpu and not why_not_tensorrt else "onnxruntime_onnx"
    if not gpu:
        proposal.notes.append(f"platform: ONNX Runtime ({instance_type_name} has no GPU, so no TensorRT)")
    elif why_not_tensorrt:
        proposal.notes.append(f"platform: ONNX Runtime on the GPU, not TensorRT: {why_not_tensorrt}")
    else:
        proposal.notes.append("platform: TensorRT engine built on the serving GPU")
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
    if entry["platform"] == "tensorrt_plan":
        shapes, guessed = _shape_ranges(signature.inputs, batching, _dim_params(onnx_path))
        _verify_ranges(onnx_path, signature, shapes, batching, proposal)
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
