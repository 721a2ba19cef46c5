"""Triton's semantic rules for one model config, with Triton's own wording.

Ported from triton-inference-server/core `src/model_config_utils.cc` (`ValidateModelConfig`,
`ValidateModelIOConfig`, `ValidateIOShape`, `ValidateBatchIO`, `GetBooleanSequenceControlProperties`,
`ValidateEnsembleSchedulingConfig`, `NormalizeInstanceGroup`, `ValidateInstanceGroup`). Triton stops at
the first error; these rules report every independent problem (one per tensor, per batch input, per
instance group...) so one run shows everything to fix. Every message contains Triton's text, so the
problem printed here is the line the server would log.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tritonclient.grpc import model_config_pb2 as pb

from model_build.check.problems import Problem
from model_build.check.schema import ENSEMBLE_PLATFORM, KNOWN_BACKEND_PLATFORMS, TENSORRT_PLATFORM, ModelConfig

WILDCARD = -1
DataType = pb.DataType
Control = pb.ModelSequenceBatching.Control
InstanceKind = pb.ModelInstanceGroup.Kind


@dataclass(frozen=True)
class Target:
    """What the model will be served on: decides the GPU-dependent rules (gpu ids, KIND_GPU, KIND_AUTO).

    `gpu_count` None means "not known": GPU-dependent rules are skipped rather than guessed.
    """

    name: str | None = None
    gpu_count: int | None = None
    compute_capability: str | None = None


# ----------------------------------------------------------------------------------------------------
# Inputs and outputs


def element_count(dims: Iterable[int]) -> int:
    """Triton's GetElementCount: -1 when any dimension is variable; 0 for an empty shape."""
    dims = list(dims)
    if not dims:
        return 0
    if WILDCARD in dims:
        return WILDCARD
    return math.prod(dims)


def _chunk_counts(dims: Iterable[int]) -> list[int]:
    """Element counts of the runs between variable-size dimensions ([2, 4, -1, 6] -> [8, 6])."""
    counts, current = [], 1
    for dim in dims:
        if dim == WILDCARD:
            counts.append(current)
            current = 1
        else:
            current *= dim
    counts.append(current)
    return counts


def _io_shape_problem(io, max_batch_size: int, prefix: str) -> tuple[str, str] | None:
    """Triton's ValidateIOShape: (field suffix, message) of the first broken rule, or None."""
    if not io.name:
        return "name", f"{prefix}must specify 'name'"
    named = f"{prefix}'{io.name}' "
    if io.data_type == DataType.TYPE_INVALID:
        return "data_type", named + "must specify 'data_type'"
    if not io.dims:
        return "dims", named + "must specify 'dims'"
    has_reshape = io.HasField("reshape")
    if has_reshape and not io.reshape.shape and max_batch_size == 0:
        return "reshape", (
            named + "cannot have empty reshape for non-batching model as scalar tensors are not supported"
        )
    if any(dim < 1 and dim != WILDCARD for dim in io.dims):
        return "dims", named + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension"
    if not has_reshape:
        return None
    if any(dim < 1 and dim != WILDCARD for dim in io.reshape.shape):
        return "reshape", (
            named + "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension"
        )
    dims_size, reshape_size = element_count(io.dims), element_count(io.reshape.shape)
    # Same element count, or both variable; an empty reshape needs dims of exactly one element.
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        return "reshape", named + "has different size for dims and reshape"
    if dims_size == WILDCARD:
        dim_chunks, reshape_chunks = _chunk_counts(io.dims), _chunk_counts(io.reshape.shape)
        if len(dim_chunks) != len(reshape_chunks):
            return "reshape", named + "has different number of variable-size dimensions for dims and reshape"
        if dim_chunks != reshape_chunks:
            return "reshape", named + "has different size for dims and reshape"
    return None


def _io_problem(io, config: ModelConfig, *, is_input: bool) -> tuple[str, str] | None:
    """Triton's ValidateModelInput / ValidateModelOutput."""
    prefix = "model input " if is_input else "model output "
    found = _io_shape_problem(io, config.max_batch_size, prefix)
    if found:
        return found
    formats = (pb.ModelInput.FORMAT_NHWC, pb.ModelInput.FORMAT_NCHW)
    if is_input and io.format in formats and len(io.dims) != 3:
        return "format", "model input NHWC/NCHW require 3 dims"
    if config.platform != TENSORRT_PLATFORM and io.is_shape_tensor:
        return "is_shape_tensor", "shape tensors are only supported for TensorRT platform"
    if io.is_non_linear_format_io:
        if config.platform != TENSORRT_PLATFORM:
            return "is_non_linear_format_io", "Non-linear IO format is only supported for the TensorRT platform"
        if len(io.dims) != 3:
            kind = "input" if is_input else "output"
            return "is_non_linear_format_io", f"Non-linear IO format {kind} requires 3 dims"
    return None


