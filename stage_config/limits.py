"""CloudFormation's per-stack resource limit, checked from the config before anything is synthesized.

CloudFormation: at most 500 resources per stack ("Understand CloudFormation quotas", Resources).
A config over it synthesizes fine and fails only at deploy, half-way through a pipeline. The
counts below were measured on the synthesized stacks of config/dev.yaml (Triton-dev-Build: ~17
fixed resources, 4 per CodeBuild build environment, 3 per model artifact (the custom resource and
its wait condition and handle); each endpoint stack: 13 fixed, 6 to 9 alarms and 3 autoscaling
resources per variant) and rounded up with headroom for resources added later, so the estimate is
an upper bound; tests/contract/test_config_limits_rules.py checks it against every shipped template.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stage_config.app import AppConfig
    from stage_config.endpoint import EndpointSettings

MAX_RESOURCES_PER_STACK = 500

# Endpoint stack: model, endpoint config, endpoint, key, alarm topic + policy, dashboard, role policies,
# the instance-type guard (function, role, log group, custom resource).
ENDPOINT_FIXED = 20
ALARMS_PER_VARIANT = 10
AUTOSCALING_PER_VARIANT = 3  # scalable target and two target-tracking policies
# Build stack: notification key/topic/policy and the ensure-artifact provider (functions, roles, logs).
BUILD_FIXED = 24
PER_BUILD_ENVIRONMENT = 6  # project, log group, policy, failure rule (+2 spare)
PER_ARTIFACT = 4  # Custom::TritonModelArtifact, its WaitCondition and handle (+1 spare)
PER_EMAIL = 1  # AWS::SNS::Subscription on the stack's topic


# Inference components (mode inference_components), per model: its Model and component, 6 alarms, and copy
# scaling (scalable target, target-tracking and step policies, wake-from-zero alarm); +2 spare. Measured on
# examples/config/components.yaml: 12 fixed + 12 per component.
PER_COMPONENT = 14


def endpoint_stack_resources(config: AppConfig, endpoint: EndpointSettings) -> int:
    if endpoint.mode == "inference_components":
        return ENDPOINT_FIXED + PER_COMPONENT * len(endpoint.models) + PER_EMAIL * len(config.notifications.emails)
    variants = 1 + len(endpoint.extra_variants)
    per_variant = ALARMS_PER_VARIANT + (AUTOSCALING_PER_VARIANT if endpoint.autoscaling else 0)
    return ENDPOINT_FIXED + variants * per_variant + PER_EMAIL * len(config.notifications.emails)


def build_stack_resources(config: AppConfig) -> int:
    """Upper bound: every (endpoint, model) pair its own artifact, every instance family its own build."""
    families = {endpoint.instance_type.rsplit(".", 1)[0] for endpoint in config.endpoints}
    # An ensemble's composing models are artifacts of their own (served_models).
    artifacts = sum(len(config.served_models(endpoint.models)) for endpoint in config.endpoints)
    return (
        BUILD_FIXED
        + PER_BUILD_ENVIRONMENT * len(families)
        + PER_ARTIFACT * artifacts
        + PER_EMAIL * len(config.notifications.emails)
    )


def stack_resource_problems(config: AppConfig) -> list[tuple[str, str]]:
    """(field path, message) for each stack the config would push over 500 resources."""
    problems = []
    limit = MAX_RESOURCES_PER_STACK
    for index, endpoint in enumerate(config.endpoints):
        count = endpoint_stack_resources(config, endpoint)
        if count > limit:
            problems.append(
                (
                    f"endpoints[{index}]",
                    f"its stack would hold about {count} resources ({1 + len(endpoint.extra_variants)} variants, "
                    f"{len(config.notifications.emails)} e-mail subscriptions); CloudFormation allows {limit} per "
                    "stack: use fewer extra_variants, models (inference components) or notifications.emails",
                )
            )
    count = build_stack_resources(config)
    if count > limit:
        problems.append(
            (
                "models",
                f"the build stack would hold about {count} resources (one per endpoint model, "
                f"{len(config.notifications.emails)} e-mail subscriptions); CloudFormation allows {limit} per stack: "
                "split the endpoints over several stages or use fewer notifications.emails",
            )
        )
    return problems
