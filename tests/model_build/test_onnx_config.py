"""ONNX inspection and config.pbtxt generation, proven against the models themselves.

Every generated config is parsed back into Triton's ModelConfig message and the model is run in
ONNX Runtime (CPU) with inputs shaped and typed from that config, so a wrong name, type or dim
fails here, not on an endpoint.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx_fixtures import (
    SHARED_VALID,
    complex_model,
    dynamic_batch_model,
    fixed_model,
    mixed_types_model,
    needs_shared,
    run_as_configured,
    sequence_model,
    settings,
    weights_as_inputs_model,
)
from tritonclient.grpc import model_config_pb2 as mc

from model_build import cli, pbtxt
from model_build.errors import InvalidModelError
from model_build.onnx_inspect import inspect_model

SIMPLE_MODELS = ["simple", "simple_int8", "simple_string", "simple_sequence", "simple_dyna_sequence"]


def generate(onnx_path: Path, model_settings) -> mc.ModelConfig:
    """Render to text and parse back: what Triton would read, not the in-memory message."""
    text = pbtxt.render(pbtxt.build_model_config(inspect_model(onnx_path), model_settings), source=onnx_path)
    return pbtxt.parse(text)


def tensors(config_tensors) -> dict:
    return {t.name: (mc.DataType.Name(t.data_type), list(t.dims)) for t in config_tensors}


@pytest.fixture
def only_our_commands(monkeypatch):
    # cli.main imports every command module; the other areas' commands are not ours to depend on here.
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("config", "trt_command", "build"))


# --- inspection --------------------------------------------------------------------------------


def test_inspect_maps_types_and_dynamic_axes(tmp_path):
    signature = inspect_model(mixed_types_model(tmp_path / "m.onnx"))
    assert [(s.name, s.triton_type, s.dims) for s in signature.inputs] == [
        ("half", "TYPE_FP16", (-1, 3)),
        ("ids", "TYPE_INT64", (-1, 3)),
        ("counts", "TYPE_INT32", (-1, 3)),
        ("flags", "TYPE_BOOL", (-1, 3)),
        ("pixels", "TYPE_UINT8", (-1, 3)),
    ]
    assert [s.name for s in signature.outputs] == ["half_out", "ids_out", "counts_out", "flags_out", "pixels_out"]


def test_inspect_excludes_initializers_listed_as_inputs(tmp_path):
    signature = inspect_model(weights_as_inputs_model(tmp_path / "w.onnx"))
    assert [s.name for s in signature.inputs] == ["x"]


@needs_shared
def test_inspect_triton_simple_model():
    signature = inspect_model(SHARED_VALID / "simple" / "1" / "model.onnx")
    assert [(s.name, s.triton_type, s.dims) for s in signature.inputs] == [
        ("INPUT0", "TYPE_INT32", (-1, 16)),
        ("INPUT1", "TYPE_INT32", (-1, 16)),
    ]


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(InvalidModelError, match=r"nope\.onnx: no such ONNX file"):
        inspect_model(tmp_path / "nope.onnx")


def test_corrupt_file_is_refused(tmp_path):
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(b"\x08\x07garbage that is not a protobuf\xff\xfe")
    with pytest.raises(InvalidModelError, match=r"corrupt\.onnx: (not a readable ONNX model|ONNX checker refused)"):
        inspect_model(path)


def test_truncated_file_is_refused(tmp_path):
    whole = dynamic_batch_model(tmp_path / "whole.onnx").read_bytes()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InvalidModelError, match=r"truncated\.onnx: "):
        inspect_model(path)


def test_model_failing_the_checker_is_refused(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["undefined"], ["y"])], "bad", [x], [y])
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(InvalidModelError, match=r"bad\.onnx: ONNX checker refused the model: .*undefined"):
        inspect_model(path)


def test_unsupported_dtype_is_refused(tmp_path):
    path = complex_model(tmp_path / "complex.onnx")
    with pytest.raises(
        InvalidModelError, match=r"complex\.onnx: input 'z' has ONNX type COMPLEX64, which Triton cannot"
    ):
        inspect_model(path)


# --- generated configs run the model ---------------------------------------------------------


@pytest.mark.parametrize("max_batch_size", [1, 8])
def test_dynamic_batch_model_config_runs(tmp_path, max_batch_size):
    path = dynamic_batch_model(tmp_path / "d.onnx")
    config = generate(path, settings("dyn", platform="onnxruntime_onnx", max_batch_size=max_batch_size))
    assert config.platform == "onnxruntime_onnx" and config.max_batch_size == max_batch_size
    assert tensors(config.input) == {"x": ("TYPE_FP32", [4])}
    assert tensors(config.output) == {"y": ("TYPE_FP32", [4]), "total": ("TYPE_FP32", [1])}
    for batch in sorted({1, max_batch_size}):
        results = run_as_configured(path, config, batch)
        assert results["y"].shape == (batch, 4)


def test_mixed_types_config_runs_at_max_batch(tmp_path):
    path = mixed_types_model(tmp_path / "m.onnx")
    config = generate(path, settings("mixed", platform="onnxruntime_onnx", max_batch_size=4))
    assert tensors(config.output)["flags_out"] == ("TYPE_BOOL", [3])
    for batch in (1, 4):
        run_as_configured(path, config, batch)


def test_sequence_model_keeps_dynamic_sequence_axis(tmp_path):
    path = sequence_model(tmp_path / "s.onnx")
    config = generate(path, settings("seq", platform="onnxruntime_onnx", max_batch_size=2))
    assert tensors(config.input) == {"tokens": ("TYPE_INT64", [-1]), "mask": ("TYPE_INT64", [-1])}
    for seq in (1, 7):
        results = run_as_configured(path, config, batch=2, dynamic=seq)
        assert results["score"].shape == (2, seq)


def test_unbatched_config_keeps_all_dims(tmp_path):
    path = fixed_model(tmp_path / "f.onnx", leading=4)
    config = generate(path, settings("fixed", max_batch_size=0, dynamic_batching={"enabled": False}))
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert tensors(config.input) == {"x": ("TYPE_FP32", [4, 8])}
    run_as_configured(path, config, batch=1)


def test_fixed_leading_one_is_accepted_only_for_max_batch_size_one(tmp_path):
    path = fixed_model(tmp_path / "one.onnx", leading=1)
    config = generate(path, settings("one", platform="onnxruntime_onnx", max_batch_size=1))
    assert tensors(config.input) == {"x": ("TYPE_FP32", [8])}
    run_as_configured(path, config, batch=1)
    with pytest.raises(InvalidModelError, match=r"input 'x' has a fixed leading dim 1 .* max_batch_size 4"):
        generate(path, settings("one", max_batch_size=4))


def test_fixed_batch_dim_with_batching_is_refused(tmp_path):
    path = fixed_model(tmp_path / "fixed.onnx", leading=4)
    with pytest.raises(
        InvalidModelError,
        match=r"fixed\.onnx: input 'x' has a fixed leading dim 4 \(shape \[4, 8\]\), but max_batch_size 16 "
        r"makes the leading axis the batch axis; export the model with a dynamic batch axis",
    ):
        generate(path, settings("fixed"))


def test_batch_only_tensor_gets_empty_reshape(tmp_path):
    from onnx import TensorProto, helper
    from onnx_fixtures import OPSET, save

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"])
    path = save(
        helper.make_model(
            helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "v", [x], [y]), opset_imports=OPSET
        ),
        tmp_path / "v.onnx",
    )
    config = generate(path, settings("vec", platform="onnxruntime_onnx", max_batch_size=4))
    assert list(config.input[0].dims) == [1] and list(config.input[0].reshape.shape) == []
    assert run_as_configured(path, config, batch=3)["y"].shape == (3,)


def test_defaults_follow_the_reference_benchmark(tmp_path):
    config = generate(dynamic_batch_model(tmp_path / "d.onnx"), settings("ref"))
    assert config.platform == "tensorrt_plan"
    assert config.HasField("dynamic_batching")
    assert [(g.count, mc.ModelInstanceGroup.Kind.Name(g.kind)) for g in config.instance_group] == [(2, "KIND_GPU")]
    assert not config.model_warmup and not config.HasField("response_cache")


def test_batching_warmup_and_cache_options(tmp_path):
    path = sequence_model(tmp_path / "s.onnx")
    config = generate(
        path,
        settings(
            "opts",
            max_batch_size=32,
            dynamic_batching={"preferred_batch_sizes": [8, 16], "max_queue_delay_microseconds": 250},
            instance_groups=[{"count": 1, "kind": "KIND_CPU"}, {"count": 3, "kind": "KIND_GPU"}],
            tensorrt={"shapes": [{"input": "tokens", "min": [1], "opt": [64], "max": [128]}]},
            warmup=True,
            response_cache=True,
        ),
    )
    assert list(config.dynamic_batching.preferred_batch_size) == [8, 16]
    assert config.dynamic_batching.max_queue_delay_microseconds == 250
    kinds = [(g.count, mc.ModelInstanceGroup.Kind.Name(g.kind)) for g in config.instance_group]
    assert kinds == [(1, "KIND_CPU"), (3, "KIND_GPU")]
    (warmup,) = config.model_warmup
    assert warmup.batch_size == 1
    # tokens has a ShapeRange: its opt; mask has none: 1.
    assert {k: (list(v.dims), v.zero_data) for k, v in warmup.inputs.items()} == {
        "tokens": ([64], True),
        "mask": ([1], True),
    }
    assert config.response_cache.enable is True


def test_python_platform_uses_backend_field(tmp_path):
    config = generate(dynamic_batch_model(tmp_path / "d.onnx"), settings("py", platform="python", source={"path": "m"}))
    assert config.backend == "python" and config.platform == ""


def test_shape_range_for_unknown_input_is_refused(tmp_path):
    with pytest.raises(InvalidModelError, match=r"tensorrt\.shapes names input 'nope', which the model does not have"):
        generate(
            sequence_model(tmp_path / "s.onnx"),
            settings("s", tensorrt={"shapes": [{"input": "nope", "min": [1], "opt": [1], "max": [1]}]}),
        )


# --- Triton's own example models ---------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("model", SIMPLE_MODELS)
def test_triton_examples_match_their_shared_configs(model):
    """Every tensor Triton's own config declares is in ours with the same type and dims (the sequence
    models' control tensors are extra inputs in ours: the sequence batcher is not generated)."""
    onnx_path = SHARED_VALID / model / "1" / "model.onnx"
    reference = pbtxt.parse((SHARED_VALID / model / "config.pbtxt").read_text())
    ours = generate(onnx_path, settings(model, platform="onnxruntime_onnx", max_batch_size=reference.max_batch_size))
    assert ours.name == reference.name and ours.platform == reference.platform
    assert tensors(reference.input).items() <= tensors(ours.input).items()
    assert tensors(reference.output) == tensors(ours.output)
    for batch in (1, reference.max_batch_size):
        run_as_configured(onnx_path, ours, batch)