def _batch_io_problems(config: ModelConfig) -> Iterator[tuple[str, str]]:
    """Triton's ValidateBatchIO, one problem per batch input / batch output."""
    input_names = {io.name for io in config.input}
    output_names = {io.name for io in config.output}
    for index, batch_input in enumerate(config.batch_input):
        where = f"batch_input[{index}]"
        kind = pb.BatchInput.Kind.Name(batch_input.kind)
        if len(batch_input.source_input) != 1:
            yield where, f"batch input kind '{kind}' expects 1 source input, got {len(batch_input.source_input)}"
        elif batch_input.data_type not in (DataType.TYPE_INT32, DataType.TYPE_FP32):
            yield where, "batch input data type must be TYPE_INT32 or TYPE_FP32"
        else:
            unknown = [name for name in batch_input.source_input if name not in input_names]
            if unknown:
                yield where, f"unknown source input name '{unknown[0]}'"
    for index, batch_output in enumerate(config.batch_output):
        where = f"batch_output[{index}]"
        kind = pb.BatchOutput.Kind.Name(batch_output.kind)
        if len(batch_output.source_input) != 1:
            yield where, f"batch output kind '{kind}' expects 1 source input, got {len(batch_output.source_input)}"
            continue
        unknown = [name for name in batch_output.source_input if name not in input_names]
        if unknown:
            yield where, f"unknown source input name '{unknown[0]}'"
            continue
        seen: set[str] = set()
        for target in batch_output.target_name:
            if target not in output_names:
                yield where, f"unknown target output name '{target}'"
                break
            if target in seen:
                yield where, f"target output name '{target}' can only be specified once"
                break
            seen.add(target)


def io_problems(config: ModelConfig) -> list[Problem]:
    """Triton's ValidateModelIOConfig: every message ends with " for <model>"."""
    found: list[Problem] = []
    for is_input, tensors in ((True, config.input), (False, config.output)):
        kind = "input" if is_input else "output"
        for index, io in enumerate(tensors):
            problem = _io_problem(io, config, is_input=is_input)
            if problem:
                suffix, message = problem
                found.append(Problem(config.name, f"{kind}[{index}].{suffix}", f"{message} for {config.name}", "io"))
    for where, message in _batch_io_problems(config):
        found.append(Problem(config.name, where, f"{message} for {config.name}", "batch-io"))
    return found


# ----------------------------------------------------------------------------------------------------
# Platform, batching, scheduling


def _platform_problems(config: ModelConfig) -> Iterator[Problem]:
    name = config.name
    if not config.backend:
        if config.platform != ENSEMBLE_PLATFORM:
            yield Problem(name, "platform", f"unexpected platform type '{config.platform}' for {name}", "platform")
            return
    elif config.platform == ENSEMBLE_PLATFORM:
        yield Problem(
            name,
            "backend",
            f"Ensemble model '{name}' must have platform type '{config.platform}' and empty backend type",
            "platform",
        )
        return
    platforms = KNOWN_BACKEND_PLATFORMS.get(config.backend)
    if platforms is not None and config.platform not in platforms:
        yield Problem(
            name,
            "platform",
            f"unexpected 'platform' and 'backend' pair, got:{config.platform}, {config.backend}",
            "platform",
        )


