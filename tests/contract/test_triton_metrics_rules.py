"""Triton's own Prometheus metrics in every SageMaker container environment of every shipped template (#26 part 3).

Source: triton-inference-server/server (e1db8a6) `docker/sagemaker/serve` lines 81-88 (SAGEMAKER_TRITON_ALLOW_METRICS
-> `--allow-metrics`, else `--allow-metrics=false`; SAGEMAKER_TRITON_METRICS_PORT -> `--metrics-port`), lines 76-80
(gRPC off unless SAGEMAKER_TRITON_ALLOW_GRPC), 70-72 (SAGEMAKER_BIND_TO_PORT -> `--sagemaker-port`), 132-133
(ADDITIONAL_ARGS after the metrics flags); `src/command_line_parser.h` (metrics 8002, SageMaker 8080 on 0.0.0.0) and
`CheckPortCollision` (two services on one address and port stop the server).
"""

from __future__ import annotations

from contract_helpers import resources_of

from stage_config.triton_metrics import SAGEMAKER_PORT, TRITON_DEFAULT_GRPC_PORT, TRITON_DEFAULT_METRICS_PORT


def _environments(template: dict) -> dict[str, dict]:
    """Every container environment of the SageMaker models and inference components, by logical id."""
    found = {}
    for logical_id, model in resources_of(template, "AWS::SageMaker::Model").items():
        properties = model["Properties"]
        containers = [properties.get("PrimaryContainer") or {}, *properties.get("Containers", [])]
        for index, container in enumerate(containers):
            if isinstance(container.get("Environment"), dict):
                found[f"{logical_id}[{index}]"] = container["Environment"]
    for logical_id, component in resources_of(template, "AWS::SageMaker::InferenceComponent").items():
        container = component["Properties"].get("Specification", {}).get("Container") or {}
        if isinstance(container.get("Environment"), dict):
            found[logical_id] = container["Environment"]
    return found


def _problems(environment: dict) -> list[str]:
    problems = []
    allow = environment.get("SAGEMAKER_TRITON_ALLOW_METRICS")
    port = environment.get("SAGEMAKER_TRITON_METRICS_PORT")
    if allow is not None and allow not in ("true", "false"):
        problems.append(f"SAGEMAKER_TRITON_ALLOW_METRICS {allow!r} is not true or false")
    if port is not None and allow != "true":
        problems.append("SAGEMAKER_TRITON_METRICS_PORT without SAGEMAKER_TRITON_ALLOW_METRICS=true does nothing")
    if allow == "true":
        metrics_port = int(port) if port is not None else TRITON_DEFAULT_METRICS_PORT
        if not 1 <= metrics_port <= 65535:
            problems.append(f"metrics port {metrics_port} is not a port")
        if metrics_port == int(environment.get("SAGEMAKER_BIND_TO_PORT", SAGEMAKER_PORT)):
            problems.append(f"metrics port {metrics_port} is the SageMaker service's")
        grpc = int(environment.get("SAGEMAKER_TRITON_GRPC_PORT", TRITON_DEFAULT_GRPC_PORT))
        if environment.get("SAGEMAKER_TRITON_ALLOW_GRPC") == "true" and metrics_port == grpc:
            problems.append(f"metrics port {metrics_port} is gRPC's")
    for word in str(environment.get("SAGEMAKER_TRITON_ADDITIONAL_ARGS", "")).split():
        if word.split("=", 1)[0] in ("--allow-metrics", "--metrics-port"):
            problems.append(f"SAGEMAKER_TRITON_ADDITIONAL_ARGS sets {word}, overriding the metrics variables")
    return problems


def test_every_container_starts_with_metrics_settings_triton_accepts(shipped_templates):
    problems = [
        f"{shipped.label}: {where}: {problem}"
        for shipped in shipped_templates
        for where, environment in _environments(shipped.template).items()
        for problem in _problems(environment)
    ]
    assert not problems, "\n".join(problems)


def test_a_shipped_template_turns_triton_metrics_on(shipped_templates):
    """examples/config/ensemble sets `container.triton_metrics: true`, so the rule above sees it on."""
    assert any(
        environment.get("SAGEMAKER_TRITON_ALLOW_METRICS") == "true"
        for shipped in shipped_templates
        for environment in _environments(shipped.template).values()
    )


def test_the_rule_catches_what_triton_refuses():
    assert _problems({"SAGEMAKER_TRITON_ALLOW_METRICS": "true", "SAGEMAKER_TRITON_METRICS_PORT": "8080"})
    assert _problems({"SAGEMAKER_TRITON_METRICS_PORT": "9000"})
    assert _problems({"SAGEMAKER_TRITON_ALLOW_METRICS": "yes"})
    assert not _problems({"SAGEMAKER_TRITON_ALLOW_METRICS": "true", "SAGEMAKER_TRITON_METRICS_PORT": "9000"})
