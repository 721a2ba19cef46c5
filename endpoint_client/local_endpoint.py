"""A local SageMaker-compatible Triton endpoint: a packaged model.tar.gz served as SageMaker would.

The archive is extracted as the model directory (SageMaker's /opt/ml/model), `tritonserver` is started
with the arguments Triton's own serve script derives from the container environment
(sagemaker_serve.py), and the endpoint counts as up once `/ping` answers 200. Multi-model mode starts
with an empty repository and loads archives by name through the SageMaker multi-model API
(POST /models, DELETE /models/<name>), as the SageMaker platform does.

Every socket listens on loopback: Triton's own SageMaker service cannot be bound to an address (it
always takes 0.0.0.0, see triton_backend.py), so it stays off; Triton serves KServe HTTP on a private
127.0.0.1 port, and the SageMaker API is served by our front (front.py) on 127.0.0.1:PORT. `host` picks
another loopback address for the front (the CLI's --host); any other address is refused: the endpoint has
no authentication.

No secret on any command line and no model-load API reachable by other programs (issue 22 C1,
triton_backend.py): the repositories Triton reads, and the folders where archives are extracted and
assembled, are private to the endpoint's user (mode 0700, checked), and Triton loads models only from them.

The server runs in its own process group; stop() ends the whole group (Python backend stubs
included), also after a failed start.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import ipaddress
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
import zlib
from collections.abc import Mapping
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from endpoint_client.codec import error_message
from endpoint_client.errors import LocalEndpointError
from endpoint_client.front import FrontServer, SageMakerAPI
from endpoint_client.limits import MAX_ARCHIVE_MEMBERS, MAX_ARCHIVE_RATIO, MIN_ARCHIVE_ALLOWANCE_BYTES
from endpoint_client.model_registry import ModelRegistry
from endpoint_client.onnx_standin import ShapeRanges, Substitution, substitute_models
from endpoint_client.sagemaker_serve import ServePlan, serve_plan
from endpoint_client.shape_ranges import tensorrt_shape_ranges
from endpoint_client.shm_guard import SharedMemoryGuard, restrict_regions
from endpoint_client.transport import INFERENCE_COMPONENT_NAME, http_request, json_request
from endpoint_client.triton_backend import LOOPBACK, TritonHTTP, TritonUnavailable, local_arguments, network_options_in
from endpoint_client.triton_install import DEFAULT_TRITON_ENV, TritonInstall

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Container variables that would start another listening service (Vertex AI's) in tritonserver.
_DROPPED_ENVIRONMENT = ("AIP_MODE", "AIP_HTTP_PORT")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def bind_address(host: str) -> str:
    """A loopback IP literal to bind the front to ("localhost" = 127.0.0.1); refuses names that need resolving
    and every address beyond loopback (the endpoint has no authentication)."""
    if host == "localhost":
        return LOOPBACK
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise LocalEndpointError(f"--host {host!r} is not an IP address (e.g. 127.0.0.1 or ::1)") from None
    if not address.is_loopback:
        raise LocalEndpointError(
            f"--host {host}: the local endpoint listens on loopback only (127.0.0.1, ::1 or localhost): it has no "
            "authentication. To call it from another machine, forward a port over SSH "
            "(ssh -L 8080:127.0.0.1:8080 this-machine)"
        )
    return str(address)


def private_directory(path: Path) -> None:
    """Create `path` (mode 0700) or check an existing one: a folder, not a link, owned by this user, that no
    other user can read or write (issue 22 C1: Triton loads every model it finds in its repository)."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = os.lstat(path)
        if stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid():
            os.chmod(path, 0o700)
            status = os.lstat(path)
    except OSError as error:
        raise LocalEndpointError(f"{path}: cannot create a private folder ({error.strerror})") from None
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise LocalEndpointError(
            f"{path} must be a folder of this user's that no one else can read or write (mode 0700); the local "
            "endpoint keeps its model repositories there: give it another working folder"
        )