def _dynamic_batching_problems(config: ModelConfig) -> Iterator[Problem]:
    if not config.HasField("dynamic_batching"):
        return
    name, batching = config.name, config.dynamic_batching
    for size in batching.preferred_batch_size:
        if size <= 0:
            yield Problem(
                name,
                "dynamic_batching.preferred_batch_size",
                f"dynamic batching preferred size must be positive for {name}",
                "dynamic-batching",
            )
        elif size > config.max_batch_size:
            yield Problem(
                name,
                "dynamic_batching.preferred_batch_size",
                f"dynamic batching preferred size must be <= max batch size for {name}",
                "dynamic-batching",
            )
    levels = batching.priority_levels
    if levels != 0:
        if batching.default_priority_level == 0 or batching.default_priority_level > levels:
            yield Problem(
                name,
                "dynamic_batching.default_priority_level",
                f"default priority level must be in range [1, {levels}] for {name}",
                "priority-levels",
            )
        for level in batching.priority_queue_policy:
            if level == 0 or level > levels:
                yield Problem(
                    name,
                    f"dynamic_batching.priority_queue_policy[{level}]",
                    f"priority queue policy must have priority level in range [1, {levels}] for {name}",
                    "priority-levels",
                )
    if batching.preserve_ordering:
        if levels > 1:
            yield Problem(
                name,
                "dynamic_batching.priority_levels",
                f"Only one priority level is allowed when 'preserve_ordering' is true for {name}",
                "preserve-ordering",
            )
        policies = [("default_queue_policy", batching.default_queue_policy)] + [
            (f"priority_queue_policy[{level}]", policy) for level, policy in batching.priority_queue_policy.items()
        ]
        for where, policy in policies:
            if policy.default_timeout_microseconds != 0 and policy.timeout_action == pb.ModelQueuePolicy.DELAY:
                yield Problem(
                    name,
                    f"dynamic_batching.{where}.timeout_action",
                    f"Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for {name}",
                    "preserve-ordering",
                )


def _control_problem(batcher, name: str, kind: int, *, boolean: bool) -> str | None:
    """Triton's Get{Boolean,Typed}SequenceControlProperties for one control kind: first problem or None."""
    kind_name = Control.Kind.Name(kind)
    seen_tensors: set[str] = set()
    seen_control = False
    for control_input in batcher.control_input:
        if not control_input.name:
            return f"sequence batching control tensor must have a name for {name}"
        if control_input.name in seen_tensors:
            return (
                f"sequence batching control tensor '{control_input.name}' is specified for multiple control kinds "
                f"for {name}"
            )
        seen_tensors.add(control_input.name)
        for control in control_input.control:
            if control.kind != kind:
                continue
            if seen_control:
                return f"sequence batching specifies multiple {kind_name} tensors for {name}"
            seen_control = True
            counts = [len(control.int32_false_true), len(control.fp32_false_true), len(control.bool_false_true)]
            given = sum(1 for count in counts if count)
            if not boolean:
                if given:
                    return (
                        "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or "
                        f"'bool_false_true' for {kind_name} for {name}"
                    )
                continue
            if given == 0:
                return (
                    "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or "
                    f"'bool_false_true' for {kind_name} for {name}"
                )
            if given > 1:
                return (
                    "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and "
                    f"'bool_false_true' for {kind_name} for {name}"
                )
            field_name = ("int32_false_true", "fp32_false_true", "bool_false_true")[[bool(c) for c in counts].index(True)]
            if max(counts) != 2:
                return f"sequence batching control '{field_name}' must have exactly 2 entries for {kind_name} for {name}"
    return None


def _corrid_type(batcher) -> int | None:
    for control_input in batcher.control_input:
        for control in control_input.control:
            if control.kind == Control.CONTROL_SEQUENCE_CORRID:
                return control.data_type
    return None


def _sequence_batching_problems(config: ModelConfig) -> Iterator[Problem]:
    if not config.HasField("sequence_batching"):
        return
    name, batcher = config.name, config.sequence_batching
    if config.response_cache.enable:
        yield Problem(
            name,
            "response_cache.enable",
            f"Response Cache does not currently support model {name} with sequence batching scheduler. "
            "Please disable the response cache.",
            "response-cache",
        )
    messages: list[str] = []
    for kind, boolean in (
        (Control.CONTROL_SEQUENCE_START, True),
        (Control.CONTROL_SEQUENCE_END, True),
        (Control.CONTROL_SEQUENCE_READY, True),
        (Control.CONTROL_SEQUENCE_CORRID, False),
    ):
        message = _control_problem(batcher, name, kind, boolean=boolean)
        # A nameless or reused control tensor is found by every kind's pass: report it once.
        if message and message not in messages:
            messages.append(message)
    allowed_corrid = (DataType.TYPE_UINT64, DataType.TYPE_INT64, DataType.TYPE_UINT32, DataType.TYPE_INT32)
    corrid_type = _corrid_type(batcher)
    if not messages and corrid_type is not None and corrid_type not in (*allowed_corrid, DataType.TYPE_STRING):
        messages.append(
            f"unexpected data type for control CONTROL_SEQUENCE_CORRID for {name}. Allowed data types are "
            "TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
        )
    for message in messages:
        yield Problem(name, "sequence_batching.control_input", message, "sequence-controls")
    if batcher.HasField("oldest"):
        for size in batcher.oldest.preferred_batch_size:
            if size <= 0:
                yield Problem(
                    name,
                    "sequence_batching.oldest.preferred_batch_size",
                    f"sequence batching preferred batch size must be positive for {name}",
                    "sequence-batching",
                )
            elif size > config.max_batch_size:
                yield Problem(
                    name,
                    "sequence_batching.oldest.preferred_batch_size",
                    f"sequence batching preferred batch size must be <= max batch size for {name}",
                    "sequence-batching",
                )
    if batcher.HasField("direct") and not 0.0 <= batcher.direct.minimum_slot_utilization <= 1.0:
        yield Problem(
            name,
            "sequence_batching.direct.minimum_slot_utilization",
            f"sequence batching minimum slot utilization must be in range (0.0, 1.0] for {name}",
            "sequence-batching",
        )


