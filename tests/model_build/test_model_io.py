"""`check` opens the model (issue #11.4): a config must match the ONNX file it ships with, as Triton's
backends require when they load it.

Sources of the rules and of every quoted message:
- triton-inference-server/onnxruntime_backend `src/onnxruntime.cc` ValidateInputs / ValidateOutputs /
  AutoCompleteMaxBatch and `src/onnxruntime_utils.cc` CompareDimsSupported ("for the model to support
  batching the shape should have at least 1 dimension and the first dimension must be -1");
- triton-inference-server/backend `src/backend_common.cc` CheckAllowedModelInput/Output ("unexpected
  inference input 'x', allowed inputs are: ...");
- triton-inference-server/tensorrt_backend `src/instance_state.cc` (ValidateIO,
  InitializeExecuteInputBinding: "unexpected datatype TYPE_INT32 for inference input ...") and
  `src/tensorrt_utils.cc` CompareDimsSupported.
What onnxruntime itself reports for a model is the oracle for reading its inputs and outputs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnxruntime as ort
import pytest
from google.protobuf import text_format
from model_fixtures import onnx_matching
from onnx_fixtures import (
    dynamic_batch_model,
    fixed_model,
    mixed_types_model,
    run_as_configured,
    sequence_model,
    settings,
    weights_as_inputs_model,
)
from synth_helpers import PROJECT_ROOT
from tritonclient.grpc import model_config_pb2 as mc

from model_build import pbtxt
from model_build.check import check_repository
from model_build.check.model_io import DYNAMIC, read_graph_io
from model_build.key import file_sha256
from model_build.onnx_inspect import inspect_model

ORT_TYPES = {"tensor(float)": 1, "tensor(float16)": 10, "tensor(int64)": 7, "tensor(int32)": 6, "tensor(bool)": 9}
ORT_TYPES |= {"tensor(uint8)": 2}


def ort_view(path: Path) -> tuple[dict, dict, dict]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def describe(args) -> dict:
        return {a.name: (ORT_TYPES[a.type], tuple(d if isinstance(d, int) else DYNAMIC for d in a.shape)) for a in args}

    return (
        describe(session.get_inputs()),
        describe(session.get_overridable_initializers()),
        describe(session.get_outputs()),
    )


@pytest.mark.parametrize("build", [dynamic_batch_model, mixed_types_model, sequence_model, weights_as_inputs_model])
def test_inputs_and_outputs_are_read_as_onnxruntime_reports_them(tmp_path: Path, build) -> None:
    path = build(tmp_path / "model.onnx")
    graph = read_graph_io(path)
    ours = tuple(
        {n: (t.elem_type, t.dims) for n, t in side.items()} for side in (graph.inputs, graph.overridable, graph.outputs)
    )
    assert ours == ort_view(path)


def ort_repository(repo: Path, config: str, onnx_path: Path, name: str = "m") -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(config)
    (folder / "1" / "model.onnx").write_bytes(onnx_path.read_bytes())
    return repo


def config_text(
    *,
    max_batch_size: int = 8,
    name: str = "x",
    data_type: str = "TYPE_FP32",
    dims: str = "4",
    out_dims: str = "4",
    total_dims: str = "1",
) -> str:
    return f"""
name: "m"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
input [ {{ name: "{name}" data_type: {data_type} dims: [ {dims} ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ {out_dims} ] }},
         {{ name: "total" data_type: TYPE_FP32 dims: [ {total_dims} ] }} ]
