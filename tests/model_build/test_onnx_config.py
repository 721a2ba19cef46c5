"""ONNX inspection and config.pbtxt generation, proven against the models themselves.

Every generated config is parsed back into Triton's ModelConfig message and the model is run in
ONNX Runtime (CPU) with inputs shaped and typed from that config, so a wrong name, type or dim
fails here, not on an endpoint.
"""

from __future__ import annotations

from pathlib import Path

import export_like_models
import pytest
from onnx import TensorProto
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
from model_build.check import check_model_config, check_repository
from model_build.errors import InvalidModelError
from model_build.onnx_inspect import inspect_model

SIMPLE_MODELS = ["simple", "simple_int8", "simple_string", "simple_sequence", "simple_dyna_sequence"]


def generate(onnx_path: Path, model_settings, triton_release: str | None = "24.09") -> mc.ModelConfig:
    """Generate (which runs `check` on the text) and parse back: what Triton would read."""
    return pbtxt.parse(pbtxt.generate(inspect_model(onnx_path), model_settings, triton_release))


def tensors(config_tensors) -> dict:
    return {t.name: (mc.DataType.Name(t.data_type), list(t.dims)) for t in config_tensors}


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


def test_fixed_leading_one_is_accepted_only_for_max_batch_size_one_on_tensorrt(tmp_path):
    """tensorrt_utils.cc CompareDimsSupported: -1 on either side matches, so a [1, 8] engine serves batches of 1;
    onnxruntime_utils.cc CompareDimsSupported: "the first dimension must be -1" whatever max_batch_size (found by
    tests/model_build/test_repository_properties.py: `config` wrote what `check` refused)."""
    path = fixed_model(tmp_path / "one.onnx", leading=1)
    config = generate(path, settings("one", max_batch_size=1))
    assert tensors(config.input) == {"x": ("TYPE_FP32", [8])}
    run_as_configured(path, config, batch=1)
    with pytest.raises(InvalidModelError, match=r"input 'x' has a fixed leading dim 1 .* max_batch_size 4"):
        generate(path, settings("one", max_batch_size=4))
    with pytest.raises(InvalidModelError, match=r"input 'x' has a fixed leading dim 1 .* max_batch_size 1"):
        generate(path, settings("one", platform="onnxruntime_onnx", max_batch_size=1))


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
            instance_groups=[{"count": 1, "kind": "KIND_AUTO"}, {"count": 3, "kind": "KIND_GPU"}],
            tensorrt={
                "shapes": [
                    {"input": "tokens", "min": [1], "opt": [64], "max": [128]},
                    {"input": "mask", "min": [1], "opt": [64], "max": [128]},
                ]
            },
            warmup=True,
            response_cache=True,
        ),
    )
    assert list(config.dynamic_batching.preferred_batch_size) == [8, 16]
    assert config.dynamic_batching.max_queue_delay_microseconds == 250
    kinds = [(g.count, mc.ModelInstanceGroup.Kind.Name(g.kind)) for g in config.instance_group]
    assert kinds == [(1, "KIND_AUTO"), (3, "KIND_GPU")]
    (warmup,) = config.model_warmup
    assert warmup.batch_size == 1
    # Every dynamic axis of a warm-up sample takes its ShapeRange's opt.
    assert {k: (list(v.dims), v.zero_data) for k, v in warmup.inputs.items()} == {
        "tokens": ([64], True),
        "mask": ([64], True),
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
def test_config_command_writes_repository_for_onnxruntime(tmp_path, capsys):
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


def test_config_command_from_app_config(tmp_path, capsys):
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


def test_config_command_tensorrt_writes_no_model_file(tmp_path):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    assert cli.main(["config", "--onnx", str(onnx_path), "--name", "dyn", "--repository", str(tmp_path / "r")]) == 0
    assert sorted(p.name for p in (tmp_path / "r" / "dyn").iterdir()) == ["config.pbtxt"]


def test_config_command_refusal_writes_nothing(tmp_path, capsys):
    onnx_path = fixed_model(tmp_path / "fixed.onnx", leading=4)
    code = cli.main(["config", "--onnx", str(onnx_path), "--name", "fixed", "--repository", str(tmp_path / "r")])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and "input 'x' has a fixed leading dim 4" in err
    assert not (tmp_path / "r").exists()


def test_config_command_needs_settings(tmp_path, capsys):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    assert cli.main(["config", "--onnx", str(onnx_path), "--stdout"]) == 1
    assert "ERROR: give either --config FILE --model NAME, or --name NAME" in capsys.readouterr().err


def test_config_command_reports_bad_settings(tmp_path, capsys):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    assert cli.main(["config", "--onnx", str(onnx_path), "--name", "bad name", "--stdout"]) == 1
    assert "ERROR: command line: name: String should match pattern" in capsys.readouterr().err


def test_config_overwrite_is_atomic(tmp_path):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    repo = tmp_path / "r"
    args = ["config", "--onnx", str(onnx_path), "--name", "dyn", "--platform", "onnxruntime_onnx", "--repository"]
    assert cli.main([*args, str(repo)]) == 0
    first = (repo / "dyn" / "config.pbtxt").read_text()
    assert cli.main([*args, str(repo)]) == 0  # regenerating over an existing model folder
    assert (repo / "dyn" / "config.pbtxt").read_text() == first  # deterministic
    assert not list((repo / "dyn").rglob(".*.tmp"))


# --- issue #11: data types per release, scalars, devices, the generator checks itself ---------------


@pytest.mark.parametrize(
    ("release", "ids_type"),
    [
        ("23.12", "TYPE_INT32"),
        ("24.01", "TYPE_INT32"),
        ("24.03", "TYPE_INT32"),
        ("24.05", "TYPE_INT64"),
        ("24.09", "TYPE_INT64"),
        ("25.04", "TYPE_INT64"),
        ("26.05", "TYPE_INT64"),
    ],
)
def test_bert_int64_ids_follow_the_releases_tensorrt(release, ids_type, tmp_path):
    """onnx-tensorrt 8.6-GA `convertDtype` imports INT64 inputs as kINT32 (TensorRT 8.6 has no INT64); the
    TensorRT backend r23.12..r24.03 `ConvertDataTypeToTrtType` has no TYPE_INT64, so the config must say
    TYPE_INT32 there. TensorRT 10 (onnx-tensorrt 10.0-GA) keeps INT64, which r24.05+ accept."""
    path = export_like_models.bert_like(tmp_path / "bert.onnx")
    shapes = [{"input": name, "min": [1], "opt": [128], "max": [512]} for name in export_like_models.BERT_INPUTS]
    model_settings = settings("bert", max_batch_size=8, tensorrt={"shapes": shapes}, warmup=True)

    text = pbtxt.generate(inspect_model(path), model_settings, release)

    config = pbtxt.parse(text)
    assert {mc.DataType.Name(t.data_type) for t in config.input} == {ids_type}
    assert {mc.DataType.Name(i.data_type) for i in config.model_warmup[0].inputs.values()} == {ids_type}
    assert ("clients send TYPE_INT32" in text) == (ids_type == "TYPE_INT32")
    assert check_model_config(text, model_name="bert", triton_release=release) == []


def test_onnxruntime_keeps_int64_on_every_release(tmp_path):
    path = export_like_models.bert_like(tmp_path / "bert.onnx")
    config = generate(path, settings("bert", platform="onnxruntime_onnx", max_batch_size=8), triton_release="23.12")

    assert {mc.DataType.Name(t.data_type) for t in config.input} == {"TYPE_INT64"}
    run_as_configured(path, config, batch=8)


def test_tensorrt_int64_without_a_release_asks_for_it(tmp_path):
    path = export_like_models.bert_like(tmp_path / "bert.onnx")
    shapes = [{"input": name, "min": [1], "opt": [8], "max": [16]} for name in export_like_models.BERT_INPUTS]

    with pytest.raises(InvalidModelError, match=r"input 'input_ids' has ONNX type INT64, which TensorRT engines carry "
                       r"differently per Triton release .* --triton-release YY\.MM"):  # fmt: skip
        generate(path, settings("bert", tensorrt={"shapes": shapes}), triton_release=None)


@pytest.mark.parametrize("release", [None, "23.12", "24.09"])
@pytest.mark.parametrize(
    ("elem_type", "onnx_name", "hint"),
    [
        (TensorProto.DOUBLE, "DOUBLE", "TensorRT has no FP64"),
        (TensorProto.STRING, "STRING", "cast it in the model"),
        (TensorProto.UINT16, "UINT16", "cast it in the model"),
    ],
)
def test_tensorrt_refuses_types_no_engine_carries(elem_type, onnx_name, hint, release, tmp_path):
    """No release's TensorRT backend maps FP64, STRING or UINT16 (ConvertDataTypeToTrtType, every branch)."""
    path = export_like_models.typed(tmp_path / "t.onnx", elem_type, ["batch", 2])

    which = (
        "no Triton release's TensorRT backend can" if release is None else f"Triton {release}'s TensorRT backend cannot"
    )
    with pytest.raises(InvalidModelError, match=rf"input 'x' has ONNX type {onnx_name} .*which {which} serve"):
        generate(path, settings("t"), triton_release=release)
    with pytest.raises(InvalidModelError, match=hint):
        generate(path, settings("t"), triton_release=release)
    # The same model is fine for ONNX Runtime.
    assert generate(path, settings("t", platform="onnxruntime_onnx"), triton_release=release).input[0].dims == [2]


def test_bf16_needs_a_release_whose_tensorrt_backend_maps_it(tmp_path):
    """BF16 came to the TensorRT backend in r24.06 (commit fd867b7): 24.05 refuses it, 24.09 takes it."""
    path = export_like_models.typed(tmp_path / "b.onnx", TensorProto.BFLOAT16, ["batch", 2])

    with pytest.raises(
        InvalidModelError, match=r"Triton 24\.05's TensorRT backend cannot serve .*BF16 needs Triton 24\.09"
    ):
        generate(path, settings("b"), triton_release="24.05")
    assert mc.DataType.Name(generate(path, settings("b"), triton_release="24.09").input[0].data_type) == "TYPE_BF16"


def test_scalars_are_served_as_dims_1_without_batching(tmp_path):
    """onnxruntime_backend PR #213 (src/onnxruntime.cc ValidateInputs/ValidateOutputs): a scalar model tensor is
    configured as dims [1] in a model without batching ("should only provide 1 in the model configuration")."""
    path = export_like_models.typed(tmp_path / "s.onnx", TensorProto.FLOAT, [])
    config = generate(
        path, settings("s", platform="onnxruntime_onnx", max_batch_size=0, dynamic_batching={"enabled": False})
    )

    assert tensors(config.input) == {"x": ("TYPE_FP32", [1])}
    assert tensors(config.output) == {"y": ("TYPE_FP32", [1])}
    assert not config.input[0].HasField("reshape") and config.max_batch_size == 0


def test_batched_scalars_are_refused_proposing_no_batching(tmp_path):
    """A scalar has no batch axis (onnxruntime_utils.cc CompareDimsSupported: "the first dimension must be -1")."""
    path = export_like_models.typed(tmp_path / "s.onnx", TensorProto.FLOAT, [])

    with pytest.raises(InvalidModelError, match=r"input 'x' is a scalar .* set max_batch_size: 0 \(Triton serves a "):
        generate(path, settings("s", platform="onnxruntime_onnx", max_batch_size=4))


def test_scalars_are_refused_for_tensorrt_proposing_onnxruntime(tmp_path):
    """tensorrt_backend CompareDimsSupported compares ranks: a rank-0 engine tensor matches no config dims."""
    path = export_like_models.typed(tmp_path / "s.onnx", TensorProto.FLOAT, [])

    with pytest.raises(InvalidModelError, match=r"is a scalar .* serve it with platform: onnxruntime_onnx"):
        generate(path, settings("s", max_batch_size=0, dynamic_batching={"enabled": False}))


def test_tensorrt_on_cpu_instances_is_refused_at_the_settings():
    """tensorrt_backend src/instance_state.cc: "TensorRT backend supports only GPU device"."""
    with pytest.raises(ValueError, match=r"platform 'tensorrt_plan' runs on GPU instances only"):
        settings("m", instance_groups=[{"kind": "KIND_CPU", "count": 1}])
    assert settings("m", platform="onnxruntime_onnx", instance_groups=[{"kind": "KIND_CPU"}])


def test_config_command_refuses_tensorrt_on_cpu(tmp_path, capsys):
    onnx_path = dynamic_batch_model(tmp_path / "d.onnx")
    args = ["config", "--onnx", str(onnx_path), "--name", "d", "--instance-kind", "KIND_CPU", "--repository"]

    assert cli.main([*args, str(tmp_path / "r")]) == 1
    assert "runs on GPU instances only" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_config_check_refuses_is_never_written(tmp_path, capsys, monkeypatch):
    """The generator's old scalar bug (an empty reshape on a non-batching model) stands in for any future
    one: `config` runs `check` on the text and writes nothing it refuses."""
    original = pbtxt.build_model_config

    def with_empty_reshape(*args, **kwargs):
        config = original(*args, **kwargs)
        config.input[0].reshape.SetInParent()
        return config

    monkeypatch.setattr(pbtxt, "build_model_config", with_empty_reshape)
    onnx_path = fixed_model(tmp_path / "fixed.onnx", leading=4)
    args = ["config", "--onnx", str(onnx_path), "--name", "fixed", "--platform", "onnxruntime_onnx"]

    assert cli.main([*args, "--max-batch-size", "0", "--repository", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "the config.pbtxt for model 'fixed' would be refused by Triton; nothing written" in err
    assert "cannot have empty reshape for non-batching model as scalar tensors are not supported" in err
    assert not (tmp_path / "r").exists()


def test_config_command_takes_the_release(tmp_path, capsys):
    path = export_like_models.bert_like(tmp_path / "bert.onnx")
    app_config = tmp_path / "dev.yaml"
    shapes = "".join(
        f"      - {{input: {n}, min: [1], opt: [64], max: [128]}}\n" for n in export_like_models.BERT_INPUTS
    )
    app_config.write_text(
        f"triton_release: '23.12'\nmodels:\n  - name: bert\n    source: {{path: bert.onnx}}\n    max_batch_size: 8\n"
        f"    tensorrt:\n      shapes:\n{shapes}"
    )
    by_file = ["config", "--onnx", str(path), "--config", str(app_config), "--model", "bert", "--stdout"]
    assert cli.main(by_file) == 0
    assert "data_type: TYPE_INT32" in capsys.readouterr().out

    by_flag = ["config", "--onnx", str(path), "--name", "bert", "--platform", "onnxruntime_onnx", "--stdout"]
    assert cli.main([*by_flag, "--triton-release", "99.99"]) == 1
    assert "--triton-release: unknown Triton release '99.99'" in capsys.readouterr().err


@pytest.mark.parametrize("release", ["23.12", "24.05", "24.09", "26.05"])
@pytest.mark.parametrize("platform", ["tensorrt_plan", "onnxruntime_onnx"])
def test_configs_generated_for_export_like_models_pass_check(platform, release, tmp_path):
    """BERT with int64 ids, a TF-style detector, a fixed-batch (YOLO-like) export: config, then `check`
    on the written repository as the build runs it, on a GPU target of the release."""
    bert = export_like_models.bert_like(tmp_path / "bert.onnx")
    shapes = [{"input": name, "min": [1], "opt": [64], "max": [128]} for name in export_like_models.BERT_INPUTS]
    no_batching = {"max_batch_size": 0, "dynamic_batching": {"enabled": False}}
    yolo_batching = {"max_batch_size": 1} if platform == "tensorrt_plan" else no_batching
    cases = [
        (bert, settings("bert", platform=platform, max_batch_size=8, tensorrt={"shapes": shapes})),
        (export_like_models.tf_style(tmp_path / "tf.onnx"), settings("tf", platform=platform, max_batch_size=4)),
        # A fixed leading 1 batches on TensorRT only (onnxruntime_utils.cc: "the first dimension must be -1").
        (fixed_model(tmp_path / "yolo.onnx", 1), settings("yolo", platform=platform, **yolo_batching)),
        (
            fixed_model(tmp_path / "fixed.onnx", 4),
            settings("fixed", platform=platform, max_batch_size=0, dynamic_batching={"enabled": False}),
        ),
    ]
    repo = tmp_path / "repo"
    for path, model_settings in cases:
        (repo / model_settings.name).mkdir(parents=True)
        (repo / model_settings.name / "config.pbtxt").write_text(
            pbtxt.generate(inspect_model(path), model_settings, release)
        )

    problems = check_repository(repo, configs_only=True, instance_type="ml.g5.xlarge", triton_release=release)

    assert [str(problem) for problem in problems] == []