# ----------------------------------------------------------------------------------------------------
# Ensemble scheduling (the ensemble's own config; rules that need the composing models are in ensemble.py)


@dataclass(eq=False)
class _FlowTensor:
    name: str
    is_output: bool
    ready: bool = False
    prev: list[_FlowTensor] = field(default_factory=list)
    next: list[_FlowTensor] = field(default_factory=list)


def _build_flow_graph(config: ModelConfig) -> tuple[dict[str, _FlowTensor], tuple[str, str] | None]:
    """Triton's BuildEnsembleGraph: the data flow between ensemble tensors, or (field, message) of an error."""
    name = config.name
    tensors: dict[str, _FlowTensor] = {}
    for index, step in enumerate(config.ensemble_scheduling.step):
        where = f"ensemble_scheduling.step[{index}]"
        if not step.model_name:
            return tensors, (f"{where}.model_name", f"must specify 'model_name' in step {index} of ensemble '{name}'")
        if not step.input_map:
            return tensors, (f"{where}.input_map", f"must specify 'input_map' in step {index} of ensemble '{name}'")
        if not step.output_map:
            return tensors, (f"{where}.output_map", f"must specify 'output_map' in step {index} of ensemble '{name}'")
        produced: list[_FlowTensor] = []
        for tensor_name in step.output_map.values():
            tensor = tensors.get(tensor_name)
            if tensor is None:
                tensor = tensors[tensor_name] = _FlowTensor(tensor_name, is_output=True)
            elif tensor.is_output:
                return tensors, (
                    f"{where}.output_map",
                    f"ensemble tensor '{tensor_name}' can appear in an output map only once for ensemble '{name}' "
                    f"step {index}",
                )
            else:
                tensor.is_output = True
            produced.append(tensor)
        # A protobuf map cannot hold one key twice (the text parser keeps the last), so the input side
        # needs no "mapped to multiple ensemble tensors" check here.
        for tensor_name in step.input_map.values():
            tensor = tensors.setdefault(tensor_name, _FlowTensor(tensor_name, is_output=False))
            for output in produced:
                output.prev.append(tensor)
                tensor.next.append(output)
    return tensors, None


def _not_written_detail(tensor: _FlowTensor) -> str:
    """The depending tensor Triton names when an ensemble output is never written."""
    last, prev_nodes, seen = tensor, tensor.prev, set()
    while prev_nodes:
        nodes, prev_nodes = prev_nodes, []
        for node in nodes:
            if not node.ready and node.name not in seen:
                seen.add(node.name)
                last, prev_nodes = node, node.prev
                break
    if last.name != tensor.name:
        return f": at least one of its depending tensors, '{last.name}', is not connected"
    return ""


