"""Test doubles shared by several areas (imported as `from fakes import ...`; tests/ is on sys.path).

- FakeSageMakerRuntime: SageMaker's runtime front in front of a real local Triton, used by the
  client tests (tests/client/conftest.py's `fake_sagemaker_runtime`) and the pipeline's smoke tests.
- serving_front: the local endpoint's real front (sockets, threads) on loopback, always shut down.
- StubTriton: stands in for Triton's private port behind the front: one canned reply, a record of every call.
- within: fail a block that blocks (a FIFO opened for reading) instead of hanging the test run.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from endpoint_client.front import FrontServer, SageMakerAPI
from endpoint_client.local_endpoint import LOOPBACK
from endpoint_client.transport import TARGET_MODEL_HEADER, http_request


class FakeSageMakerRuntime:
    """SageMaker's runtime front on 127.0.0.1, in front of a real local Triton.

    Answers `POST /endpoints/<name>/invocations` the way the service does: the first `not_ready`
    calls with ModelNotReadyException (HTTP 429), then forwards to Triton (`/invocations`, or
    `/models/<TargetModel>/invoke`) and wraps a Triton refusal as ModelError (HTTP 424) with
    OriginalStatusCode/OriginalMessage.
    """

    def __init__(self, backend_url: str) -> None:
        self.backend_url = backend_url
        self.not_ready = 0
        self.calls: list[dict[str, str | None]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                target = self.headers.get(TARGET_MODEL_HEADER)
                fake.calls.append({"path": self.path, "target": target})
                if fake.not_ready > 0:
                    fake.not_ready -= 1
                    message = f"Model {target} is not ready yet"
                    self._reply(429, "ModelNotReadyException", {"message": message})
                    return
                path = f"/models/{target}/invoke" if target else "/invocations"
                headers = {"Content-Type": self.headers.get("Content-Type", "")}
                status, reply, content_type = http_request("POST", fake.backend_url + path, body, headers, 30)
                if status == 200:
                    self.send_response(200)
                    self.send_header("Content-Type", content_type or "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                    return
                original = reply.decode(errors="replace")
                self._reply(
                    424,
                    "ModelError",
                    {
                        "Message": f'Received client error ({status}) from primary with message "{original}"',
                        "OriginalStatusCode": status,
                        "OriginalMessage": original,
                    },
                )

            def _reply(self, status: int, error_type: str, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("x-amzn-ErrorType", error_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.url = f"http://{LOOPBACK}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeSageMakerRuntime:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def boto3_client(self):
        import boto3
        from botocore.config import Config

        return boto3.client(
            "sagemaker-runtime",
            region_name="us-east-1",
            endpoint_url=self.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"total_max_attempts": 1}),  # only our retry policy may retry
        )


class StubTriton:
    """Stands in for Triton's private port: one canned reply, a record of every call."""

    def __init__(self, status: int = 200, body: bytes = b'{"outputs": []}') -> None:
        self.reply = (status, body, {})
        self.calls: list[str] = []

    def request(self, method, path, body=None, headers=None, *, timeout, max_reply_bytes=None):
        self.calls.append(path)
        return self.reply

    def model_path(self, model: str, action: str) -> str:
        return f"/v2/models/{model}/{action}"

    def healthy(self, mode: str, *, timeout: float = 5.0) -> bool:
        return True


@contextlib.contextmanager
def serving_front(api: SageMakerAPI, **limits: float) -> Iterator[FrontServer]:
    """The real front (sockets, threads) on 127.0.0.1 and a free port; always shut down."""
    server = FrontServer(LOOPBACK, 0, api, **limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging the test run) when the block blocks, e.g. on a FIFO: SIGALRM interrupts the
    blocking system call and the handler's exception propagates (PEP 475)."""

    def expired(signum, frame):
        raise TimeoutError(f"blocked for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
