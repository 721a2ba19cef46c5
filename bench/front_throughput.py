"""The local endpoint's front under load: throughput and latency through `/invocations` vs straight to Triton.

    .venv/bin/python bench/front_throughput.py [--levels 1,8] [--duration 10] [--rounds 2] [--front async] \
        [--compare-rev REV] [--profile]

Starts the local endpoint on examples/models/add_sub (the CPU Triton of .venv-triton) in this process, then runs
`python -m endpoint_client loadtest` in a separate process (so the generator does not share the front's
interpreter) once per level and path: (a) `--local` through the front's `/invocations`, (b) `--triton` straight to
Triton's KServe port, same generated JSON body, alternating front and Triton per round so both see the same machine
load. `--front async` serves the endpoint with front_async.py's asyncio server instead of front.py's threaded
one; `--compare-rev REV` adds front.py's server of that git revision (e.g. HEAD, or de0e454, before issue #24)
on its own port before the same Triton, measured in the same rounds: `--front async --compare-rev HEAD` is the
A/B of the two servers. Prints inv/s, p50/p99 and the front's CPU per request (this process's CPU time over
the requests) per level and path, and each front's share of Triton's throughput.

`--profile` samples the front's threads (a poor man's py-spy: every 2 ms, the innermost frames of each thread
that is not waiting) while the front is under load, and prints the hottest functions.

Target (issue #24): at concurrency 8 the front's throughput within ~30% of Triton's own; at concurrency 1 its p50
within 1 ms + 30% of Triton's.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from endpoint_client.local_endpoint import LocalEndpoint  # noqa: E402
from model_build.package import write_model_archive  # noqa: E402

_IDLE = ("wait", "select", "poll", "accept", "_wait_for_tstate_lock", "readinto", "recv_into", "peek", "sleep")


class Sampler:
    """Counts, every `interval` s, the innermost few frames of every other thread of this process."""

    def __init__(self, interval: float = 0.002, depth: int = 6) -> None:
        self.interval, self.depth = interval, depth
        self.own: collections.Counter[str] = collections.Counter()
        self.stacks: collections.Counter[str] = collections.Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                self.samples += 1
                names = []
                current = frame
                while current is not None and len(names) < self.depth:
                    code = current.f_code
                    names.append(f"{Path(code.co_filename).name}:{code.co_name}")
                    current = current.f_back
                self.own[names[0]] += 1
                self.stacks[" < ".join(names)] += 1

    def report(self, top: int = 25) -> str:
        lines = [f"{self.samples} thread samples; innermost function (idle waits included):"]
        lines += [f"  {count:6d}  {name}" for name, count in self.own.most_common(top)]
        busy = [(s, c) for s, c in self.stacks.most_common() if s.split(" < ")[0].split(":")[1] not in _IDLE]
        lines.append("hottest non-waiting stacks:")
        lines += [f"  {count:6d}  {stack}" for stack, count in busy[:top]]
        return "\n".join(lines)


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds_of_tree(pid: int) -> float:
    """User + system CPU seconds of a process and its direct children (tritonserver and its Python backend stubs),
    from /proc/<pid>/stat (fields 14 and 15, in clock ticks; proc(5))."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we looked
            continue
        fields = text[text.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
        own, parent = int(stat.parent.name), int(fields[1])
        if own == pid or parent == pid:
            total += int(fields[11]) + int(fields[12])
    return total / _TICKS


def _loadtest(target: list[str], level: int, duration: float, out: Path, triton_pid: int | None = None) -> dict:
    command = [
        sys.executable, "-m", "endpoint_client", "loadtest", *target,
        "--model-config", str(ROOT / "examples" / "models" / "add_sub" / "config.pbtxt"),
        "--encoding", "json", "--concurrency", str(level), "--duration", str(duration), "--warmup", "2",
        "--json", str(out), "--quiet",
    ]  # fmt: skip
    before = time.process_time()
    generator_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    triton_before = _cpu_seconds_of_tree(triton_pid) if triton_pid else 0.0
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    used = time.process_time() - before  # this process's CPU: the front's (Triton and the generator are
    # other processes), per request of the window and the 2 s warm-up at the same rate (an estimate)
    generator_after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the loadtest process, waited for above
    generator = (generator_after.ru_utime + generator_after.ru_stime) - (
        generator_before.ru_utime + generator_before.ru_stime
    )
    triton = _cpu_seconds_of_tree(triton_pid) - triton_before if triton_pid else None
    level_doc = json.loads(out.read_text())["levels"][0]
    requests = max(1.0, level_doc["requests"] * (duration + 2) / duration)
    level_doc["front_cpu_us"] = used / requests * 1e6 if "--local" in target else None
    level_doc["triton_cpu_us"] = triton / requests * 1e6 if triton is not None else None
    level_doc["generator_cpu_us"] = generator / requests * 1e6
    return level_doc


@contextlib.contextmanager
def _front_of(rev: str, triton: object, work: Path) -> Iterator[str]:
    """Another revision's front.py (its FrontServer and SageMakerAPI) in front of the same Triton, on a free
    loopback port, served from a thread as the local endpoint serves its own; yields its URL."""
    source = subprocess.run(
        ["git", "show", f"{rev}:endpoint_client/front.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = work / "front_at_rev.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("front_at_rev", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["front_at_rev"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    api = module.SageMakerAPI(triton, ping_mode="ready", default_model="add_sub", registry=None)
    server = module.FrontServer("127.0.0.1", 0, api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _us(value: float | None) -> str:
    return "" if value is None else f"{value:.0f} µs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,8")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--front",
        choices=("threads", "async"),
        default="threads",
        help="the local endpoint's front: front.py's (threads) or front_async.py's (one asyncio loop)",
    )
    parser.add_argument(
        "--compare-rev",
        metavar="GIT_REV",
        help="also measure the front of this revision (git show REV:endpoint_client/front.py), on the same Triton",
    )
    parser.add_argument("--profile", action="store_true", help="sample the front's threads at the highest level")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    if args.front == "async":
        from endpoint_client import local_endpoint
        from endpoint_client.front_async import AsyncFrontServer

        local_endpoint.FrontServer = AsyncFrontServer  # type: ignore[misc]
    rows: list[tuple[int, str, int, dict]] = []
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
        with endpoint, contextlib.ExitStack() as stack:
            assert endpoint.triton is not None
            paths = [("front /invocations", ["--local", endpoint.url])]
            if args.compare_rev:
                url = stack.enter_context(_front_of(args.compare_rev, endpoint.triton, Path(work)))
                paths.append((f"front of {args.compare_rev}", ["--local", url]))
            triton = ["--triton", f"http://127.0.0.1:{endpoint.triton.port}", "--model-name", "add_sub"]
            paths.append(("Triton KServe", triton))
            out = Path(work) / "level.json"
            triton_pid = endpoint.process.pid if endpoint.process is not None else None
            print(f"load average before: {os.getloadavg()}", flush=True)
            for round_number in range(1, args.rounds + 1):
                for level in levels:
                    for name, target in paths:
                        doc = _loadtest(target, level, args.duration, out, triton_pid)
                        rows.append((level, name, round_number, doc))
            if args.profile:
                with Sampler() as sampler:
                    _loadtest(paths[0][1], max(levels), args.duration, out)
                print(sampler.report())
            print(f"load average after: {os.getloadavg()}", flush=True)
    print(
        "| path | concurrency | round | inv/s | p50 ms | p99 ms | errors | front CPU per request "
        "| Triton CPU per request | generator CPU per request |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for level, name, round_number, doc in sorted(rows, key=lambda row: (row[0], row[1], row[2])):
        latency = doc["latency_ms"] or {}
        print(
            f"| {name} | {level} | {round_number} | {doc['invocations_per_s']:.1f} | {latency.get('p50', 0):.2f} "
            f"| {latency.get('p99', 0):.2f} | {sum(doc['errors'].values())} "
            f"| {_us(doc['front_cpu_us'])} | {_us(doc['triton_cpu_us'])} | {_us(doc['generator_cpu_us'])} |"
        )
    for level in levels:
        for round_number in range(1, args.rounds + 1):
            docs = {name: doc for lv, name, rn, doc in rows if lv == level and rn == round_number}
            triton_doc = docs.pop("Triton KServe")
            for name, doc in docs.items():
                ratio = doc["invocations_per_s"] / triton_doc["invocations_per_s"]
                p50, triton_p50 = doc["latency_ms"]["p50"], triton_doc["latency_ms"]["p50"]
                print(
                    f"concurrency {level} round {round_number}: {name} {ratio:.0%} of Triton's inv/s; p50 {p50:.2f} "
                    f"vs limit {1 + 1.3 * triton_p50:.2f} ms (1 ms + 1.3 x Triton's)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
