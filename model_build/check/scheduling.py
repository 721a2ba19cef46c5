"""Triton's batching and sequence-batching rules (part of `ValidateModelConfig`).

From triton-inference-server/core `src/model_config_utils.cc`: preferred batch sizes, priority levels,
`preserve_ordering`, and `GetBooleanSequenceControlProperties` / `GetTypedSequenceControlProperties`
for the sequence-batching control tensors.
"""

from __future__ import annotations

from collections.abc import Iterator

from tritonclient.grpc import model_config_pb2 as pb

from model_build.check.problems import Problem
from model_build.check.schema import ModelConfig

DataType = pb.DataType
Control = pb.ModelSequenceBatching.Control


def dynamic_batching_problems(config: ModelConfig) -> Iterator[Problem]:
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
            field_names = ("int32_false_true", "fp32_false_true", "bool_false_true")
            field_name = next(option for option, count in zip(field_names, counts, strict=True) if count)
            if max(counts) != 2:
                return (
                    f"sequence batching control '{field_name}' must have exactly 2 entries for {kind_name} for {name}"
                )
    return None


def _corrid_type(batcher) -> int | None:
    for control_input in batcher.control_input:
        for control in control_input.control:
            if control.kind == Control.CONTROL_SEQUENCE_CORRID:
                return control.data_type
    return None


def sequence_batching_problems(config: ModelConfig) -> Iterator[Problem]:
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
