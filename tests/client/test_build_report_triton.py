"""The build report end to end on the real CPU Triton (.venv-triton; skipped cleanly without it, as every local
Triton test): the built model and `<model>__reference` (the ONNX file on onnxruntime_onnx) in one temporary
repository, both on the ONNX Runtime stand-in (onnx_standin.py: this Triton has the Python backend only), the same
generated inputs to both, the comparison (Polygraphy's elemwise rule, model_build.accuracy), a bounded load test
and a tiny tuning grid.

A deliberately perturbed model (add_sub with a changed constant, built with onnx.helper here) must fail the fp32
tolerance (Polygraphy's default 1e-5) with the output named, and leave no report behind (the build stops before
`package` and `upload`).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from endpoint_client import build_check_cli
from model_build import cli as model_build_cli

MODEL = "add_sub"


def _add_sub(path: Path, constant: float) -> Path:
    """OUTPUT0 = INPUT0 + INPUT1 + constant, OUTPUT1 = INPUT0 - INPUT1 ([batch, 4] FP32)."""
    tensor = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 4])  # noqa: E731
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["SUM"]),
        helper.make_node("Add", ["SUM", "K"], ["OUTPUT0"]),
        helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
    ]
    graph = helper.make_graph(
        nodes,
        MODEL,
        [tensor("INPUT0"), tensor("INPUT1")],
        [tensor("OUTPUT0"), tensor("OUTPUT1")],
        [numpy_helper.from_array(np.array([constant], np.float32), "K")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _stage(tmp_path: Path, tune: str = "") -> Path:
    config = tmp_path / "stage.yaml"
    config.write_text(
        f"""triton_release: "24.09"
