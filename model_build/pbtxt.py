"""Triton `config.pbtxt` from an inspected ONNX model and the model's settings.

The config is built as Triton's own `ModelConfig` protobuf message (tritonclient's copy of
model_config.proto) and rendered with protobuf's text format, so field names, enum values and
nesting are right by construction. What the schema cannot say (which axis is the batch axis,
whether a fixed axis can be batched) is checked here, with messages that name the file.

Batch-axis rule (documented in docs/model-build-config-and-trt.md): with max_batch_size > 0,
Triton prepends the batch axis to every input and output, so the ONNX leading axis must be the
batch axis and is dropped from `dims`. It must be dynamic; a fixed leading 1 is accepted only when
max_batch_size is 1 and only for TensorRT (ONNX Runtime's backend wants -1); any other fixed leading size is
refused. A scalar is served by ONNX Runtime as dims [1] without batching (onnxruntime_backend PR #213); batched
it has no batch axis, and TensorRT configs cannot describe it (refused, proposing onnxruntime_onnx).

Data types of a TensorRT model are the engine's, which depend on the Triton release's TensorRT and
TensorRT backend (serving_facts.releases): on TensorRT 8.6 an INT64 input or output is INT32 in the
engine, so the config says TYPE_INT32; types no engine of the release carries are refused.

`generate` is the one entry point that writes text: every config it returns has passed `check`.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from model_build.errors import InvalidModelError
from model_build.onnx_inspect import DYNAMIC, ModelSignature, TensorSpec
from serving_facts.releases import ANY_TENSORRT_CONFIG_TYPE, RELEASES, release
from serving_facts.settings import ModelSettings, ShapeRange

# Types every release's TensorRT engine carries unchanged: no release needs to be named for them.
EVERY_RELEASE_TENSORRT_TYPE = frozenset.intersection(
    *(r.tensorrt_config_types - set(r.tensorrt_type_casts) for r in RELEASES.values())
)

PLATFORM_FIELDS: dict[str, dict[str, str]] = {
    "tensorrt_plan": {"platform": "tensorrt_plan"},
    "onnxruntime_onnx": {"platform": "onnxruntime_onnx"},
    # The Python backend is named by `backend`, not `platform` (Triton's python_backend README).
    "python": {"backend": "python"},
}

MODEL_FILENAMES = {"tensorrt_plan": "model.plan", "onnxruntime_onnx": "model.onnx", "python": "model.py"}


def config_dims(
    spec: TensorSpec, max_batch_size: int, source: Path, role: str, platform: str = "tensorrt_plan"
) -> tuple[int, ...]:
    """The tensor's dims as Triton sees them: without the batch axis when batching; a scalar is [1].

    A fixed leading 1 with max_batch_size 1 serves on TensorRT (tensorrt_utils.cc CompareDimsSupported: -1 on
    either side matches) but not on ONNX Runtime (onnxruntime_utils.cc CompareDimsSupported: "the first dimension
    must be -1")."""
    if spec.rank == 0:
        # onnxruntime_backend (PR #213, src/onnxruntime.cc ValidateInputs/ValidateOutputs): a scalar model tensor
        # is served as config dims [1] ("should only provide 1 in the model configuration when the model doesn't
        # support batching"); batched, it has no batch axis.
        if max_batch_size:
            raise InvalidModelError(
                f"{source}: {role} {spec.name!r} is a scalar (shape []), which has no batch axis for "
                f"max_batch_size {max_batch_size}; set max_batch_size: 0 (Triton serves a scalar as dims [1] "
                "without batching), or export the model with a leading batch axis"
            )
        return (1,)
    if max_batch_size == 0:
        return spec.dims
    leading = spec.dims[0]
    fixed_one_batches = platform != "onnxruntime_onnx" and leading == 1 and max_batch_size == 1
    if leading != DYNAMIC and not fixed_one_batches:
        declared = (
            f" (the graph declares {list(spec.declared)}, but ONNX Runtime infers {list(spec.dims)}, and Triton's "
            "ONNX Runtime backend compares outputs with what ONNX Runtime infers)"
            if spec.declared is not None
            else ""
        )
        raise InvalidModelError(
            f"{source}: {role} {spec.name!r} has a fixed leading dim {leading} (shape {list(spec.dims)}){declared}, "
            f"but max_batch_size {max_batch_size} makes the leading axis the batch axis; export the model with a "
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


def _check_warmup_axes(
    source: Path, spec: TensorSpec, dims: tuple[int, ...], shape: ShapeRange | None, max_batch_size: int
) -> None:
    """A warm-up sample needs a real extent on every dynamic axis: tensorrt.shapes' opt, never a guess.

    Triton runs the warm-up samples while loading the model and fails the load when one fails
    (model_configuration.md, "Model Warmup"); an extent of 1 on an axis the model needs larger (a
    convolution's window, an OCR model's height 48) would make `warmup: true` a model that never loads.
    """
    if shape is not None or DYNAMIC not in dims:
        return
    axes = [axis + (1 if max_batch_size else 0) for axis, dim in enumerate(dims) if dim == DYNAMIC]
    raise InvalidModelError(
        f"{source}: warmup: true, but input {spec.name!r} (shape {list(spec.dims)}) has dynamic axes {axes} and "
        f"tensorrt.shapes gives no opt extent for them, so the warm-up sample would guess; add tensorrt.shapes: "
        f"[{{input: {spec.name}, min: [...], opt: [...], max: [...]}}] (the warm-up uses opt) or set warmup: false"
    )


def _check_platform_can_serve(signature: ModelSignature, settings: ModelSettings, triton_release: str | None) -> None:
    """ONNX Runtime must load the graph for onnxruntime_onnx; TensorRT must import its operators for tensorrt_plan."""
    from model_build.tensorrt_ops import unsupported_message, unsupported_operators  # imports onnx_inspect

    source = signature.path
    if settings.platform == "onnxruntime_onnx" and signature.ort_error is not None:
        raise InvalidModelError(
            f"{source}: ONNX Runtime cannot load the model, so Triton's onnxruntime backend cannot either: "
            f"{signature.ort_error}"
        )
    if settings.platform != "tensorrt_plan":
        return
    tensorrt_version = release(triton_release).tensorrt if triton_release else None
    found = unsupported_operators(signature.operators, tensorrt_version)
    if found:
        raise InvalidModelError(f"{source}: platform tensorrt_plan: {unsupported_message(found)}")
    for role, specs in (("input", signature.inputs), ("output", signature.outputs)):
        scalar = next((spec for spec in specs if spec.rank == 0), None)
        if scalar is not None:
            # tensorrt_backend CompareDimsSupported compares the engine's rank with the config's: a scalar
            # engine tensor matches no dims, and Triton's config needs at least one dim.
            raise InvalidModelError(
                f"{source}: {role} {scalar.name!r} is a scalar (shape []), which a tensorrt_plan config cannot "
                "describe (Triton needs dims [1], the engine has rank 0); serve it with platform: onnxruntime_onnx "
                "(dims [1] without batching) or export the tensor with shape [1]"
            )


def warmup_dims(dims: tuple[int, ...], shape: ShapeRange | None) -> list[int]:
    """Concrete dims for a warm-up sample: -1 becomes the ShapeRange's opt, else 1."""
    return [dim if dim != DYNAMIC else (shape.opt[axis] if shape else 1) for axis, dim in enumerate(dims)]


def _refused_type_hint(triton_type: str) -> str:
    if triton_type == "TYPE_FP64":
        return (
            "TensorRT has no FP64 (its ONNX parser imports it as FP32, so clients and engine would disagree): "
            "export the model with float32 inputs and outputs, or serve it with onnxruntime_onnx"
        )
    if triton_type == "TYPE_BF16":
        return "BF16 needs Triton 24.09 or later here; cast it to FP16/FP32 in the model, or pick a later release"
    return "cast it in the model before export, or serve it with onnxruntime_onnx"


def served_type(spec: TensorSpec, settings: ModelSettings, triton_release: str | None, source: Path, role: str) -> str:
    """The tensor's Triton data type: the ONNX type, or for TensorRT the type the release's engine carries."""
    if settings.platform != "tensorrt_plan":
        return spec.triton_type
    if triton_release is None:
        if spec.triton_type in EVERY_RELEASE_TENSORRT_TYPE:
            return spec.triton_type
        if spec.triton_type in ANY_TENSORRT_CONFIG_TYPE:
            raise InvalidModelError(
                f"{source}: {role} {spec.name!r} has ONNX type {spec.onnx_type}, which TensorRT engines carry "
                f"differently per Triton release (TensorRT 8.6, Triton 23.12-24.03, turns INT64 into INT32; "
                f"BF16 needs 24.09+); give the serving release: --triton-release YY.MM (or a stage file: "
                "--config, or --append for init)"
            )
        allowed = sorted(ANY_TENSORRT_CONFIG_TYPE)
        where = "no Triton release's TensorRT backend can serve"
    else:
        serving = release(triton_release)
        engine_type = serving.tensorrt_type_casts.get(spec.triton_type, spec.triton_type)
        if engine_type in serving.tensorrt_config_types:
            return engine_type
        allowed = sorted(serving.tensorrt_config_types)
        where = f"Triton {triton_release}'s TensorRT backend cannot serve"
    raise InvalidModelError(
        f"{source}: {role} {spec.name!r} has ONNX type {spec.onnx_type} ({spec.triton_type}), which {where} "
        f"(it takes {', '.join(allowed)}); {_refused_type_hint(spec.triton_type)}"
    )


def _tensor(message_type, spec: TensorSpec, dims: tuple[int, ...], data_type: str):
    tensor = message_type(name=spec.name, data_type=mc.DataType.Value(data_type))
    if dims:
        tensor.dims.extend(dims)
    else:
        # A batched tensor whose only axis is the batch axis: Triton wants dims [1] with an empty
        # reshape (model_configuration.md, "Reshape").
        tensor.dims.append(1)
        tensor.reshape.SetInParent()
    return tensor


def build_model_config(
    signature: ModelSignature, settings: ModelSettings, triton_release: str | None = None
) -> mc.ModelConfig:
    """The ModelConfig message for `settings` serving the model described by `signature`.

    `triton_release` ("24.09") decides a TensorRT model's data types; without it, types whose engine
    type differs between releases are refused with a message asking for it.
    """
    source = signature.path
    _check_platform_can_serve(signature, settings, triton_release)
    check_shape_ranges(signature, settings)
    config = mc.ModelConfig(
        name=settings.name, max_batch_size=settings.max_batch_size, **PLATFORM_FIELDS[settings.platform]
    )

    input_dims: dict[str, tuple[int, ...]] = {}
    input_types: dict[str, str] = {}
    for spec in signature.inputs:
        dims = config_dims(spec, settings.max_batch_size, source, "input", settings.platform)
        input_dims[spec.name] = dims
        input_types[spec.name] = served_type(spec, settings, triton_release, source, "input")
        config.input.append(_tensor(mc.ModelInput, spec, dims, input_types[spec.name]))
    for spec in signature.outputs:
        dims = config_dims(spec, settings.max_batch_size, source, "output", settings.platform)
        config.output.append(
            _tensor(mc.ModelOutput, spec, dims, served_type(spec, settings, triton_release, source, "output"))
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
            shape = _shape_range(settings, spec.name)
            _check_warmup_axes(source, spec, input_dims[spec.name], shape, settings.max_batch_size)
            sample.inputs[spec.name].CopyFrom(
                mc.ModelWarmup.Input(
                    data_type=mc.DataType.Value(input_types[spec.name]),
                    dims=warmup_dims(input_dims[spec.name], shape) or [1],
                    zero_data=True,
                )
            )
        config.model_warmup.append(sample)

    if settings.response_cache:
        config.response_cache.enable = True
    return config


def render(config: mc.ModelConfig, source: Path | None = None, notes: list[str] | None = None) -> str:
    header = (
        f"# Generated by `python -m model_build config` from {source.name}. Do not edit by hand.\n" if source else ""
    )
    header += "".join(f"# {note}\n" for note in notes or [])
    return header + text_format.MessageToString(config)


def type_notes(signature: ModelSignature, settings: ModelSettings, config: mc.ModelConfig) -> list[str]:
    """One line per tensor whose served type is not its ONNX type (clients must send the served type)."""
    specs = {spec.name: spec for spec in (*signature.inputs, *signature.outputs)}
    notes = []
    for tensor in (*config.input, *config.output):
        served = mc.DataType.Name(tensor.data_type)
        if served != specs[tensor.name].triton_type:
            notes.append(
                f"{tensor.name}: ONNX {specs[tensor.name].onnx_type} is {served} in the TensorRT engine "
                f"(TensorRT 8.6 has no INT64); clients send {served}"
            )
    return notes


def generate(signature: ModelSignature, settings: ModelSettings, triton_release: str | None = None) -> str:
    """config.pbtxt text for `settings` serving `signature`, refused unless `check` passes it."""
    # Imported here, not at the top: check modules may use this module's helpers; no import cycle then.
    from model_build.check import check_model_config

    config = build_model_config(signature, settings, triton_release)
    text = render(config, source=signature.path, notes=type_notes(signature, settings, config))
    problems = check_model_config(text, model_name=settings.name, triton_release=triton_release)
    if problems:
        listed = "\n".join(f"  {problem}" for problem in problems)
        raise InvalidModelError(
            f"{signature.path}: the config.pbtxt for model {settings.name!r} would be refused by Triton; "
            f"nothing written:\n{listed}"
        )
    return text


def parse(text: str) -> mc.ModelConfig:
    """Parse config.pbtxt text into a ModelConfig (syntax and field names are checked)."""
    return text_format.Parse(text, mc.ModelConfig())
