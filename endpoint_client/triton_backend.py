"""The Triton behind the local endpoint: its command line and a client for its loopback HTTP port.

Why Triton's own SageMaker service is off: its listening address is fixed at 0.0.0.0. In
triton-inference-server/server `src/command_line_parser.h` (tag v2.51.0, the wheel's version, and
still on main) `sagemaker_address_{"0.0.0.0"}` has no command-line option, while the KServe HTTP,
gRPC and metrics services take `--http-address`, `--grpc-address` and `--metrics-address`. So the
local endpoint runs Triton with the SageMaker (and Vertex AI) services off, its KServe HTTP service on
127.0.0.1 at a private port, and its own front (front.py) serves the SageMaker API in front of it.

The flags that pin the addresses come *after* everything derived from the container environment
(including SAGEMAKER_TRITON_ADDITIONAL_ARGS): Triton parses its options in order and the last value
wins, so no environment can widen them.

No secret on the command line (issue 22 C1): every local user reads /proc/PID/cmdline, so a key there
guards nothing (an earlier version guarded every API with a per-run key passed in
`--http-restricted-api`; with it any local program loaded a model whose model.py ran as the endpoint's
user). Instead no model can be loaded through Triton's ports at all:

- Multi-model: `--model-control-mode=poll`. Triton's docs (`docs/user_guide/model_management.md`, v2.51.0,
  "Model Control Mode POLL"): model load and unload requests of the model-repository API "will have no
  affect and will return an error response"; its core refuses them (triton-inference-server/core
  `model_repository_manager.cc` LoadUnloadModel: "explicit model load / unload is not allowed if polling is
  enabled") and refuses registering another repository ("repository registration is not allowed if model
  control mode is not EXPLICIT"). The front loads a model by renaming its folder into the private (0700)
  repository that Triton polls (model_registry.py).
- Single-model: the serve script's own `--model-control-mode=explicit --load-model=<default>` stays (so
  exactly the models SageMaker loads are loaded), and the model-repository API is *locked* (below).
- Locked APIs: Triton's restricted-API option (`--http-restricted-api` / `--grpc-restricted-protocol`,
  `<apis>:<header>=<value>`, src/command_line_parser.cc) answers 403 unless a request carries the header
  with exactly that value (http_server.cc `RespondIfRestricted`). The value here holds a line feed, which
  no HTTP header value (it ends at the line break) and no gRPC metadata value (printable ASCII only) can
  carry, so nobody, the front included, can call these APIs; the value is public and needs no secrecy.
  Locked: shared-memory (it would map /dev/shm objects the endpoint's user can open, on another program's
  behalf), trace and logging (settings of the server), and model-repository on single-model endpoints.
  The log and trace *file* cannot be moved through the network in 2.51 (http_server.cc: "log file
  location can not be updated through network protocol").
What stays open on the private port: health, metadata, model-config, statistics, inference (what the
front uses) and, on multi-model endpoints, the repository index (read-only there).
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Mapping, Sequence

LOOPBACK = "127.0.0.1"
# A header no client can send with this value (see the module docstring): the APIs below are locked for all.
LOCK_HEADER = "local-endpoint-locked"
LOCK_VALUE = "no-client-can-send\na-line-feed-in-a-header"
LOCKED_APIS = ("shared-memory", "trace", "logging")
LOCKED_APIS_SINGLE_MODEL = ("model-repository", *LOCKED_APIS)
REPOSITORY_POLL_SECONDS = 1  # multi-model: how often Triton looks at the repository (its smallest value)
# What the serve script emits for Triton's SageMaker service; the local endpoint replaces it.
_SAGEMAKER_SERVICE_FLAGS = ("--allow-sagemaker", "--allow-http", "--sagemaker-port", "--sagemaker-safe-port-range")
# Options in SAGEMAKER_TRITON_ADDITIONAL_ARGS that would move or open a listening socket: refused
# with a message (the pinned flags would override them anyway).
NETWORK_OPTIONS = (
    "--allow-sagemaker",
    "--sagemaker-port",
    "--allow-vertex-ai",
    "--vertex-ai-port",
    "--allow-http",
    "--http-address",
    "--http-port",
    "--reuse-http-port",
    "--http-restricted-api",
    "--grpc-address",
    "--reuse-grpc-port",
    "--grpc-restricted-protocol",
    "--metrics-address",
)
# Options that decide how models are loaded, which the local endpoint pins (see the module docstring).
MODEL_CONTROL_OPTIONS = ("--model-control-mode", "--repository-poll-secs")


def network_options_in(additional_args: str) -> list[str]:
    """The network and model-control options among SAGEMAKER_TRITON_ADDITIONAL_ARGS' words (also abbreviated
    ones)."""
    found = []
    pinned = (*NETWORK_OPTIONS, *MODEL_CONTROL_OPTIONS)
    for word in additional_args.split():
        flag = word.split("=", 1)[0]
        if len(flag) > 4 and any(option.startswith(flag) for option in pinned):  # getopt takes prefixes
            found.append(word)
    return found


def local_arguments(
    plan_arguments: Sequence[str], *, http_port: int, multi_model: bool, metrics_port: int | None = None
) -> list[str]:
    """The serve script's arguments with the SageMaker service swapped for KServe HTTP on loopback, the
    model-load paths closed (module docstring) and no secret anywhere. `metrics_port`: Triton's Prometheus
    metrics on 127.0.0.1 at that port (whatever the environment said); None leaves them to the environment."""
    arguments = []
    for argument in plan_arguments:
        flag, _, value = argument.partition("=")
        if flag in _SAGEMAKER_SERVICE_FLAGS:
            continue
        if flag == "--sagemaker-thread-count":  # SAGEMAKER_TRITON_THREAD_COUNT: now the HTTP service's threads
            arguments.append(f"--http-thread-count={value}")
            continue
        if multi_model and flag == "--model-control-mode":
            continue  # replaced by poll below
        arguments.append(argument)
    locked = ",".join(LOCKED_APIS if multi_model else LOCKED_APIS_SINGLE_MODEL)
    control = ["--model-control-mode=poll", f"--repository-poll-secs={REPOSITORY_POLL_SECONDS}"] if multi_model else []
    metrics = ["--allow-metrics=true", f"--metrics-port={metrics_port}"] if metrics_port is not None else []
    return [
        *arguments,
        *control,
        *metrics,
        "--allow-sagemaker=false",
        "--allow-vertex-ai=false",
        "--allow-http=true",
        f"--http-address={LOOPBACK}",
        f"--http-port={http_port}",
        f"--http-restricted-api={locked}:{LOCK_HEADER}={LOCK_VALUE}",
        f"--grpc-address={LOOPBACK}",  # only listens when SAGEMAKER_TRITON_ALLOW_GRPC=true...
        # ...and then gRPC's load_model (which takes inline files, model.py included) is closed the same way.
        # Format from `tritonserver --help` (2.51): <protocols>:<key>=<value>.
        f"--grpc-restricted-protocol={locked}:{LOCK_HEADER}={LOCK_VALUE}",
        f"--metrics-address={LOOPBACK}",  # only listens when SAGEMAKER_TRITON_ALLOW_METRICS=true
    ]


class TritonUnavailable(Exception):
    """Triton's private port did not answer (not started yet, exited, or too slow)."""


