"""Ensemble rules that need the composing models: availability, cycles, versions, tensors between steps.

Triton checks these once the composing models are loaded (`ModelRepositoryManager::DependencyGraph`:
`ConnectDependencyGraph`, `CircularDependencyCheck`, the required-version check; then
`ValidateEnsembleConfig` in triton-inference-server/core `src/ensemble_scheduler/ensemble_utils.cc`).
A CPU-only Triton never gets that far when the composing models need ONNX Runtime or TensorRT
(../shared/README.md, "Tooling facts"), so these checks are ours and follow that code line by line,
messages included. Like Triton, an ensemble is checked step by step only when everything before
passed: a broken composing model is reported once, on the ensemble as "which has no loaded version".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from tritonclient.grpc import model_config_pb2 as pb

from model_build.check.checked import CheckedModel
from model_build.check.problems import Problem
from model_build.check.schema import ModelConfig

WILDCARD = -1
NOT_FATAL_RULES = {"version-folder"}


@dataclass(eq=False)
class _Tensor:
    """Triton's TensorNode: an ensemble tensor, the model its type and shape come from, its decoupled label."""

    model: str
    data_type: int = pb.TYPE_INVALID
    dims: tuple[int, ...] = ()
    full_dims: tuple[int, ...] = ()
    is_decoupled: bool = False
    label: int = 0
    visited: bool = False
    prev: list[_Tensor] = field(default_factory=list)
    next: list[_Tensor] = field(default_factory=list)
    sibling: _Tensor | None = None


def _tensor(model: str, batching: bool, data_type: int, dims) -> _Tensor:
    dims = tuple(dims)
    return _Tensor(model, data_type, dims, ((WILDCARD,) if batching else ()) + dims)


def _same_dims(lhs: tuple[int, ...], rhs: tuple[int, ...]) -> bool:
    """Triton's CompareDimsWithWildcard."""
    return len(lhs) == len(rhs) and all(a == b or WILDCARD in (a, b) for a, b in zip(lhs, rhs, strict=True))


