"""Deploy rules between a stage's stacks and across deploys (issue #22 A1, A2, A3; part E3).

Sources, per rule:
- Exports (A1): CloudFormation User Guide, "Get exported outputs from a deployed CloudFormation stack": "You
  can't modify or remove an output value that is referenced by another stack", and a stack can only import what
  another stack of the account and region exports. A deploy of the artifact stack (the first of the stage) must
  therefore keep every export that the deployed consumer stacks import, whatever the config edit.
- Component chain and update headroom (A2): SageMaker API reference, InferenceComponentRollingUpdatePolicy
  (MaximumBatchSize: "For each step, SageMaker AI provisions capacity on the new endpoint fleet, routes traffic
  to that fleet, and terminates capacity on the old endpoint fleet"); CloudFormation User Guide, "DependsOn
  attribute" (CloudFormation "creates, updates, and deletes resources in parallel to the extent possible";
  DependsOn overrides that parallelism).
- Region rule (A3): CloudFormation User Guide, "Rules" (rules validate "before creating or updating resources";
  rule functions `Fn::Contains`); AWS CodeBuild API reference, ProjectEnvironment.type and CreateFleet
  (LINUX_GPU_CONTAINER regions; triton_cdk/artifact_build/gpu_regions.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from contract_helpers import ShippedTemplate, logical_id_of, resources_of
from synth_helpers import CONFIG_DIR, EXAMPLES_CONFIG_DIR, config_folder, synth_stage

from serving_facts.catalogue import INSTANCE_TYPES
from stacks.artifact_stack import SHARED_EXPORTS
from triton_cdk.artifact_build.gpu_regions import GPU_BUILD_REGIONS, gpu_build_regions

AUTOMATIC = ":ExportsOutput"  # CDK's automatic cross-stack export names: `<stack>:ExportsOutput<Ref|FnGetAtt>...`


def _imports(value) -> list[str]:
    if isinstance(value, dict):
        if set(value) == {"Fn::ImportValue"} and isinstance(value["Fn::ImportValue"], str):
            return [value["Fn::ImportValue"]]
        return [name for item in value.values() for name in _imports(item)]
    if isinstance(value, list):
        return [name for item in value for name in _imports(item)]
    return []


def _exports(template: dict) -> set[str]:
    return {o["Export"]["Name"] for o in template.get("Outputs", {}).values() if "Export" in o}


def _assembly_templates(synth) -> dict[str, dict]:
    return {stack.stack_name: synth.template_of(stack.stack_name) for stack in synth.assembly.stacks}


# ---------------------------------------------------------------------------------------------------------
# A1: export stability between two assemblies of one stage


def _edited(stage: str, folder: Path, edit) -> Path:
    document = yaml.safe_load((folder / f"{stage}.yaml").read_text())
    edit(document)
    return config_folder(f"deploy-rules:{stage}:{edit.__name__}", {stage: document})


def _no_rollback_alarms_and_one_endpoint_less(document: dict) -> None:
    """The issue's edit (rollback_alarms []), plus an endpoint and the models only it served removed."""
    for endpoint in document["endpoints"]:
        endpoint.setdefault("deployment", {})["rollback_alarms"] = []
    removed = document["endpoints"].pop()
    kept = {m for e in document["endpoints"] for m in e["models"]}
    document["models"] = [m for m in document["models"] if m["name"] in kept or m["name"] not in removed["models"]]


def _no_rollback_alarms(document: dict) -> None:
    for endpoint in document["endpoints"]:
        endpoint["deployment"]["rollback_alarms"] = []


EDITS = [
    ("dev", CONFIG_DIR, _no_rollback_alarms_and_one_endpoint_less),
    ("components", EXAMPLES_CONFIG_DIR, _no_rollback_alarms),
]


@pytest.mark.parametrize(("stage", "folder", "edit"), EDITS, ids=[f"{s}-{e.__name__}" for s, _, e in EDITS])
def test_a_config_edit_keeps_every_export_the_deployed_stacks_import(stage, folder, edit) -> None:
    """Deploy the shipped config, then the edited one (and back): the artifact stack, deployed first, keeps
    every export, and so every import of the stacks still deployed from the other assembly resolves."""
    before = _assembly_templates(synth_stage(stage, folder))
    after = _assembly_templates(synth_stage(stage, _edited(stage, folder, edit)))
    artifacts = f"Triton-{stage}-Artifacts"
    assert set(before) != set(after) or before != after, "the edit changed nothing: the rule would pass vacuously"
    for first, second in ((before, after), (after, before)):
        exported = _exports(second[artifacts])
        assert _exports(first[artifacts]) <= exported
        imported = {name for template in first.values() for name in _imports(template)}
        assert imported, "no import in the first assembly: the rule would pass vacuously"
        assert imported <= exported, f"imports the next artifact stack drops: {sorted(imported - exported)}"