# --- the command -------------------------------------------------------------------------------


@needs_shared
def test_config_command_writes_repository_for_onnxruntime(tmp_path, only_our_commands, capsys):
    onnx_path = SHARED_VALID / "simple" / "1" / "model.onnx"
    code = cli.main(
        [
            "config",
            "--onnx",
            str(onnx_path),
            "--name",
            "simple",
            "--platform",
            "onnxruntime_onnx",
            "--max-batch-size",
            "8",
            "--repository",
            str(tmp_path / "repo"),
        ]
    )
    assert code == 0
    model_dir = tmp_path / "repo" / "simple"
    assert (model_dir / "1" / "model.onnx").read_bytes() == onnx_path.read_bytes()
    config = pbtxt.parse((model_dir / "config.pbtxt").read_text())
    assert config.max_batch_size == 8
    assert sorted(p.name for p in model_dir.rglob("*")) == ["1", "config.pbtxt", "model.onnx"]  # no temp files
    run_as_configured(model_dir / "1" / "model.onnx", config, batch=8)


def test_config_command_from_app_config(tmp_path, only_our_commands, capsys):
    app_config = tmp_path / "dev.yaml"
    app_config.write_text(
        "triton_release: '24.09'\nmodels:\n  - name: dyn\n    source: {path: d.onnx}\n    max_batch_size: 8\n"
        "    dynamic_batching: {preferred_batch_sizes: [4, 8]}\n"
    )
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    assert (
        cli.main(["config", "--onnx", str(onnx_path), "--config", str(app_config), "--model", "dyn", "--stdout"]) == 0
    )
    config = pbtxt.parse(capsys.readouterr().out)
    assert config.platform == "tensorrt_plan" and list(config.dynamic_batching.preferred_batch_size) == [4, 8]