def _ensemble_scheduling_problems(config: ModelConfig) -> Iterator[Problem]:
    """Triton's ValidateEnsembleSchedulingConfig, plus 'ensemble scheduling must be set' for ensembles."""
    name = config.name
    if not config.HasField("ensemble_scheduling"):
        if config.platform == ENSEMBLE_PLATFORM:
            yield Problem(
                name,
                "ensemble_scheduling",
                f"ensemble scheduling must be set for ensemble {name} whose platform is {ENSEMBLE_PLATFORM}",
                "ensemble-scheduling",
            )
        return
    if config.platform != ENSEMBLE_PLATFORM:
        yield Problem(
            name,
            "ensemble_scheduling",
            f"ensemble scheduling cannot be set for model '{name}' whose platform is not {ENSEMBLE_PLATFORM}",
            "ensemble-scheduling",
        )
        return
    if config.instance_group:
        yield Problem(
            name,
            "instance_group",
            f"instance group should not be specified for ensemble '{name}'",
            "ensemble-scheduling",
        )
    if config.HasField("optimization"):
        yield Problem(
            name, "optimization", f"optimization should not be specified for ensemble '{name}'", "ensemble-scheduling"
        )
    if config.model_warmup:
        yield Problem(
            name, "model_warmup", f"model_warmup can not be specified for ensemble '{name}'", "ensemble-scheduling"
        )
    if not config.ensemble_scheduling.step:
        yield Problem(
            name, "ensemble_scheduling.step", f"must specify 'step' for ensemble '{name}'", "ensemble-scheduling"
        )
        return
    tensors, error = _build_flow_graph(config)
    if error:
        yield Problem(name, error[0], error[1], "ensemble-mapping")
        return
    ready_queue: deque[_FlowTensor] = deque()
    for index, ensemble_input in enumerate(config.input):
        tensor = tensors.get(ensemble_input.name)
        if tensor is None:
            # Triton's wording, stray quote included.
            yield Problem(
                name,
                f"input[{index}]",
                f"ensemble input '{ensemble_input.name}' for ensemble {name}' is not used",
                "ensemble-data-flow",
            )
            continue
        tensor.ready = True
        ready_queue.append(tensor)
    while ready_queue:
        for candidate in ready_queue.popleft().next:
            if not candidate.ready and all(prev.ready for prev in candidate.prev):
                candidate.ready = True
                ready_queue.append(candidate)
    outputs: set[str] = set()
    for index, ensemble_output in enumerate(config.output):
        tensor = tensors.get(ensemble_output.name)
        if tensor is None:
            yield Problem(
                name,
                f"output[{index}]",
                f"ensemble output '{ensemble_output.name}' for ensemble {name}' is not used",
                "ensemble-data-flow",
            )
        elif not tensor.ready:
            yield Problem(
                name,
                f"output[{index}]",
                f"output '{ensemble_output.name}' for ensemble '{name}' is not written{_not_written_detail(tensor)}",
                "ensemble-data-flow",
            )
        else:
            outputs.add(tensor.name)
    for tensor in tensors.values():
        if tensor.name not in outputs and (not tensor.ready or not tensor.next):
            yield Problem(
                name,
                "ensemble_scheduling",
                f"ensemble tensor '{tensor.name}' is unused in ensemble '{name}'",
                "ensemble-data-flow",
            )


# ----------------------------------------------------------------------------------------------------
# Instance groups (the only rules that depend on the GPUs of the target)


def normalize_instance_groups(config: ModelConfig, target: Target) -> None:
    """Triton's NormalizeInstanceGroup, in place, for a server that sees `target.gpu_count` GPUs.

    A missing instance group becomes one named after the model; nameless groups are named
    `<model>_<index>`; KIND_AUTO becomes KIND_GPU when every listed GPU exists, else KIND_CPU;
    KIND_GPU without `gpus` gets every GPU. With an unknown GPU count the kind and GPUs are left as
    they are, and the GPU-dependent rules are skipped.
    """
    if config.HasField("ensemble_scheduling"):
        return
    if not config.instance_group:
        config.instance_group.add(name=config.name)
    supported = set(range(target.gpu_count)) if target.gpu_count is not None else None
    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == InstanceKind.KIND_AUTO and supported is not None:
            gpu_present = bool(supported) and all(gpu in supported for gpu in group.gpus)
            group.kind = InstanceKind.KIND_GPU if gpu_present else InstanceKind.KIND_CPU
        if group.count < 1:
            group.count = 1
        if group.kind == InstanceKind.KIND_GPU and not group.gpus and supported:
            group.gpus.extend(sorted(supported))


