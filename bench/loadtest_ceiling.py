"""The load generator's own ceiling: `loadtest`'s engine against a minimal loopback server (issue #24 part 1).

The server (another process, so it does not share the generator's event loop) is an asyncio protocol that answers
every request on a keep-alive connection with one fixed 200 reply in one write: no model, no parsing beyond the
headers, so what limits the run is the generator. The generator is `endpoint_client.loadtest` exactly as the
CLI runs it (local target, the add_sub request body, closed-loop levels). Besides the throughput it prints the
generator's CPU time per request: 1 s / that is its ceiling per core, whatever the server.

    .venv/bin/python bench/loadtest_ceiling.py [--levels 1,8,64] [--duration 5]

Compare with the local Triton's own figures (bench/README.md, `make loadtest`): the ceiling must be well above.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from endpoint_client import loadtest as lt
from endpoint_client import loadtest_report as report
from endpoint_client.codec import encode_request

BODY = b'{"model_name":"add_sub","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,4],"data":[2,4,6,8]}]}'
REPLY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + str(len(BODY)).encode() + b"\r\n\r\n"
) + BODY


class _Answer(asyncio.Protocol):
    """Reads a request's headers and Content-Length bytes of body, answers REPLY; repeats (keep-alive)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            self.transport.write(REPLY)


def _serve(port: int) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Answer, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,8,64", help="concurrency levels (default 1,8,64)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per level (default 5)")
    args = parser.parse_args()
    port = _free_port()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(port,), daemon=True)
    server.start()
    try:
        for _ in range(100):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        tensors = {"INPUT0": np.ones((1, 4), np.float32), "INPUT1": np.ones((1, 4), np.float32)}
        target = lt.local_target(f"http://127.0.0.1:{port}", encode_request(tensors))
        levels = tuple(lt.Level(concurrency=int(c)) for c in args.levels.split(","))
        plan = lt.Plan(levels, duration=args.duration, warmup=1.0)
        cpu, wall = time.process_time(), time.perf_counter()
        measured = asyncio.run(lt.run_plan(target, plan))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        documents = [report.level_document(m, instances=1, inferences_per_request=1) for m in measured]
        print(report.table(documents))
        # every request sent, warm-ups included, shares the generator's CPU time
        sent = sum(m.requests for m in measured) * (plan.duration + plan.warmup) / plan.duration
        print(
            f"generator CPU: {cpu:.2f} s for ~{sent:.0f} requests in {wall:.1f} s = {cpu / sent * 1e6:.0f} us per "
            f"request -> ceiling ~{sent / cpu:.0f} requests/s per core (load {os.getloadavg()[0]:.2f}, "
            f"{os.cpu_count()} cores)"
        )
    finally:
        server.terminate()
        server.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