class ReplyTooLarge(Exception):
    """Triton's reply is over the size asked for; `size` is its Content-Length when it sent one."""

    def __init__(self, size: int | None) -> None:
        super().__init__(f"reply of {size} bytes")
        self.size = size


class TritonHTTP:
    """A client for Triton's KServe HTTP service on the private loopback port."""

    def __init__(self, port: int) -> None:
        self.port = port

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: float,
        max_reply_bytes: int | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        """(status, body, headers); ReplyTooLarge, without reading it, for a body over `max_reply_bytes`."""
        connection = http.client.HTTPConnection(LOOPBACK, self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=dict(headers or {}))
            response = connection.getresponse()
            reply_headers = {k.lower(): v for k, v in response.getheaders()}
            if max_reply_bytes is None:
                return response.status, response.read(), reply_headers
            if response.length is not None and response.length > max_reply_bytes:
                raise ReplyTooLarge(response.length)
            reply = response.read(max_reply_bytes + 1)
            if len(reply) > max_reply_bytes:
                raise ReplyTooLarge(None)
            return response.status, reply, reply_headers
        except TimeoutError as error:
            raise TritonUnavailable(f"Triton did not answer within {timeout:.0f} s") from error
        except (OSError, http.client.HTTPException) as error:
            raise TritonUnavailable(f"Triton is not answering ({error})") from error
        finally:
            connection.close()

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        """`ready` or `live`, as SAGEMAKER_TRITON_PING_MODE picks for /ping."""
        status, _, _ = self.request("GET", f"/v2/health/{mode}", timeout=timeout)
        return status == 200

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{urllib.parse.quote(model, safe='')}/{action}"

    def model_ready(self, model: str, *, timeout: float = 10.0) -> bool:
        """GET /v2/models/<model>/ready: whether Triton serves the model now."""
        status, _, _ = self.request("GET", self.model_path(model, "ready"), timeout=timeout)
        return status == 200

    def model_state(self, model: str, *, timeout: float = 10.0) -> tuple[str, str] | None:
        """(state, reason) of the model in the repository index (READY, UNAVAILABLE, LOADING...), None if
        absent. The index lists the repository's folders (a folder renamed out is gone from it at once, its
        model still served until the next poll: `model_ready` says that). Open on multi-model endpoints only
        (module docstring)."""
        status, reply, _ = self.request("POST", "/v2/repository/index", b"{}", timeout=timeout)
        if status != 200:
            raise TritonUnavailable(f"repository index: HTTP {status}: {_error_text(reply)}")
        try:
            index = json.loads(reply)
        except ValueError as error:
            raise TritonUnavailable(f"repository index: not JSON ({error})") from None
        for entry in index if isinstance(index, list) else []:
            if isinstance(entry, dict) and entry.get("name") == model:
                return str(entry.get("state", "")), str(entry.get("reason", ""))
        return None


def _error_text(reply: bytes) -> str:
    try:
        parsed = json.loads(reply)
    except ValueError:
        return reply.decode("utf-8", errors="replace")
    return parsed.get("error", "") if isinstance(parsed, dict) else ""
