"""Look-ups over synthesized CloudFormation templates, shared by the contract (deploy-rule) tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ShippedTemplate:
    """One template of one shipped configuration.

    `config` names where it came from: "config/dev", "config/pipeline:assembly-Triton-Pipeline-dev" (a pipeline
    stage's nested assembly), "tests/configs/test", "examples/config/<stage>".
    """

    config: str
    stack: str
    path: Path
    template: dict

    @property
    def label(self) -> str:
        return f"{self.config}:{self.stack}"


def resources_of(template: dict, resource_type: str) -> dict[str, dict]:
    """{logical id: resource} of every resource of one CloudFormation type."""
    return {k: v for k, v in template.get("Resources", {}).items() if v.get("Type") == resource_type}


def read_assembly_templates(config: str, assembly_dir: Path) -> Iterator[ShippedTemplate]:
    """Every stack template of a cloud assembly, nested stage assemblies (CDK Pipelines) included."""
    manifest = json.loads((assembly_dir / "manifest.json").read_text())
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") == "aws:cloudformation:stack":
            path = assembly_dir / artifact["properties"]["templateFile"]
            yield ShippedTemplate(config, artifact.get("displayName", artifact_id), path, json.loads(path.read_text()))
        elif artifact.get("type") == "cdk:cloud-assembly":
            nested = assembly_dir / artifact["properties"]["directoryName"]
            yield from read_assembly_templates(f"{config}:{nested.name}", nested)
