"""Tuning in the build (issue 25 part 2, `tune: {slo_p99_ms, candidates}` on a model): every combination of the
candidates' instance counts, batcher delays and preferred batch sizes (at most 12, serving_facts.settings) becomes a
variant `<model>__tune<i>` of the built model (the same engine, linked; its config.pbtxt changed), loaded into the
build report's Triton one at a time, load-tested at `tune.concurrency` for `tune.seconds` each, and unloaded.

The best is the highest inferences per second at any concurrency whose p99 latency is within `slo_p99_ms` and that
had no errors. A variant that fails to load (e.g. three instances do not fit the build GPU's memory) is recorded
as failed, with the first line of Triton's error, and the others are still measured. It is reported as
stage-config lines for the model; the stage config itself is never changed (it is reviewed code). The measurement
replaces the schema's default of two instances per GPU, "the best measured
configuration of the reference benchmark", with one of the user's model on the build GPU.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from endpoint_client.build_server import BuildServer, link_version, read_model_config, write_model_config
from endpoint_client.errors import LocalEndpointError
from serving_facts.settings import ModelSettings


@dataclass(frozen=True)
class Candidate:
    count: int
    max_queue_delay_microseconds: int | None  # None: no dynamic batcher
    preferred_batch_sizes: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "instance_count": self.count,
            "max_queue_delay_microseconds": self.max_queue_delay_microseconds,
            "preferred_batch_sizes": list(self.preferred_batch_sizes),
        }


def variant_name(model: str, index: int) -> str:
    return f"{model}__tune{index}"


def candidates(settings: ModelSettings) -> list[Candidate]:
    """The grid, in a fixed order (instance counts, then delays, then preferred sizes)."""
    if settings.tune is None:
        return []
    grid = settings.tune.candidates
    batching = settings.dynamic_batching
    if not batching.enabled:
        return [Candidate(count, None, ()) for count in grid.instance_counts]
    delays = grid.max_queue_delay_microseconds or [batching.max_queue_delay_microseconds]
    preferred = grid.preferred_batch_sizes or [batching.preferred_batch_sizes]
    return [
        Candidate(count, delay, tuple(sizes))
        for count, delay, sizes in itertools.product(grid.instance_counts, delays, preferred)
    ]


def prepare_variants(repository: Path, settings: ModelSettings) -> list[str]:
    """repository/<model>__tune<i>/ for each candidate (before the server starts: the CPU stand-in rewrites every
    folder once); their names."""
    names = []
    source = repository / settings.name
    for index, candidate in enumerate(candidates(settings)):
        name = variant_name(settings.name, index)
        link_version(source, repository / name)
        config = read_model_config(source)
        config.name = name
        for group in config.instance_group:
            group.count = candidate.count
        if candidate.max_queue_delay_microseconds is not None:
            config.dynamic_batching.max_queue_delay_microseconds = candidate.max_queue_delay_microseconds
            del config.dynamic_batching.preferred_batch_size[:]
            config.dynamic_batching.preferred_batch_size.extend(candidate.preferred_batch_sizes)
        write_model_config(repository / name, config)
        names.append(name)
    return names


def config_lines(settings: ModelSettings, candidate: Candidate, best: Mapping[str, Any], gpu: str) -> str:
    kind = settings.instance_groups[0].kind
    lines = [
        f"# tune ({gpu}): {best['inferences_per_second']:.1f} inferences/s at concurrency {best['concurrency']}, "
        f"p99 {best['latency_ms']['p99']} ms <= {settings.tune.slo_p99_ms:g} ms",
        f"instance_groups: [{{count: {candidate.count}, kind: {kind}}}]",
    ]
    if candidate.max_queue_delay_microseconds is not None:
        sizes = ", ".join(str(size) for size in candidate.preferred_batch_sizes)
        lines.append(
            f"dynamic_batching: {{preferred_batch_sizes: [{sizes}], "
            f"max_queue_delay_microseconds: {candidate.max_queue_delay_microseconds}}}"
        )
    return "\n".join(lines)


def first_line(text: str, limit: int = 500) -> str:
    return (text.strip().splitlines() or [""])[0][:limit]


def tune(server: BuildServer, settings: ModelSettings, inputs: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Load-test every candidate (variants prepared by prepare_variants); the tuning section of report.json."""
    from endpoint_client.build_check import host_facts, speed_sweep

    assert settings.tune is not None
    slo = settings.tune.slo_p99_ms
    measured = []
    best: tuple[float, Candidate, dict[str, Any]] | None = None
    for index, candidate in enumerate(candidates(settings)):
        name = variant_name(settings.name, index)
        try:
            server.load(name)
        except LocalEndpointError as error:
            # A variant that does not load (3 instances of the engine need more GPU memory than the build GPU has)
            # is a result of the tuning, not a failed build: recorded, and the next candidate is measured.
            measured.append({**candidate.as_dict(), "levels": [], "failed": first_line(str(error))})
            with contextlib.suppress(LocalEndpointError):
                server.unload(name)  # whatever Triton loaded of it
            continue
        try:
            levels = speed_sweep(server.url, name, inputs, settings.tune.concurrency, settings.tune.seconds)
        finally:
            server.unload(name)
        rows = [level.as_dict() for level in levels]
        measured.append({**candidate.as_dict(), "levels": rows})
        for row in rows:
            p99 = row["latency_ms"]["p99"]
            within = row["errors"] == 0 and p99 is not None and p99 <= slo
            if within and (best is None or row["inferences_per_second"] > best[0]):
                best = (row["inferences_per_second"], candidate, row)
    if best is None:
        lines = f"# tune: no candidate met p99 <= {slo:g} ms on this build host; keep the stage config as it is"
        chosen = None
    else:
        lines = config_lines(settings, best[1], best[2], host_facts()[0])
        chosen = {**best[1].as_dict(), **{k: best[2][k] for k in ("concurrency", "inferences_per_second")}}
        chosen["p99_ms"] = best[2]["latency_ms"]["p99"]
    return {"slo_p99_ms": slo, "candidates": measured, "best": chosen, "config_lines": lines}