instance_group [ {{ kind: KIND_CPU }} ]
"""


def model_io_lines(repo: Path) -> list[str]:
    return [f"{p.field}: {p.message}" for p in check_repository(repo) if p.rule == "model-io"]


def test_a_matching_config_passes(tmp_path: Path) -> None:
    onnx_path = dynamic_batch_model(tmp_path / "src.onnx")
    assert check_repository(ort_repository(tmp_path / "repo", config_text(), onnx_path)) == []


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"name": "input"},
            "input[0]: unexpected inference input 'input', allowed inputs are: x",
        ),
        (
            {"data_type": "TYPE_INT64"},
            "input[0]: unable to load model 'm', configuration expects datatype TYPE_INT64 for input 'x', model "
            "provides TYPE_FP32",
        ),
        (
            {"dims": "5"},
            "input[0]: model 'm', tensor 'x': the model expects 2 dimensions (shape [-1,4]) but the model "
            "configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 followed "
            "by the explicit tensor shape, making complete shape [-1,5])",
        ),
        (
            # Outputs are compared exactly: a -1 in the config where the model has 4 is refused.
            {"out_dims": "-1"},
            "output[0]: model 'm', tensor 'y': the model expects 2 dimensions (shape [-1,4]) but the model "
            "configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 followed "
            "by the explicit tensor shape, making complete shape [-1,-1])",
        ),
        (
            {"max_batch_size": 0, "dims": "-1, 4", "out_dims": "-1, 4", "total_dims": "-1, 2"},
            "output[1]: model 'm', tensor 'total': the model expects 2 dimensions (shape [-1,1]) but the model "
            "configuration specifies 2 dimensions (shape [-1,2])",
        ),
    ],
)
def test_each_mismatch_is_refused_in_the_backends_words(tmp_path: Path, changes: dict, expected: str) -> None:
    onnx_path = dynamic_batch_model(tmp_path / "src.onnx")
    repo = ort_repository(tmp_path / "repo", config_text(**changes), onnx_path)
    assert [line.split(" (version 1")[0] for line in model_io_lines(repo)] == [expected]


def test_a_fixed_batch_model_cannot_batch(tmp_path: Path) -> None:
    """A YOLO-style export with batch 1 baked in: max_batch_size > 0 needs a first dimension of -1."""
    onnx_path = fixed_model(tmp_path / "src.onnx", leading=1)
    config = """
name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 8 ] } ]
"""
    repo = ort_repository(tmp_path / "repo", config, onnx_path)
    assert model_io_lines(repo) == [
        "input[0]: model 'm', tensor 'x': for the model to support batching the shape should have at least 1 "
        "dimension and the first dimension must be -1; but shape expected by the model is [1,8] (version 1: "
        "model.onnx)",
        "output[0]: model 'm', tensor 'y': for the model to support batching the shape should have at least 1 "
        "dimension and the first dimension must be -1; but shape expected by the model is [1,8] (version 1: "
        "model.onnx)",
    ]
    fixed = config.replace("max_batch_size: 8", "max_batch_size: 0").replace("dims: [ 8 ]", "dims: [ 1, 8 ]")
    (repo / "m" / "config.pbtxt").write_text(fixed)
    assert check_repository(repo) == []


def test_an_input_count_mismatch_is_refused(tmp_path: Path) -> None:
    onnx_path = sequence_model(tmp_path / "src.onnx")  # tokens, mask -> score
    config = """
name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "tokens" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "score" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""
    repo = ort_repository(tmp_path / "repo", config, onnx_path)
    assert model_io_lines(repo) == [
        "input: unable to load model 'm', configuration expects 1 inputs, model provides 2 (version 1: model.onnx)"
    ]


@pytest.mark.parametrize(
    ("build", "max_batch_size"),
    [(dynamic_batch_model, 8), (mixed_types_model, 4), (sequence_model, 16), (weights_as_inputs_model, 2)],
)
def test_generated_configs_match_their_models_and_run(tmp_path: Path, build, max_batch_size: int) -> None:
    """Differential: what `config` writes for a model passes the model check, and onnxruntime runs the
    model with tensors shaped as that config declares."""
    onnx_path = build(tmp_path / "src.onnx")
    model_settings = settings("m", platform="onnxruntime_onnx", max_batch_size=max_batch_size)
    config = pbtxt.build_model_config(inspect_model(onnx_path), model_settings)
    repo = ort_repository(tmp_path / "repo", pbtxt.render(config), onnx_path)
    assert [p for p in check_repository(repo) if p.rule in ("model-io", "onnx-file")] == []
    run_as_configured(onnx_path, config, batch=2)


# --- TensorRT: against the ONNX recorded in build-info.json -------------------------------------

