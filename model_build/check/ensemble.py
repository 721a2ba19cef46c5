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


# Ensembles nest at most this deep: an ensemble whose step is an ensemble whose step is ... counts one level per
# ensemble. Triton sets no limit; ours is far above any real pipeline and keeps `check` and `package` (which follows
# the steps to collect the composing folders, model_build.ensemble_config.composing_closure) bounded and agreeing.
MAX_ENSEMBLE_DEPTH = 16


def nesting_message(name: str) -> str:
    """The one message for an ensemble nested too deep, from `check` and from `package`."""
    return (
        f"ensemble {name} nests ensembles more than {MAX_ENSEMBLE_DEPTH} deep (a step's model is an ensemble whose "
        "step's model is an ensemble ...; a cycle of ensembles nests without end); flatten the pipeline"
    )


@dataclass(eq=False)
class _Tensor:
    """Triton's TensorNode: an ensemble tensor, the model its type and shape come from, its decoupled label.

    Triton links every output of a step to every input of it (prev/next); here the step is a node of its own
    (`_Step`, Triton's "sibling"), so a step of N inputs and M outputs costs N + M links, not N x M."""

    model: str
    data_type: int = pb.TYPE_INVALID
    dims: tuple[int, ...] = ()
    full_dims: tuple[int, ...] = ()
    is_decoupled: bool = False
    label: int = 0
    visited: bool = False
    consumers: list[_Step] = field(default_factory=list)


@dataclass(eq=False)
class _Step:
    """One step (or the ensemble's sink): its input and output tensors, the label its outputs share, and how many
    of its inputs are not visited yet (each mapping counts, as Triton's prev list holds each)."""

    model: str
    inputs: list[_Tensor] = field(default_factory=list)
    outputs: list[_Tensor] = field(default_factory=list)
    label: int = 0
    visited: bool = False
    pending: int = 0


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


def _map_step(
    ensemble: str, step, model: ModelConfig, decoupled: bool, tensors: dict[str, _Tensor]
) -> tuple[str | None, _Step | None]:
    """Triton's ValidateTensorMapping for one step: (first problem or None, the step's node linking its tensors).
    Dictionary lookups throughout: a scan of the map per input was quadratic in the step's tensor count."""
    step_model = step.model_name
    batching = model.max_batch_size > 0
    input_names = {io.name for io in model.input}
    for model_input, tensor_name in step.input_map.items():
        if model_input not in input_names:
            return (
                f"in ensemble {ensemble}, ensemble tensor {tensor_name} is mapping to non-existing input "
                f"{model_input} in model {step_model}"
            ), None
    for model_input in model.input:
        if model_input.name not in step.input_map:
            if model_input.optional:
                continue
            return (
                f"in ensemble {ensemble}, input {model_input.name} in model {step_model} is not mapped to any "
                "ensemble tensors"
            ), None
        tensor_name = step.input_map[model_input.name]
        node = _tensor(step_model, batching, model_input.data_type, model_input.dims)
        existing = tensors.get(tensor_name)
        if existing is not None:
            error = _consistency(existing, node, f"in ensemble {ensemble}, ensemble tensor {tensor_name}: ")
            if error:
                return error, None
        else:
            tensors[tensor_name] = node
    outputs = {io.name: io for io in model.output}
    for model_output, tensor_name in step.output_map.items():
        if model_output not in outputs:
            return (
                f"in ensemble {ensemble}, ensemble tensor {tensor_name} is mapped from non-existing output "
                f"{model_output} in model {step_model}"
            ), None
    for model_output, tensor_name in step.output_map.items():
        io = outputs[model_output]
        node = _tensor(step_model, batching, io.data_type, io.dims)
        existing = tensors.get(tensor_name)
        if existing is not None:
            error = _consistency(existing, node, f"in ensemble {ensemble}, ensemble tensor {tensor_name}: ")
            if error:
                return error, None
        else:
            tensors[tensor_name] = node
    node = _Step(step_model)
    node.outputs = [tensors[tensor_name] for tensor_name in step.output_map.values()]
    for produced in node.outputs:
        produced.is_decoupled = decoupled
    node.inputs = [tensors[tensor_name] for tensor_name in step.input_map.values()]
    for source in node.inputs:
        source.consumers.append(node)
    node.pending = len(node.inputs)
    return None, node