models:
  - name: {MODEL}
    source: {{path: reference.onnx}}
    platform: tensorrt_plan
    max_batch_size: 8
    dynamic_batching: {{preferred_batch_sizes: [4]}}
    instance_groups: [{{count: 1, kind: KIND_GPU}}]
    tensorrt: {{precision: fp32}}
{tune}"""
    )
    return config


def _built(tmp_path: Path, config: Path, reference: Path, engine_constant: float) -> Path:
    """What `model_build config` + `build` leave, with the engine's place taken by the ONNX file it would be built
    from (`1/model.onnx`, which the CPU stand-in runs): here a perturbed one when engine_constant != 0."""
    repository = tmp_path / "repo"
    argv = ["config", "--config", str(config), "--model", MODEL, "--onnx", str(reference), "--repository"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert model_build_cli.main([*argv, str(repository)]) == 0
    (repository / MODEL / "1").mkdir()
    _add_sub(repository / MODEL / "1" / "model.onnx", engine_constant)
    return repository


def _run(triton_env: Path, config: Path, repository: Path, reference: Path, out: Path) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = [
        *("--config", str(config), "--model", MODEL, "--repository", str(repository), "--onnx", str(reference)),
        *("--out", str(out), "--triton-env", str(triton_env), "--concurrency", "1,2", "--seconds", "0.5"),
        *("--startup-timeout", "60"),
    ]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = build_check_cli.main(argv)
    return code, stdout.getvalue(), stderr.getvalue()


def test_the_same_model_on_both_sides_passes_measures_and_tunes(triton_env: Path, tmp_path: Path):
    """Both sides agree exactly; report.json (schema 1) holds the accuracy per output, one speed row per
    concurrency, the host ("none (CPU)" without nvidia-smi; Triton's version from GET /v2) and the tuning result as
    stage-config lines, best under the SLO of a 2-candidate grid."""
    tune = "    tune: {slo_p99_ms: 5000, candidates: {instance_counts: [1, 2]}, concurrency: [1], seconds: 0.5}\n"
    config = _stage(tmp_path, tune)
    reference = _add_sub(tmp_path / "reference.onnx", 0.0)
    out = tmp_path / "out" / "report.json"
    code, stdout, stderr = _run(triton_env, config, _built(tmp_path, config, reference, 0.0), reference, out)
    assert code == 0, stderr
    report = json.loads(out.read_text())
    assert report["schema_version"] == 1 and report["model"] == MODEL
    assert report["accuracy"]["passed"] and report["accuracy"]["atol"] == 1e-5
    assert [o["name"] for o in report["accuracy"]["outputs"]] == ["OUTPUT0", "OUTPUT1"]
    assert report["accuracy"]["inputs"]["INPUT0"]["shape"] == [4, 4]  # opt batch: the largest preferred size
    assert [level["concurrency"] for level in report["speed"]] == [1, 2]
    assert all(level["errors"] == 0 and level["inferences_per_second"] > 0 for level in report["speed"])
    assert report["host"]["gpu"] == "none (CPU)" and report["host"]["triton"]
    tuning = report["tuning"]
    assert len(tuning["candidates"]) == 2 and tuning["best"] is not None
    assert "instance_groups: [{count:" in tuning["config_lines"] and "KIND_GPU" in tuning["config_lines"]
    assert "accuracy PASSED" in stdout


def test_a_perturbed_engine_fails_the_tolerance_naming_the_output(triton_env: Path, tmp_path: Path):
    """add_sub whose OUTPUT0 adds 0.5: 0.5 exceeds both atol and rtol (1e-5) -> exit 1, OUTPUT0 named with its max
    abs error, OUTPUT1 (unchanged) not, and no report.json written."""
    config = _stage(tmp_path)
    reference = _add_sub(tmp_path / "reference.onnx", 0.0)
    out = tmp_path / "report.json"
    code, _, stderr = _run(triton_env, config, _built(tmp_path, config, reference, 0.5), reference, out)
    assert code == 1
    assert "output 'OUTPUT0'" in stderr and "max abs error 0.5" in stderr and "OUTPUT1" not in stderr
    assert not out.exists()


def test_the_report_is_never_written_into_the_repository(tmp_path: Path):
    """report.json stays out of the archive (its key names the archive's bytes): --out inside --repository is
    refused before any server starts (no CPU Triton needed)."""
    config = _stage(tmp_path)
    reference = _add_sub(tmp_path / "reference.onnx", 0.0)
    repository = _built(tmp_path, config, reference, 0.0)
    code, _, stderr = _run(tmp_path / "no-triton", config, repository, reference, repository / MODEL / "report.json")
    assert code == 1 and "inside --repository" in stderr


def test_an_int64_model_is_compared_in_each_sides_own_types(triton_env: Path, tmp_path: Path):
    """Triton 24.03's TensorRT 8.6 engine carries INT64 as INT32 (model_build.pbtxt.served_type): the engine is
    sent INT32, the reference (ONNX Runtime, the ONNX file's own INT64) INT64, the same values; they agree."""
    tensor = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", 3])  # noqa: E731
    graph = helper.make_graph(
        [helper.make_node("Add", ["ids", "one"], ["next_ids"])],
        "ids",
        [tensor("ids")],
        [tensor("next_ids")],
        [numpy_helper.from_array(np.array([1], np.int64), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    reference = tmp_path / "reference.onnx"
    onnx.save(model, reference)
    config = _stage(tmp_path)
    config.write_text(config.read_text().replace('"24.09"', '"24.03"'))
    repository = tmp_path / "repo"
    argv = ["config", "--config", str(config), "--model", MODEL, "--onnx", str(reference), "--repository"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert model_build_cli.main([*argv, str(repository)]) == 0
    assert "TYPE_INT32" in (repository / MODEL / "config.pbtxt").read_text()
    (repository / MODEL / "1").mkdir()
    onnx.save(model, repository / MODEL / "1" / "model.onnx")
    out = tmp_path / "report.json"
    code, _, stderr = _run(triton_env, config, repository, reference, out)
    assert code == 0, stderr
    report = json.loads(out.read_text())
    assert report["accuracy"]["passed"] and report["accuracy"]["inputs"]["ids"]["dtype"] == "int32"


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--samples", "inputs.npy"], "an .npz file"), (["--seconds", "0"], "above 0, at most 60"),
     (["--seconds", "61"], "at most 60")],
)  # fmt: skip
def test_bad_options_are_refused_before_any_server_starts(tmp_path: Path, extra: list[str], message: str):
    """One ERROR line (exit 1) naming the option; the load test is bounded to 60 s per level."""
    config = _stage(tmp_path)
    reference = _add_sub(tmp_path / "reference.onnx", 0.0)
    stderr = io.StringIO()
    argv = ["--config", str(config), "--model", MODEL, "--repository", str(tmp_path / "repo"), "--onnx", str(reference)]
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = build_check_cli.main([*argv, "--out", str(tmp_path / "out" / "r.json"), *extra])
    assert code == 1 and message in stderr.getvalue()


def test_user_samples_are_what_both_sides_get(triton_env: Path, tmp_path: Path):
    """--samples inputs.npz (as `invoke --input` reads it) replaces the generated inputs, shapes as given."""
    config = _stage(tmp_path)
    reference = _add_sub(tmp_path / "reference.onnx", 0.0)
    samples = tmp_path / "inputs.npz"
    np.savez(samples, INPUT0=np.full((2, 4), 3, np.float32), INPUT1=np.ones((2, 4), np.float32))
    out = tmp_path / "report.json"
    repository = _built(tmp_path, config, reference, 0.0)
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["--config", str(config), "--model", MODEL, "--repository", str(repository), "--onnx", str(reference)]
    extra = ["--samples", str(samples), "--triton-env", str(triton_env), "--concurrency", "1", "--seconds", "0.3"]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = build_check_cli.main([*argv, "--out", str(out), *extra])
    assert code == 0, stderr.getvalue()
    accuracy = json.loads(out.read_text())["accuracy"]
    assert accuracy["input_source"] == "samples" and accuracy["inputs"]["INPUT0"]["shape"] == [2, 4]
