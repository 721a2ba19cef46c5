"""What a stage's smoke test calls: written at synth (JSON in the step's environment), read in CodeBuild.

Plain dataclasses and the standard library only, so the smoke step's image needs no CDK.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class ModelCheck:
    name: str
    artifact_key: str  # the model's archive in the stage's artifact bucket: holds <name>/config.pbtxt
    target_model: str | None  # multi-model endpoints: TargetModel `<name>.tar.gz`; None for single-model
    # Sizes for dynamic (-1) non-batch dims, from the model's tensorrt.shapes `opt`; others become 1.
    shape_hints: dict[str, list[int]] = field(default_factory=dict)
    # Inference-component endpoints: InvokeEndpoint's InferenceComponentName of this model's component.
    inference_component: str | None = None


@dataclass(frozen=True)
class EndpointCheck:
    name: str  # as in config/<stage>.yaml
    deployed_name: str  # the SageMaker endpoint name
    max_latency_ms: float
    models: list[ModelCheck]


@dataclass(frozen=True)
class SmokePlan:
    stage: str
    timed_calls: int
    attempts: int
    endpoints: list[EndpointCheck]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SmokePlan:
        try:
            document = json.loads(text)
            endpoints = [
                EndpointCheck(**{**e, "models": [ModelCheck(**m) for m in e["models"]]}) for e in document["endpoints"]
            ]
            return cls(**{**document, "endpoints": endpoints})
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"not a smoke plan ({error}); the pipeline writes it into SMOKE_PLAN") from error
