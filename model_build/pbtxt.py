"""Triton `config.pbtxt` from an inspected ONNX model and the model's settings.

The config is built as Triton's own `ModelConfig` protobuf message (tritonclient's copy of
model_config.proto) and rendered with protobuf's text format, so field names, enum values and
nesting are right by construction. What the schema cannot say (which axis is the batch axis,
whether a fixed axis can be batched) is checked here, with messages that name the file.

Batch-axis rule (documented in docs/model-build-config-and-trt.md): with max_batch_size > 0,
Triton prepends the batch axis to every input and output, so the ONNX leading axis must be the
batch axis and is dropped from `dims`. It must be dynamic; a fixed leading 1 is accepted only when
max_batch_size is 1 (batches never exceed 1 then); any other fixed leading size is refused.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from model_build.errors import InvalidModelError
from model_build.onnx_inspect import DYNAMIC, ModelSignature, TensorSpec
from model_build.settings import ModelSettings, ShapeRange

PLATFORM_FIELDS: dict[str, dict[str, str]] = {
    "tensorrt_plan": {"platform": "tensorrt_plan"},
    "onnxruntime_onnx": {"platform": "onnxruntime_onnx"},
    # The Python backend is named by `backend`, not `platform` (Triton's python_backend README).
    "python": {"backend": "python"},
}

MODEL_FILENAMES = {"tensorrt_plan": "model.plan", "onnxruntime_onnx": "model.onnx", "python": "model.py"}


def config_dims(spec: TensorSpec, max_batch_size: int, source: Path, role: str) -> tuple[int, ...]:
    """The tensor's dims as Triton sees them: without the batch axis when batching."""
    if max_batch_size == 0:
        return spec.dims
    if spec.rank == 0:
        raise InvalidModelError(
            f"{source}: {role} {spec.name!r} is a scalar, so it has no batch axis; set max_batch_size: 0 "
            "or export the model with a leading batch axis"
        )
    leading = spec.dims[0]
    if leading != DYNAMIC and not (leading == 1 and max_batch_size == 1):
        raise InvalidModelError(
            f"{source}: {role} {spec.name!r} has a fixed leading dim {leading} (shape {list(spec.dims)}), but "
            f"max_batch_size {max_batch_size} makes the leading axis the batch axis; export the model with a "
            "dynamic batch axis (torch.onnx.export dynamic_axes={name: {0: 'batch'}}) or set max_batch_size: 0"
        )
    return spec.dims[1:]


def _shape_range(settings: ModelSettings, name: str) -> ShapeRange | None:
    return next((shape for shape in settings.tensorrt.shapes if shape.input == name), None)


def check_shape_ranges(signature: ModelSignature, settings: ModelSettings) -> None:
    """Each tensorrt.shapes entry must name a real input and fit its (non-batch) dims."""
    source = signature.path
    names = [spec.name for spec in signature.inputs]
    for shape in settings.tensorrt.shapes:
        if shape.input not in names:
            raise InvalidModelError(
                f"{source}: tensorrt.shapes names input {shape.input!r}, which the model does not have; "
                f"inputs: {', '.join(names)}"
            )
        dims = config_dims(signature.input(shape.input), settings.max_batch_size, source, "input")
        if len(shape.min) != len(dims):
            raise InvalidModelError(
                f"{source}: tensorrt.shapes for {shape.input!r} has rank {len(shape.min)}, but the input's "
                f"{'non-batch ' if settings.max_batch_size else ''}dims {list(dims)} have rank {len(dims)}"
            )
        for axis, (dim, lo, hi) in enumerate(zip(dims, shape.min, shape.max, strict=True)):
            if dim != DYNAMIC and not lo == hi == dim:
                raise InvalidModelError(
                    f"{source}: tensorrt.shapes for {shape.input!r} axis {axis} is fixed at {dim} in the model, "
                    f"but min/max say {lo}..{hi}; give {dim} for fixed axes"
                )


def warmup_dims(dims: tuple[int, ...], shape: ShapeRange | None) -> list[int]:
    """Concrete dims for a warm-up sample: -1 becomes the ShapeRange's opt, else 1."""
    return [dim if dim != DYNAMIC else (shape.opt[axis] if shape else 1) for axis, dim in enumerate(dims)]


def _tensor(message_type, spec: TensorSpec, dims: tuple[int, ...]):
    tensor = message_type(name=spec.name, data_type=mc.DataType.Value(spec.triton_type))
    if dims:
        tensor.dims.extend(dims)
    else:
        # A batched tensor whose only axis is the batch axis: Triton wants dims [1] with an empty
        # reshape (model_configuration.md, "Reshape").
        tensor.dims.append(1)
        tensor.reshape.SetInParent()
    return tensor


def build_model_config(signature: ModelSignature, settings: ModelSettings) -> mc.ModelConfig:
    """The ModelConfig message for `settings` serving the model described by `signature`."""
    source = signature.path
    check_shape_ranges(signature, settings)
    config = mc.ModelConfig(
        name=settings.name, max_batch_size=settings.max_batch_size, **PLATFORM_FIELDS[settings.platform]
    )

    input_dims: dict[str, tuple[int, ...]] = {}
    for spec in signature.inputs:
        dims = config_dims(spec, settings.max_batch_size, source, "input")
        input_dims[spec.name] = dims
        config.input.append(_tensor(mc.ModelInput, spec, dims))
    for spec in signature.outputs:
        config.output.append(
            _tensor(mc.ModelOutput, spec, config_dims(spec, settings.max_batch_size, source, "output"))
        )

    batching = settings.dynamic_batching
    if batching.enabled and settings.max_batch_size > 0:
        config.dynamic_batching.preferred_batch_size.extend(batching.preferred_batch_sizes)
        config.dynamic_batching.max_queue_delay_microseconds = batching.max_queue_delay_microseconds

    for group in settings.instance_groups:
        config.instance_group.append(
            mc.ModelInstanceGroup(count=group.count, kind=mc.ModelInstanceGroup.Kind.Value(group.kind))
        )

    if settings.warmup:
        sample = mc.ModelWarmup(name="zero_batch_1", batch_size=1)
        for spec in signature.inputs:
            sample.inputs[spec.name].CopyFrom(
                mc.ModelWarmup.Input(
                    data_type=mc.DataType.Value(spec.triton_type),
                    dims=warmup_dims(input_dims[spec.name], _shape_range(settings, spec.name)) or [1],
                    zero_data=True,
                )
            )
        config.model_warmup.append(sample)

    if settings.response_cache:
        config.response_cache.enable = True
    return config


def render(config: mc.ModelConfig, source: Path | None = None) -> str:
    header = (
        f"# Generated by `python -m model_build config` from {source.name}. Do not edit by hand.\n" if source else ""
    )
    return header + text_format.MessageToString(config)


def parse(text: str) -> mc.ModelConfig:
    """Parse config.pbtxt text into a ModelConfig (syntax and field names are checked)."""
    return text_format.Parse(text, mc.ModelConfig())