BERT_LIKE = """
name: "bert"
platform: "tensorrt_plan"
max_batch_size: 8
input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def trt_repository(tmp_path: Path, config: str, tensorrt_version: str | None) -> Path:
    onnx_path = tmp_path / "source" / "model.onnx"
    onnx_path.parent.mkdir(parents=True, exist_ok=True)
    onnx_path.write_bytes(onnx_matching(BERT_LIKE))
    folder = tmp_path / "repo" / "bert"
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "1" / "model.plan").write_bytes(b"engine bytes (not readable without TensorRT)")
    (folder / "config.pbtxt").write_text(config)
    info = {"source": {"path": str(onnx_path), "sha256": file_sha256(onnx_path)}}
    if tensorrt_version:
        info["tensorrt_version"] = tensorrt_version
    (folder / "build-info.json").write_text(json.dumps(info))
    return tmp_path / "repo"


def test_tensorrt_int64_inputs_are_int32_before_tensorrt_10(tmp_path: Path) -> None:
    """onnx-tensorrt 8.6 casts INT64 to INT32, so the engine's input is INT32 and Triton refuses a TYPE_INT64
    config; TensorRT 10 keeps INT64."""
    repo = trt_repository(tmp_path, BERT_LIKE, "8.6.1")
    assert model_io_lines(repo) == [
        "input[0]: unexpected datatype TYPE_INT32 for inference input 'input_ids', expecting TYPE_INT64 for bert "
        "(engine built from model.onnx)"
    ]
    (repo / "bert" / "config.pbtxt").write_text(BERT_LIKE.replace("TYPE_INT64", "TYPE_INT32"))
    assert model_io_lines(repo) == []
    repo = trt_repository(tmp_path / "ten", BERT_LIKE, "10.3.0")
    assert model_io_lines(repo) == []
    repo = trt_repository(tmp_path / "unknown", BERT_LIKE, None)
    assert model_io_lines(repo) == []


def test_tensorrt_names_and_dims_are_checked_against_the_onnx(tmp_path: Path) -> None:
    config = BERT_LIKE.replace('"logits"', '"scores"').replace(
        "dims: [ -1 ] } ]\noutput", "dims: [ -1, 4 ] } ]\noutput"
    )
    repo = trt_repository(tmp_path, config, "10.3.0")
    assert model_io_lines(repo) == [
        "input[0]: model 'bert', tensor 'input_ids': the model expects 2 dimensions (shape [-1,-1]) but the model "
        "configuration specifies 3 dimensions (an initial batch dimension because max_batch_size > 0 followed by "
        "the explicit tensor shape, making complete shape [-1,-1,4]) (engine built from model.onnx)",
        "output[0]: unexpected inference output 'scores', allowed outputs are: logits (engine built from model.onnx)",
    ]


def test_an_engine_built_from_an_onnx_that_changed_since_is_stale(tmp_path: Path) -> None:
    repo = trt_repository(tmp_path, BERT_LIKE.replace("TYPE_INT64", "TYPE_INT32"), "8.6.1")
    (tmp_path / "source" / "model.onnx").write_bytes(onnx_matching(BERT_LIKE.replace("logits", "other")))
    [line] = model_io_lines(repo)
    assert line.startswith(f"build-info.json: the engine was built from {tmp_path / 'source' / 'model.onnx'} with")
    assert "has changed since: rebuild the engine from the current ONNX" in line


def test_the_config_text_round_trips(tmp_path: Path) -> None:
    """The fixture configs are valid ModelConfig text (a typo would make every test above vacuous)."""
    for text in (config_text(), BERT_LIKE):
        assert text_format.Parse(text, mc.ModelConfig()).input


SIMPLE_SEQUENCE = PROJECT_ROOT.parent / "shared" / "triton-configs" / "valid" / "simple_sequence"


@pytest.mark.skipif(not SIMPLE_SEQUENCE.is_dir(), reason="Triton's example models are not checked out")
def test_sequence_controls_against_triton_s_own_example(tmp_path: Path) -> None:
    """Triton's simple_sequence example (docs/examples/model_repository) passes; a control typed
    differently from the model's input is refused as ValidateBooleanSequenceControl refuses it."""
    repo = tmp_path / "repo"
    shutil.copytree(SIMPLE_SEQUENCE, repo / "simple_sequence")
    assert model_io_lines(repo) == []
    config = repo / "simple_sequence" / "config.pbtxt"
    config.write_text(config.read_text().replace("int32_false_true: [ 0, 1 ]", "fp32_false_true: [ 0, 1 ]", 1))
    assert model_io_lines(repo) == [
        "sequence_batching.control_input[0]: unable to load model 'simple_sequence', sequence control 'START', the "
        "model expects data-type INT32 but the model configuration specifies data-type TYPE_FP32 (version 1: "
        "model.onnx)"
    ]
    config.write_text(config.read_text().replace('name: "START"', 'name: "BEGIN"'))
    assert model_io_lines(repo)[0] == (
        "sequence_batching.control_input[0]: configuration specified sequence control 'BEGIN', but model does not "
        "provide that input (version 1: model.onnx)"
    )