def extract_archive(archive: Path, destination: Path) -> None:
    """Unpack model.tar.gz the way SageMaker does into `destination` (which must not exist or be an empty
    folder). Every member is read first and the archive refused, nothing written, if one is not a regular
    file or a folder (links, devices, FIFOs: review H1), or it would extract to far more than it weighs (a tar
    bomb, review finding 10). `model_build package` writes only folders and regular files
    (model_build/archive.py `_tar_header`) and `model_build check` refuses links in a repository, so no packaged
    model holds anything else. Refusing links is what matters: Python 3.11.7's `filter="data"` lets a chain of
    symlinks whose expanded path passes PATH_MAX write outside the folder (CVE-2025-4517, fixed in CPython
    3.11.13/3.12.11/3.13.4); the filter stays as a second layer (absolute names, `..`, modes). The members are
    extracted into a fresh private folder (mode 0700) beside `destination` that is then renamed into place."""
    if not archive.is_file():
        raise LocalEndpointError(f"archive {archive} does not exist: build it with `python -m model_build package`")
    try:
        with tarfile.open(archive, "r:*") as tar:
            _check_members(archive, tar)
            destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fresh = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}-extracting-"))
            try:
                tar.extractall(fresh, filter="data")
                _move_into_place(fresh, destination)
            except BaseException:
                shutil.rmtree(fresh, ignore_errors=True)
                raise
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise LocalEndpointError(f"archive {archive} cannot be extracted: {error}") from error


def _move_into_place(fresh: Path, destination: Path) -> None:
    """Rename `fresh` to `destination`; an empty `destination` folder is replaced (rename(2) does that), a
    non-empty one (a model extracted earlier under the same name) is renamed aside and removed."""
    try:
        os.rename(fresh, destination)
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        old = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}-replaced-"))
        os.rename(destination, old / "old")
        os.rename(fresh, destination)
        shutil.rmtree(old, ignore_errors=True)


def _check_members(archive: Path, tar: tarfile.TarFile) -> None:
    """Read the members' headers (the archive is decompressed once, nothing written) and refuse a member that
    is not a regular file or a folder, too many members, or more bytes than MAX_ARCHIVE_RATIO times the
    archive (at least MIN_ARCHIVE_ALLOWANCE_BYTES)."""
    allowance = max(MIN_ARCHIVE_ALLOWANCE_BYTES, MAX_ARCHIVE_RATIO * archive.stat().st_size)
    total = 0
    for members, member in enumerate(tar, start=1):
        if not (member.isfile() or member.isdir()):
            raise LocalEndpointError(
                f"archive {archive}: member {member.name[:200]!r} is a {_member_kind(member)}; a "
                "model archive holds only folders and regular files (`python -m model_build package` writes "
                "nothing else): refused, nothing extracted"
            )
        total += member.size
        if members > MAX_ARCHIVE_MEMBERS:
            raise LocalEndpointError(f"archive {archive} holds more than {MAX_ARCHIVE_MEMBERS} files; refused")
        if total > allowance:
            raise LocalEndpointError(
                f"archive {archive} ({archive.stat().st_size} bytes) would extract to over {allowance} bytes; "
                f"refused as a likely tar bomb (the local endpoint allows {MAX_ARCHIVE_RATIO}x the archive)"
            )


def _member_kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"symbolic link (to {member.linkname[:200]!r})"
    if member.islnk():
        return f"hard link (to {member.linkname[:200]!r})"
    if member.ischr() or member.isblk():
        return "device"
    if member.isfifo():
        return "FIFO"
    return f"member of tar type {member.type!r}"