def _dims_text(dims: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _consistency(lhs: _Tensor, rhs: _Tensor, prefix: str) -> str | None:
    """Triton's ValidateTensorConsistency."""
    if lhs.data_type != rhs.data_type:
        return (
            f"{prefix}inconsistent data type: {pb.DataType.Name(lhs.data_type)} is inferred from model {lhs.model} "
            f"while {pb.DataType.Name(rhs.data_type)} is inferred from model {rhs.model}"
        )
    # A batching and a non-batching model may share a tensor when the full shapes agree.
    if not _same_dims(lhs.dims, rhs.dims) and not _same_dims(lhs.full_dims, rhs.full_dims):
        return (
            f"{prefix}inconsistent shape: {_dims_text(lhs.full_dims)} is inferred from model {lhs.model} while "
            f"{_dims_text(rhs.full_dims)} is inferred from model {rhs.model}"
        )
    return None


def _map_step(ensemble: str, step, model: ModelConfig, decoupled: bool, tensors: dict[str, _Tensor]) -> str | None:
    """Triton's ValidateTensorMapping for one step: first problem or None; links the tensors."""
    step_model = step.model_name
    batching = model.max_batch_size > 0
    input_names = {io.name for io in model.input}
    for model_input, tensor_name in step.input_map.items():
        if model_input not in input_names:
            return (
                f"in ensemble {ensemble}, ensemble tensor {tensor_name} is mapping to non-existing input "
                f"{model_input} in model {step_model}"
            )
    for model_input in model.input:
        mapped = [tensor_name for key, tensor_name in step.input_map.items() if key == model_input.name]
        if not mapped:
            if model_input.optional:
                continue
            return (
                f"in ensemble {ensemble}, input {model_input.name} in model {step_model} is not mapped to any "
                "ensemble tensors"
            )
        node = _tensor(step_model, batching, model_input.data_type, model_input.dims)
        existing = tensors.get(mapped[0])
        if existing is not None:
            error = _consistency(existing, node, f"in ensemble {ensemble}, ensemble tensor {mapped[0]}: ")
            if error:
                return error
        else:
            tensors[mapped[0]] = node
    outputs = {io.name: io for io in model.output}
    for model_output, tensor_name in step.output_map.items():
        if model_output not in outputs:
            return (
                f"in ensemble {ensemble}, ensemble tensor {tensor_name} is mapped from non-existing output "
                f"{model_output} in model {step_model}"
            )
    sibling = _Tensor(step_model)
    for model_output, tensor_name in step.output_map.items():
        io = outputs[model_output]
        node = _tensor(step_model, batching, io.data_type, io.dims)
        existing = tensors.get(tensor_name)
        if existing is not None:
            error = _consistency(existing, node, f"in ensemble {ensemble}, ensemble tensor {tensor_name}: ")
            if error:
                return error
        else:
            existing = tensors[tensor_name] = node
        existing.sibling = sibling
    for tensor_name in step.output_map.values():
        produced = tensors[tensor_name]
        produced.is_decoupled = decoupled
        for source_name in step.input_map.values():
            source = tensors[source_name]
            produced.prev.append(source)
            source.next.append(produced)
    return None


def _decoupled_flow(ensemble: ModelConfig, tensors: dict[str, _Tensor]) -> tuple[str | None, bool]:
    """Triton's decoupled-branch walk: (problem or None, whether the ensemble ends up decoupled)."""
    labels = 0
    queue: deque[_Tensor] = deque()
    for ensemble_input in ensemble.input:
        node = tensors[ensemble_input.name]
        node.visited = True
        queue.append(node)
    while queue:
        for node in queue.popleft().next:
            if node.visited or not all(prev.visited for prev in node.prev):
                continue
            first_label = node.prev[0].label
            if any(prev.label != first_label for prev in node.prev):
                return (
                    f"in ensemble {ensemble.name}, step of model '{node.model}' receives inputs originated from "
                    "different decoupled models"
                ), False
            if node.sibling is not None and node.sibling.visited:
                node.label = node.sibling.label
            else:
                if node.is_decoupled:
                    labels += 1
                node.label = labels if node.is_decoupled else first_label
                if node.sibling is not None:
                    node.sibling.label = node.label
                    node.sibling.visited = True
            node.visited = True
            queue.append(node)
    return None, labels != 0


def _validate_against_models(
    ensemble: ModelConfig, configs: Mapping[str, ModelConfig], decoupled: Mapping[str, bool]
) -> tuple[str | None, bool]:
    """Triton's ValidateEnsembleConfig: batch sizes, tensor mapping, types, shapes, decoupled branches."""
    batching = ensemble.max_batch_size > 0
    tensors: dict[str, _Tensor] = {}
    for io in ensemble.input:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        tensors.setdefault(io.name, _tensor(ensemble.name, batching, io.data_type, dims))
    sink = _Tensor(ensemble.name)
    for io in ensemble.output:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        node = tensors.setdefault(io.name, _tensor(ensemble.name, batching, io.data_type, dims))
        sink.prev.append(node)
        node.next.append(sink)
    for step in ensemble.ensemble_scheduling.step:
        model = configs[step.model_name]
        if model.max_batch_size != 0 and model.max_batch_size < ensemble.max_batch_size:
            return (
                f"ensemble {ensemble.name} allows maximum batch size {ensemble.max_batch_size}, but it contains model "
                f"{step.model_name} which only allows maximum batch size to be {model.max_batch_size}"
            ), False
        error = _map_step(ensemble.name, step, model, decoupled[step.model_name], tensors)
        if error:
            return error, False
    return _decoupled_flow(ensemble, tensors)


def _cycle(models: Mapping[str, CheckedModel], start: str) -> str | None:
    """Triton's CircularDependencyCheck: walks upstream from `start` until it comes back."""
    seen: set[str] = set()

    def walk(current: str) -> str | None:
        seen.add(current)
        config = models[current].config
        for step in config.ensemble_scheduling.step if models[current].is_ensemble else ():
            upstream = step.model_name
            if upstream == start:
                return f"circular dependency between ensembles: {start} -> ... -> {current} -> {start}"
            if upstream in models and upstream not in seen:
                found = walk(upstream)
                if found:
                    return found
        return None

    return walk(start)


class _EnsembleChecker:
    def __init__(self, models: Mapping[str, CheckedModel]) -> None:
        self.models = models
        self.failures: dict[str, str] = {}  # model -> the first error Triton would log when loading it
        self.decoupled: dict[str, bool] = {}
        self.problems: list[Problem] = []
        for name, model in models.items():
            # A stray non-version folder only makes Triton log a warning: the model still loads.
            fatal = [problem for problem in model.problems if problem.rule not in NOT_FATAL_RULES]
            if fatal:
                self.failures[name] = fatal[0].message
            elif model.config is not None:
                self.decoupled[name] = model.config.model_transaction_policy.decoupled
        self.done: set[str] = set()

    def fail(self, ensemble: str, field_name: str, message: str, rule: str) -> None:
        self.problems.append(Problem(ensemble, field_name, message, rule))
        self.failures[ensemble] = message

    def check(self, name: str) -> None:
        """Check one ensemble after the ensembles it depends on (Triton loads upstream first)."""
        if name in self.done:
            return
        self.done.add(name)
        if name in self.failures:
            return
        config = self.models[name].config
        steps = config.ensemble_scheduling.step
        missing = sorted({step.model_name for step in steps if step.model_name not in self.models})
        if missing:
            message = f"ensemble {name} contains models that are not available or ambiguous: {', '.join(missing)}"
            self.fail(name, "ensemble_scheduling.step.model_name", message, "ensemble-unknown-model")
            return
        cycle = _cycle(self.models, name)
        if cycle:
            self.fail(name, "ensemble_scheduling.step.model_name", cycle, "ensemble-cycle")
            return
        required: dict[str, set[int]] = {}
        for step in steps:
            required.setdefault(step.model_name, set()).add(step.model_version)
        for upstream, versions in required.items():
            if self.models[upstream].is_ensemble:
                self.check(upstream)
            if upstream in self.failures:
                message = (
                    f"ensemble '{name}' depends on '{upstream}' which has no loaded version. Model '{upstream}' "
                    f"loading failed with error: {self.failures[upstream]}"
                )
                self.fail(name, "ensemble_scheduling.step.model_name", message, "ensemble-composing-model")
                return
            loaded = self.models[upstream].versions
            for version in sorted(versions):
                if version != -1 and loaded is not None and version not in loaded:
                    message = (
                        f"ensemble '{name}' depends on '{upstream}' whose required version {version} is not loaded."
                    )
                    self.fail(name, "ensemble_scheduling.step.model_version", message, "ensemble-version")
                    return
        configs = {step.model_name: self.models[step.model_name].config for step in steps}
        error, decoupled = _validate_against_models(config, configs, self.decoupled)
        if error:
            self.fail(name, "ensemble_scheduling", error, "ensemble-tensors")
            return
        self.decoupled[name] = decoupled


def ensemble_problems(models: Mapping[str, CheckedModel]) -> list[Problem]:
    """Repository-wide ensemble problems; each ensemble's own config problems are already in its model."""
    checker = _EnsembleChecker(models)
    for name in sorted(models):
        if models[name].is_ensemble:
            checker.check(name)
    return checker.problems
