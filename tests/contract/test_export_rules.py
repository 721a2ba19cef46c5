"""No two stacks of one synthesized app export the same name; every import names an export of the app.

Source: AWS CloudFormation User Guide, "Outputs" (export names): "For each AWS account, Export names
must be unique within a region", and "Get exported outputs from a deployed CloudFormation stack"
(Fn::ImportValue): "You can't create cross-stack references across Regions" and a stack can import
only values another stack has exported. A second export of a name fails that stack's deploy
("Export with name ... is already exported by stack ..."). The stacks of one app (and of one pipeline
stage's nested assembly) deploy to one account and region unless their environments differ.
"""

from __future__ import annotations

from collections import defaultdict

from contract_helpers import ShippedTemplate


def test_export_names_are_unique_within_each_app(shipped_templates) -> None:
    # Stricter than CloudFormation where an app's stacks deploy to several environments: simpler, and safe.
    exporters: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for shipped in shipped_templates:
        for output_id, output in shipped.template.get("Outputs", {}).items():
            if "Export" in output:
                name = output["Export"]["Name"]
                assert isinstance(name, str), f"{shipped.label}: output {output_id} exports a computed name"
                exporters[shipped.config][name].append(f"{shipped.stack}.{output_id}")
    duplicates = [
        f"{app}: {name} exported by {', '.join(owners)}"
        for app, names in exporters.items()
        for name, owners in names.items()
        if len(owners) > 1
    ]
    assert exporters, "no export found: the rule would pass vacuously"
    assert not duplicates, "duplicate export names:\n" + "\n".join(duplicates)


def test_every_import_names_an_export_of_the_same_app(shipped_templates) -> None:
    exported: dict[str, set[str]] = defaultdict(set)
    imports: list[tuple[str, str, str]] = []
    for shipped in shipped_templates:
        for output in shipped.template.get("Outputs", {}).values():
            if "Export" in output and isinstance(output["Export"]["Name"], str):
                exported[shipped.config].add(output["Export"]["Name"])
        for name in _imports(shipped.template.get("Resources", {})):
            imports.append((shipped.config, shipped.label, name))
    missing = [f"{label} imports {name!r}" for app, label, name in imports if name not in exported[app]]
    assert imports, "no import found: the rule would pass vacuously"
    assert not missing, "imports of names no stack of the app exports:\n" + "\n".join(missing)


def test_data_capture_app_exports_the_bucket_arn_once(shipped_templates) -> None:
    """Issue #10.7: with data capture on, the build and endpoint stacks both import the bucket ARN."""
    by_app: dict[str, list[ShippedTemplate]] = defaultdict(list)
    for shipped in shipped_templates:
        by_app[shipped.config].append(shipped)
    checked = 0
    for label, shipped in by_app.items():
        importers = {s.stack for s in shipped if any(n.endswith("-ArtifactBucketArn") for n in _imports(s.template))}
        if len(importers) < 2:
            continue
        checked += 1
        owners = [
            s.stack
            for s in shipped
            for output in s.template.get("Outputs", {}).values()
            if str(output.get("Export", {}).get("Name", "")).endswith("-ArtifactBucketArn")
        ]
        assert len(owners) == 1 and owners[0].endswith("-Artifacts"), f"{label}: {owners}"
    assert checked, "no shipped app imports the bucket ARN from two stacks (data capture on): add one"


def _imports(value) -> list[str]:
    if isinstance(value, dict):
        if set(value) == {"Fn::ImportValue"} and isinstance(value["Fn::ImportValue"], str):
            return [value["Fn::ImportValue"]]
        return [name for item in value.values() for name in _imports(item)]
    if isinstance(value, list):
        return [name for item in value for name in _imports(item)]
    return []


def test_a_stack_of_one_deploy_path_imports_only_named_exports(shipped_templates) -> None:
    """The pipeline's SmokeAccess stack exists only on the pipeline's path. An automatic export (CDK's
    `<stack>:ExportsOutput...`, made because a consumer references a resource) would exist in the pipeline's
    artifact stack only, so `make deploy` of that same-named stack would try to delete an export another stack
    imports, which CloudFormation refuses ("Outputs": an export cannot be removed while it is imported). Review
    finding: the smoke role's kms:Decrypt came through such an export."""
    checked = 0
    for shipped in shipped_templates:
        if not shipped.stack.endswith("-SmokeAccess"):
            continue
        checked += 1
        automatic = [n for n in _imports(shipped.template.get("Resources", {})) if ":ExportsOutput" in n]
        assert not automatic, f"{shipped.label} imports automatic exports {automatic}"
    assert checked, "no SmokeAccess stack among the shipped templates: the rule would pass vacuously"
