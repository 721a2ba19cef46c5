"""Property-based tests of the model-repository checker and of `config` (issue #22 E2, B6, B7).

Generated inputs, three oracles:

1. `config` never writes what its own `check` or `package` refuses (B6): a generated ONNX graph (ranks,
   dynamic/fixed axes, scalars, element types) with generated settings (platform, batching, warm-up, shape
   ranges, release) is either refused by `config` with a message naming the ONNX file, or written, and then
   `check` passes it and `package` packs it.
2. Mutated model folders (config.pbtxt edits, bytes, version folder names, links, empty files) are judged by
   `check` without a traceback, every problem naming model, field and rule on one line; and `package` packs the
   folder exactly when `check` finds nothing in it (B7: `package` applies every rule `check` applies).
3. Where cheap, Triton itself: mutated onnxruntime configs, many per repository, are given to the CPU
   tritonserver of `.venv-triton` with `--strict-model-config=true` (../shared/README.md, "Tooling facts"); a
   config Triton refuses at its poll is refused by `check`, and one `check` accepts is not refused by Triton.

Runs are bounded (max_examples, no deadline) so the file takes well under a minute here. Failures found while
writing these properties are kept as `@example`s (the regression corpus).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx_fixtures import OPSET, save
from pydantic import ValidationError

from model_build.check import check_repository
from model_build.check.problems import Problem
from model_build.errors import ModelBuildError
from model_build.package import package_repository
from model_build.stage_repository import write_onnx_model
from serving_facts.settings import ModelSettings

# MODEL_BUILD_PROPERTY_EXAMPLES=1500 for a longer hunt (both properties passed 1500 examples on 2026-11-27).
BOUNDED = hypothesis_settings(
    max_examples=int(os.environ.get("MODEL_BUILD_PROPERTY_EXAMPLES", "40")),
    deadline=None,
    database=None,  # nothing written into the working tree; the regression corpus is the @examples
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# --- 1. config never writes what check or package refuses -------------------------------------------------

ELEMENT_TYPES = [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL,
                 TensorProto.UINT8, TensorProto.DOUBLE, TensorProto.STRING]  # fmt: skip
DIM = st.sampled_from(["batch", "seq", 1, 2, 3])
TENSOR = st.tuples(st.sampled_from(ELEMENT_TYPES), st.lists(DIM, min_size=0, max_size=3))


def graph(path: Path, tensors: list[tuple[int, list]], loose: tuple[bool, ...] = ()) -> Path:
    """One Identity per input, so each output has its input's type and shape; a `loose` output declares its
    fixed dims as symbols, which ONNX Runtime's shape inference makes fixed again (issue #22 B1)."""
    inputs = [helper.make_tensor_value_info(f"in{i}", kind, dims) for i, (kind, dims) in enumerate(tensors)]
    outputs = [
        helper.make_tensor_value_info(
            f"out{i}",
            kind,
            [
                f"o{i}_{axis}" if i < len(loose) and loose[i] and isinstance(d, int) else d
                for axis, d in enumerate(dims)
            ],
        )
        for i, (kind, dims) in enumerate(tensors)
    ]
    nodes = [helper.make_node("Identity", [f"in{i}"], [f"out{i}"]) for i in range(len(tensors))]
    return save(helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=OPSET), path)


@st.composite
def model_settings(draw, tensors: list[tuple[int, list]]) -> dict:
    platform = draw(st.sampled_from(["onnxruntime_onnx", "tensorrt_plan"]))
    max_batch_size = draw(st.sampled_from([0, 1, 4, 16]))
    fields: dict = {"name": "m", "source": {"path": "m.onnx"}, "platform": platform, "max_batch_size": max_batch_size}
    if max_batch_size == 0 or draw(st.booleans()):
        fields["dynamic_batching"] = {"enabled": False}
    if platform == "onnxruntime_onnx":
        fields["instance_groups"] = [{"kind": draw(st.sampled_from(["KIND_CPU", "KIND_GPU"]))}]
    fields["warmup"] = draw(st.booleans())
    shapes = []
    for index, (_, dims) in enumerate(tensors):
        axes = dims[1:] if max_batch_size else dims
        if any(isinstance(d, str) for d in axes) and draw(st.booleans()):
            low = [1 if isinstance(d, str) else d for d in axes]
            high = [draw(st.sampled_from([1, 4, 8])) if isinstance(d, str) else d for d in axes]
            shapes.append({"input": f"in{index}", "min": low, "opt": high, "max": high})
    if shapes:
        fields["tensorrt"] = {"shapes": shapes}
    return fields


