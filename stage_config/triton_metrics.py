"""Triton's own Prometheus metrics in the SageMaker container (`container.triton_metrics`, issue #26 part 3).

What Triton's SageMaker entry point does with them (triton-inference-server/server `docker/sagemaker/serve`,
lines 81-88 at e1db8a6): `--allow-metrics=${SAGEMAKER_TRITON_ALLOW_METRICS}` when the variable is set, else
`--allow-metrics=false`; `--metrics-port=${SAGEMAKER_TRITON_METRICS_PORT}` when that one is set. The script starts
`tritonserver --allow-sagemaker=true --allow-http=false ...` (line 183) and appends
`SAGEMAKER_TRITON_ADDITIONAL_ARGS` after the metrics flags (lines 132-133), so a metrics flag there wins.

Triton's own rules (`src/command_line_parser.h` / `.cc`, same commit): the metrics port defaults to 8002
(`metrics_port_{8002}`); the metrics address defaults to `--http-address` (default 0.0.0.0); the SageMaker service
listens on 0.0.0.0 at `--sagemaker-port` (default 8080; the serve script passes `SAGEMAKER_BIND_TO_PORT` when set)
and gRPC (when `SAGEMAKER_TRITON_ALLOW_GRPC` turns it on) at 8001 or `SAGEMAKER_TRITON_GRPC_PORT`.
`CheckPortCollision` refuses to start when two enabled services share an address and port ("The server cannot
listen to metrics requests and SageMaker requests at the same address and port"), and, with a SageMaker safe port
range (`SAGEMAKER_SAFE_PORT_RANGE` -> `--sagemaker-safe-port-range`), any other service's port outside it.

What is *not* established (docs/serving.md "Triton's own metrics"): how SageMaker would bring these metrics to
CloudWatch. MetricsConfig.EnableDetailedObservability scrapes "the container's Prometheus endpoint", for BYOC at
`/metrics` on port 8080 unless ContainerMetricsConfig names another path (it has no port member), and for "first-
party and Deep Learning Containers" a path "determined automatically" (SageMaker API reference, MetricsConfig and
ContainerMetricsConfig). Triton serves `/metrics` only on its metrics port, never on 8080 (its SageMaker service
answers /ping, /invocations and /models: `src/sagemaker_server.cc`), and the port cannot be 8080 (above).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

ALLOW_METRICS = "SAGEMAKER_TRITON_ALLOW_METRICS"
METRICS_PORT = "SAGEMAKER_TRITON_METRICS_PORT"
VARIABLES = (ALLOW_METRICS, METRICS_PORT)

TRITON_DEFAULT_METRICS_PORT = 8002  # command_line_parser.h metrics_port_{8002}
SAGEMAKER_PORT = 8080  # command_line_parser.h sagemaker_port_{8080}; SageMaker's serving port
TRITON_DEFAULT_GRPC_PORT = 8001  # grpc/grpc_server.h port_{8001}
# The tritonserver options the typed fields own; getopt also takes an unambiguous prefix of a long option.
METRICS_OPTIONS = ("--allow-metrics", "--metrics-port")
_RANGE = re.compile(r"^([0-9]+)-([0-9]+)$")
_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only: str.isdigit() also takes other scripts' digits


def metrics_environment(enabled: bool, port: int | None) -> dict[str, str]:
    """The variables the serve script reads; nothing when off (its own default is --allow-metrics=false)."""
    if not enabled:
        return {}
    return {ALLOW_METRICS: "true", **({METRICS_PORT: str(port)} if port is not None else {})}


def metrics_option_words(additional_args: str) -> list[str]:
    """The words of SAGEMAKER_TRITON_ADDITIONAL_ARGS that set a metrics option the typed fields own (prefixes too:
    Triton parses with getopt_long)."""
    found = []
    for word in additional_args.split():
        flag = word.split("=", 1)[0]
        # "--allow-met" / "--metrics-p": the shortest prefixes that name one option only.
        if len(flag) >= len("--metrics-p") and any(option.startswith(flag) for option in METRICS_OPTIONS):
            found.append(word)
    return found


def metrics_problems(
    enabled: bool, port: int | None, extra_environment: Mapping[str, str], additional_args: str | None
) -> list[str]:
    """What Triton (or the serve script) would refuse or silently override, as config messages."""
    problems = []
    overriding = metrics_option_words(additional_args or "")
    if overriding:
        problems.append(
            f"additional_args sets {overriding}; the serve script appends additional_args after its metrics flags, "
            "so they would override triton_metrics / triton_metrics_port: use those fields"
        )
    if port is not None and not enabled:
        problems.append(
            f"triton_metrics_port {port} is set but triton_metrics is false: the serve script starts Triton with "
            "--allow-metrics=false, so the port would do nothing; set triton_metrics: true or drop the port"
        )
    if not enabled:
        return problems
    metrics_port = port if port is not None else TRITON_DEFAULT_METRICS_PORT
    sagemaker_port = _int(extra_environment.get("SAGEMAKER_BIND_TO_PORT")) or SAGEMAKER_PORT
    if metrics_port == sagemaker_port:
        problems.append(
            f"triton_metrics_port {metrics_port} is the SageMaker service's port (both on 0.0.0.0): Triton refuses "
            'to start ("cannot listen to metrics requests and SageMaker requests at the same address and port"); '
            f"choose another port (Triton's default is {TRITON_DEFAULT_METRICS_PORT})"
        )
    if extra_environment.get("SAGEMAKER_TRITON_ALLOW_GRPC", "").lower() == "true":
        grpc_port = _int(extra_environment.get("SAGEMAKER_TRITON_GRPC_PORT")) or TRITON_DEFAULT_GRPC_PORT
        if metrics_port == grpc_port:
            problems.append(
                f"triton_metrics_port {metrics_port} is gRPC's port (SAGEMAKER_TRITON_ALLOW_GRPC is true): Triton "
                "refuses to start with two services on one address and port; choose another port"
            )
    safe_range = _RANGE.match(extra_environment.get("SAGEMAKER_SAFE_PORT_RANGE", "").strip())
    if safe_range and not int(safe_range[1]) <= metrics_port <= int(safe_range[2]):
        problems.append(
            f"triton_metrics_port {metrics_port} is outside SAGEMAKER_SAFE_PORT_RANGE {safe_range[0]}: Triton "
            'refuses to start ("allowed port range is ..."); choose a port in the range'
        )
    return problems


def _int(text: str | None) -> int | None:
    return int(text.strip()) if text and _PORT.fullmatch(text.strip()) else None
