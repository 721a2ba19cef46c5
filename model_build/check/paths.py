"""Paths a config names, which must stay inside what is packaged: the backend `runtime` and warm-up data files.

- `runtime`: triton-inference-server/core `src/backend_model.cc` `GetBackendLibraryProperties` looks the name
  up in the backend folders and refuses a library path that climbs out ("backend library name '...' escapes
  backend directory '...', for model '...', check model config runtime field"). On SageMaker's image only
  the shipped backends exist, so `runtime` is a file name: no folder, no '..', no absolute path.
- `model_warmup[].inputs[].input_data_file`: core `src/backend_model_instance.cc` reads
  `JoinPath({model path, "warmup", input_data_file})`: a name with '..' or an absolute path reads a file
  outside the model folder (which is not packaged), so it must be a path inside `<model>/warmup/`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from pathlib import Path

from model_build.check.problems import Problem
from model_build.check.schema import ModelConfig

RULE = "config-paths"
WARMUP_FOLDER = "warmup"  # core kWarmupDataFolder


def inside(relative: str) -> bool:
    """Whether `relative` names something strictly below the folder it is joined to."""
    if not relative or relative.startswith("/") or "\\" in relative or "\0" in relative:
        return False
    normal = posixpath.normpath(relative)
    return normal not in (".", "..") and not normal.startswith("../")


def path_problems(config: ModelConfig) -> Iterator[Problem]:
    name = config.name
    runtime = config.runtime
    if runtime and ("/" in runtime or "\\" in runtime or runtime in (".", "..") or "\0" in runtime):
        yield Problem(
            name,
            "runtime",
            f"backend library name '{runtime}' escapes backend directory, for model '{name}', check model config "
            "runtime field (give a library file name such as libtriton_onnxruntime.so or model.py, no folders)",
            RULE,
        )
    for index, sample in enumerate(config.model_warmup):
        for tensor, data in sorted(sample.inputs.items()):
            if data.WhichOneof("input_data_type") != "input_data_file":
                continue
            if not inside(data.input_data_file):
                yield Problem(
                    name,
                    f"model_warmup[{index}].inputs[{tensor}].input_data_file",
                    f"'{data.input_data_file}' is not a path inside the model's {WARMUP_FOLDER}/ folder, where Triton "
                    f"reads warm-up data (<model>/{WARMUP_FOLDER}/<input_data_file>); only the model folder is "
                    "packaged: put the file there and name it relative to it",
                    RULE,
                )


def warmup_file_problems(folder: Path, config: ModelConfig) -> Iterator[Problem]:
    """Each warm-up data file inside `<model>/warmup/` exists as a regular file (core ReadTextFile fails the load)."""
    for index, sample in enumerate(config.model_warmup):
        for tensor, data in sorted(sample.inputs.items()):
            if data.WhichOneof("input_data_type") != "input_data_file" or not inside(data.input_data_file):
                continue
            path = folder / WARMUP_FOLDER / posixpath.normpath(data.input_data_file)
            if not path.is_file() or path.is_symlink():
                yield Problem(
                    config.name,
                    f"model_warmup[{index}].inputs[{tensor}].input_data_file",
                    f"{WARMUP_FOLDER}/{data.input_data_file} is not a file in the model folder: Triton fails the "
                    "model's load when a warm-up sample cannot be read; add it or use zero_data / random_data",
                    RULE,
                )