def _decoupled_flow(ensemble: ModelConfig, tensors: dict[str, _Tensor]) -> tuple[str | None, bool]:
    """Triton's decoupled-branch walk: (problem or None, whether the ensemble ends up decoupled).

    A step is taken once all its inputs are visited (its `pending` count reaches 0, instead of Triton's
    re-scanning every prev list each time one of them is reached); its outputs then get their labels as in
    Triton: a decoupled step starts a new label, any other passes its inputs' label on, and inputs of different
    labels meeting in one step are refused."""
    labels = 0
    queue: deque[_Tensor] = deque()
    for ensemble_input in ensemble.input:
        node = tensors[ensemble_input.name]
        if not node.visited:
            node.visited = True
            queue.append(node)
    while queue:
        for step in queue.popleft().consumers:
            step.pending -= 1
            if step.pending:
                continue
            first_label = step.inputs[0].label
            for node in step.outputs:
                if node.visited:
                    continue
                if any(source.label != first_label for source in step.inputs):
                    return (
                        f"in ensemble {ensemble.name}, step of model '{node.model}' receives inputs originated from "
                        "different decoupled models"
                    ), False
                if step.visited:
                    node.label = step.label
                else:
                    if node.is_decoupled:
                        labels += 1
                    node.label = labels if node.is_decoupled else first_label
                    step.label = node.label
                    step.visited = True
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
    # The ensemble's outputs feed a sink: it is taken (and its inputs' labels compared) once all are visited.
    sink = _Step(ensemble.name, outputs=[_Tensor(ensemble.name)])
    for io in ensemble.output:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        node = tensors.setdefault(io.name, _tensor(ensemble.name, batching, io.data_type, dims))
        sink.inputs.append(node)
        node.consumers.append(sink)
    sink.pending = len(sink.inputs)
    for step in ensemble.ensemble_scheduling.step:
        model = configs[step.model_name]
        if model.max_batch_size != 0 and model.max_batch_size < ensemble.max_batch_size:
            return (
                f"ensemble {ensemble.name} allows maximum batch size {ensemble.max_batch_size}, but it contains model "
                f"{step.model_name} which only allows maximum batch size to be {model.max_batch_size}"
            ), False
        error, _ = _map_step(ensemble.name, step, model, decoupled[step.model_name], tensors)
        if error:
            return error, False
    return _decoupled_flow(ensemble, tensors)


def _step_models(models: Mapping[str, CheckedModel], name: str) -> list[str]:
    model = models[name]
    if not model.is_ensemble or model.config is None:
        return []
    return [s.model_name for s in model.config.ensemble_scheduling.step if s.model_name in models]


def _too_deep(models: Mapping[str, CheckedModel], start: str) -> bool:
    """Whether ensembles nest more than MAX_ENSEMBLE_DEPTH levels below `start` (itself the first level): a walk
    of at most that many levels, whatever the repository holds."""
    level = {start}
    for _ in range(MAX_ENSEMBLE_DEPTH):
        level = {up for name in level for up in _step_models(models, name) if models[up].is_ensemble}
        if not level:
            return False
    return True


def _cycle(models: Mapping[str, CheckedModel], start: str) -> str | None:
    """Triton's CircularDependencyCheck: walks upstream from `start` (depth first, in step order) until it comes
    back. An explicit stack: a chain of thousands of ensembles must not exhaust Python's recursion limit."""
    seen = {start}
    stack = [(start, iter(_step_models(models, start)))]
    while stack:
        current, upstreams = stack[-1]
        for upstream in upstreams:
            if upstream == start:
                return f"circular dependency between ensembles: {start} -> ... -> {current} -> {start}"
            if upstream not in seen:
                seen.add(upstream)
                stack.append((upstream, iter(_step_models(models, upstream))))
                break
        else:
            stack.pop()
    return None


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
        if _too_deep(self.models, name):
            self.fail(name, "ensemble_scheduling.step.model_name", nesting_message(name), "ensemble-depth")
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
