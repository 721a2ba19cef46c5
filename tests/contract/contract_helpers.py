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


def plain_guard_findings(report) -> set[tuple[str, str, str]]:
    """(rule, template path, logical id) of every violation in the cdklabs Guard plugin's own report (a
    `PolicyValidationPluginReportBeta1`, before aws-cdk-lib or our wrapper touch it)."""
    return {
        (v.rule_name, str(Path(r.template_path).resolve()), r.resource_logical_id)
        for v in report.violations
        for r in v.violating_resources
    }


def listed(value) -> list:
    """A CloudFormation/IAM field that may hold one value or a list of them, as a list."""
    return value if isinstance(value, list) else [value]


def statements_of(document: dict) -> list[dict]:
    """A policy document's statements (`Statement` may be one object or a list)."""
    return listed(document.get("Statement", []))


def logical_id_of(value) -> str | None:
    """The logical id a `Ref` or `Fn::GetAtt` points at; None for anything else."""
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            return value["Fn::GetAtt"][0]
    return None


def seconds_to_alarm(alarm: dict) -> int:
    """Shortest time an AWS::CloudWatch::Alarm needs to reach ALARM: (datapoints to alarm + 1) x its period.

    One period more than the breaching datapoints: a period's datapoint is evaluated only once it has closed
    and the metric arrived (found by an independent review: 2 x 300 s alarms in a 600 s bake never fired).
    """
    props = alarm["Properties"]
    periods = [props.get("Period")] + [
        query.get("Period") or query.get("MetricStat", {}).get("Period") for query in props.get("Metrics", [])
    ]
    return max(p for p in periods if p) * ((props.get("DatapointsToAlarm") or props["EvaluationPeriods"]) + 1)
