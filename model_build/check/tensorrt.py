"""The TensorRT backend's own rules for a `tensorrt_plan` config, checked before any engine exists.

From triton-inference-server/tensorrt_backend (branches r23.12 .. r26.05, read on 2026-11-24):
- `src/instance_state.cc`: every model instance must be a GPU instance ("TensorRT backend supports
  only GPU device"); KIND_MODEL needs the multi-device build, which no release in
  serving_facts.releases has.
- `src/instance_state.cc` `ValidateIO` / `ValidateIOHelper`: every input and output data type must map
  to a TensorRT type (`ConvertDataTypeToTrtType`, which differs per release: see serving_facts.releases).

Both run when Triton creates the model, after the config was accepted at load time.
"""

from __future__ import annotations

from collections.abc import Iterator

from tritonclient.grpc import model_config_pb2 as pb

from model_build.check.problems import Problem
from model_build.check.schema import TENSORRT_PLATFORM, ModelConfig
from model_build.check.target import Target
from serving_facts.releases import ANY_TENSORRT_CONFIG_TYPE, release

InstanceKind = pb.ModelInstanceGroup.Kind


def tensorrt_problems(config: ModelConfig, target: Target) -> Iterator[Problem]:
    """The TensorRT backend's device and data-type rules (nothing for other platforms)."""
    if config.platform != TENSORRT_PLATFORM:
        return
    yield from _device_problems(config)
    yield from _data_type_problems(config, target)


def _device_problems(config: ModelConfig) -> Iterator[Problem]:
    # KIND_AUTO is left as is only when the target's GPUs are unknown: on a GPU host it becomes KIND_GPU.
    for index, group in enumerate(config.instance_group):
        if group.kind in (InstanceKind.KIND_CPU, InstanceKind.KIND_MODEL):
            kind = InstanceKind.Name(group.kind)
            yield Problem(
                config.name,
                f"instance_group[{index}].kind",
                f"unable to load model '{config.name}', TensorRT backend supports only GPU device "
                f"(instance group {group.name} has kind {kind}; use KIND_GPU, or onnxruntime_onnx for CPU serving)",
                "tensorrt-device",
            )
            return  # the backend stops at the first instance it cannot create


def _data_type_problems(config: ModelConfig, target: Target) -> Iterator[Problem]:
    name = target.triton_release
    allowed = release(name).tensorrt_config_types if name else ANY_TENSORRT_CONFIG_TYPE
    # Releases before 24.05 print the message without a space after "datatype" (r23.12..r24.03 source).
    gap = "" if name and name < "24.05" else " "
    where = f"Triton {name}'s" if name else "every release's"
    for kind, tensors in (("input", config.input), ("output", config.output)):
        for index, io in enumerate(tensors):
            if io.data_type == pb.DataType.TYPE_INVALID:
                continue  # Triton's own io rule reports it first
            data_type = pb.DataType.Name(io.data_type)
            if data_type in allowed:
                continue
            yield Problem(
                config.name,
                f"{kind}[{index}].data_type",
                f"unsupported datatype{gap}{data_type} for {kind} '{io.name}' for model '{config.name}' "
                f"({where} TensorRT backend takes {', '.join(sorted(allowed))})",
                "tensorrt-data-type",
            )
