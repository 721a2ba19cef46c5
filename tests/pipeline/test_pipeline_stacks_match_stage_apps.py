"""The pipeline deploys the same stacks as `make deploy` (stack names are shared, docs/pipeline.md): the stateful
artifact stack's template must be the same in both, or deploying it one way after the other changes it — and
CloudFormation refuses to delete an export another stack imports ("Exporting stack output values": "You can't
delete a stack if another stack references one of its outputs", nor remove an output another stack imports)."""

from __future__ import annotations

from synth_helpers import deploy_path_differences, synth_pipeline, synth_stage


def _exports(template: dict) -> set[str]:
    return {
        str(output.get("Export", {}).get("Name"))
        for output in template.get("Outputs", {}).values()
        if "Export" in output
    }


def test_the_pipeline_artifact_stacks_equal_the_stage_apps():
    pipeline = synth_pipeline(checks=False)
    for stage in ("dev", "prod"):
        in_pipeline = pipeline.stage_templates(stage)[f"Triton-{stage}-Artifacts"]
        alone = synth_stage(stage, checks=False).template_of(f"Triton-{stage}-Artifacts")
        assert _exports(in_pipeline) == _exports(alone), stage
        assert in_pipeline["Resources"] == alone["Resources"], stage


def _policy_names(template: dict) -> list[str]:
    return sorted(
        r["Properties"]["PolicyName"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"
    )


def test_scaling_policies_keep_their_names_on_either_deploy_path():
    """PutScalingPolicy identifies a policy by name per scalable target and a new PolicyName replaces it: a name
    generated from the construct path would differ between the pipeline's stage and `make deploy`."""
    pipeline = synth_pipeline(checks=False)
    for stage in ("dev", "prod"):
        alone = synth_stage(stage, checks=False)
        for name, stack in alone.stacks.endpoints.items():
            names = _policy_names(alone.template_of(stack))
            assert names and all(not n.startswith("Triton") for n in names), (stage, name, names)
            assert _policy_names(pipeline.stage_templates(stage)[stack.stack_name]) == names


def test_every_stack_of_a_stage_is_the_same_on_either_deploy_path():
    """Beyond the artifact stack: switching a stage between `make deploy` and the pipeline changes nothing but
    the path-derived names synth_helpers.deploy_path_differences leaves out (review findings: the build stack's
    event-rule permission is recreated, the Provider framework's description updated and, once the stage has an
    account, its build log group's resource policy renamed, all harmless; docs/pipeline.md says so)."""
    pipeline = synth_pipeline(checks=False)
    for stage in ("dev", "prod"):
        assert deploy_path_differences(pipeline, stage, synth_stage(stage, checks=False)) == [], stage
