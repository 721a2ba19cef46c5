"""An INT8 build gets its calibration cache, or is refused before anything is built (issue #22 B8).

Source: trtexec reads a calibration cache with `--calib=<file>` ("Read INT8 calibration cache file", TensorRT
samples/common/sampleOptions.cpp; the issue's "--calibration=" is this flag); it cannot make one. In the GPU build
(model_build/buildspec.yml) the stage config's `tensorrt.calibration_cache` is a project path or an s3:// URI,
neither on the build host: `model_build build` fetches `CALIBRATION_URI` or the s3:// cache
(model_build.calibration), and synth (model_build.preflight) refuses what cannot reach the build. The CDK app
ships a local cache and grants the s3:// one: tests/artifact_build/test_build_calibration.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx_fixtures import dynamic_batch_model, path_with, settings, write_executable
from test_trt import GPU_A10G, TRTEXEC

from model_build import calibration, cli, preflight
from model_build.errors import ModelBuildError
from model_build.preflight import preflight_problems
from serving_facts.build_variables import CALIBRATION_URI


@pytest.fixture
def tools(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_executable(bin_dir / "nvidia-smi", GPU_A10G)
    write_executable(bin_dir / "trtexec", TRTEXEC)
    monkeypatch.setenv("PATH", path_with(bin_dir))
    monkeypatch.delenv(CALIBRATION_URI, raising=False)
    return bin_dir


def stage(tmp_path: Path, cache: str) -> Path:
    dynamic_batch_model(tmp_path / "dyn.onnx")
    config = tmp_path / "dev.yaml"
    config.write_text(
        "triton_release: '24.09'\nmodels:\n  - name: m\n    source: {path: dyn.onnx}\n"
        f"    tensorrt: {{precision: int8, calibration_cache: '{cache}'}}\n"
    )
    return config


def build(tmp_path: Path, config: Path) -> int:
    return cli.main(
        ["build", "--onnx", str(tmp_path / "dyn.onnx"), "--config", str(config), "--model", "m", "--repository",
         str(tmp_path / "repo"), "--trtexec", "trtexec", "--timing-cache", str(tmp_path / "cache" / "m.timing")]
    )  # fmt: skip


def test_a_local_cache_reaches_trtexec_as_calib(tmp_path, tools, capsys):
    (tmp_path / "calib.cache").write_bytes(b"TRT-100400-EntropyCalibration2\n")
    config = stage(tmp_path, str(tmp_path / "calib.cache"))

    assert build(tmp_path, config) == 0, capsys.readouterr().err
    engine = (tmp_path / "repo" / "m" / "1" / "model.plan").read_bytes()
    assert b"--int8" in engine and f"--calib={tmp_path / 'calib.cache'}".encode() in engine


def test_a_local_cache_that_is_not_on_the_build_host_is_refused_before_building(tmp_path, tools, capsys):
    """What every INT8 build in CodeBuild did: the project path is not there. Refused, naming the field."""
    config = stage(tmp_path, "models/calib.cache")

    assert build(tmp_path, config) == 1
    err = capsys.readouterr().err
    assert (
        "tensorrt.calibration_cache 'models/calib.cache' is a file of the project, and this build was not given" in err
    )
    assert not (tmp_path / "repo").exists()


def test_an_empty_cache_is_refused(tmp_path, tools, capsys):
    (tmp_path / "calib.cache").write_bytes(b"")
    config = stage(tmp_path, str(tmp_path / "calib.cache"))

    assert build(tmp_path, config) == 1
    assert "is empty; an INT8 engine needs its calibration cache" in capsys.readouterr().err


def test_a_shipped_or_s3_cache_is_fetched_and_passed(tmp_path, tools, monkeypatch, capsys):
    """CALIBRATION_URI wins over the settings; an s3:// cache is fetched itself (the download is faked here)."""
    fetched = []

    def fake_download(uri: str, out: Path) -> None:
        fetched.append(uri)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"cache")

    monkeypatch.setattr(calibration, "_download", fake_download)
    config = stage(tmp_path, "s3://bucket/calib.cache")
    assert build(tmp_path, config) == 0, capsys.readouterr().err
    monkeypatch.setenv(CALIBRATION_URI, "s3://assets/abc.cache")
    assert build(tmp_path, stage(tmp_path, "models/calib.cache")) == 0, capsys.readouterr().err

    assert fetched == ["s3://bucket/calib.cache", "s3://assets/abc.cache"]
    engine = (tmp_path / "repo" / "m" / "1" / "model.plan").read_bytes()
    assert f"--calib={tmp_path / 'cache' / 'm.calibration'}".encode() in engine


def test_calibration_source_refuses_a_shipped_value_that_is_not_s3():
    with pytest.raises(ModelBuildError, match=r"CALIBRATION_URI='/tmp/x': expected s3://bucket/key"):
        calibration.calibration_source("models/c.cache", "/tmp/x", "dev.yaml: model 'm'")


@pytest.mark.parametrize(
    ("cache", "message"),
    [
        ("models/calib.cache", "the GPU build does not receive a local calibration cache yet"),
        ("s3://bucket/calib.cache", "which is granted only the model sources and the artifact bucket"),
    ],
)
def test_synth_refuses_an_int8_cache_that_cannot_reach_the_build(tmp_path, cache, message, monkeypatch):
    """An app that does not ship the cache (CALIBRATION_URI) or grant reading it is refused at synth. This app
    does both (stacks/build_stack.py; tests/artifact_build/test_build_calibration.py): the switches are off here."""
    monkeypatch.setattr(preflight, "LOCAL_CALIBRATION_SHIPPED", False)
    monkeypatch.setattr(preflight, "S3_CALIBRATION_READABLE", False)
    model = settings(
        "m", source={"s3_uri": "s3://sources/m.onnx"}, tensorrt={"precision": "int8", "calibration_cache": cache}
    )
    problems = preflight_problems(model, instance_type_name="ml.g5.xlarge", triton_release="24.09", base_dir=tmp_path)
    assert [field for field, _ in problems] == ["tensorrt.calibration_cache"]
    assert message in problems[0][1]


def test_synth_reports_an_int8_cache_once_for_a_local_source(tmp_path, monkeypatch):
    """The trtexec command is generated at synth with the build's fetched cache in mind: one problem, the field's
    (none once the cache reaches the build, as it does in this app)."""
    dynamic_batch_model(tmp_path / "dyn.onnx")
    int8 = {"precision": "int8", "calibration_cache": "s3://bucket/calib.cache"}
    model = settings("m", source={"path": "dyn.onnx"}, tensorrt=int8)
    problems = preflight_problems(model, instance_type_name="ml.g5.xlarge", triton_release="24.09", base_dir=tmp_path)
    assert problems == []
    monkeypatch.setattr(preflight, "S3_CALIBRATION_READABLE", False)
    problems = preflight_problems(model, instance_type_name="ml.g5.xlarge", triton_release="24.09", base_dir=tmp_path)
    assert [field for field, _ in problems] == ["tensorrt.calibration_cache"]
