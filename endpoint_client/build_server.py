"""A `tritonserver` on a temporary model repository for the build report (issue 25): the built model and the
same ONNX under the ONNX Runtime backend (`<model>__reference`), side by side, on 127.0.0.1.

Two servers serve it:
- on the GPU build host, the serving image's own `tritonserver` (`--tritonserver PATH`), whose TensorRT and ONNX
  Runtime backends load the engine and the ONNX file as SageMaker would;
- here, the CPU Triton of .venv-triton (`--triton-env`), which has the Python backend only: both models then run
  through the ONNX Runtime stand-in (onnx_standin.py), the engine's folder holding the ONNX file it is built from as
  `1/model.onnx`. That tests the whole path (repository, server, requests, comparison, load test), not TensorRT.

Models load explicitly (`--model-control-mode=explicit`, one `--load-model` each; Triton's docs
`user_guide/model_management.md`), so tuning can load and unload its variants through the repository API
(`POST /v2/repository/models/<name>/load|unload`) on the same server.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from endpoint_client.codec import encode_request
from endpoint_client.errors import EndpointError, LocalEndpointError
from endpoint_client.local_endpoint import free_port
from endpoint_client.onnx_standin import ONNX_FOR_ENGINE, substitute_models
from endpoint_client.triton_backend import LOOPBACK, TritonHTTP, TritonUnavailable
from endpoint_client.triton_install import TritonInstall
from model_build.onnx_external import external_data
from model_build.onnx_inspect import inspect_model

REFERENCE_SUFFIX = "__reference"
STANDIN = "onnx stand-in (CPU)"
TENSORRT = "tensorrt"


def reference_name(model: str) -> str:
    return f"{model}{REFERENCE_SUFFIX}"


def read_model_config(folder: Path) -> mc.ModelConfig:
    path = folder / "config.pbtxt"
    try:
        return text_format.Parse(path.read_text(encoding="utf-8"), mc.ModelConfig())
    except (OSError, text_format.ParseError, UnicodeDecodeError) as error:
        raise LocalEndpointError(f"{path}: cannot read the model's config ({error})") from None


def write_model_config(folder: Path, config: mc.ModelConfig) -> None:
    (folder / "config.pbtxt").write_text(text_format.MessageToString(config), encoding="utf-8")


def link_version(source: Path, target: Path) -> None:
    """target/1/ holding links to every file of source/1/ (an engine is not copied for each variant)."""
    (target / "1").mkdir(parents=True)
    for file in sorted((source / "1").iterdir()):
        if file.is_file() and file.name != "model.py":
            (target / "1" / file.name).symlink_to(file.resolve())


def prepare_repository(built: Path, model: str, onnx: Path, destination: Path) -> None:
    """destination/<model>/ (the built folder, linked) and destination/<model>__reference/ (the ONNX file under
    onnxruntime_onnx on the CPU: the reference TensorRT is compared with)."""
    source = built / model
    if not (source / "config.pbtxt").is_file():
        raise LocalEndpointError(f"{source}: no config.pbtxt; run `python -m model_build config` and `build` first")
    engine = destination / model
    link_version(source, engine)
    shutil.copy2(source / "config.pbtxt", engine / "config.pbtxt")
    config = read_model_config(source)
    reference = destination / reference_name(model)
    (reference / "1").mkdir(parents=True)
    shutil.copy2(onnx, reference / "1" / "model.onnx")
    for item in external_data(onnx):  # tensors stored beside the ONNX file travel with it
        target = reference / "1" / item.location
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(item.path, target)
    # The ONNX file's own types: a TensorRT 8.6 engine (Triton 23.12-24.03) carries INT64 as INT32
    # (model_build.pbtxt.served_type), which ONNX Runtime would refuse for an INT64 input.
    signature = inspect_model(onnx)
    onnx_types = {spec.name: spec.triton_type for spec in (*signature.inputs, *signature.outputs)}
    for tensor in (*config.input, *config.output):
        if tensor.name in onnx_types:
            tensor.data_type = mc.DataType.Value(onnx_types[tensor.name])
    config.name = reference_name(model)
    config.platform = "onnxruntime_onnx"
    config.backend = ""
    config.default_model_filename = "model.onnx"
    config.ClearField("optimization")
    config.ClearField("dynamic_batching")  # one request at a time: the reference need not be fast
    del config.instance_group[:]
    config.instance_group.add(count=1, kind=mc.ModelInstanceGroup.Kind.KIND_CPU)
    write_model_config(reference, config)


class BuildServer:
    """tritonserver on `repository`, models loaded explicitly; always stopped by `stop()` (or the `with`)."""

    def __init__(
        self,
        repository: Path,
        models: Sequence[str],
        *,
        tritonserver: Path | None = None,
        triton_env: Path | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        if (tritonserver is None) == (triton_env is None):
            raise LocalEndpointError("give either the serving image's tritonserver or a CPU Triton venv")
        self.repository = repository
        self.models = list(models)
        self.tritonserver = tritonserver
        self.triton_env = triton_env
        self.startup_timeout = startup_timeout
        self.engine = STANDIN if triton_env is not None else TENSORRT
        self.http = TritonHTTP(free_port())
        self.process: subprocess.Popen | None = None
        self._workdir = tempfile.TemporaryDirectory(prefix="build-server-")
        self.log_path = Path(self._workdir.name) / "tritonserver.log"

    def __enter__(self) -> BuildServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.http.port}"

    def start(self) -> None:
        arguments = [
            f"--model-repository={self.repository}",
            "--model-control-mode=explicit",
            *(f"--load-model={name}" for name in self.models),
            f"--http-address={LOOPBACK}",
            f"--http-port={self.http.port}",
            "--allow-grpc=false",
            "--allow-metrics=false",
            "--log-verbose=0",
        ]
        env = dict(os.environ)
        if self.triton_env is not None:
            substitute_models(self.repository)
            install = TritonInstall.find(self.triton_env)
            backends = install.prepare_backends(Path(self._workdir.name) / "backends")
            binary = install.binary
            arguments += [
                f"--backend-directory={backends}",
                f"--backend-config=python,shm-region-prefix-name=build{uuid.uuid4().hex[:12]}",
            ]
            env = install.environment(env)
        else:
            binary = self.tritonserver
            if not binary.is_file():
                raise LocalEndpointError(f"no tritonserver at {binary} (the serving image has /opt/tritonserver/bin)")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [str(binary), *arguments],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise LocalEndpointError(
                    f"tritonserver exited with code {self.process.returncode} while loading "
                    f"{', '.join(self.models)}; its log ends:\n{self.log_tail()}"
                )
            with contextlib.suppress(TritonUnavailable):
                if self.http.healthy("ready", timeout=2):
                    return
            time.sleep(0.2)
        raise LocalEndpointError(f"tritonserver not ready within {self.startup_timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 15.0) -> None:
        process, self.process = self.process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=timeout)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # stubs left behind go too
            process.wait()
        self._workdir.cleanup()

    def version(self) -> str | None:
        status, body, _ = self.http.request("GET", "/v2", timeout=10)
        return json.loads(body).get("version") if status == 200 else None

    def _repository_call(self, model: str, action: str) -> None:
        path = f"/v2/repository/models/{urllib.parse.quote(model, safe='')}/{action}"
        status, body, _ = self.http.request("POST", path, b"{}", timeout=600)
        if status != 200:
            raise LocalEndpointError(f"{action} of {model!r} failed: HTTP {status}: {body[:500]!r}\n{self.log_tail()}")

    def load(self, model: str) -> None:
        self._repository_call(model, "load")

    def unload(self, model: str) -> None:
        self._repository_call(model, "unload")

    def infer(self, model: str, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One request through Triton's KServe binary route; every output, by name."""
        from tritonclient.http import InferenceServerClient

        request = encode_request(inputs)
        size = request.content_type.rsplit("=", 1)[1]
        headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": size}
        status, body, reply_headers = self.http.request(
            "POST", self.http.model_path(model, "infer"), request.body, headers, timeout=300
        )
        if status != 200:
            text = body.decode("utf-8", errors="replace")
            with contextlib.suppress(ValueError):
                text = json.loads(text).get("error", text)
            raise EndpointError(model, text[:2000], status=status)
        length = reply_headers.get("inference-header-content-length")
        result = InferenceServerClient.parse_response_body(body, header_length=int(length) if length else None)
        return {output["name"]: result.as_numpy(output["name"]) for output in result.get_response()["outputs"]}


def standin_ready(built: Path, model: str) -> bool:
    """Whether the built folder can run on the CPU stand-in (it holds the ONNX file as 1/model.onnx)."""
    return (built / model / "1" / ONNX_FOR_ENGINE).is_file()