def _instance_group_problems(config: ModelConfig, target: Target) -> Iterator[Problem]:
    """Triton's ValidateInstanceGroup on the normalized groups."""
    if config.HasField("ensemble_scheduling"):
        return
    name = config.name
    for index, group in enumerate(config.instance_group):
        where = f"instance_group[{index}]"
        prefix = f"instance group {group.name} of model {name}"
        if group.kind == InstanceKind.KIND_MODEL and group.gpus:
            yield Problem(name, where, f"{prefix} has kind KIND_MODEL but specifies one or more GPUs", "instance-group")
        elif group.kind == InstanceKind.KIND_CPU and group.gpus:
            yield Problem(name, where, f"{prefix} has kind KIND_CPU but specifies one or more GPUs", "instance-group")
        elif group.kind == InstanceKind.KIND_GPU and target.gpu_count is not None:
            if target.gpu_count == 0:
                yield Problem(
                    name,
                    where,
                    f"{prefix} has kind KIND_GPU but no GPUs are available (instance type {target.name} has no GPU)",
                    "gpu-count",
                )
            else:
                for gpu in group.gpus:
                    if not 0 <= gpu < target.gpu_count:
                        ids = ", ".join(str(i) for i in range(target.gpu_count))
                        yield Problem(
                            name,
                            f"{where}.gpus",
                            f"{prefix} specifies invalid or unsupported gpu id {gpu} "
                            f"(instance type {target.name} has GPUs: {ids})",
                            "gpu-count",
                        )
                        break
        if config.platform != TENSORRT_PLATFORM and group.profile:
            yield Problem(
                name,
                f"{where}.profile",
                f"{prefix} and platform {config.platform} specifies profile field which is only supported for "
                "TensorRT models",
                "instance-group",
            )
        else:
            for profile in group.profile:
                if not profile.strip().lstrip("-").isdigit() or int(profile) < 0:
                    yield Problem(
                        name,
                        f"{where}.profile",
                        f"{prefix} and platform {config.platform} specifies invalid profile {profile}. The field "
                        "should contain the string representation of a non-negative integer.",
                        "instance-group",
                    )


def _target_problems(config: ModelConfig, target: Target) -> Iterator[Problem]:
    """Our own rule, not Triton's: a TensorRT engine cannot be served without a GPU."""
    if target.gpu_count == 0 and config.platform == TENSORRT_PLATFORM:
        yield Problem(
            config.name,
            "platform",
            f"platform {TENSORRT_PLATFORM} needs a GPU but instance type {target.name} has none; pick a GPU "
            "instance type or export the model to ONNX for a CPU endpoint",
            "gpu-platform",
        )


# ----------------------------------------------------------------------------------------------------


def validate_model_config(config: ModelConfig, target: Target | None = None) -> list[Problem]:
    """Every single-model rule on a completed config (see schema.autocomplete); the config is normalized in place."""
    target = target or Target()
    name = config.name
    if not name:
        return [Problem("(unnamed)", "name", "model configuration must specify 'name'", "name")]
    found: list[Problem] = list(_platform_problems(config))
    if not config.platform and not config.backend:
        found.append(Problem(name, "platform", f"must specify 'platform' or 'backend' for '{name}'", "platform"))
    if config.max_batch_size < 0:
        found.append(
            Problem(name, "max_batch_size", f"'max_batch_size' must be non-negative value for {name}", "max-batch-size")
        )
    found += _dynamic_batching_problems(config)
    found += _sequence_batching_problems(config)
    found += _ensemble_scheduling_problems(config)
    if config.model_transaction_policy.decoupled and config.response_cache.enable:
        found.append(
            Problem(
                name,
                "response_cache.enable",
                f"Response Cache does not currently support model {name} with 'decoupled' transaction policy. "
                "Please disable the response cache.",
                "response-cache",
            )
        )
    found += _metrics_problems(config)
    normalize_instance_groups(config, target)
    found += _instance_group_problems(config, target)
    found += io_problems(config)
    found += _target_problems(config, target)
    return found


def _metrics_problems(config: ModelConfig) -> Iterator[Problem]:
    """Triton's ValidateModelMetrics."""
    for index, control in enumerate(config.model_metrics.metric_control):
        where = f"model_metrics.metric_control[{index}]"
        if not control.HasField("metric_identifier"):
            message = "metric control must specify 'metric_identifier'"
        elif not control.metric_identifier.family:
            message = "metric identifier must specify non-empty 'family'"
        elif not control.HasField("histogram_options"):
            message = "metric control must specify 'histogram_options'"
        elif not control.histogram_options.buckets:
            message = "histogram options must specify non-empty 'buckets'"
        else:
            continue
        yield Problem(config.name, where, message, "model-metrics")
