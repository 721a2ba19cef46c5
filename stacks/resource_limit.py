"""CloudFormation's 500 resources per stack: aws-cdk-lib refuses a stack over it at synth; this names the stage and
endpoint of the stack it refused, for app.py's one-line error.

Source: CloudFormation User Guide, "Understand CloudFormation quotas" (Resources: 500 per stack). aws-cdk-lib
(2.275.0, core/lib/stack.js `_synthesizeTemplate`) counts each template's resources when it writes it and throws
`TooManyResourcesInStack: Number of resources in stack '<path>': <n> is greater than allowed maximum of 500: <type
(count), ...>`; the maximum is `MAX_RESOURCES = 500` unless the context key `@aws-cdk/core:stackResourceLimit` sets
another (0 turns the check off). cdk.json does not set it (tests/foundation/test_stack_resource_limit.py), so the
app needs no estimate of its own: the stage config's former estimate (stage_config/limits.py) is gone.
"""

from __future__ import annotations

import re

ERROR_CODE = "TooManyResourcesInStack"
CONTEXT_KEY = "@aws-cdk/core:stackResourceLimit"
_REFUSAL = re.compile(
    rf"^{ERROR_CODE}: Number of resources in stack '(?P<path>[^']+)': (?P<count>\d+) is greater than allowed "
    r"maximum of (?P<limit>\d+): (?P<types>.*)$"
)
# The stack ids of stacks/stage.py: Triton-<stage>-Artifacts, -Build, -Endpoint-<endpoint name>.
_STACK_ID = re.compile(r"^Triton-(?P<stage>[a-z][a-z0-9]*)-(?:Endpoint-(?P<endpoint>.+)|(?P<kind>Build|Artifacts))$")
_ADVICE = {
    "endpoint": "use fewer extra_variants, models (inference components) or notifications.emails",
    "Build": "split the endpoints over several stages, or use fewer models or notifications.emails",
    "Artifacts": "use fewer artifacts.reader_accounts or notifications.emails",
}


def too_many_resources_message(error: Exception) -> str | None:
    """A one-line message (no jsii traceback) for aws-cdk-lib's TooManyResourcesInStack refusal; None for any other
    error."""
    match = _REFUSAL.match(str(error).splitlines()[0] if str(error) else "")
    if match is None:
        return None
    stack_id = match["path"].rsplit("/", 1)[-1]
    named = _STACK_ID.match(stack_id)
    if named is None:
        where, advice = f"stack {stack_id}", "split its resources over several stacks"
    elif named["endpoint"]:
        where = f"stage {named['stage']}, endpoint {named['endpoint']!r} (stack {stack_id})"
        advice = _ADVICE["endpoint"]
    else:
        where, advice = f"stage {named['stage']}, the {named['kind'].lower()} stack {stack_id}", _ADVICE[named["kind"]]
    return (
        f"{where}: {match['count']} resources, over CloudFormation's {match['limit']} per stack (aws-cdk-lib refused "
        f"it at synth: {ERROR_CODE}); {advice}. Its resources: {match['types']}"
    )
