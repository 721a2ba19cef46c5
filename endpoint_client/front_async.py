"""The local endpoint's front (front.py's SageMakerAPI) on one asyncio event loop: aiohttp.web's low-level
server for the client side, aiohttp's client with a bounded pool of keep-alive connections to Triton (issue #24).

NOT the local endpoint's front. Measured with bench/front_throughput.py on add_sub (bench/README.md): on a quiet
2-core machine it served twice the threaded front's rate at concurrency 8 (2529-2749 vs 1325-1383 inv/s, at about
300 vs 630 µs of CPU per request) and kept its p50 within 1 ms + 30% of Triton's, which the threaded front did not;
on a machine oversubscribed 4-7 times it lost (its one loop thread gets less of the CPU than eight threads). It is
not the default because it keeps front.py's answers to malformed requests by subclassing aiohttp's internal
parser and protocol classes (below), which a newer aiohttp can change under it; issue #24 records the choice.
`bench/front_throughput.py --front async` measures it; tests/client/test_front_event_loop.py holds it to the
threaded front's behaviour.

It keeps front.py's behaviour, which its tests check on the threaded server: the same SageMakerAPI, Host check
before the body, payload limits from Content-Length, 411 for chunked or missing lengths, JSON refusals for what
the HTTP parser refuses (405 with Allow for an unknown method, 505 for HTTP/2's preface, 414 for a long request
line, 400 for TLS), bounded connections with drained 503s beyond them, the idle timeout and the request read
deadline, TCP_NODELAY replies in one write, and `Expect: 100-continue`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import socket
import sys
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
from aiohttp import HttpVersion11, web
from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod, HttpProcessingError, InvalidHeader, LineTooLong
from aiohttp.http_parser import HttpRequestParserPy
from aiohttp.web_protocol import RequestHandler, RequestPayloadError

from endpoint_client import front
from endpoint_client.front import (
    _ALLOW,
    _DIGITS,
    Reply,
    SageMakerAPI,
    _describe,
    host_refusal,
    infer_reply,
    reply_too_large,
)
from endpoint_client.limits import (
    IDLE_CONNECTION_TIMEOUT_SECONDS,
    INVOCATION_TIMEOUT_SECONDS,
    LISTEN_BACKLOG,
    MAX_CONCURRENT_REQUESTS,
    MAX_CONNECTIONS,
    MAX_PAYLOAD_BYTES,
    MAX_REFUSING_CONNECTIONS,
    REFUSAL_DEADLINE_SECONDS,
)
from endpoint_client.request_check import RequestRefused
from endpoint_client.triton_backend import LOOPBACK, ReplyTooLarge, TritonHTTP, TritonUnavailable


class AsyncFrontServer:
    """front.FrontServer's interface and limits on an asyncio event loop (aiohttp.web's low-level server), bound
    to one address (IPv4 or IPv6 literal). Issue #24's profile of the threaded server (cProfile, add_sub,
    2000 requests): ~700 µs of CPU per request, of which Triton's client (http.client, a new connection per
    request) ~38%, request header parsing in the email package ~18%, request_check.py ~12%, the reply ~6%, a
    watchdog thread started per request ~4%.

    At most `max_connections` connections are served at once and MAX_CONCURRENT_REQUESTS requests among them.
    Up to `max_refusing` more are accepted to be answered 503 (after their declared body is drained, so the
    client reads the refusal rather than a TCP reset), with Connection: close. Beyond both the front accepts
    nothing until a connection ends: new ones wait in the listen backlog (LISTEN_BACKLOG). A connection with no
    request under way is closed after `idle_timeout` seconds; one still sending its request (line, headers and
    body) REQUEST_READ_DEADLINE_SECONDS after its first byte is dropped (review finding 9).

    Invocations are forwarded to Triton on the loop (aiohttp's client, a pool of at most
    MAX_CONCURRENT_REQUESTS keep-alive connections); everything else (/ping, the multi-model API, a test's
    stand-in for Triton) runs SageMakerAPI.handle on a worker thread. serve_forever() runs the loop in the
    calling thread until shutdown().
    """

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
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server does
            self.socket.bind((host, port))
            self.socket.listen(self.request_queue_size)
            self.socket.setblocking(False)
        except OSError:
            self.socket.close()
            raise
        self.server_address = self.socket.getsockname()
        self.api = api
        self.slots = threading.BoundedSemaphore(MAX_CONCURRENT_REQUESTS)  # taken without blocking, on the loop
        self.max_connections = max_connections
        self.max_refusing = max_refusing
        self.idle_timeout = idle_timeout
        self.served: set[_Connection] = set()  # open connections (served and refusing), on the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopped = threading.Event()
        self._closing = False
        self._executor = ThreadPoolExecutor(MAX_CONCURRENT_REQUESTS, thread_name_prefix="local-endpoint-api")
        self.session: aiohttp.ClientSession | None = None

    def serve_forever(self) -> None:
        if self._closing:
            return
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stops serve_forever (from another thread) and waits for it to return."""
        self._closing = True
        loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(stop.set)
        self._stopped.wait(15)

    def server_close(self) -> None:
        self._closing = True
        self.socket.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._closing:
            return
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=MAX_CONCURRENT_REQUESTS, keepalive_timeout=IDLE_CONNECTION_TIMEOUT_SECONDS
            ),
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding", "User-Agent"),  # Triton would gzip a reply asked with gzip
        )
        requests = _Requests(self, self._handle, loop=loop, access_log=None, **_SERVER_OPTIONS)
        accepting = loop.create_task(self._accept(loop, requests))
        try:
            await self._stop.wait()
        finally:
            accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await accepting
            for connection in list(self.served):
                connection.force_close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(requests.shutdown(1.0), 3)
            await self.session.close()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:  # connections' tasks, a request still waiting on a worker thread
                task.cancel()
            if others:
                await asyncio.wait(others, timeout=3)

    async def _accept(self, loop: asyncio.AbstractEventLoop, requests: _Requests) -> None:
        capacity = asyncio.Semaphore(self.max_connections + self.max_refusing)
        while True:
            await capacity.acquire()  # beyond both limits, new connections wait in the listen backlog
            try:
                client, _ = await loop.sock_accept(self.socket)
            except OSError as error:
                capacity.release()
                if self._closing:
                    return
                print(f"local endpoint: accepting a connection failed: {_describe(error)}", file=sys.stderr)
                await asyncio.sleep(0.1)
                continue
            connection = requests()
            connection.overloaded = len(self.served) >= self.max_connections
            connection.release = capacity.release
            self.served.add(connection)
            try:
                await loop.connect_accepted_socket(lambda connection=connection: connection, client)
            except OSError:
                self.served.discard(connection)
                capacity.release()
                client.close()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """One request: the checks that come before its body, the body, then the API's reply."""
        connection = request.protocol
        assert isinstance(connection, _Connection)
        if connection.overloaded:
            return await self._refuse_busy(
                request, f"the local endpoint is serving {self.max_connections} connections, its most; retry"
            )
        if not self.slots.acquire(blocking=False):
            return await self._refuse_busy(
                request, f"too many requests at once (the local endpoint takes {MAX_CONCURRENT_REQUESTS}); retry"
            )
        try:
            api = self.api
            assert api is not None, "serve_forever() before the api was set"
            method, path = request.method, urllib.parse.urlsplit(request.raw_path).path
            if method not in _METHODS:
                connection.done_reading()
                reply = Reply.error(405, f"method {method[:50]!r} is not served; use one of {_ALLOW}")
                reply.headers["Allow"] = _ALLOW
                return _response(reply, close=True)
            refused_host = host_refusal(request.headers.getall("Host", []), self.server_address[1])
            if refused_host is not None:
                connection.done_reading()
                return _response(Reply.error(400, refused_host), close=True)  # the body stays unread
            body, refusal = await _read_body(request, api.body_limit(method, path))
            connection.done_reading()
            if refusal is not None:
                return _response(refusal, close=True)  # the unread body makes the connection unusable
            headers = {key.lower(): value for key, value in request.headers.items()}
            return _response(await self._reply(api, method, path, headers, body))
        finally:
            self.slots.release()

    async def _reply(self, api: SageMakerAPI, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        loop = asyncio.get_running_loop()
        if type(api.triton) is not TritonHTTP or self.session is None:  # a stand-in: its own (blocking) client
            return await loop.run_in_executor(self._executor, api.handle, method, path, headers, body)
        try:
            target = api.invocation_target(method, path, headers)
            if target is None:  # /ping and the multi-model API: blocking calls (model loads wait for Triton)
                return await loop.run_in_executor(self._executor, api.handle, method, path, headers, body)
            model, multi_model = target
            triton_path, forward = api.infer_request(model, headers, body)
            status, reply, reply_headers = await _forward(self.session, api.triton.port, triton_path, body, forward)
            return infer_reply(status, reply, reply_headers, multi_model=multi_model)
        except RequestRefused as refused:
            return Reply.error(refused.status, refused.message)
        except ReplyTooLarge as error:
            return reply_too_large(error)
        except TritonUnavailable as error:
            return Reply.error(502, f"the local Triton server is not answering: {error}")
        except Exception as error:  # anything else: still an answer, never a dropped connection
            return Reply.error(500, f"{method} {path[:200]} failed on the local endpoint: {_describe(error)}")

    async def _refuse_busy(self, request: web.BaseRequest, message: str) -> web.StreamResponse:
        """503 and Connection: close, after draining the declared body (up to the payload limit): closing a
        socket with unread bytes sends a reset, which the client reads instead of the 503 (review LOW11)."""
        lengths = request.headers.getall("Content-Length", [])
        chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
        framed = not chunked and len(lengths) == 1 and _DIGITS.fullmatch(lengths[0].strip())
        if framed and int(lengths[0]) <= MAX_PAYLOAD_BYTES:  # otherwise not read: unknown or too long
            with contextlib.suppress(Exception):
                await _continue(request)
                await request.protocol.reading_body(request.content).readexactly(int(lengths[0]))  # type: ignore[attr-defined]
        request.protocol.done_reading()  # type: ignore[attr-defined]
        reply = Reply.error(503, message)
        reply.headers["Retry-After"] = "1"
        return _response(reply, close=True)


# http.server's limits, which the front kept before issue #24: a request line or header line of at most 65536
# bytes (414 / 431 beyond), at most 100 headers (431). No lingering: a body left unread by a refusal is not
# waited for (aiohttp would read it for up to 10 s); the connection is closed after the reply, as before.
_SERVER_OPTIONS = {"max_line_size": 65536, "max_field_size": 65536, "max_headers": 100, "lingering_time": 0}
_METHODS = frozenset(method.strip() for method in _ALLOW.split(","))


async def _forward(
    session: aiohttp.ClientSession, port: int, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, bytes, dict[str, str]]:
    """POST to Triton's KServe port: (status, body, lower-cased headers); its reply is read no further than
    SageMaker's payload limit (finding 11)."""
    timeout = aiohttp.ClientTimeout(total=INVOCATION_TIMEOUT_SECONDS)
    try:
        async with session.post(
            f"http://{LOOPBACK}:{port}{path}", data=body, headers=headers, timeout=timeout
        ) as response:
            if response.content_length is not None and response.content_length > MAX_PAYLOAD_BYTES:
                raise ReplyTooLarge(response.content_length)
            chunks: list[bytes] = []
            size = 0
            while chunk := await response.content.read(MAX_PAYLOAD_BYTES + 1 - size):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_PAYLOAD_BYTES:
                    raise ReplyTooLarge(None)
            return response.status, b"".join(chunks), {key.lower(): value for key, value in response.headers.items()}
    except TimeoutError as error:
        raise TritonUnavailable(f"Triton did not answer within {INVOCATION_TIMEOUT_SECONDS:.0f} s") from error
    except (OSError, aiohttp.ClientError) as error:
        raise TritonUnavailable(f"Triton is not answering ({error})") from error


async def _read_body(request: web.BaseRequest, limit: int) -> tuple[bytes, Reply | None]:
    """The body by its one Content-Length, or the refusal (411 chunked or none, 413 over `limit`)."""
    if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        return b"", Reply.error(411, "chunked bodies are not accepted: send Content-Length")
    lengths = request.headers.getall("Content-Length", [])
    if len(lengths) > 1:  # the parser refuses these first (_Connection.handle_error); kept for any other path
        return b"", _several_lengths(len(lengths))
    if not lengths:
        if request.method in ("POST", "PUT", "PATCH"):
            return b"", Reply.error(411, "the request has no Content-Length")
        return b"", None
    length_text = lengths[0]
    if not _DIGITS.fullmatch(length_text.strip()):  # str.isdigit() also takes '²', which int() refuses
        return b"", Reply.error(400, f"Content-Length {length_text[:50]!r} is not a number")
    length = int(length_text)
    if length > limit:
        return b"", Reply.error(
            413, f"the body is {length} bytes; SageMaker real-time endpoints accept at most {limit} bytes"
        )
    await _continue(request)
    try:
        body = await request.protocol.reading_body(request.content).readexactly(length)  # type: ignore[attr-defined]
    except asyncio.IncompleteReadError as error:
        return b"", Reply.error(400, f"the body ended after {len(error.partial)} of {length} bytes")
    return body, None


async def _continue(request: web.BaseRequest) -> None:
    """`Expect: 100-continue` (curl sends it with larger bodies): the interim reply before the body is read, as
    http.server sent it (aiohttp's low-level server leaves it to the handler; its router sends the same bytes)."""
    if request.version >= HttpVersion11 and request.headers.get("Expect", "").lower() == "100-continue":
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")


def _several_lengths(count: int) -> Reply:
    # RFC 9112 §6.3: differing Content-Length values make the framing invalid and a server MUST answer 400 and
    # close. RFC 9110 §8.6 allows accepting identical repeats; the front refuses every repeat (as nginx does:
    # "client sent duplicate header line"): no client sends one, and the front and anything behind it could
    # then frame the body differently (request smuggling).
    return Reply.error(400, f"the request has {count} Content-Length headers; send one")


def _response(reply: Reply, *, close: bool = False) -> web.Response:
    """aiohttp writes a small reply's headers and body in one write, on a TCP_NODELAY socket (aiohttp's
    BaseProtocol): issue #24 measured 48 ms p50 when Nagle's algorithm held a body written after its headers
    until the client's delayed ACK."""
    response = web.Response(status=reply.status, body=reply.body, headers=reply.headers)
    if reply.content_type:
        response.headers["Content-Type"] = reply.content_type
    if close:
        response.headers["Connection"] = "close"
        response.force_close()
    return response


class _Requests(web.Server):
    """aiohttp's low-level server, making _Connection protocols."""

    def __init__(self, front: AsyncFrontServer, handler: Any, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.front = front

    def __call__(self) -> _Connection:
        return _Connection(self, loop=self._loop, keepalive_timeout=self.front.idle_timeout, **self._kwargs)


class _RequestLineTooLong(LineTooLong):
    """The request line (not a header line) is over the limit: 414, as http.server answered."""


class _Refused(BadHttpMessage):
    """A refusal whose message is the front's own (400)."""


class _RequestParser(HttpRequestParserPy):
    """aiohttp's Python request parser, refusing at a request's first bytes what is not HTTP/1.x there (a TLS
    ClientHello, HTTP/2's preface), as http.server did from the request line alone, where it would wait for
    the blank line that ends a head."""

    def feed_data(self, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if not self._lines and not self._tail and self._payload_parser is None:
            start = data.lstrip(b"\r\n")
            if start.startswith(b"PRI * HTTP/2"):
                raise BadHttpMessage("HTTP/2 connection preface")
            if start and not start[:1].isalpha():
                raise BadHttpMethod(repr(start[:20]))
        head = b"\r\n".join(self._lines) + b"\r\n" + self._tail + data  # for the messages below
        try:
            return super().feed_data(data, *args, **kwargs)
        except LineTooLong as error:
            if not self._lines:  # no line of this request read yet: its request line is too long
                raise _RequestLineTooLong(*error.args) from None
            raise
        except InvalidHeader as error:
            values = re.findall(rb"(?im)^content-length:[ \t]*([^\r\n]*)", head)
            if "Content-Length" in str(error) and len(values) == 1:
                shown = values[0].strip().decode("latin-1")[:50]
                raise _Refused(f"Content-Length {shown!r} is not a number") from None
            raise


class _Connection(RequestHandler):
    """One client connection: aiohttp's protocol with the front's idle and request-read deadlines, and JSON
    refusals for what its HTTP parser refuses."""

    overloaded = False
    release: Any = None

    def __init__(self, manager: _Requests, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        # aiohttp's pure-Python parser, not its llhttp one: llhttp drops a request it parsed whole when bytes
        # after it fail to parse in the same read (a POST without Content-Length followed by its body, a
        # chunked body), so the front could not answer those 411 as it always has; it costs ~45 µs a request.
        self._parser = _RequestParser(
            self,
            self._loop,
            self._read_bufsize,
            max_line_size=self.max_line_size,
            max_field_size=self.max_field_size,
            max_headers=self.max_headers,
            payload_exception=RequestPayloadError,
            auto_decompress=False,
            max_msg_queue_size=self._max_msg_queue_size,
        )

    def data_received(self, data: bytes) -> None:
        if data and getattr(self, "_read_deadline", None) is None and self.transport is not None:
            front = self._manager.front if self._manager is not None else None  # type: ignore[attr-defined]
            if front is not None:
                deadline = REFUSAL_DEADLINE_SECONDS if self.overloaded else _request_read_deadline()
                self._read_deadline = self._loop.call_later(deadline, self._reading_too_long)
        super().data_received(data)

    def eof_received(self) -> bool:
        """A client that half-closes after its request (shutdown(SHUT_WR)) still reads the reply: keep the
        transport open for writing (the idle timeout closes what is left); a body still awaited ends here."""
        self._eof = True
        if getattr(self, "_body", None) is not None:
            self._body.feed_eof()
        return True

    def reading_body(self, stream: aiohttp.StreamReader) -> aiohttp.StreamReader:
        """The request body being read: cut short when the client half-closes (eof_received)."""
        self._body = stream
        if getattr(self, "_eof", False):
            stream.feed_eof()
        return stream

    def done_reading(self) -> None:
        handle = getattr(self, "_read_deadline", None)
        if handle is not None:
            handle.cancel()
        self._read_deadline = None

    def _reading_too_long(self) -> None:
        self._read_deadline = None
        if self.transport is not None:
            self.transport.abort()  # the pending read fails; the request is dropped

    def connection_lost(self, exc: BaseException | None) -> None:
        self.done_reading()
        manager = self._manager
        if manager is not None:
            manager.front.served.discard(self)  # type: ignore[attr-defined]
        release, self.release = self.release, None
        if release is not None:
            release()
        super().connection_lost(exc)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """Every refusal aiohttp's parser makes (a malformed or over-long request line, an unknown method, HTTP/2's
        preface, a TLS ClientHello, too many headers, repeated Content-Length) is JSON like the front's own, not
        aiohttp's text page, and closes the connection (review L1). A method the front has no handler for is a
        405 naming the methods it has (RFC 9110 §15.5.6: a 405 MUST carry Allow)."""
        self.done_reading()
        if request.version < HttpVersion11:  # a request line the parser refused has none: answer as HTTP/1.1
            request._version = HttpVersion11  # aiohttp 3.14 BaseRequest: `version` is a cached property of it
            request._cache.pop("version", None)
        reply = _parser_refusal(status, exc, message)
        if status >= 500 and not isinstance(exc, HttpProcessingError):
            address = self.peername[0] if isinstance(self.peername, tuple) else "?"
            print(
                f"local endpoint: a request from {address} failed: {_describe(exc or Exception(message))}",
                file=sys.stderr,
            )
        return _response(reply, close=True)


def _request_read_deadline() -> float:
    return front.REQUEST_READ_DEADLINE_SECONDS  # read when each request begins (a test lowers front.py's value)


def _parser_refusal(status: int, exc: BaseException | None, message: str | None) -> Reply:
    text = (getattr(exc, "message", None) or message or "").strip()
    if isinstance(exc, BadHttpMethod):
        method = _method_in(text)
        if method is not None:
            reply = Reply.error(405, f"method {method[:50]!r} is not served; use one of {_ALLOW}")
            reply.headers["Allow"] = _ALLOW
            return reply
        return Reply.error(400, "malformed request line: this is an HTTP/1.1 endpoint")
    if isinstance(exc, HttpProcessingError) and ("HTTP/2" in text or "PRI/" in text):  # llhttp: "Pause on PRI/Upgrade"
        return Reply.error(505, "HTTP/2 is not served: this is an HTTP/1.1 endpoint")
    if isinstance(exc, _Refused):
        return Reply.error(400, exc.message)
    if isinstance(exc, _RequestLineTooLong):
        return Reply.error(414, "the request line is too long")
    if isinstance(exc, LineTooLong):
        return Reply.error(431, "a header line is too long")
    if "content-length" in text.lower() and ("duplicate" in text.lower() or "multiple" in text.lower()):
        return _several_lengths(2)
    if isinstance(exc, HttpProcessingError):
        return Reply.error(exc.code if 400 <= exc.code < 500 else 400, f"malformed request: {text[:200]}")
    if status >= 500:
        return Reply.error(500, f"the request failed on the local endpoint: {_describe(exc or Exception(text))}")
    return Reply.error(status, text[:200] or "the request cannot be served")


def _method_in(text: str) -> str | None:
    match = re.search(r"'([A-Za-z][A-Za-z0-9!#$%&*+.^_`|~-]{0,49}) ", text) or re.search(
        r"'([A-Za-z][A-Za-z0-9!#$%&*+.^_`|~-]{0,49})'", text
    )
    return match.group(1) if match else None
