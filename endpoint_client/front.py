"""The local endpoint's SageMaker API: a small HTTP server on loopback in front of Triton.

Routes, as Triton's SageMaker service serves them (triton-inference-server/server
`src/sagemaker_server.cc`, v2.51.0):

- `GET /ping`: 200 when Triton is ready (single-model) or live (multi-model; SAGEMAKER_TRITON_PING_MODE).
- `POST /invocations`: the default model (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME). On a multi-model
  endpoint the X-Amzn-SageMaker-Target-Model header names the model instead. A single-model endpoint
  started as an inference component accepts X-Amzn-SageMaker-Inference-Component naming it (what
  SageMaker's runtime sends for InferenceComponentName), so a client written for a component works.
- Multi-model only: `GET /models`, `GET /models/<name>`, `POST /models` {"model_name", "url"},
  `POST /models/<name>/invoke`, `DELETE /models/<name>` (model_registry.py).

Web pages (issue 22 C3): the front has no authentication, so what a browser can send it must refuse.
- `Host` must name a loopback address or `localhost`, with the front's port (a request without one, or
  with several, is refused): a page on a name its owner re-points to 127.0.0.1 (DNS rebinding) reaches
  the front as the same origin and could read replies, but its requests carry its own name in `Host`
  (RFC 9110 7.2). Checked on every route, before the body is read (400, connection closed).
- `POST /models` must be `Content-Type: application/json`: a page may post cross-site without asking
  first (no CORS preflight) only with the CORS-safelisted types `text/plain`,
  `application/x-www-form-urlencoded` and `multipart/form-data` (WHATWG Fetch standard, "CORS-safelisted
  request-header"), so those are refused (415) before the body is parsed; `DELETE` is never sent
  cross-site without a preflight, which the front does not answer (no OPTIONS route). Invocations already
  take only JSON or the binary+json type (request_check.py), neither safelisted.

Connections: at most MAX_CONNECTIONS at once, a thread each; beyond them a few more are answered 503 (after
their body is drained, so the client reads it rather than a reset) and the rest wait in the listen backlog;
a connection with no request under way is closed after IDLE_CONNECTION_TIMEOUT_SECONDS (FrontServer).
front_async.py has the same server on one asyncio event loop (issue #24), opt-in: about twice this front's
throughput at concurrency 8 on a quiet machine, but it depends on aiohttp's internal classes (its docstring and
bench/README.md say why and what it would take).

Before anything reaches Triton: bodies above SageMaker's payload limit are refused unread (413), a body
without Content-Length is refused (411), a request not fully received within
REQUEST_READ_DEADLINE_SECONDS is dropped, and invocations pass request_check.py (repeated JSON keys,
mistyped parameters and sizes that do not match the bytes sent are 400s). Triton's reply is read no
further than SageMaker's payload limit. Statuses: an
invocation keeps Triton's own status on /invocations, as Triton's SageMaker service does; a
multi-model invocation answers Triton's errors with 400 (507 for out of memory), as that service's
multi-model path does. Every refusal is JSON `{"error": "..."}`, like Triton's; a failure of the endpoint
itself (a file it cannot write) is a JSON 500, never a dropped connection.
"""

from __future__ import annotations

import contextlib
import heapq
import ipaddress
import json
import re
import socket
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from endpoint_client.limits import (
    CLIENT_SOCKET_TIMEOUT_SECONDS,
    IDLE_CONNECTION_TIMEOUT_SECONDS,
    INVOCATION_TIMEOUT_SECONDS,
    LISTEN_BACKLOG,
    MAX_CONCURRENT_REQUESTS,
    MAX_CONNECTIONS,
    MAX_CONTROL_BODY_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_REFUSING_CONNECTIONS,
    REFUSAL_DEADLINE_SECONDS,
    REQUEST_READ_DEADLINE_SECONDS,
)
from endpoint_client.model_registry import ModelRegistry
from endpoint_client.request_check import (
    BINARY_MEDIA_TYPE,
    JSON_MEDIA_TYPE,
    RequestRefused,
    check_invocation,
    strict_json,
)
from endpoint_client.transport import INFERENCE_COMPONENT_HEADER, TARGET_MODEL_HEADER
from endpoint_client.triton_backend import ReplyTooLarge, TritonHTTP, TritonUnavailable