def test_the_artifact_stack_exports_every_shared_value_under_its_fixed_name(shipped_templates) -> None:
    """Always present, whatever the config: each SHARED_EXPORTS name, as `<artifact stack>-<value>`."""
    checked = 0
    for shipped in shipped_templates:
        name = shipped.stack.rpartition("/")[2]  # a pipeline stage's stacks are shown by construct path
        if not name.endswith("-Artifacts"):
            continue
        checked += 1
        expected = {f"{name}-{suffix}" for suffix in SHARED_EXPORTS.values()}
        assert expected <= _exports(shipped.template), shipped.label
    assert checked


def test_no_stage_stack_imports_an_automatic_export(shipped_templates) -> None:
    """CDK's automatic exports follow what the consumers reference: a config edit removes one while deployed
    stacks import it (issue #22 A1). Every import names one of the artifact stack's fixed exports."""
    imports = 0
    for shipped in shipped_templates:
        for name in _imports(shipped.template):
            imports += 1
            assert AUTOMATIC not in name, f"{shipped.label} imports the automatic export {name}"
            stack, _, suffix = name.rpartition("-")
            assert stack.endswith("-Artifacts") and suffix in SHARED_EXPORTS.values(), (shipped.label, name)
    assert imports


# ---------------------------------------------------------------------------------------------------------
# A2: inference components update one at a time, with room for one batch


def _component_endpoints(templates: list[ShippedTemplate]):
    for shipped in templates:
        components = resources_of(shipped.template, "AWS::SageMaker::InferenceComponent")
        by_endpoint: dict[str, dict[str, dict]] = defaultdict(dict)
        for logical_id, component in components.items():
            by_endpoint[logical_id_of(component["Properties"]["EndpointName"])][logical_id] = component
        for endpoint_id, mine in by_endpoint.items():
            yield shipped, endpoint_id, mine


def test_the_components_of_an_endpoint_form_one_dependency_chain(shipped_templates) -> None:
    """Each component but the first DependsOn exactly one other component, and no two on the same one: a single
    chain, so CloudFormation never runs two of their rolling updates at once."""
    chained = 0
    for shipped, _, mine in _component_endpoints(shipped_templates):
        after = {i: [d for d in c.get("DependsOn", []) if d in mine] for i, c in mine.items()}
        heads = [i for i, deps in after.items() if not deps]
        assert len(heads) == 1, f"{shipped.label}: components without a predecessor {heads}"
        assert all(len(deps) <= 1 for deps in after.values()), shipped.label
        followed = [d for deps in after.values() for d in deps]
        assert len(followed) == len(set(followed)) == len(mine) - 1, f"{shipped.label}: not one chain"
        chained += len(mine) > 1
    assert chained, "no endpoint with two components among the shipped templates: the rule would pass vacuously"


