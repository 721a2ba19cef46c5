"""Refuses an endpoint update that changes the instance type of an autoscaled variant, before SageMaker does.

SageMaker "Update endpoints that use auto scaling": "If the update would change the instance type for any
model that is a target for auto scaling, the update fails"; the variant must be deregistered first (and
the same for removing an autoscaled variant). CloudFormation cannot order that inside one update, so the
endpoint depends on this resource, which fails the update with the procedure instead.
Properties: EndpointName, Variants {name: instance type}, Autoscaled [names]. Standard library only.

Rollback: after a FAILED update CloudFormation rolls back with another Update whose old and new properties
are swapped (aws/aws-cdk#17040), which would be refused again (UPDATE_ROLLBACK_FAILED). The physical id
carries a digest of the variants this guard last accepted; an update back to them is always allowed.
"""

import hashlib
import json
import urllib.request

PROCEDURE = (
    "deploy once without `autoscaling:` (this deregisters the variants; set initial_instance_count to the "
    "fleet you need meanwhile), then with the new instance_type, then with `autoscaling:` again"
)


def refusal(old: dict, new: dict) -> str | None:
    """The reason to refuse this update, or None."""
    old_types, new_types = old.get("Variants", {}), new.get("Variants", {})
    changed = [
        f"{name} ({old_types[name]} -> {new_types.get(name, 'removed')})"
        for name in old.get("Autoscaled", [])
        if name in old_types and new_types.get(name) != old_types[name]
    ]
    if not changed:
        return None
    return (
        f"endpoint {new.get('EndpointName')}: SageMaker refuses to change or remove an autoscaled variant "
        f"({', '.join(changed)}) while it is registered with Application Auto Scaling; {PROCEDURE}"
    )


def digest(props: dict) -> str:
    accepted = {"Variants": props.get("Variants", {}), "Autoscaled": sorted(props.get("Autoscaled", []))}
    return hashlib.sha256(json.dumps(accepted, sort_keys=True).encode()).hexdigest()[:16]


def handler(event, context):
    reason, new = None, event["ResourceProperties"]
    physical = event.get("PhysicalResourceId") or event["LogicalResourceId"]
    if event["RequestType"] == "Update" and not physical.endswith(digest(new)):
        reason = refusal(event.get("OldResourceProperties", {}), new)
    if event["RequestType"] != "Delete" and not reason:
        physical = f"{event['LogicalResourceId']}-{digest(new)}"
    body = {
        "Status": "FAILED" if reason else "SUCCESS",
        "Reason": reason or "ok",
        "PhysicalResourceId": physical,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
    }
    data = json.dumps(body).encode()
    request = urllib.request.Request(event["ResponseURL"], data=data, method="PUT", headers={"Content-Type": ""})
    with urllib.request.urlopen(request, timeout=30):  # the pre-signed S3 URL CloudFormation waits on
        pass
    return body