_DIGITS = re.compile(r"[0-9]{1,19}")
_ALLOW = "GET, HEAD, POST, PUT, PATCH, DELETE"  # the methods the front serves (others: 405)
_MODELS_PATH = re.compile(r"/models(?:/([^/]+))?(/invoke)?/?")
_INFER_HEADER_LENGTH = "Inference-Header-Content-Length"  # KServe binary extension, both directions
# Triton's 500s for a request whose JSON it could not read (src/http_server.cc): the request's fault.
_TRITON_PARSE_ERRORS = (b'{"error":"Unable to parse', b'{"error":"Unable to set', b'{"error":"failed to parse')
_OUT_OF_MEMORY = ("out of memory", "Out of memory", "Out Of Memory", "OutOfMemory", "MemoryError", "OOM")


@dataclass
class Reply:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def error(cls, status: int, message: str) -> Reply:
        return cls(status, json.dumps({"error": message}).encode(), JSON_MEDIA_TYPE)

    @classmethod
    def json(cls, payload: object) -> Reply:
        return cls(200, json.dumps(payload).encode(), JSON_MEDIA_TYPE)


class SageMakerAPI:
    """Turns one request into one Reply; knows nothing about sockets."""

    def __init__(
        self,
        triton: TritonHTTP,
        *,
        ping_mode: str,
        default_model: str | None,
        registry: ModelRegistry | None,
        inference_component: str | None = None,
    ) -> None:
        self.triton = triton
        self.inference_component = inference_component
        self.ping_mode = ping_mode
        self.default_model = default_model
        self.registry = registry  # None: single-model endpoint, the multi-model API is off

    def body_limit(self, method: str, path: str) -> int:
        """SageMaker's payload limit for invocations; the multi-model control calls are small."""
        match = _MODELS_PATH.fullmatch(path)
        if match is not None and not match.group(2):
            return MAX_CONTROL_BODY_BYTES
        return MAX_PAYLOAD_BYTES

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        try:
            return self._route(method, path, headers, body)
        except RequestRefused as refused:
            return Reply.error(refused.status, refused.message)
        except TritonUnavailable as error:
            return Reply.error(502, f"the local Triton server is not answering: {error}")
        except OSError as error:  # a file the endpoint could not write or read (review M7): a 500, not a hang-up
            return Reply.error(500, f"{method} {path[:200]} failed on the local endpoint: {_describe(error)}")
        except Exception as error:  # anything else: still an answer, never a dropped connection
            return Reply.error(500, f"{method} {path[:200]} failed on the local endpoint: {_describe(error)}")

    def _route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if path == "/ping":
            _allow(method, "GET")
            return Reply(200) if self.triton.healthy(self.ping_mode) else Reply.error(400, "Triton is not ready")
        if path == "/invocations":
            _allow(method, "POST")
            return self._invocations(headers, body)
        match = _MODELS_PATH.fullmatch(path)
        if match is None:
            raise RequestRefused(404, f"no route {path[:200]!r}: the SageMaker API has /ping and /invocations")
        if self.registry is None:
            raise RequestRefused(
                404, "the multi-model API is off: this endpoint serves one model (start it with --multi-model)"
            )
        name = urllib.parse.unquote(match.group(1)) if match.group(1) else None
        return self._models(method, name, bool(match.group(2)), headers, body)

    def _invocations(self, headers: dict[str, str], body: bytes) -> Reply:
        target = headers.get(TARGET_MODEL_HEADER.lower())
        self._check_component(headers.get(INFERENCE_COMPONENT_HEADER.lower()))
        if self.registry is None:
            if target:
                raise RequestRefused(
                    400, f"{TARGET_MODEL_HEADER} is for multi-model endpoints; this one serves one model"
                )
            return self._infer(self.default_model or "", headers, body, multi_model=False)
        if not target:
            raise RequestRefused(
                400, f"a multi-model endpoint needs the model: send {TARGET_MODEL_HEADER} (--target-model)"
            )
        return self._invoke_loaded(target, headers, body)

    def _check_component(self, component: str | None) -> None:
        if component is None:
            return
        if self.registry is not None:
            raise RequestRefused(400, "a multi-model endpoint hosts no inference components: send the TargetModel")
        if self.inference_component is None:
            raise RequestRefused(
                400,
                f"this endpoint hosts no inference component (asked for {component[:63]!r}): start it with "
                "--inference-component NAME to play one",
            )
        if component != self.inference_component:
            raise RequestRefused(
                400,
                f"no inference component {component[:63]!r} on this endpoint; it hosts {self.inference_component!r}",
            )

    def _models(self, method: str, name: str | None, invoke: bool, headers: dict[str, str], body: bytes) -> Reply:
        assert self.registry is not None
        if invoke:
            _allow(method, "POST")
            if name is None:
                raise RequestRefused(404, "POST /models/<name>/invoke needs the model's name")
            return self._invoke_loaded(name, headers, body)
        if method == "GET" and name is None:
            return Reply.json({"models": [{"modelName": m.name, "modelUrl": m.url} for m in self.registry.listing()]})
        if method == "GET":
            model = self.registry.get(name or "")
            if model is None:
                raise RequestRefused(404, f"model {name!r} is not loaded")
            return Reply.json({"modelName": model.name, "modelUrl": model.url})
        if method == "POST" and name is None:
            _require_json(headers.get("content-type"))
            request = _json_object(body, '{"model_name": "<TargetModel>", "url": "<extracted archive folder>"}')
            unknown = sorted(set(request) - {"model_name", "url"})
            if unknown:
                raise RequestRefused(400, f"unknown field(s) {', '.join(unknown)}: the body is {{model_name, url}}")
            self.registry.load(request.get("model_name"), request.get("url"))
            return Reply(200)
        if method == "DELETE" and name is not None:
            self.registry.unload(name)
            return Reply(200)
        raise RequestRefused(405, f"{method} is not allowed here")

    def _invoke_loaded(self, name: str, headers: dict[str, str], body: bytes) -> Reply:
        assert self.registry is not None
        if self.registry.get(name) is None:
            raise RequestRefused(404, f"model {name[:200]!r} is not loaded on this endpoint")
        return self._infer(name, headers, body, multi_model=True)

    def _infer(self, model: str, headers: dict[str, str], body: bytes, *, multi_model: bool) -> Reply:
        path, forward = self.infer_request(model, headers, body)
        try:
            status, reply, reply_headers = self.triton.request(
                "POST",
                path,
                body,
                forward,
                timeout=INVOCATION_TIMEOUT_SECONDS,
                max_reply_bytes=MAX_PAYLOAD_BYTES,  # read no further than the limit (finding 11)
            )
        except ReplyTooLarge as error:
            return reply_too_large(error)
        return infer_reply(status, reply, reply_headers, multi_model=multi_model)

    def invocation_target(self, method: str, path: str, headers: dict[str, str]) -> tuple[str, bool] | None:
        """(model, multi_model) when the request is an invocation that the routing accepts; None for every other
        route (served by `handle`). Raises RequestRefused as `handle` would answer it."""
        if path == "/invocations":
            _allow(method, "POST")
            target = headers.get(TARGET_MODEL_HEADER.lower())
            self._check_component(headers.get(INFERENCE_COMPONENT_HEADER.lower()))
            if self.registry is None:
                if target:
                    raise RequestRefused(
                        400, f"{TARGET_MODEL_HEADER} is for multi-model endpoints; this one serves one model"
                    )
                return self.default_model or "", False
            if not target:
                raise RequestRefused(
                    400, f"a multi-model endpoint needs the model: send {TARGET_MODEL_HEADER} (--target-model)"
                )
            name = target
        else:
            match = _MODELS_PATH.fullmatch(path)
            if match is None or self.registry is None or not match.group(2) or not match.group(1) or method != "POST":
                return None
            name = urllib.parse.unquote(match.group(1))
        if self.registry.get(name) is None:
            raise RequestRefused(404, f"model {name[:200]!r} is not loaded on this endpoint")
        return name, True

    def infer_request(self, model: str, headers: dict[str, str], body: bytes) -> tuple[str, dict[str, str]]:
        """Triton's path and the headers to forward, after request_check.py's checks (RequestRefused)."""
        header_length = check_invocation(body, headers.get("content-type"))
        forward = {"Content-Type": JSON_MEDIA_TYPE if header_length is None else "application/octet-stream"}
        if header_length is not None:
            forward[_INFER_HEADER_LENGTH] = str(header_length)
        return self.triton.model_path(model, "infer"), forward