class LocalEndpoint:
    """Start with `start()` (or `with LocalEndpoint(...) as endpoint:`); `url` is http://127.0.0.1:PORT.

    `host` (default 127.0.0.1) is the front's address; a non-loopback one exposes the endpoint.
    `inference_component` names the inference component this single-model endpoint plays: requests
    carrying X-Amzn-SageMaker-Inference-Component must name it.
    """

    def __init__(
        self,
        archive: Path | None = None,
        *,
        environment: Mapping[str, str] | None = None,
        multi_model: bool = False,
        port: int = 0,
        host: str = LOOPBACK,
        inference_component: str | None = None,
        triton_env: Path = DEFAULT_TRITON_ENV,
        workdir: Path | None = None,
        startup_timeout: float = 120.0,
        stage_config: Path | None = None,
    ) -> None:
        """`stage_config`: the stage config the archive's TensorRT models were packaged from (`model_build
        package --config`); their engines' shape ranges are then enforced (shape_ranges.py). Default: only
        Triton's own shape checks (fixed dims, max_batch_size)."""
        if multi_model == (archive is not None):
            raise ValueError("give an archive for a single-model endpoint, or multi_model=True without one")
        if inference_component is not None:
            if multi_model:
                raise LocalEndpointError("a multi-model endpoint cannot host an inference component")
            if not INFERENCE_COMPONENT_NAME.fullmatch(inference_component):
                raise LocalEndpointError(
                    f"{inference_component!r} is not an inference component name (1-63 letters, digits, inner hyphens)"
                )
        self.inference_component = inference_component
        self.stage_config = stage_config
        self.archive = archive
        self.container_environment = dict(environment or {})
        if multi_model:
            self.container_environment["SAGEMAKER_MULTI_MODEL"] = "true"  # what SageMaker sets for Mode MultiModel
        self.host = bind_address(host)
        self.port = port
        self.triton_env = triton_env
        self.startup_timeout = startup_timeout
        self._owned_workdir = tempfile.TemporaryDirectory(prefix="local-endpoint-") if workdir is None else None
        self.workdir = Path(self._owned_workdir.name) if self._owned_workdir else workdir
        self.log_path = self.workdir / "tritonserver.log"
        self.process: subprocess.Popen | None = None
        self._shm_guard: SharedMemoryGuard | None = None
        self.plan: ServePlan | None = None
        self.front: FrontServer | None = None
        self._front_thread: threading.Thread | None = None
        self.triton: TritonHTTP | None = None
        # Triton's Prometheus metrics on 127.0.0.1 (local_metrics_port); None when the environment turns them off.
        self.metrics_port: int | None = None
        self.registry: ModelRegistry | None = None
        # Models served by a Python-backend stand-in (ONNX Runtime on the CPU): endpoint_client.onnx_standin.
        self.substitutions: list[Substitution] = []

    @property
    def substituted(self) -> list[str]:
        """The names of the models that run substituted (`substitutions` says in place of what)."""
        return [substitution.model for substitution in self.substitutions]

    @property
    def url(self) -> str:
        """Where this machine reaches the front (loopback when it is bound to every interface)."""
        address = ipaddress.ip_address(self.host)
        if address.is_unspecified:
            return f"http://{LOOPBACK if address.version == 4 else '[::1]'}:{self.port}"
        return f"http://{self.host}:{self.port}" if address.version == 4 else f"http://[{self.host}]:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """Triton's Prometheus metrics, on loopback only (None when off or not started)."""
        return f"http://{LOOPBACK}:{self.metrics_port}/metrics" if self.metrics_port is not None else None

    def __enter__(self) -> LocalEndpoint:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def model_repository(self) -> Path:
        """Where a single-model archive is extracted (SageMaker's /opt/ml/model)."""
        return self.workdir / "opt-ml-model"

    def ensemble_steps(self, model: str) -> list[str]:
        """The models a served single-model ensemble runs, in step order ([] for any other model)."""
        try:
            text = (self.model_repository / model / "config.pbtxt").read_text(encoding="utf-8")
            config = text_format.Parse(text, model_config_pb2.ModelConfig())
        except (OSError, UnicodeDecodeError, text_format.ParseError):
            return []
        return [step.model_name for step in config.ensemble_scheduling.step] if config.platform == "ensemble" else []

    @property
    def shm_prefix(self) -> str:
        """Local-only: the Python backend's shared-memory regions are /dev/shm/<this><uuid> (shm_guard.py)."""
        return f"local_endpoint_{os.getpid()}_{self.port}_"

    @property
    def staging(self) -> Path:
        """Where multi-model archives are extracted: the only folders POST /models will load."""
        return self.workdir / "mme"

    @property
    def incoming(self) -> Path:
        """Multi-model: where a load is assembled before it is renamed into the served repository."""
        return self.workdir / "tmp-sagemaker-incoming"

    def start(self) -> str:
        widening = network_options_in(self.container_environment.get("SAGEMAKER_TRITON_ADDITIONAL_ARGS", ""))
        if widening:
            raise LocalEndpointError(
                f"SAGEMAKER_TRITON_ADDITIONAL_ARGS sets {' '.join(widening)}: the local endpoint decides Triton's "
                "addresses, ports and model control itself (everything on 127.0.0.1; no model loads through "
                "Triton's ports); use --port / --host"
            )
        model_repository = self.model_repository
        multi_model_repository = self.workdir / "tmp-sagemaker"  # multi-model: the served repository
        for folder in (self.workdir, multi_model_repository, self.staging, self.incoming):
            private_directory(folder)
        if self.archive is not None:
            private_directory(model_repository)
            extract_archive(self.archive, model_repository)
            self.substitutions += substitute_models(model_repository, self._shape_ranges(model_repository))
        install = TritonInstall.find(self.triton_env)
        self._bind_front()
        container_env = {"SAGEMAKER_BIND_TO_PORT": str(self.port), **self.container_environment}
        try:
            self.plan = serve_plan(
                container_env, model_repository=model_repository, multi_model_repository=multi_model_repository
            )
            self.triton = TritonHTTP(free_port())
            self.metrics_port = local_metrics_port(container_env)
            backends = install.prepare_backends(self.workdir / "backends")
        except BaseException:
            self.stop()
            raise
        arguments = [
            str(install.binary),
            *local_arguments(
                self.plan.arguments,
                http_port=self.triton.port,
                multi_model=self.plan.multi_model,
                metrics_port=self.metrics_port,
            ),
            f"--backend-directory={backends}",
            # Local-only: a shared-memory prefix of its own so two local endpoints never share regions.
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
        ]
        base_env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENVIRONMENT}
        container_env = {k: v for k, v in container_env.items() if k not in _DROPPED_ENVIRONMENT}
        env = install.environment({**base_env, **container_env, **self.plan.environment})

        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                arguments,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
                # Files the server and the models' code create: owner-only (review M1). Its shared-memory
                # regions are chmod()ed to 644 by Boost past the umask: the guard below sets them to 0600.
                umask=0o077,
            )
        self._shm_guard = SharedMemoryGuard(self.shm_prefix).start()
        try:
            self._wait_for_triton()
            restrict_regions(self.shm_prefix)  # before the front's first request
            self._serve_front()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _bind_front(self) -> None:
        """Bind the front first: a taken port is refused before anything starts (no server of someone
        else's can answer our /ping), and --port 0 learns its port here."""
        try:
            self.front = FrontServer(self.host, self.port)
        except OSError as error:
            problem = "is in use" if error.errno == errno.EADDRINUSE else "cannot be used"
            raise LocalEndpointError(
                f"port {self.port} on {self.host} {problem} ({error.strerror}); choose another with --port, "
                "or --port 0 for a free one"
            ) from None
        self.port = self.front.server_address[1]

    def _wait_for_triton(self) -> None:
        assert self.triton is not None and self.plan is not None
        mode = self.plan.environment["SAGEMAKER_TRITON_PING_MODE"]
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise LocalEndpointError(
                    f"tritonserver exited with code {self.process.returncode} before /ping answered; "
                    f"its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            with contextlib.suppress(TritonUnavailable):  # not listening yet
                if self.triton.healthy(mode, timeout=2):
                    return
            time.sleep(0.1)
        raise LocalEndpointError(
            f"/ping on {self.url} did not answer 200 within {self.startup_timeout:.0f} s; log ends:\n{self.log_tail()}"
        )

    def _serve_front(self) -> None:
        assert self.front is not None and self.triton is not None and self.plan is not None
        if self.plan.multi_model:
            self.registry = ModelRegistry(
                self.triton, repository=self.workdir / "tmp-sagemaker", staging=self.staging, incoming=self.incoming
            )
        self.front.api = SageMakerAPI(
            self.triton,
            ping_mode=self.plan.environment["SAGEMAKER_TRITON_PING_MODE"],
            default_model=self.plan.default_model,
            registry=self.registry,
            inference_component=self.inference_component,
        )
        self._front_thread = threading.Thread(target=self.front.serve_forever, name="local-endpoint-front", daemon=True)
        self._front_thread.start()
        status, _, _ = http_request("GET", self.url + "/ping", None, {}, timeout=10)
        if status != 200:
            raise LocalEndpointError(f"/ping on {self.url} answered {status}; log ends:\n{self.log_tail()}")

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the server's process group, SIGKILL it if still there after `timeout`; idempotent."""
        front, self.front = self.front, None
        if front is not None:
            if self._front_thread is not None:
                front.shutdown()  # only a running serve_forever may be shut down (it would wait forever)
                self._front_thread = None
            front.server_close()
        process, self.process = self.process, None
        guard, self._shm_guard = self._shm_guard, None
        if guard is not None:
            guard.stop()
        if process is not None:
            _signal_group(process, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=timeout)
            _signal_group(process, signal.SIGKILL)  # stubs left behind by a crashed server go too
            process.wait()
            _wait_for_group_to_end(process.pid, timeout=5.0)
        if self._owned_workdir is not None:
            self._owned_workdir.cleanup()
            self._owned_workdir = None

    # The SageMaker multi-model API: what the SageMaker platform calls on an MME instance.
    def _shape_ranges(self, repository: Path) -> dict[str, ShapeRanges]:
        if self.stage_config is None:
            return {}
        return tensorrt_shape_ranges(self.stage_config, repository)

    def load_model(self, name: str, archive: Path) -> None:
        """Extract `archive` and load it under `name` (on SageMaker: the TargetModel, e.g. "add_sub.tar.gz")."""
        model_dir = self.staging / urllib.parse.quote(name, safe="") / "model"
        extract_archive(archive, model_dir)
        substitutions = substitute_models(model_dir, self._shape_ranges(model_dir))
        status, body = json_request("POST", f"{self.url}/models", {"model_name": name, "url": str(model_dir)}, 300)
        if status != 200:
            raise LocalEndpointError(f"loading model {name!r} failed: HTTP {status}: {error_message(body)}")
        self.substitutions += substitutions  # only what was loaded

    def unload_model(self, name: str) -> None:
        status, body = json_request("DELETE", f"{self.url}/models/{urllib.parse.quote(name, safe='')}", None, 300)
        if status != 200:
            raise LocalEndpointError(f"unloading model {name!r} failed: HTTP {status}: {error_message(body)}")

    def list_models(self) -> list[str]:
        status, body = json_request("GET", f"{self.url}/models", None, 30)
        if status != 200:
            raise LocalEndpointError(f"listing models failed: HTTP {status}: {error_message(body)}")
        return [model["modelName"] for model in json.loads(body).get("models", [])]


def local_metrics_port(container_environment: Mapping[str, str]) -> int | None:
    """Where the local Triton serves its Prometheus metrics (always on 127.0.0.1, triton_backend.local_arguments).

    On unless the environment says SAGEMAKER_TRITON_ALLOW_METRICS=false: on SageMaker they are off unless the
    variable is set (Triton's docker/sagemaker/serve lines 81-85), but locally they cost nothing, listen on loopback
    only and show queue vs compute time (the load test reads them). The port is SAGEMAKER_TRITON_METRICS_PORT when
    given, else a free one (Triton's default 8002 would collide between two local endpoints)."""
    if container_environment.get("SAGEMAKER_TRITON_ALLOW_METRICS", "").strip().lower() == "false":
        return None
    port = container_environment.get("SAGEMAKER_TRITON_METRICS_PORT", "").strip()
    if port:
        if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise LocalEndpointError(f"SAGEMAKER_TRITON_METRICS_PORT {port[:20]!r} is not a port (1-65535)")
        return int(port)
    return free_port()


def _die_with_parent() -> None:
    """In the child before exec: Linux SIGKILLs the server if the process that started it dies without
    stopping it (e.g. pytest killed by SIGKILL); the Python backend stubs exit when the server does."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _wait_for_group_to_end(group: int, *, timeout: float) -> None:
    """The server is reaped; its SIGKILLed stubs (now children of init) may take a moment to be gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except OSError:  # ProcessLookupError: none left
            return
        time.sleep(0.05)


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)  # start_new_session=True: the group id is the server's pid