@st.composite
def model_cases(draw):
    tensors = draw(st.lists(TENSOR, min_size=1, max_size=3))
    loose = tuple(draw(st.lists(st.booleans(), min_size=len(tensors), max_size=len(tensors))))
    release = draw(st.sampled_from([None, "24.01", "24.05", "24.09", "25.04"]))
    return tensors, draw(model_settings(tensors)), release, loose


@BOUNDED
@given(model_cases())
@example(([(TensorProto.FLOAT, [])], {"name": "m", "source": {"path": "m.onnx"}, "platform": "onnxruntime_onnx",
          "max_batch_size": 0, "dynamic_batching": {"enabled": False}, "warmup": True}, None))  # fmt: skip
@example(([(TensorProto.FLOAT, ["batch", "seq"])], {"name": "m", "source": {"path": "m.onnx"},
          "platform": "onnxruntime_onnx", "max_batch_size": 4, "warmup": True}, None))  # fmt: skip
@example(([(TensorProto.FLOAT, [1])], {"name": "m", "source": {"path": "m.onnx"}, "platform": "onnxruntime_onnx",
          "max_batch_size": 1, "instance_groups": [{"kind": "KIND_CPU"}], "warmup": False}, None))  # fmt: skip
def test_config_never_writes_what_check_or_package_refuses(case):
    tensors, fields, release, *rest = case
    loose = rest[0] if rest else ()
    try:
        model = ModelSettings.model_validate(fields)
    except ValidationError:
        assume(False)  # the settings schema refuses it: the loader's tests own that
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        onnx_path = graph(work / "m.onnx", tensors, loose)
        try:
            write_onnx_model(work / "repo", model, onnx_path, release, with_onnx=True)
        except ModelBuildError as error:
            assert str(error).startswith(str(onnx_path)), error  # a clean refusal naming the file
            assert not (work / "repo" / "m" / "config.pbtxt").exists()
            return
        engines = ["m"] if model.platform == "tensorrt_plan" else []
        problems = check_repository(work / "repo", triton_release=release, engines_from_onnx=engines)
        assert problems == [], (problems, (work / "repo" / "m" / "config.pbtxt").read_text())
        package_repository(work / "repo", work / "out", engines_from_onnx=engines)


# --- 2. check never crashes; package packs exactly what check passes -----------------------------------------

BASE = (
    'name: "m"\nbackend: "python"\nmax_batch_size: 0\n'
    'input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    'output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
NUMBER = st.one_of(st.integers(-3, 20), st.sampled_from([2**31, 2**63 - 1, 2**63, -(2**63)]))
PATHISH = st.one_of(TEXT, st.sampled_from(["../x", "/etc/passwd", "a/../../b", "ok.bin", "..", "sub/ok.bin"]))


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


FIELD_LINES = st.one_of(
    NUMBER.map(lambda n: f"max_batch_size: {n}"),
    st.sampled_from(["python", "onnxruntime", "", "tensorrt"]).map(lambda b: f"backend: {_quoted(b)}"),
    st.sampled_from(["onnxruntime_onnx", "tensorrt_plan", "ensemble", "x"]).map(lambda p: f"platform: {_quoted(p)}"),
    PATHISH.map(lambda r: f"runtime: {_quoted(r)}"),
    NUMBER.map(lambda n: f"instance_group [ {{ kind: KIND_CPU count: {n} }} ]"),
    NUMBER.map(lambda n: f"dynamic_batching {{ max_queue_delay_microseconds: {n} }}"),
    NUMBER.map(lambda n: f"version_policy {{ specific {{ versions: [ {n} ] }} }}"),
    PATHISH.map(
        lambda f: (
            'model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value { data_type: TYPE_FP32 '
            f"dims: [ 1 ] input_data_file: {_quoted(f)} }} }} }} ]"
        )
    ),
    PATHISH.map(lambda v: f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: {_quoted(v)} }} }}'),
    st.lists(NUMBER, max_size=3).map(lambda d: f'input [ {{ name: "z" data_type: TYPE_FP32 dims: {d} }} ]'),
    TEXT,  # anything at all
)
FOLDER_NAMES = st.one_of(
    st.sampled_from(["2", "01", "9223372036854775807", "9223372036854775808", "12abc", "+3", "-1", "warmup", "٣", "3"]),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=8),
)