def reply_too_large(error: ReplyTooLarge) -> Reply:
    """InvokeEndpoint's reply Body has the same limit as the request's."""
    return Reply.error(
        500,
        f"the model's reply is {error.size or 'over ' + str(MAX_PAYLOAD_BYTES)} bytes; SageMaker real-time "
        f"endpoints return at most {MAX_PAYLOAD_BYTES} bytes: ask for fewer outputs (--output) or send "
        "smaller batches",
    )


def infer_reply(status: int, reply: bytes, reply_headers: dict[str, str], *, multi_model: bool) -> Reply:
    """Triton's answer to an inference as the SageMaker API answers it (module docstring: statuses)."""
    if status != 200 and multi_model:
        status = 507 if any(s in reply.decode(errors="replace") for s in _OUT_OF_MEMORY) else 400
    elif status == 500 and reply.lstrip().startswith(_TRITON_PARSE_ERRORS):
        status = 400  # Triton's JSON type errors are the request's fault; a 5XX would trip SageMaker alarms
    reply_header_length = reply_headers.get(_INFER_HEADER_LENGTH.lower())
    if status == 200 and reply_header_length is not None:
        content_type = f"{BINARY_MEDIA_TYPE};json-header-size={reply_header_length}"
    else:
        content_type = JSON_MEDIA_TYPE
    return Reply(status, reply, content_type)


