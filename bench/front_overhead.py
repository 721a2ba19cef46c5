"""What the local endpoint's front adds to a request, measured against its own Triton.

    .venv/bin/python bench/front_overhead.py [--requests 300]

Starts the local endpoint on examples/models/add_sub (the CPU Triton of .venv-triton), then sends the same
KServe v2 JSON inference, one at a time over one keep-alive connection, (a) to the front's `/invocations` and
(b) straight to Triton's `/v2/models/add_sub/infer`, alternating so both see the same machine load. Prints
p50/p90/p99 of each and the front's added p50. Target (issue #24): the front's p50 within 1 ms + 30% of Triton's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from endpoint_client.local_endpoint import LocalEndpoint  # noqa: E402
from model_build.package import write_model_archive  # noqa: E402

BODY = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [4, 3, 2, 1]},
        ]
    }
).encode()
HEADERS = {"Content-Type": "application/json"}


def _timed(connection: http.client.HTTPConnection, path: str) -> float:
    started = time.perf_counter()
    connection.request("POST", path, body=BODY, headers=HEADERS)
    response = connection.getresponse()
    response.read()
    elapsed = time.perf_counter() - started
    if response.status != 200:
        raise SystemExit(f"POST {path}: HTTP {response.status}")
    return elapsed * 1000


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return f"p50 {statistics.median(ordered):6.2f} ms  p90 {pick(0.9):6.2f} ms  p99 {pick(0.99):6.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        archive = Path(work) / "model.tar.gz"
        write_model_archive(ROOT / "examples" / "models" / "add_sub", archive)
        endpoint = LocalEndpoint(
            archive,
            environment={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "add_sub", "SAGEMAKER_TRITON_LOG_VERBOSE": "false"},
            triton_env=ROOT / ".venv-triton",
            workdir=Path(work) / "endpoint",
            port=0,
            startup_timeout=120,
        )
        with endpoint:
            front = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
            triton = http.client.HTTPConnection("127.0.0.1", endpoint.triton.port, timeout=30)
            for _ in range(20):  # warm-up: model instance, connections
                _timed(front, "/invocations")
                _timed(triton, "/v2/models/add_sub/infer")
            through_front, straight = [], []
            for _ in range(args.requests):
                through_front.append(_timed(front, "/invocations"))
                straight.append(_timed(triton, "/v2/models/add_sub/infer"))
    front_p50, triton_p50 = statistics.median(through_front), statistics.median(straight)
    print(f"through the front  {_percentiles(through_front)}")
    print(f"straight to Triton {_percentiles(straight)}")
    limit = 1 + 1.3 * triton_p50
    verdict = "met" if front_p50 <= limit else "NOT met"
    print(f"front p50 {front_p50:.2f} ms vs limit {limit:.2f} ms (1 ms + 1.3 x Triton's p50): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