@st.composite
def mutations(draw) -> list[tuple[str, object]]:
    return draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("append"), FIELD_LINES),
                st.tuples(st.just("drop-line"), st.integers(0, 6)),
                st.tuples(st.just("truncate"), st.integers(0, len(BASE))),
                st.tuples(st.just("bytes"), st.binary(max_size=40)),
                st.tuples(st.just("folder"), FOLDER_NAMES),
                st.tuples(st.just("file"), FOLDER_NAMES),
                st.tuples(st.just("hard-link"), st.just(None)),
                st.tuples(st.just("symlink"), st.just(None)),
            ),
            min_size=1,
            max_size=4,
        )
    )


def mutate(repo: Path, outside: Path, steps: list[tuple[str, object]]) -> None:
    folder = repo / "m"
    config = folder / "config.pbtxt"
    for kind, value in steps:
        data = config.read_bytes()
        if kind == "append":
            config.write_bytes(data + f"{value}\n".encode())
        elif kind == "drop-line":
            lines = data.split(b"\n")
            del lines[value % len(lines)]
            config.write_bytes(b"\n".join(lines))
        elif kind == "truncate":
            config.write_bytes(data[:value])
        elif kind == "bytes":
            config.write_bytes(value)
        elif kind in ("folder", "file"):
            if "/" in value or "\0" in value or value in (".", ".."):
                continue
            target = folder / value
            if target.exists():
                continue
            try:
                target.mkdir() if kind == "folder" else target.write_bytes(b"x")
            except OSError:
                continue  # a name this file system cannot hold
        elif kind == "hard-link":
            if not (folder / "1" / "data.bin").exists():
                os.link(outside, folder / "1" / "data.bin")
        elif kind == "symlink" and not (folder / "1" / "link.bin").exists():
            (folder / "1" / "link.bin").symlink_to(outside)


def well_formed(problem: Problem) -> bool:
    return (
        isinstance(problem, Problem)
        and bool(problem.model)
        and bool(problem.rule)
        and bool(problem.message.strip())
        and "\n" not in str(problem)
    )


ORT_MODEL_BASE = (
    'name: "m"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 4\n'
    'input [ { name: "in0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
    'output [ { name: "out0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
    "instance_group [ { kind: KIND_CPU } ]\n"
)
IO_LINES = st.one_of(
    st.tuples(st.sampled_from(["input", "output"]), st.sampled_from(["in0", "out0", "x"]),
              st.sampled_from(["TYPE_FP32", "TYPE_INT64", "TYPE_STRING"]), st.lists(NUMBER, max_size=3)).map(
        lambda t: f'{t[0]} [ {{ name: "{t[1]}" data_type: {t[2]} dims: {t[3]} }} ]'
    ),
)  # fmt: skip


