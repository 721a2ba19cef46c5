"""The Triton behind the local endpoint: its command line and a client for its loopback HTTP port.

Why Triton's own SageMaker service is off: its listening address is fixed at 0.0.0.0. In
triton-inference-server/server `src/command_line_parser.h` (tag v2.51.0, the wheel's version, and
still on main) `sagemaker_address_{"0.0.0.0"}` has no command-line option, while the KServe HTTP,
gRPC and metrics services take `--http-address`, `--grpc-address` and `--metrics-address`. So the
local endpoint runs Triton with the SageMaker (and Vertex AI) services off, its KServe HTTP service on
127.0.0.1 at a private port, and its own front (front.py) serves the SageMaker API in front of it.

The flags that pin the addresses come *after* everything derived from the container environment
(including SAGEMAKER_TRITON_ADDITIONAL_ARGS): Triton parses its options in order and the last value
wins, so no environment can widen them. Every HTTP API of the private port also requires a per-run
key header (`--http-restricted-api`), so that another local program cannot use Triton's
model-repository API (which can load a model from files sent in the request) behind the front's back;
the gRPC service (off unless SAGEMAKER_TRITON_ALLOW_GRPC=true) requires the same key
(`--grpc-restricted-protocol`), as its load_model takes inline files too.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Mapping, Sequence

LOOPBACK = "127.0.0.1"
KEY_HEADER = "local-endpoint-key"
RESTRICTED_APIS = "health,metadata,inference,shared-memory,model-config,model-repository,statistics,trace,logging"
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


def network_options_in(additional_args: str) -> list[str]:
    """The network options among SAGEMAKER_TRITON_ADDITIONAL_ARGS' words (also abbreviated ones)."""
    found = []
    for word in additional_args.split():
        flag = word.split("=", 1)[0]
        if len(flag) > 4 and any(option.startswith(flag) for option in NETWORK_OPTIONS):  # getopt takes prefixes
            found.append(word)
    return found


def local_arguments(plan_arguments: Sequence[str], *, http_port: int, key: str) -> list[str]:
    """The serve script's arguments with the SageMaker service swapped for KServe HTTP on loopback."""
    arguments = []
    for argument in plan_arguments:
        flag, _, value = argument.partition("=")
        if flag in _SAGEMAKER_SERVICE_FLAGS:
            continue
        if flag == "--sagemaker-thread-count":  # SAGEMAKER_TRITON_THREAD_COUNT: now the HTTP service's threads
            arguments.append(f"--http-thread-count={value}")
            continue
        arguments.append(argument)
    return [
        *arguments,
        "--allow-sagemaker=false",
        "--allow-vertex-ai=false",
        "--allow-http=true",
        f"--http-address={LOOPBACK}",
        f"--http-port={http_port}",
        f"--http-restricted-api={RESTRICTED_APIS}:{KEY_HEADER}={key}",
        f"--grpc-address={LOOPBACK}",  # only listens when SAGEMAKER_TRITON_ALLOW_GRPC=true...
        # ...and then every protocol needs the key too: gRPC's load_model takes inline files, model.py
        # included (review finding 2). Format from `tritonserver --help` (2.51): <protocols>:<key>=<value>.
        f"--grpc-restricted-protocol={RESTRICTED_APIS}:{KEY_HEADER}={key}",
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

    def __init__(self, port: int, key: str) -> None:
        self.port = port
        self.key = key

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
            connection.request(method, path, body=body, headers={KEY_HEADER: self.key, **(headers or {})})
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

    def repository(self, model: str, action: str, parameters: dict | None, *, timeout: float) -> tuple[int, str]:
        """POST /v2/repository/models/<model>/<load|unload>: (status, Triton's error text or "")."""
        body = json.dumps({"parameters": parameters} if parameters else {}).encode()
        path = f"/v2/repository/models/{urllib.parse.quote(model, safe='')}/{action}"
        status, reply, _ = self.request("POST", path, body, {"Content-Type": "application/json"}, timeout=timeout)
        return status, _error_text(reply)

    def model_state(self, model: str, *, timeout: float = 10.0) -> str | None:
        """The model's state in the repository index (READY, UNAVAILABLE, LOADING...), None if absent."""
        status, reply, _ = self.request("POST", "/v2/repository/index", b"{}", timeout=timeout)
        if status != 200:
            raise TritonUnavailable(f"repository index: HTTP {status}: {_error_text(reply)}")
        states = [entry.get("state") for entry in json.loads(reply) if entry.get("name") == model]
        return states[0] if states else None


def _error_text(reply: bytes) -> str:
    try:
        parsed = json.loads(reply)
    except ValueError:
        return reply.decode("utf-8", errors="replace")
    return parsed.get("error", "") if isinstance(parsed, dict) else ""
