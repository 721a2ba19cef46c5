"""Rules on an ensemble's own config: steps, mappings and data flow (`ValidateEnsembleSchedulingConfig`).

From triton-inference-server/core `src/model_config_utils.cc` (`BuildEnsembleGraph`,
`ValidateEnsembleSchedulingConfig`). Triton checks these while reading the repository, before any
composing model is loaded; the rules that need the composing models are in ensemble.py.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from model_build.check.problems import Problem
from model_build.check.schema import ENSEMBLE_PLATFORM, ModelConfig
from serving_facts.settings import MAX_STEP_TENSORS


@dataclass(eq=False)
class _FlowStep:
    """One step: Triton links each of its outputs to each of its inputs; one node in between is the same flow
    at N + M links instead of N x M. `pending`: inputs not ready yet (each mapping counts)."""

    inputs: list[_FlowTensor] = field(default_factory=list)
    outputs: list[_FlowTensor] = field(default_factory=list)
    pending: int = 0


@dataclass(eq=False)
class _FlowTensor:
    name: str
    is_output: bool
    ready: bool = False
    producer: _FlowStep | None = None  # the step writing it (its `prev` are that step's inputs)
    consumers: list[_FlowStep] = field(default_factory=list)  # the steps reading it (its `next`)

    @property
    def prev(self) -> list[_FlowTensor]:
        return self.producer.inputs if self.producer is not None else []


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
        for map_name in ("input_map", "output_map"):
            count = len(getattr(step, map_name))
            if count > MAX_STEP_TENSORS:
                return tensors, (
                    f"{where}.{map_name}",
                    f"step {index} of ensemble '{name}' maps {count} tensors in its {map_name}; at most "
                    f"{MAX_STEP_TENSORS} are checked (the stage config's limit; Triton sets none): split the step",
                )
        flow = _FlowStep()
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
            tensor.producer = flow
            flow.outputs.append(tensor)
        # A protobuf map cannot hold one key twice (the text parser keeps the last), so the input side
        # needs no "mapped to multiple ensemble tensors" check here.
        for tensor_name in step.input_map.values():
            tensor = tensors.setdefault(tensor_name, _FlowTensor(tensor_name, is_output=False))
            flow.inputs.append(tensor)
            tensor.consumers.append(flow)
        flow.pending = len(flow.inputs)
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


def ensemble_scheduling_problems(config: ModelConfig) -> Iterator[Problem]:
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
        if not tensor.ready:  # (an input listed twice is one tensor: counted once)
            tensor.ready = True
            ready_queue.append(tensor)
    while ready_queue:
        for flow in ready_queue.popleft().consumers:
            flow.pending -= 1
            if flow.pending == 0:  # every input ready: its outputs are (Triton: all(prev.ready))
                for candidate in flow.outputs:
                    if not candidate.ready:
                        candidate.ready = True
                        ready_queue.append(candidate)
    outputs: set[str] = set()
    flow_problems: list[Problem] = []
    for index, ensemble_output in enumerate(config.output):
        tensor = tensors.get(ensemble_output.name)
        if tensor is None:
            message = f"ensemble output '{ensemble_output.name}' for ensemble {name}' is not used"
        elif not tensor.ready:
            detail = _not_written_detail(tensor)
            message = f"output '{ensemble_output.name}' for ensemble '{name}' is not written{detail}"
        else:
            outputs.add(tensor.name)
            continue
        flow_problems.append(Problem(name, f"output[{index}]", message, "ensemble-data-flow"))
    if flow_problems:
        # Triton stops here; an output never written would also count as an unused tensor below.
        yield from flow_problems
        return
    for tensor in tensors.values():
        if tensor.name not in outputs and (not tensor.ready or not tensor.consumers):
            yield Problem(
                name,
                "ensemble_scheduling",
                f"ensemble tensor '{tensor.name}' is unused in ensemble '{name}'",
                "ensemble-data-flow",
            )