@BOUNDED
@given(st.sampled_from(["python", "onnxruntime"]), mutations(), st.lists(IO_LINES, max_size=2))
@example("python", [("folder", "9223372036854775808")], [])
@example("python", [("append", 'runtime: "../../x.so"')], [])
@example("python", [("bytes", b"")], [])
@example("python", [("append", 'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "/opt/env" } }')], [])
@example("python", [("hard-link", None)], [])
@example("python", [("append", 'name: "other"')], [])
def test_check_judges_every_mutation_and_package_agrees(base, steps, io_lines):
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        repo = work / "repo"
        (repo / "m" / "1").mkdir(parents=True)
        if base == "python":
            (repo / "m" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
            config = BASE
        else:
            graph(repo / "m" / "1" / "model.onnx", [(TensorProto.FLOAT, ["batch", 3])])
            config = ORT_MODEL_BASE
        (repo / "m" / "config.pbtxt").write_text(config + "".join(f"{line}\n" for line in io_lines))
        (work / "outside.bin").write_bytes(b"outside the repository")
        mutate(repo, work / "outside.bin", steps)

        problems = check_repository(repo)  # no traceback, whatever the folder holds

        assert all(well_formed(problem) for problem in problems), problems
        try:
            package_repository(repo, work / "out", models=["m"])
        except ModelBuildError as error:
            assert str(error).strip()
            assert problems, f"package refused what check passes: {error}"
        else:
            assert problems == [], f"package packed what check refuses: {problems}"


# --- 3. Triton's own verdict on mutated onnxruntime configs -----------------------------------------------------

ORT_BASE = (
    'platform: "onnxruntime_onnx"\nmax_batch_size: 4\n'
    'input [ { name: "x" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
    'output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
)
ORT_LINES = st.one_of(
    NUMBER.map(lambda n: f"max_batch_size: {n}"),
    st.lists(NUMBER, max_size=3).map(lambda d: f'input [ {{ name: "x2" data_type: TYPE_FP32 dims: {d} }} ]'),
    st.lists(NUMBER, max_size=3).map(lambda d: f'output [ {{ name: "y2" data_type: TYPE_INT8 dims: {d} }} ]'),
    st.lists(NUMBER, min_size=1, max_size=3).map(
        lambda p: f"dynamic_batching {{ preferred_batch_size: {p} max_queue_delay_microseconds: 10 }}"
    ),
    NUMBER.map(lambda n: f"instance_group [ {{ kind: KIND_CPU count: {n} }} ]"),
    NUMBER.map(lambda n: f"version_policy {{ latest {{ num_versions: {n} }} }}"),
    st.sampled_from(["x", "y", "z"]).map(lambda n: f'input [ {{ name: "{n}" data_type: TYPE_FP32 dims: [ 3 ] }} ]'),
    st.sampled_from(["TYPE_STRING", "TYPE_INVALID", "TYPE_BF16"]).map(
        lambda t: f'output [ {{ name: "w" data_type: {t} dims: [ 1 ] }} ]'
    ),
    PATHISH.map(lambda r: f"runtime: {_quoted(r)}"),
    st.just("sequence_batching { max_sequence_idle_microseconds: 5 }"),
    st.just("model_transaction_policy { decoupled: true }\nresponse_cache { enable: true }"),
    st.just('ensemble_scheduling { step [ { model_name: "a" model_version: -1 } ] }'),
    st.lists(NUMBER, max_size=2).map(
        lambda d: f'input [ {{ name: "r" data_type: TYPE_FP32 dims: [ 4 ] reshape {{ shape: {d} }} }} ]'
    ),
    st.sampled_from(["BATCH_ELEMENT_COUNT", "BATCH_ACCUMULATED_ELEMENT_COUNT", "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"]).map(
        lambda k: f'batch_input [ {{ kind: {k} target_name: "b" data_type: TYPE_FP32 source_input: "x" }} ]'
    ),
    st.sampled_from(["TYPE_INT32", "TYPE_FP32", "TYPE_STRING"]).map(
        lambda t: (
            'sequence_batching { control_input [ { name: "s" control [ { kind: CONTROL_SEQUENCE_START '
            f"int32_false_true: [ 0, 1 ] data_type: {t} }} ] }} ] }}"
        )
    ),
    NUMBER.map(lambda n: f"optimization {{ graph {{ level: {n} }} }}"),
    NUMBER.map(lambda n: f"dynamic_batching {{ priority_levels: {n} default_priority_level: 2 }}"),
)


# Rules Triton applies after the poll (backend library lookup), besides test_check_vs_triton's AFTER_POLL_RULES.
LATER_RULES = {"config-paths"}


@pytest.mark.triton
@hypothesis_settings(
    max_examples=int(os.environ.get("MODEL_BUILD_TRITON_EXAMPLES", "3")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(st.lists(ORT_LINES, min_size=1, max_size=3), min_size=6, max_size=10))
def test_triton_agrees_with_check_on_mutated_configs(configs):
    """Every model fails in this CPU Triton (no ONNX Runtime backend), so the server exits by itself; what
    matters is which configs it refuses at its poll (`Poll failed for model directory`)."""
    from test_check_vs_triton import AFTER_POLL_RULES, TRITON, triton_refusals

    if TRITON is None:
        pytest.skip("no CPU Triton: run `make .venv-triton/.stamp`")
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder) / "repo"
        for index, lines in enumerate(configs):
            model = repo / f"m{index}"
            (model / "1").mkdir(parents=True)
            (model / "config.pbtxt").write_text(
                f'name: "m{index}"\n' + ORT_BASE + "".join(f"{line}\n" for line in lines)
            )
        ours: dict[str, list[Problem]] = {}
        for problem in check_repository(repo, configs_only=True):
            if problem.rule not in AFTER_POLL_RULES:
                ours.setdefault(problem.model, []).append(problem)
        theirs = triton_refusals(repo)
        for index in range(len(configs)):
            name = f"m{index}"
            text = (repo / name / "config.pbtxt").read_text()
            if name in theirs:
                assert name in ours, f"Triton refused {name} ({theirs[name]}); check passed it:\n{text}"
            else:
                # Not refused at the poll: only rules Triton applies when it loads the backend may refuse it.
                early = [str(problem) for problem in ours.get(name, []) if problem.rule not in LATER_RULES]
                assert not early, f"check refused {name}, which Triton's poll accepts: {early}\n{text}"
        shutil.rmtree(repo)
