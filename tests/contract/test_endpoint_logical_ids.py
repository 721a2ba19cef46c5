"""Every endpoint stack of every shipped stage keeps its resources' logical ids and types (issue #23 item 7).

CloudFormation replaces a resource whose logical id changes; an endpoint with a fixed EndpointName then fails the
deploy (the new endpoint's name is taken by the old one). The endpoint stacks build their resources through the
pattern constructs (TritonServingEndpoint, TritonServingComponents) created under the construct id "Default", which
aws-cdk-lib leaves out of logical ids (core/lib/private/uniqueid.ts, in the venv's jsii bundle:
`HIDDEN_ID="Default"`, `makeUniqueId` filters it from the path before hashing and naming).

endpoint_logical_ids.json holds {"<config>:<stack>": {logical id: type}} as the stacks were synthesized before the
pattern constructs existed (commit abcad3f's endpoint stack; every stage of config/, examples/config/,
tests/configs/, the serving tests' custom config and the pipeline tests' cross-account config), and the endpoint
stacks of the pipelines' nested stage assemblies (recorded later from the then current templates, after
`test_a_pipeline_stage_s_endpoint_stacks_have_its_stage_app_s_ids` showed they equal the stage apps'). An intended
change of an endpoint stack's resources (a new feature adds one) is recorded by editing that file in the same
commit; the failure message prints the entry.
"""

from __future__ import annotations

import json
from pathlib import Path

from contract_helpers import ShippedTemplate, read_assembly_templates
from synth_helpers import SHIPPED_CONFIG_DIR, config_is_as_shipped, synth_pipeline, synth_stage

RECORDED = json.loads((Path(__file__).parent / "endpoint_logical_ids.json").read_text())


def _endpoint_stacks(shipped_templates: list[ShippedTemplate]) -> dict[str, dict[str, str]]:
    """{label: {logical id: type}} of the endpoint stacks of the stage apps and of the pipelines' stages (the
    pipeline deploys its own copy of each: a changed logical id there replaces a deployed endpoint too)."""
    return {
        t.label: {logical_id: r["Type"] for logical_id, r in t.template.get("Resources", {}).items()}
        for t in shipped_templates
        if "-Endpoint-" in t.stack
    }


def stage_app_label(t: ShippedTemplate) -> str | None:
    """The stage app's label of a pipeline stage's stack ("config/pipeline:assembly-Triton-Pipeline-dev",
    "Triton-Pipeline/dev/Triton-dev-Endpoint-x" -> "config/dev:Triton-dev-Endpoint-x"); None for a stage app's own."""
    if ":assembly-" not in t.config:
        return None
    folder = t.config.split(":assembly-")[0].rsplit("/", 1)[0]
    name = t.stack.rsplit("/", 1)[-1]
    return f"{folder}/{name.split('-')[1]}:{name}"


def _as_recorded(shipped_templates: list[ShippedTemplate]) -> list[ShippedTemplate]:
    """The templates the record describes: config/'s as synthesized, or, once a user has filled in config/ (README
    "Before the first deploy": e.g. `notifications.emails` adds a subscription to each alarm topic), the shipped
    copy's (tests/shipped_config/) under the same labels; the user's own stacks are checked by the other tests."""
    if config_is_as_shipped():
        return shipped_templates
    stages = sorted(p.stem for p in SHIPPED_CONFIG_DIR.glob("*.yaml") if p.stem != "pipeline")
    copies = [
        t for s in stages for t in read_assembly_templates(f"config/{s}", synth_stage(s, SHIPPED_CONFIG_DIR).outdir)
    ]
    copies += read_assembly_templates("config/pipeline", synth_pipeline(SHIPPED_CONFIG_DIR).outdir)
    return [t for t in shipped_templates if not t.config.startswith("config/")] + copies


def test_every_endpoint_stack_keeps_its_logical_ids_and_types(shipped_templates: list[ShippedTemplate]) -> None:
    found = _endpoint_stacks(_as_recorded(shipped_templates))
    assert found, "no endpoint stack synthesized"
    problems = []
    for label, resources in sorted(found.items()):
        recorded = RECORDED.get(label)
        if recorded is None:
            problems.append(f"{label}: not recorded; add it: {json.dumps({label: resources}, sort_keys=True)}")
            continue
        removed = sorted(set(recorded.items()) - set(resources.items()))
        added = sorted(set(resources.items()) - set(recorded.items()))
        if removed or added:
            problems.append(f"{label}: removed {removed}, added {added}")
    assert not problems, "\n".join(problems)


def test_every_recorded_endpoint_stack_is_still_shipped(shipped_templates: list[ShippedTemplate]) -> None:
    """A recorded stack no configuration synthesizes any more is stale: remove its entry. Judged on the templates
    the record describes (`_as_recorded`): a user who replaces the example endpoints in config/ removes stacks the
    record names, which is theirs to do."""
    assert sorted(set(RECORDED) - set(_endpoint_stacks(_as_recorded(shipped_templates)))) == []


def test_a_pipeline_stage_s_endpoint_stacks_have_its_stage_app_s_ids(shipped_templates: list[ShippedTemplate]) -> None:
    """A stage's stacks are identical on both deploy paths (make deploy and the pipeline): the same logical ids and
    types in every pipeline stage (each region of a multi-region stage included) as in the stage's own app."""
    found = _endpoint_stacks(shipped_templates)
    nested = {t.label: stage_app_label(t) for t in shipped_templates if "-Endpoint-" in t.stack and stage_app_label(t)}
    assert nested, "no pipeline stage's endpoint stack synthesized"
    problems = [
        f"{label}: differs from {own}" if own in found else f"{label}: no stage app {own}"
        for label, own in sorted(nested.items())
        if found.get(own) != found[label]
    ]
    assert not problems, "\n".join(problems)