def _capacity(shipped: ShippedTemplate, component: dict) -> tuple[int, dict, dict, int]:
    """(most copies, requirements, variant, batch copies) of a component, from its template."""
    template = shipped.template
    props = component["Properties"]
    endpoint = template["Resources"][logical_id_of(props["EndpointName"])]
    config = template["Resources"][logical_id_of(endpoint["Properties"]["EndpointConfigName"])]
    (variant,) = [v for v in config["Properties"]["ProductionVariants"] if v["VariantName"] == props["VariantName"]]
    name = props["InferenceComponentName"]
    targets = [
        t["Properties"]["MaxCapacity"]
        for t in resources_of(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
        if t["Properties"]["ResourceId"] == f"inference-component/{name}"
    ]
    most = max([props["RuntimeConfig"]["CopyCount"], *targets])
    size = props["DeploymentConfig"]["RollingUpdatePolicy"]["MaximumBatchSize"]
    batch = size["Value"] if size["Type"] == "COPY_COUNT" else math.ceil(most * size["Value"] / 100)
    return most, props["Specification"]["ComputeResourceRequirements"], variant, batch


def test_every_component_at_its_most_copies_leaves_room_for_one_rolling_batch(shipped_templates) -> None:
    """Per resource: the sum of every component's most copies plus the largest single batch (the one component
    updating) fits MaxInstanceCount instances. The components example needed 5 GPUs of 4 while they updated in
    parallel (issue #22 A2); chained it needs 3 + 1."""
    checked = 0
    for shipped, _, mine in _component_endpoints(shipped_templates):
        parts = [_capacity(shipped, c) for c in mine.values()]
        variant = parts[0][2]
        instance = INSTANCE_TYPES[variant["InstanceType"]]
        instances = variant["ManagedInstanceScaling"]["MaxInstanceCount"]
        for field, per_instance in (
            ("NumberOfAcceleratorDevicesRequired", instance.gpu_count),
            ("NumberOfCpuCoresRequired", instance.vcpus),
            ("MinMemoryRequiredInMb", instance.memory_gib * 1024),
        ):
            steady = sum(most * r.get(field, 0) for most, r, _, _ in parts)
            batch = max(b * r.get(field, 0) for _, r, _, b in parts)
            assert steady + batch <= per_instance * instances, (shipped.label, field, steady, batch)
        checked += 1
    assert checked


def test_the_components_example_fits_only_because_the_updates_are_chained() -> None:
    """The example's own figures (examples/config/components.yaml comment): 3 copies at most + 1 new = 4 GPUs of
    a ml.g5.12xlarge; in parallel each component would add its own new copy, 5 GPUs."""
    from triton_cdk.serving.component_sizing import ComputeRequirements, update_headroom_problem

    instance = INSTANCE_TYPES["ml.g5.12xlarge"]
    one_gpu = ComputeRequirements(accelerators=1, cpu_cores=8, min_memory_mb=4096)
    copies = {"resnet50": (2, one_gpu), "yolov5s": (1, one_gpu)}
    assert update_headroom_problem(instance, 1, copies) is None
    parallel = sum(n for n, _ in copies.values()) + len(copies)
    assert parallel == 5 > instance.gpu_count
    problem = update_headroom_problem(instance, 1, {**copies, "yolov5s": (2, one_gpu)})
    assert problem and "4 needed" not in problem and "5 needed, 1 x ml.g5.12xlarge offer 4" in problem


def test_the_endpoint_construct_refuses_a_layout_without_room_for_one_batch() -> None:
    """The library check at synth (node validation of TritonComponentEndpoint), for users of the construct
    without the app's config checks."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3
    from synth_helpers import new_app

    from triton_cdk.serving import TritonModel, TritonModelData
    from triton_cdk.serving.component_sizing import ComputeRequirements
    from triton_cdk.serving.inference_components import (
        ComponentVariant,
        TritonComponentEndpoint,
        TritonInferenceComponent,
    )

    app = new_app()
    stack = cdk.Stack(app, "Headroom")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    bucket = s3.Bucket(stack, "Bucket")
    endpoint = TritonComponentEndpoint(
        stack, "Endpoint", endpoint_name="ep", execution_role=role,
        variant=ComponentVariant(instance_type="ml.g5.12xlarge", max_instances=1),
    )  # fmt: skip
    components = []
    for name, copies in (("a", 2), ("b", 2)):
        model = TritonModel(
            stack, f"Model{name}", image_uri="image", execution_role=role, default_model_name=name,
            model_data=TritonModelData.from_archive(bucket, f"{name}.tar.gz"),
        )  # fmt: skip
        component = TritonInferenceComponent(
            stack, f"Component{name}", endpoint=endpoint, component_name=f"ep-{name}", model=model,
            requirements=ComputeRequirements(1, 2, 1024), copy_count=copies,
        )  # fmt: skip
        components.append(component)
    assert components[1].resource.obtain_dependencies() == [components[0].resource]
    with pytest.raises(Exception, match=r"rolling update of ep-a starts 1 new copy .* 5 needed, 1 x ml.g5.12xlarge"):
        app.synth()


# ---------------------------------------------------------------------------------------------------------
# A3: a stage with a GPU build refuses, before any resource, a region without LINUX_GPU_CONTAINER


def _gpu_computes(template: dict) -> set[str]:
    found = set()
    for project in resources_of(template, "AWS::CodeBuild::Project").values():
        environment = project["Properties"]["Environment"]
        if environment["Type"] == "LINUX_GPU_CONTAINER":
            found.add("fleet" if "Fleet" in environment else environment["ComputeType"])
    return found


def _region_rule(template: dict) -> list[str] | None:
    rule = template.get("Rules", {}).get("GpuBuildRegion")
    if rule is None:
        return None
    (assertion,) = rule["Assertions"]
    regions, region = assertion["Assert"]["Fn::Contains"]
    assert region == {"Ref": "AWS::Region"}
    assert assertion["AssertDescription"]
    return regions


def test_every_stage_with_a_gpu_build_asserts_its_region_in_its_first_stack(shipped_templates) -> None:
    by_assembly: dict[str, dict[str, dict]] = defaultdict(dict)
    for shipped in shipped_templates:
        by_assembly[shipped.config][shipped.stack] = shipped.template
    checked = 0
    for label, templates in by_assembly.items():
        for name, build in templates.items():
            if not name.endswith("-Build"):
                continue
            computes = _gpu_computes(build)
            artifacts = templates[name.removesuffix("-Build") + "-Artifacts"]
            if not computes:
                assert _region_rule(artifacts) is None and _region_rule(build) is None, label
                continue
            checked += 1
            fleets = [
                p["Properties"]["Environment"]["Fleet"]
                for p in resources_of(build, "AWS::CodeBuild::Project").values()
                if "Fleet" in p["Properties"]["Environment"]
            ]
            fleet_region = fleets[0]["FleetArn"].split(":")[3] if fleets else None
            expected = list(gpu_build_regions(computes, fleet_region))
            assert _region_rule(artifacts) == expected, f"{label}: {name} artifact stack"
            assert _region_rule(build) == expected, f"{label}: {name}"
            assert all(r in GPU_BUILD_REGIONS[c] for c in computes for r in expected)
    assert checked, "no shipped stage with a GPU build: the rule would pass vacuously"


@pytest.mark.parametrize(("region", "passes"), [("us-east-1", True), ("eu-west-2", True), ("af-south-1", False)])
def test_the_region_rule_refuses_a_region_without_gpu_builds(dev_app, region, passes) -> None:
    """The rule as CloudFormation evaluates it: Fn::Contains of the list and the region the stack deploys to."""
    regions = _region_rule(dev_app.template_of("Triton-dev-Artifacts"))
    assert (region in regions) is passes


def test_synthesized_templates_with_the_rule_pass_cfn_lint(dev_app, tmp_path) -> None:
    """cfn-lint (the venv's) validates the Rules section's syntax and functions."""
    import subprocess
    import sys

    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    if not cfn_lint.exists():
        pytest.skip("cfn-lint is not installed in the venv")
    files = [str(dev_app.template_file(name)) for name in ("Triton-dev-Artifacts", "Triton-dev-Build")]
    result = subprocess.run([str(cfn_lint), *files], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rule_lists_the_regions_that_have_every_gpu_compute_of_the_stage() -> None:
    """All of a stage's builds run in its one region: the intersection of the computes' lists, and a fleet's own
    region (a CodeBuild project uses a fleet of its region)."""
    from triton_cdk.artifact_build.gpu_regions import FLEET_GPU_REGIONS, ON_DEMAND_GPU_REGIONS

    assert gpu_build_regions(["BUILD_GENERAL1_SMALL"]) == ON_DEMAND_GPU_REGIONS
    assert gpu_build_regions(["BUILD_GENERAL1_SMALL", "fleet"]) == FLEET_GPU_REGIONS
    assert gpu_build_regions(["fleet", "BUILD_GENERAL1_LARGE"], "eu-west-1") == ("eu-west-1",)
    assert gpu_build_regions(["fleet"], "eu-west-2") == ()  # no GPU fleets there: the stack refuses to synth
    with pytest.raises(ValueError, match="no GPU build compute"):
        gpu_build_regions([])


def test_copy_scalings_maximum_counts_where_max_copies_is_left_out(tmp_path) -> None:
    """Without `max_copies`, copy scaling may reach `copy_count` x `max_instances` (stacks/endpoint_stack.py):
    3 x 2 + 1 x 2 copies of one GPU each, plus 1 new, is 9 GPUs of 2 x 4. The config loader counts what the stack
    counts (the same `component_sizing.update_headroom_problem`), so the refusal names the config's field and line
    before anything is synthesized."""
    from stage_config import ConfigError, load_config

    document = yaml.safe_load((EXAMPLES_CONFIG_DIR / "components.yaml").read_text())
    endpoint = document["endpoints"][0]
    endpoint["inference_components"]["max_instances"] = 2
    for name, copies in (("resnet50", 3), ("yolov5s", 1)):
        component = endpoint["inference_components"]["components"][name]
        component.pop("max_copies")
        component["copy_count"] = copies
    (tmp_path / "components.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(
        ConfigError,
        match=r"endpoints\[0\]: inference_components.max_instances: at their most copies "
        r"\(resnet50 x 6, yolov5s x 2\).*9 needed, 2 x ml.g5.12xlarge offer 8; raise max_instances",
    ):
        load_config(tmp_path / "components.yaml")
