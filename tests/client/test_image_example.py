"""The example image pipeline (issue 15): examples/models/image_classifier, an ensemble of image_preprocess
(Python, Pillow from its own packed environment), image_cnn (ONNX) and image_postprocess (Python, numpy).

Without a server: the committed ONNX is what examples/tools/make_image_cnn.py writes and ONNX Runtime runs
it; the committed ensemble config is what model_build generates from the stage config's steps; TensorRT
models run from their ONNX on the local endpoint. With the real local Triton (marked `triton`): the
example packaged by `model_build package --environment-python` (the project's one packing code path) is
served whole, `invoke --raw image=cat.jpg --output labels` prints five ImageNet names, and hostile images
are refused with 400 and a message while the endpoint keeps serving; the stage config's pipeline, packaged
by `model_build package --config examples/config/ensemble.yaml` (image_cnn a TensorRT model, run from its
ONNX), answers the same labels, and the `endpoint_client local` command says which model runs substituted.

Sources: python_backend README "Creating Custom Execution Environments" (EXECUTION_ENV_PATH,
$$TRITON_MODEL_DIRECTORY) and "Error Handling" (TritonError codes: INVALID_ARG becomes HTTP 400); Triton's
architecture guide "Ensemble Models" (explicit model control loads an ensemble's composing models with it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.cli import main as endpoint_client
from endpoint_client.client import EndpointClient
from endpoint_client.errors import LocalEndpointError
from endpoint_client.local_endpoint import LocalEndpoint, extract_archive
from endpoint_client.onnx_standin import Substitution, substitute_models, substitution_notice
from endpoint_client.transport import http_request
from model_build.cli import main as model_build
from model_build.requirements_lock import read_locked_requirements
from model_build.stage_repository import assemble_repository

REPO_ROOT = Path(__file__).resolve().parents[2]
MODELS = REPO_ROOT / "examples" / "models"
CAT = REPO_ROOT / "examples" / "images" / "cat.jpg"
STAGE_CONFIGS = REPO_ROOT / "examples" / "config"
TRITON_PYTHON = REPO_ROOT / ".venv-triton" / "bin" / "python"
LABELS = [line.strip() for line in (MODELS / "image_postprocess" / "imagenet_labels.txt").read_text().splitlines()]
QUIET = {"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}


def _generator():
    path = REPO_ROOT / "examples" / "tools" / "make_image_cnn.py"
    spec = importlib.util.spec_from_file_location("make_image_cnn", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(folder: Path) -> mc.ModelConfig:
    return text_format.Parse((folder / "config.pbtxt").read_text(), mc.ModelConfig())


# --- the committed files -------------------------------------------------------------------------------


def test_the_generator_rewrites_the_committed_onnx_byte_for_byte():
    """examples/tools/make_image_cnn.py is the source of 1/model.onnx: fixed seed, IR version and opset."""
    committed = (MODELS / "image_cnn" / "1" / "model.onnx").read_bytes()
    assert _generator().model_bytes() == committed
    assert len(committed) < 4_000_000  # "a few MB at most" (issue 15)


def test_onnx_runtime_runs_the_cnn_with_its_config_tensors():
    path = MODELS / "image_cnn" / "1" / "model.onnx"
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert {node.op_type for node in model.graph.node} >= {"Conv", "BatchNormalization", "Add", "MaxPool", "Gemm"}
    config = _config(MODELS / "image_cnn")
    assert config.platform == "onnxruntime_onnx" and config.max_batch_size == 0
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (graph_input,), (graph_output,) = session.get_inputs(), session.get_outputs()
    assert (graph_input.name, graph_input.shape) == (config.input[0].name, list(config.input[0].dims))
    assert (graph_output.name, graph_output.shape) == (config.output[0].name, list(config.output[0].dims))
    image = np.random.default_rng(0).standard_normal((3, 224, 224)).astype(np.float32)
    (logits,) = session.run(None, {"input": image})
    assert logits.shape == (1000,) and logits.dtype == np.float32 and np.all(np.isfinite(logits))
    assert len(np.unique(np.round(logits, 4))) > 900  # random weights, but real scores: no collapsed output


def test_the_pipeline_files_fit_together():
    """Labels: 1000 names (Triton's densenet example list). Pre-processing: locked requirements with numpy
    (the stub imports it) and Pillow, and EXECUTION_ENV_PATH where the packer puts the archive."""
    assert len(LABELS) == 1000 and all(LABELS) and LABELS[281] == "TABBY"
    names = {
        r.normalized: r.version for r in read_locked_requirements(MODELS / "image_preprocess" / "requirements.txt")
    }
    assert set(names) == {"numpy", "pillow"} and names["numpy"].startswith("1.")
    preprocess = _config(MODELS / "image_preprocess")
    assert preprocess.parameters["EXECUTION_ENV_PATH"].string_value == "$$TRITON_MODEL_DIRECTORY/python_env.tar.gz"
    assert not (MODELS / "image_preprocess" / "python_env.tar.gz").exists()  # packed into the package only
    assert (preprocess.input[0].data_type, list(preprocess.input[0].dims)) == (mc.TYPE_STRING, [1])
    assert _config(MODELS / "image_postprocess").output[0].data_type == mc.TYPE_STRING
    ensemble = _config(MODELS / "image_classifier")
    assert ensemble.platform == "ensemble" and [s.model_name for s in ensemble.ensemble_scheduling.step] == [
        "image_preprocess",
        "image_cnn",
        "image_postprocess",
    ]


def _stage_file() -> Path:
    for name in ("ensemble.yaml", "ensemble.yaml.draft"):
        if (STAGE_CONFIGS / name).is_file():
            return STAGE_CONFIGS / name
    pytest.fail("examples/config/ensemble.yaml is missing")


def test_the_committed_ensemble_config_is_what_model_build_generates(tmp_path):
    """The stage config's steps and the composing configs give exactly the committed config.pbtxt
    (model_build.ensemble_config, checked with `model_build check`'s ensemble rules)."""
    shutil.copyfile(_stage_file(), tmp_path / "ensemble.yaml")  # the draft loads under its stage's name
    repository = tmp_path / "repo"
    for model in ("image_preprocess", "image_cnn", "image_postprocess"):
        shutil.copytree(MODELS / model, repository / model)
    argv = ["config", "--config", str(tmp_path / "ensemble.yaml"), "--model", "image_classifier",
            "--repository", str(repository)]  # fmt: skip
    assert model_build(argv) == 0
    generated = (repository / "image_classifier" / "config.pbtxt").read_text()
    assert generated == (MODELS / "image_classifier" / "config.pbtxt").read_text()


# --- TensorRT models run from their ONNX locally -------------------------------------------------------


def _tensorrt_folder(repository: Path, *, with_onnx: bool) -> Path:
    """image_cnn as examples/config/ensemble.yaml describes it (tensorrt_plan, KIND_GPU), assembled by
    `model_build package --config`'s code: the build's config and the ONNX its engine is built from. Without
    the ONNX, the engine's place holds an engine (what a build's archive holds)."""
    assert assemble_repository(_stage_file(), "image_cnn", repository, base_dir=REPO_ROOT).engines_from_onnx == (
        "image_cnn",
    )
    folder = repository / "image_cnn"
    if not with_onnx:
        (folder / "1" / "model.onnx").rename(folder / "1" / "model.plan")
    return folder


def test_a_tensorrt_model_with_its_onnx_runs_substituted_with_its_tensors(tmp_path):
    folder = _tensorrt_folder(tmp_path, with_onnx=True)
    before = _config(folder)
    assert (before.platform, before.instance_group[0].kind) == ("tensorrt_plan", mc.ModelInstanceGroup.Kind.KIND_GPU)
    assert substitute_models(tmp_path) == [Substitution("image_cnn", "tensorrt_plan")]
    after = _config(folder)
    assert (after.platform, after.backend) == ("", "python")
    assert list(after.input) == list(before.input) and list(after.output) == list(before.output)
    assert [(g.kind, list(g.gpus)) for g in after.instance_group] == [(mc.ModelInstanceGroup.Kind.KIND_CPU, [])]
    assert (folder / "1" / "model.py").is_file()
    notice = substitution_notice([Substitution("image_cnn", "tensorrt_plan"), "other"])
    assert "image_cnn (tensorrt_plan: its model.onnx instead of the engine)" in notice
    assert "other (onnxruntime_onnx)" in notice


def test_a_tensorrt_engine_alone_is_refused_with_what_to_do(tmp_path):
    _tensorrt_folder(tmp_path, with_onnx=False)
    with pytest.raises(LocalEndpointError, match=r"model 'image_cnn' is a TensorRT engine.*image_cnn/1/model\.onnx"):
        substitute_models(tmp_path)


@pytest.mark.triton
def test_the_local_command_serves_a_tensorrt_model_from_its_onnx_and_says_so(triton_env, tmp_path):
    """`model_build package --config examples/config/ensemble.yaml --model image_cnn`, then the `endpoint_client
    local` command (a process, as a user runs it): it prints which model runs substituted, in place of what,
    and the stand-in answers what ONNX Runtime computes from the same ONNX."""
    out = tmp_path / "out"
    package = [sys.executable, "-m", "model_build", "package", "--config", str(_stage_file()), "--model", "image_cnn",
               "--base-dir", str(REPO_ROOT), "--out", str(out)]  # fmt: skip
    packaged = subprocess.run(package, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert packaged.returncode == 0, packaged.stderr
    assert "note: image_cnn is a tensorrt_plan model" in packaged.stderr
    process = subprocess.Popen(
        [sys.executable, "-m", "endpoint_client", "local", str(out / "model.tar.gz"), "--port", "0",
         "--triton-env", str(triton_env), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=false"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.poll() is not None else url
        pixels = np.random.default_rng(1).standard_normal((3, 224, 224)).astype(np.float32)
        outputs = EndpointClient.for_url(url).invoke({"input": pixels})
        session = ort.InferenceSession(
            str(MODELS / "image_cnn" / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
        )
        (expected,) = session.run(None, {"input": pixels})
        np.testing.assert_allclose(outputs["logits"], expected, rtol=1e-5, atol=1e-5)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        err = process.stderr.read()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert (
        "note: substituted locally: image_cnn (tensorrt_plan: its model.onnx instead of the engine) run(s) on ONNX "
        "Runtime (CPU) in a Python-backend stand-in" in err
    ), err
    assert "serving image_cnn (log: " in err and "stopping (SIGINT)" in err


# --- served end to end by the real local Triton -------------------------------------------------------


def _package(out: Path) -> Path:
    """`model_build package --model image_classifier --environment-python <the local Triton's python>`."""
    argv = ["package", str(MODELS), "--model", "image_classifier", "--layout", "single",
            "--environment-python", str(TRITON_PYTHON), "--out", str(out)]  # fmt: skip
    assert model_build(argv) == 0
    return out / "model.tar.gz"


@pytest.fixture(scope="module")
def image_archive(triton_env, tmp_path_factory) -> Path:
    return _package(tmp_path_factory.mktemp("image-package"))


@contextlib.contextmanager
def _serve(archive: Path, workdir: Path) -> Iterator[LocalEndpoint]:
    endpoint = LocalEndpoint(
        archive,
        environment={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "image_classifier", **QUIET},
        triton_env=REPO_ROOT / ".venv-triton",
        workdir=workdir,
        startup_timeout=180,
    )
    try:
        endpoint.start()
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture(scope="module")
def image_endpoint(image_archive, tmp_path_factory) -> Iterator[LocalEndpoint]:
    with _serve(image_archive, tmp_path_factory.mktemp("image-endpoint")) as endpoint:
        yield endpoint


def _invoke(url: str, image: Path, capsys) -> tuple[int, list[str], str]:
    code = endpoint_client(["invoke", "--url", url, "--raw", f"image={image}", "--output", "labels"])
    captured = capsys.readouterr()
    labels = json.loads(captured.out)["outputs"]["labels"]["data"] if code == 0 else []
    return code, labels, captured.err


@pytest.mark.triton
def test_pillow_comes_only_from_the_packed_environment(image_archive):
    """The server's own Python cannot import Pillow; the package carries it in image_preprocess's archive."""
    result = subprocess.run([str(TRITON_PYTHON), "-c", "import PIL"], capture_output=True, text=True)
    assert result.returncode != 0 and "No module named 'PIL'" in result.stderr
    with tarfile.open(image_archive) as tar:
        environment = tar.extractfile("image_preprocess/python_env.tar.gz").read()
    with tarfile.open(fileobj=io.BytesIO(environment)) as tar:
        names = tar.getnames()
    assert "bin/activate" in names and any(n.endswith("/site-packages/PIL/Image.py") for n in names)


@pytest.mark.triton
def test_a_jpeg_in_five_imagenet_names_out(image_endpoint, capsys):
    assert image_endpoint.plan.default_model == "image_classifier"
    assert image_endpoint.substitutions == [Substitution("image_cnn", "onnxruntime_onnx")]
    assert image_endpoint.ensemble_steps("image_classifier") == ["image_preprocess", "image_cnn", "image_postprocess"]
    assert image_endpoint.ensemble_steps("image_cnn") == []
    code, labels, err = _invoke(image_endpoint.url, CAT, capsys)
    assert code == 0, err
    assert len(labels) == 5 and len(set(labels)) == 5 and set(labels) <= set(LABELS)
    again = _invoke(image_endpoint.url, CAT, capsys)[1]
    assert again == labels  # deterministic: same bytes, same weights


def _png(width: int, height: int, pixels: bytes = b"") -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b"")


HOSTILE = {
    "garbage": (b"this is not an image at all", "not a JPEG or PNG file"),
    "empty": (b"", "the element is empty"),
    "bomb": (_png(100_000, 100_000, b"\0" * 1000), "decompression bomb"),  # 30 GB of RGB from 90 bytes
    "over_the_pixel_limit": (_png(6_000, 6_000, b"\0" * 1000), "more than 25000000"),
    "a_line": (_png(30_000, 1, b"\0" * 100), "over 20 times the other"),
    "truncated_jpeg": (CAT.read_bytes()[:2000], "cannot be decoded"),
    "gif": (b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", "not a JPEG or PNG file"),
}


@pytest.mark.triton
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_images_get_400_with_a_message_and_the_endpoint_stays_up(case, image_endpoint, tmp_path, capsys):
    data, message = HOSTILE[case]
    path = tmp_path / f"{case}.bin"
    path.write_bytes(data)
    code, _, err = _invoke(image_endpoint.url, path, capsys)
    assert code == 1
    assert "HTTP 400" in err and "in ensemble 'image_classifier'" in err and message in err, err
    assert http_request("GET", f"{image_endpoint.url}/ping", None, {}, timeout=10)[0] == 200
    assert _invoke(image_endpoint.url, CAT, capsys)[0] == 0


@pytest.mark.triton
def test_the_stage_configs_pipeline_runs_locally_with_its_tensorrt_model_from_its_onnx(
    image_endpoint, tmp_path, capsys
):
    """examples/config/ensemble.yaml builds image_cnn as a TensorRT engine. `model_build package --config` packages
    the pipeline as that stage config describes it (no hand edits: the build's configs, tensorrt_plan for
    image_cnn with the ONNX its engine is built from); served locally, image_cnn runs substituted from that
    ONNX, and a JPEG in gives the same five labels as the ONNX Runtime example."""
    out = tmp_path / "out"
    argv = ["package", "--config", str(_stage_file()), "--model", "image_classifier", "--base-dir", str(REPO_ROOT),
            "--environment-python", str(TRITON_PYTHON), "--out", str(out)]  # fmt: skip
    assert model_build(argv) == 0
    assert "note: image_cnn is a tensorrt_plan model" in capsys.readouterr().err
    with tarfile.open(out / "model.tar.gz") as tar:
        names = set(tar.getnames())
        cnn = text_format.Parse(tar.extractfile("image_cnn/config.pbtxt").read().decode(), mc.ModelConfig())
    assert (
        cnn.platform == "tensorrt_plan" and "image_cnn/1/model.onnx" in names and "image_cnn/1/model.plan" not in names
    )
    assert "image_preprocess/python_env.tar.gz" in names
    expected = _invoke(image_endpoint.url, CAT, capsys)[1]  # the ONNX Runtime example's answer
    with _serve(out / "model.tar.gz", tmp_path / "endpoint") as endpoint:
        assert endpoint.plan.default_model == "image_classifier"
        assert endpoint.substitutions == [Substitution("image_cnn", "tensorrt_plan")]
        code, labels, err = _invoke(endpoint.url, CAT, capsys)
        assert code == 0, err
        assert len(labels) == 5 and set(labels) <= set(LABELS)
        assert labels == expected


@pytest.mark.triton
def test_a_multi_model_endpoint_loads_the_ensemble_archive_with_its_steps(
    image_archive, image_endpoint, tmp_path, capsys
):
    """Multi-model: the ensemble's TargetModel archive holds it and its composing models; the local endpoint
    serves the ensemble under the TargetModel's name and its steps beside it, as Triton's SageMaker service."""
    expected = _invoke(image_endpoint.url, CAT, capsys)[1]
    endpoint = LocalEndpoint(
        environment=QUIET,
        multi_model=True,
        triton_env=REPO_ROOT / ".venv-triton",
        workdir=tmp_path,
        startup_timeout=180,
    )
    try:
        endpoint.start()
        endpoint.load_model("image_classifier.tar.gz", image_archive)
        assert endpoint.substitutions == [Substitution("image_cnn", "onnxruntime_onnx")]
        argv = ["invoke", "--url", endpoint.url, "--target-model", "image_classifier.tar.gz",
                "--raw", f"image={CAT}", "--output", "labels"]  # fmt: skip
        assert endpoint_client(argv) == 0
        assert json.loads(capsys.readouterr().out)["outputs"]["labels"]["data"] == expected
    finally:
        endpoint.stop()


@pytest.mark.triton
def test_the_ensemble_archive_under_one_of_its_step_names_is_a_409_not_a_dropped_connection(
    image_archive, triton_env, multi_endpoint, tmp_path
):
    """Review M7: `local --multi-model --load image_preprocess=<the ensemble's archive>` was a FileExistsError in
    the front's thread, an empty reply and "Remote end closed connection". The name is checked against the
    archive's steps first: a 409 naming the clash, through the command and through POST /models."""
    command = [sys.executable, "-m", "endpoint_client", "local", "--multi-model", "--port", "0",
               "--triton-env", str(triton_env), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=false",
               "--load", f"image_preprocess={image_archive}"]  # fmt: skip
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "Remote end closed" not in result.stderr
    assert "loading model 'image_preprocess' failed: HTTP 409: model_name 'image_preprocess' is also the name " in (
        result.stderr
    )

    staged = multi_endpoint.staging / "m7" / "model"
    extract_archive(image_archive, staged)
    for step in ("image_preprocess", "image_cnn", "image_postprocess"):
        status, body, _ = http_request(
            "POST", f"{multi_endpoint.url}/models", json.dumps({"model_name": step, "url": str(staged)}).encode(),
            {"Content-Type": "application/json"}, 30,
        )  # fmt: skip
        assert status == 409, body
        assert "step of the archive's ensemble 'image_classifier'" in json.loads(body)["error"]
    assert multi_endpoint.list_models() == []
    assert http_request("GET", f"{multi_endpoint.url}/ping", None, {}, timeout=10)[0] == 200


@pytest.mark.triton
def test_the_pipeline_smoke_check_passes_on_the_image_pipeline_with_its_sample(image_endpoint, image_archive):
    """The pipeline's smoke step (endpoint_client.smoke.check_model) against the served image pipeline: with
    generated bytes the pre-processing step refuses the request (400, review finding: such a stage could never
    pass), with config/pipeline.yaml smoke.raw_inputs naming a JPEG it passes and its outputs match the config."""
    from endpoint_client import EndpointClient
    from endpoint_client.smoke import check_model, read_model_config
    from endpoint_client.smoke_plan import EndpointCheck, ModelCheck
    from endpoint_client.transport import LocalTransport

    with image_archive.open("rb") as archive:
        config = read_model_config(archive, "image_classifier", str(image_archive))
    client = EndpointClient(LocalTransport(image_endpoint.url))
    generated = ModelCheck("image_classifier", "k", None)
    sampled = ModelCheck("image_classifier", "k", None, raw_inputs={"image": str(CAT)})
    endpoint = EndpointCheck("triton-ensemble", "ensemble-triton-ensemble", 60_000.0, [generated, sampled])
    refused = check_model(client, endpoint, generated, config, timed_calls=1)
    assert not refused.passed and "not a JPEG or PNG" in refused.problems[0]
    passed = check_model(client, endpoint, sampled, config, timed_calls=2)
    assert passed.passed, passed.problems
    assert len(passed.latencies_ms) == 2