def test_config_command_tensorrt_writes_no_model_file(tmp_path, only_our_commands):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    assert cli.main(["config", "--onnx", str(onnx_path), "--name", "dyn", "--repository", str(tmp_path / "r")]) == 0
    assert sorted(p.name for p in (tmp_path / "r" / "dyn").iterdir()) == ["config.pbtxt"]


def test_config_command_refusal_writes_nothing(tmp_path, only_our_commands, capsys):
    onnx_path = fixed_model(tmp_path / "fixed.onnx", leading=4)
    code = cli.main(["config", "--onnx", str(onnx_path), "--name", "fixed", "--repository", str(tmp_path / "r")])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and "input 'x' has a fixed leading dim 4" in err
    assert not (tmp_path / "r").exists()


def test_config_command_needs_settings(tmp_path, only_our_commands, capsys):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    assert cli.main(["config", "--onnx", str(onnx_path), "--stdout"]) == 1
    assert "ERROR: give either --config FILE --model NAME, or --name NAME" in capsys.readouterr().err


def test_config_command_reports_bad_settings(tmp_path, only_our_commands, capsys):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    assert cli.main(["config", "--onnx", str(onnx_path), "--name", "bad name", "--stdout"]) == 1
    assert "ERROR: command line: name: String should match pattern" in capsys.readouterr().err


def test_config_overwrite_is_atomic(tmp_path, only_our_commands):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    repo = tmp_path / "r"
    args = ["config", "--onnx", str(onnx_path), "--name", "dyn", "--platform", "onnxruntime_onnx", "--repository"]
    assert cli.main([*args, str(repo)]) == 0
    first = (repo / "dyn" / "config.pbtxt").read_text()
    assert cli.main([*args, str(repo)]) == 0  # regenerating over an existing model folder
    assert (repo / "dyn" / "config.pbtxt").read_text() == first  # deterministic
    assert not list((repo / "dyn").rglob(".*.tmp"))
