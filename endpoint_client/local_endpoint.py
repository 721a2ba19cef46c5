"""A local SageMaker-compatible Triton endpoint: a packaged model.tar.gz served as SageMaker would.

The archive is extracted as the model directory (SageMaker's /opt/ml/model), `tritonserver` is started
with the arguments Triton's own serve script derives from the container environment
(sagemaker_serve.py), and the endpoint counts as up once `/ping` answers 200 on 127.0.0.1. Multi-model
mode starts with an empty repository and loads archives by name through Triton's SageMaker
multi-model API (POST /models, DELETE /models/<name>), as the SageMaker platform does.

The server runs in its own process group; stop() ends the whole group (Python backend stubs
included), also after a failed start.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from endpoint_client.codec import error_message
from endpoint_client.errors import LocalEndpointError
from endpoint_client.sagemaker_serve import ServePlan, serve_plan
from endpoint_client.transport import http_request, json_request
from endpoint_client.triton_install import DEFAULT_TRITON_ENV, TritonInstall

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
LOOPBACK = "127.0.0.1"  # Triton's SageMaker port binds all interfaces (no address flag): talk to loopback only


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def ensure_port_free(port: int) -> None:
    """Triton binds the SageMaker port on all interfaces and exits if it is taken; but a server already
    there could answer our /ping first, so refuse a taken port before starting."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))  # binding only: no traffic leaves the machine
        except OSError as error:
            raise LocalEndpointError(
                f"port {port} is in use ({error.strerror}); choose another with --port, or --port 0 for a free one"
            ) from None


def extract_archive(archive: Path, destination: Path) -> None:
    """Unpack model.tar.gz the way SageMaker does; refuses links and paths leaving `destination`."""
    if not archive.is_file():
        raise LocalEndpointError(f"archive {archive} does not exist: build it with `python -m model_build package`")
    destination.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(destination, filter="data")
    except (tarfile.TarError, OSError) as error:
        raise LocalEndpointError(f"archive {archive} cannot be extracted: {error}") from error


class LocalEndpoint:
    """Start with `start()` (or `with LocalEndpoint(...) as endpoint:`); `url` is http://127.0.0.1:PORT."""

    def __init__(
        self,
        archive: Path | None = None,
        *,
        environment: Mapping[str, str] | None = None,
        multi_model: bool = False,
        port: int = 0,
        triton_env: Path = DEFAULT_TRITON_ENV,
        workdir: Path | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        if multi_model == (archive is not None):
            raise ValueError("give an archive for a single-model endpoint, or multi_model=True without one")
        self.archive = archive
        self.container_environment = dict(environment or {})
        if multi_model:
            self.container_environment["SAGEMAKER_MULTI_MODEL"] = "true"  # what SageMaker sets for Mode MultiModel
        self.port = port or free_port()
        self.triton_env = triton_env
        self.startup_timeout = startup_timeout
        self._owned_workdir = tempfile.TemporaryDirectory(prefix="local-endpoint-") if workdir is None else None
        self.workdir = Path(self._owned_workdir.name) if self._owned_workdir else workdir
        self.log_path = self.workdir / "tritonserver.log"
        self.process: subprocess.Popen | None = None
        self.plan: ServePlan | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def __enter__(self) -> LocalEndpoint:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> str:
        model_repository = self.workdir / "opt-ml-model"
        multi_model_repository = self.workdir / "tmp-sagemaker"
        multi_model_repository.mkdir(parents=True, exist_ok=True)
        if self.archive is not None:
            extract_archive(self.archive, model_repository)
        install = TritonInstall.find(self.triton_env)
        ensure_port_free(self.port)
        container_env = {"SAGEMAKER_BIND_TO_PORT": str(self.port), **self.container_environment}
        self.plan = serve_plan(
            container_env, model_repository=model_repository, multi_model_repository=multi_model_repository
        )
        backends = install.prepare_backends(self.workdir / "backends")
        arguments = [
            str(install.binary),
            *self.plan.arguments,
            f"--backend-directory={backends}",
            # Local-only: a shared-memory prefix of its own so two local endpoints never share regions.
            f"--backend-config=python,shm-region-prefix-name=local_endpoint_{os.getpid()}_{self.port}_",
        ]
        env = install.environment({**os.environ, **container_env, **self.plan.environment})
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                arguments,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_for_ping()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _wait_for_ping(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise LocalEndpointError(
                    f"tritonserver exited with code {self.process.returncode} before /ping answered; "
                    f"its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            try:
                status, _, _ = http_request("GET", self.url + "/ping", None, {}, timeout=2)
            except Exception:  # not listening yet
                status = 0
            if status == 200 and self.process is not None and self.process.poll() is None:
                return
            time.sleep(0.1)
        raise LocalEndpointError(
            f"/ping on {self.url} did not answer 200 within {self.startup_timeout:.0f} s; log ends:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the server's process group, SIGKILL it if still there after `timeout`; idempotent."""
        process, self.process = self.process, None
        if process is not None:
            _signal_group(process, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=timeout)
            _signal_group(process, signal.SIGKILL)  # stubs left behind by a crashed server go too
            process.wait()
        if self._owned_workdir is not None:
            self._owned_workdir.cleanup()
            self._owned_workdir = None

    # Triton's SageMaker multi-model API: what the SageMaker platform calls on an MME instance.
    def load_model(self, name: str, archive: Path) -> None:
        """Extract `archive` and load it under `name` (on SageMaker: the TargetModel, e.g. "add_sub.tar.gz")."""
        model_dir = self.workdir / "mme" / urllib.parse.quote(name, safe="") / "model"
        extract_archive(archive, model_dir)
        status, body = json_request("POST", f"{self.url}/models", {"model_name": name, "url": str(model_dir)}, 300)
        if status != 200:
            raise LocalEndpointError(f"loading model {name!r} failed: HTTP {status}: {error_message(body)}")

    def unload_model(self, name: str) -> None:
        status, body = json_request("DELETE", f"{self.url}/models/{urllib.parse.quote(name, safe='')}", None, 300)
        if status != 200:
            raise LocalEndpointError(f"unloading model {name!r} failed: HTTP {status}: {error_message(body)}")

    def list_models(self) -> list[str]:
        status, body = json_request("GET", f"{self.url}/models", None, 30)
        if status != 200:
            raise LocalEndpointError(f"listing models failed: HTTP {status}: {error_message(body)}")
        return [model["modelName"] for model in json.loads(body).get("models", [])]


def _die_with_parent() -> None:
    """In the child before exec: Linux SIGKILLs the server if the process that started it dies without
    stopping it (e.g. pytest killed by SIGKILL); the Python backend stubs exit when the server does."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)  # start_new_session=True: the group id is the server's pid