def _describe(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        return f"{type(error).__name__}: {error.strerror}{where}"
    return f"{type(error).__name__}: {str(error)[:500]}"


def _allow(method: str, allowed: str) -> None:
    if method != allowed:
        raise RequestRefused(405, f"{method} is not allowed here; use {allowed}")


def _require_json(content_type: str | None) -> None:
    """Model management takes application/json only: the types a web page may post cross-site without a
    preflight (text/plain, forms) are refused (module docstring, issue 22 C3)."""
    media = (content_type or "").partition(";")[0].strip().lower()
    if media != JSON_MEDIA_TYPE:
        shown = repr(content_type[:100]) if content_type else "none"
        raise RequestRefused(
            415,
            f"POST /models takes Content-Type {JSON_MEDIA_TYPE}, not {shown}: the types a web page can post "
            "cross-site (text/plain, forms) are refused",
        )


_LOOPBACK_NAMES = ("localhost",)


def host_refusal(values: list[str], port: int) -> str | None:
    """Why the request's Host header(s) are refused, or None: exactly one, naming a loopback IP literal or
    `localhost` (any case), with `port` (no port only when `port` is HTTP's default, 80). DNS rebinding:
    module docstring (issue 22 C3)."""
    if len(values) != 1:
        return f"send exactly one Host header (got {len(values)})"
    value = values[0].strip()
    host, port_text = value, None
    if value.startswith("["):  # an IPv6 literal: [::1]:8080
        host, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return f"Host {value[:100]!r} is not host[:port]"
        port_text = rest[1:] if rest else None
    elif ":" in value:
        host, _, port_text = value.rpartition(":")
    if host.lower() not in _LOOPBACK_NAMES:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            address = None
        if address is None or not address.is_loopback or (address.version == 6) != value.startswith("["):
            return (
                f"Host {value[:100]!r} is not this machine: the local endpoint answers only requests for "
                f"localhost or a loopback address (e.g. 127.0.0.1:{port}), so a web page on another name that "
                "points at 127.0.0.1 (DNS rebinding) cannot use it"
            )
    if port_text is None:
        return None if port == 80 else f"Host {value[:100]!r} lacks the port: send {host}:{port}"
    if not _DIGITS.fullmatch(port_text) or int(port_text) != port:
        return f"Host {value[:100]!r} names another port than this endpoint's, {port}"
    return None


def _json_object(body: bytes, shape: str) -> dict:
    try:
        document = strict_json(body, "the body")
    except RequestRefused as refused:
        raise RequestRefused(400, f"{refused.message}; expected {shape}") from None
    if not isinstance(document, dict):
        raise RequestRefused(400, f"the body must be a JSON object: {shape}")
    return document


class FrontServer(ThreadingHTTPServer):
    """ThreadingHTTPServer bound to one address (IPv4 or IPv6 literal), with bounded connections and requests.

    At most `max_connections` connections are served at once, a thread each, and at most
    MAX_CONCURRENT_REQUESTS requests among them. Beyond `max_connections`, up to `max_refusing` more get a
    short-lived thread that reads the request, drains its declared body (up to the payload limit) and answers
    503 with Connection: close, so the client reads the refusal rather than a TCP reset. Beyond both the
    front accepts nothing until a connection ends: new ones wait in the listen backlog (LISTEN_BACKLOG).
    A connection with no request under way is closed after `idle_timeout` seconds (review LOW11).
    """

    daemon_threads = True
    block_on_close = False
    request_queue_size = LISTEN_BACKLOG  # socketserver's default, 5, made 400 connections take 53 s to open

    def __init__(
        self,
        host: str,
        port: int,
        api: SageMakerAPI | None = None,
        *,
        max_connections: int = MAX_CONNECTIONS,
        max_refusing: int = MAX_REFUSING_CONNECTIONS,
        idle_timeout: float = IDLE_CONNECTION_TIMEOUT_SECONDS,
    ) -> None:
        """Binds at once; `api` may be set later, before serve_forever()."""
        self.address_family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        self.api = api
        self.slots = threading.BoundedSemaphore(MAX_CONCURRENT_REQUESTS)
        self.max_connections = max_connections
        self.connections = threading.BoundedSemaphore(max_connections)
        self.refusing = threading.BoundedSemaphore(max_refusing)
        self.idle_timeout = idle_timeout
        self._closing = threading.Event()
        super().__init__((host, port), _Handler)

    def process_request(self, request: socket.socket, client_address: Any) -> None:  # type: ignore[override]
        """In the accept loop: a served or a refusing slot for the connection (waiting for one to free while
        both are taken, which leaves further connections in the backlog), then its thread."""
        slot = self._connection_slot()
        if slot is None:  # the front is closing
            self.shutdown_request(request)
            return
        thread = threading.Thread(
            target=self._connection,
            args=(request, client_address, slot),
            name="local-endpoint-connection",
            daemon=True,
        )
        try:
            thread.start()
        except RuntimeError:  # no thread can be started: drop this one connection, keep serving
            slot.release()
            self.shutdown_request(request)

    def _connection_slot(self) -> threading.BoundedSemaphore | None:
        while not self._closing.is_set():
            if self.connections.acquire(blocking=False):
                return self.connections
            if self.refusing.acquire(timeout=0.05):
                return self.refusing
        return None

    def _connection(self, request: socket.socket, client_address: Any, slot: threading.BoundedSemaphore) -> None:
        try:
            _Handler(request, client_address, self, overloaded=slot is self.refusing)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            slot.release()
            self.shutdown_request(request)

    def handle_error(self, request: object, client_address: Any) -> None:
        """One line on stderr, not socketserver's traceback."""
        error = sys.exc_info()[1]
        print(f"local endpoint: a connection from {client_address[0]} failed: {_describe(error)}", file=sys.stderr)

    def shutdown(self) -> None:
        self._closing.set()  # an accept loop waiting for a free slot stops waiting
        super().shutdown()

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()


class _Deadline:
    """One deadline of _Watchdog's: `cancel()` before it passes and its action never runs."""

    __slots__ = ("action", "cancelled", "when")

    def __init__(self, when: float, action: Any) -> None:
        self.when, self.action, self.cancelled = when, action, False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _Deadline) -> bool:
        return self.when < other.when


