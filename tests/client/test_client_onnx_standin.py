"""ONNX models run on the local endpoint through a Python-backend stand-in (ONNX Runtime on the CPU).

The local Triton carries the Python backend only (../shared/README.md, "Tooling facts"); the stand-in keeps
the config's name, inputs, outputs and batching, so the request a client sends locally is the one it sends
to the onnxruntime backend on SageMaker.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.cli import main
from endpoint_client.errors import LocalEndpointError
from endpoint_client.local_endpoint import LocalEndpoint
from endpoint_client.onnx_standin import (
    ONNX_FILE_PARAMETER,
    substitute_models,
    substitute_onnx_models,
    substitution_notice,
)
from endpoint_client.transport import json_request
from model_build.cli import main as model_build
from model_build.package import write_model_archive

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model_build"))
from onnx_fixtures import dynamic_batch_model

QUIET = {"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}
MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


@pytest.fixture
def onnx_repository(tmp_path: Path) -> Path:
    """A repository as `model_build config` writes it for an onnxruntime_onnx model on a CPU."""
    onnx_path = dynamic_batch_model(tmp_path / "classifier.onnx")
    repository = tmp_path / "repo"
    argv = ["config", "--onnx", str(onnx_path), "--name", "classifier", "--platform", "onnxruntime_onnx",
            "--instance-kind", "KIND_CPU", "--max-batch-size", "8", "--repository", str(repository)]  # fmt: skip
    assert model_build(argv) == 0
    return repository


def test_the_config_becomes_a_python_model_with_the_same_tensors(onnx_repository):
    before = text_format.Parse((onnx_repository / "classifier" / "config.pbtxt").read_text(), mc.ModelConfig())
    assert substitute_onnx_models(onnx_repository) == ["classifier"]
    after = text_format.Parse((onnx_repository / "classifier" / "config.pbtxt").read_text(), mc.ModelConfig())
    assert (after.backend, after.platform) == ("python", "")
    assert list(after.input) == list(before.input) and list(after.output) == list(before.output)
    assert after.max_batch_size == before.max_batch_size
    assert after.parameters[ONNX_FILE_PARAMETER].string_value == "model.onnx"
    assert all(group.kind == mc.ModelInstanceGroup.Kind.KIND_CPU for group in after.instance_group)
    assert (onnx_repository / "classifier" / "1" / "model.py").is_file()
    assert "classifier" in substitution_notice(["classifier"])


@pytest.mark.triton
def test_an_onnx_model_answers_on_the_local_endpoint(onnx_repository, triton_env, tmp_path):
    archive = tmp_path / "model.tar.gz"
    write_model_archive(onnx_repository / "classifier", archive)
    endpoint = LocalEndpoint(
        archive,
        environment={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "classifier", **QUIET},
        triton_env=triton_env,
        workdir=tmp_path / "endpoint",
        startup_timeout=90,
    )
    x = np.array([[1.0, -2.0, 3.0, -4.0], [0.5, 0.5, -0.5, 2.0]], dtype=np.float32)
    try:
        endpoint.start()
        assert endpoint.substituted == ["classifier"]
        request = {"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}]}
        status, body = json_request("POST", f"{endpoint.url}/invocations", request, 60)
    finally:
        endpoint.stop()
    assert status == 200, body
    replies = json.loads(body)["outputs"]
    outputs = {o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"]) for o in replies}
    np.testing.assert_allclose(outputs["y"], np.maximum(x, 0))
    np.testing.assert_allclose(outputs["total"], x.sum(axis=1, keepdims=True), rtol=1e-6)


# --- Review LOW2: what the archive holds where the stand-in writes its model.py ------------------------------


def onnx_model(repository: Path, model_py: str) -> Path:
    """image_cnn's config and an ONNX file, with `model_py` ('folder' or 'link') where the stand-in writes."""
    folder = repository / "image_cnn"
    (folder / "1").mkdir(parents=True)
    shutil.copyfile(MODELS / "image_cnn" / "config.pbtxt", folder / "config.pbtxt")
    (folder / "1" / "model.onnx").write_bytes(b"onnx")
    if model_py == "folder":
        (folder / "1" / "model.py").mkdir()
        (folder / "1" / "model.py" / "inner.txt").write_text("x")
    else:
        (folder / "1" / "model.py").symlink_to(folder / "config.pbtxt")
    return folder


@pytest.mark.parametrize("kind", ["folder", "link"])
def test_a_model_py_that_is_not_a_file_is_a_clear_error_naming_it(tmp_path: Path, kind: str) -> None:
    folder = onnx_model(tmp_path, kind)
    config_before = (folder / "config.pbtxt").read_text()

    with pytest.raises(
        LocalEndpointError, match=rf"model 'image_cnn': image_cnn/1/model\.py in the archive is a {kind}"
    ):
        substitute_models(tmp_path)

    assert (folder / "config.pbtxt").read_text() == config_before  # nothing written through the link
    assert text_format.Parse(config_before, mc.ModelConfig()).platform == "onnxruntime_onnx"


def test_the_local_command_reports_it_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The archive is refused while it is prepared, before Triton is looked for or a port is bound."""
    onnx_model(tmp_path / "repo", "folder")
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "repo" / "image_cnn", arcname="image_cnn")

    code = main(["local", str(archive), "--port", "0", "--triton-env", str(tmp_path / "no-triton")])

    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "IsADirectoryError" not in err
    assert "ERROR: model 'image_cnn': image_cnn/1/model.py in the archive is a folder" in err
