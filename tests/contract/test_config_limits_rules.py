"""CloudFormation's per-stack resource limit, over every template of every shipped configuration.

Source: CloudFormation User Guide, "Understand CloudFormation quotas": 500 resources per stack. The
loader refuses a config whose estimated stacks exceed it (stage_config/limits.py); these tests
hold the estimate to what synthesis really produces, so it stays an upper bound as stacks grow.
"""

from __future__ import annotations

import pytest
from contract_helpers import ShippedTemplate
from synth_helpers import PROJECT_ROOT

from stage_config.limits import MAX_RESOURCES_PER_STACK, build_stack_resources, endpoint_stack_resources


def _config_of(template: ShippedTemplate):
    """The AppConfig behind a template whose config lives in the project ("config/dev", "tests/configs/x")."""
    from stage_config import load_config

    label = template.config.split(":")[0]
    path = PROJECT_ROOT / f"{label}.yaml"
    return load_config(path) if path.is_file() else None


def test_every_template_is_within_500_resources(shipped_templates: list[ShippedTemplate]) -> None:
    over = {
        t.label: len(t.template.get("Resources", {}))
        for t in shipped_templates
        if len(t.template.get("Resources", {})) > MAX_RESOURCES_PER_STACK
    }
    assert not over


def test_the_estimate_bounds_every_endpoint_and_build_stack(shipped_templates: list[ShippedTemplate]) -> None:
    checked = 0
    for template in shipped_templates:
        if ":assembly-" in template.config or template.config.endswith("/pipeline"):
            continue  # the pipeline app's stages repeat the stages checked on their own
        config = _config_of(template)
        if config is None:
            continue
        actual = len(template.template.get("Resources", {}))
        if template.stack.endswith("-Build"):
            estimate = build_stack_resources(config)
        elif "-Endpoint-" in template.stack:
            name = template.stack.split("-Endpoint-", 1)[1]
            endpoint = next((e for e in config.endpoints if e.name == name), None)
            if endpoint is None:
                continue
            estimate = endpoint_stack_resources(config, endpoint)
        else:
            continue
        assert actual <= estimate, f"{template.label}: {actual} resources, estimated at most {estimate}"
        checked += 1
    if not checked:
        pytest.skip("no endpoint or build stack of a config inside the project")