class _Watchdog:
    """One daemon thread for every request's read deadline (issue #24: a threading.Timer per request started and
    stopped a thread per request, ~4% of the front's time in the profile, plus the context switches)."""

    def __init__(self) -> None:
        self._pending: list[_Deadline] = []
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def after(self, seconds: float, action: Any) -> _Deadline:
        deadline = _Deadline(time.monotonic() + seconds, action)
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="local-endpoint-watchdog", daemon=True)
                self._thread.start()
            heapq.heappush(self._pending, deadline)
            if self._pending[0] is deadline:  # earlier than what the thread waits for
                self._changed.notify()
        return deadline

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._pending and self._pending[0].cancelled:
                    heapq.heappop(self._pending)
                if not self._pending:
                    self._changed.wait()
                    continue
                wait = self._pending[0].when - time.monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                due = heapq.heappop(self._pending)
            with contextlib.suppress(Exception):
                due.action()


_WATCHDOG = _Watchdog()


class _Handler(BaseHTTPRequestHandler):
    """One connection. It waits at most the server's idle timeout for each request to begin; from its first
    byte the socket timeout bounds each read and a watchdog the whole request (request line, headers and
    body) to REQUEST_READ_DEADLINE_SECONDS, so a client that sends a byte now and then cannot hold a request
    slot (review finding 9). An `overloaded` connection (beyond the server's most) gets 503 to its request."""

    server: FrontServer
    protocol_version = "HTTP/1.1"
    timeout = CLIENT_SOCKET_TIMEOUT_SECONDS
    # TCP_NODELAY (socketserver.StreamRequestHandler): with Nagle's algorithm on, a reply written after its
    # headers waited for the client's delayed ACK (~40 ms on Linux) before leaving: issue #24 measured 48 ms
    # p50 through the front against 2.8 ms straight to Triton. `_send` also writes headers and body at once.
    disable_nagle_algorithm = True

    def __init__(
        self, request: socket.socket, client_address: Any, server: FrontServer, *, overloaded: bool = False
    ) -> None:
        self.overloaded = overloaded
        self._reading = False
        self._watchdog: _Deadline | None = None
        super().__init__(request, client_address, server)

    def handle_one_request(self) -> None:
        try:
            if not self._request_begins():
                self.close_connection = True  # idle past the timeout, or closed by the client
                return
            self._reading = True
            deadline = REFUSAL_DEADLINE_SECONDS if self.overloaded else REQUEST_READ_DEADLINE_SECONDS
            self._watchdog = _WATCHDOG.after(deadline, self._reading_too_long)
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client went away: nothing to answer, no traceback
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None

    def _request_begins(self) -> bool:
        """Wait up to the idle timeout for the next request's first byte (no watchdog thread meanwhile)."""
        self.connection.settimeout(self.server.idle_timeout)
        try:
            return bool(self.rfile.peek(1))  # type: ignore[attr-defined]
        except OSError:  # TimeoutError included
            return False
        finally:
            with contextlib.suppress(OSError):
                self.connection.settimeout(self.timeout)

    def _reading_too_long(self) -> None:
        if self._reading:
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)  # the pending read returns; the request is dropped

    def _done_reading(self) -> None:
        self._reading = False
        if self._watchdog is not None:
            self._watchdog.cancel()

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Every refusal BaseHTTPRequestHandler makes itself (a method with no do_* handler, a malformed or
        over-long request line, HTTP/2's preface, a TLS ClientHello, too many headers) is JSON like the
        front's own, not its HTML page (review L1). A method the front has no handler for is a 405 naming
        the methods it has (RFC 9110 §15.5.6: a 405 MUST carry Allow), not 501. The connection is closed."""
        self._done_reading()
        if self.request_version == "HTTP/0.9":  # the request line was not understood: answer as HTTP/1.1
            self.request_version = self.protocol_version
        reply = Reply.error(code, message or explain or "the request cannot be served")
        if code == 501 and self.command and not hasattr(self, f"do_{self.command}"):
            reply = Reply.error(405, f"method {self.command[:50]!r} is not served; use one of {_ALLOW}")
            reply.headers["Allow"] = _ALLOW
        elif code == 400 and not message:
            reply = Reply.error(400, "malformed request")
        self._send(reply, close=True)

    def _serve(self, method: str) -> None:
        if self.overloaded:
            self._refuse_busy(
                f"the local endpoint is serving {self.server.max_connections} connections, its most; retry"
            )
            return
        if not self.server.slots.acquire(blocking=False):
            self._refuse_busy(f"too many requests at once (the local endpoint takes {MAX_CONCURRENT_REQUESTS}); retry")
            return
        try:
            api = self.server.api
            assert api is not None, "serve_forever() before the api was set"
            refused_host = host_refusal(self.headers.get_all("Host") or [], self.server.server_address[1])
            if refused_host is not None:
                self._done_reading()
                self._send(Reply.error(400, refused_host), close=True)  # the body stays unread
                return
            path = urllib.parse.urlsplit(self.path).path
            body, refusal = self._read_body(method, api.body_limit(method, path))
            self._done_reading()
            if refusal is not None:
                self._send(refusal, close=True)  # the unread body makes the connection unusable
                return
            headers = {key.lower(): value for key, value in self.headers.items()}
            self._send(api.handle(method, path, headers, body))
        finally:
            self.server.slots.release()

    def _refuse_busy(self, message: str) -> None:
        """503 and Connection: close, after draining the declared body (up to the payload limit): closing a
        socket with unread bytes sends a reset, which the client reads instead of the 503 (review LOW11)."""
        self._drain_body()
        self._done_reading()
        reply = Reply.error(503, message)
        reply.headers["Retry-After"] = "1"
        self._send(reply, close=True)

    def _drain_body(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return
        if len(self.headers.get_all("Content-Length") or []) > 1:
            return  # framing unknown: not read
        length_text = self.headers.get("Content-Length", "").strip()
        if not _DIGITS.fullmatch(length_text) or int(length_text) > MAX_PAYLOAD_BYTES:
            return  # nothing, or more than any request may be: not read
        left = int(length_text)
        while left > 0:
            chunk = self.rfile.read(min(left, 64 * 1024))
            if not chunk:
                return
            left -= len(chunk)

    def _read_body(self, method: str, limit: int) -> tuple[bytes, Reply | None]:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return b"", Reply.error(411, "chunked bodies are not accepted: send Content-Length")
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) > 1:
            # RFC 9112 §6.3: differing Content-Length values make the framing invalid and a server MUST answer
            # 400 and close. RFC 9110 §8.6 allows accepting identical repeats; the front refuses every repeat
            # (as nginx does: "client sent duplicate header line"): no client sends one, and the front and
            # anything behind it could then frame the body differently (request smuggling).
            shown = ", ".join(repr(value[:20]) for value in lengths[:4])
            return b"", Reply.error(400, f"the request has {len(lengths)} Content-Length headers ({shown}); send one")
        length_text = lengths[0] if lengths else None
        if length_text is None:
            if method in ("POST", "PUT", "PATCH"):
                return b"", Reply.error(411, "the request has no Content-Length")
            return b"", None
        if not _DIGITS.fullmatch(length_text.strip()):  # str.isdigit() also takes '²', which int() refuses
            return b"", Reply.error(400, f"Content-Length {length_text[:50]!r} is not a number")
        length = int(length_text)
        if length > limit:
            return b"", Reply.error(
                413, f"the body is {length} bytes; SageMaker real-time endpoints accept at most {limit} bytes"
            )
        body = self.rfile.read(length)
        if len(body) != length:
            return b"", Reply.error(400, f"the body ended after {len(body)} of {length} bytes")
        return body, None

    def _send(self, reply: Reply, *, close: bool = False) -> None:
        self.send_response(reply.status)
        if reply.content_type:
            self.send_header("Content-Type", reply.content_type)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(reply.body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        # end_headers() would write the headers alone; one write carries headers and body (one segment for a
        # small reply), as http.client does for a request with a bytes body.
        if not hasattr(self, "_headers_buffer"):  # an HTTP/0.9 request gets no headers (BaseHTTPRequestHandler)
            self._headers_buffer = []
        if self.request_version != "HTTP/0.9":
            self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(reply.body)
        self.flush_headers()
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass  # Triton's log has the details; a line per request on stderr would drown the CLI's output
