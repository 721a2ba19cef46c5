"""IAM's policy-size quotas of a role, measured on the synthesized templates of one stage (all its stacks together):
each endpoint stack of a stage adds inline policies to the stage's ONE execution role (created in the artifact stack),
so a stage with many endpoints passes every per-stack check and fails at deploy (PutRolePolicy: LimitExceeded).

Source: IAM User Guide, "IAM and AWS STS quotas" (reference_iam-quotas.html): "Role policy size cannot exceed 10,240
characters" (the aggregate of all inline policies embedded in a role; IAM does not count white space), "Managed policy
size cannot exceed 6,144 characters", managed policies attached to a role: 10 by default, adjustable up to 20
(GetAccountSummary's `RolePolicySizeQuota`, `PolicySizeQuota`, `AttachedPoliciesPerRoleQuota`). The synth can not know
an account's raised managed-policy quota, so it holds a stage to the default.

Sizes are worst cases: every CloudFormation reference is resolved to the longest value it can take (account: 12
digits, region: the longest region name of the `aws` partition in botocore's endpoints.json, partition `aws`, a
bucket: its configured name or S3's 63 characters, a KMS key ARN with its 36-character id, `Fn::ImportValue`: the
export's value in the exporting template, resolved the same way), then white space is removed, as IAM counts.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLE_POLICY_SIZE_QUOTA = 10_240  # aggregate of a role's inline policies, non-white-space characters
MANAGED_POLICY_SIZE_QUOTA = 6_144
ATTACHED_POLICIES_PER_ROLE_QUOTA = 10  # default; adjustable to 20 by a quota increase the synth cannot see
QUOTA_SOURCE = 'IAM User Guide, "IAM and AWS STS quotas"'

ACCOUNT = "0" * 12
PARTITION = "aws"
URL_SUFFIX = "amazonaws.com"
KEY_ID = "0" * 8 + "-0000-0000-0000-" + "0" * 12  # a KMS key id: a UUID, 36 characters
BUCKET_NAME = "b" * 63  # S3 bucket names: 3 to 63 characters
NAME = "n" * 64  # IAM role/policy names: up to 64 (roles) / 128 (policies) characters; names the app does not set
UNKNOWN = "u" * 256  # a value of unknown length (a resource's Ref or attribute this module does not model)
# Resource types whose Ref is their name: (name property, the longest name the type allows).
_NAME_PROPERTIES = {
    "AWS::CloudWatch::Alarm": ("AlarmName", 255),
    "AWS::Logs::LogGroup": ("LogGroupName", 512),
    "AWS::Lambda::Function": ("FunctionName", 64),
    "AWS::CodeBuild::Project": ("Name", 255),
    "AWS::SageMaker::Endpoint": ("EndpointName", 63),
    "AWS::SageMaker::Model": ("ModelName", 63),
    "AWS::SageMaker::EndpointConfig": ("EndpointConfigName", 63),
    "AWS::SageMaker::InferenceComponent": ("InferenceComponentName", 63),
    "AWS::StepFunctions::StateMachine": ("StateMachineName", 80),
}
# Resource types whose `Arn` attribute is regional: (service, resource part with the name).
_ARN_FORMATS = {
    "AWS::CloudWatch::Alarm": ("cloudwatch", "alarm:{}"),
    "AWS::Logs::LogGroup": ("logs", "log-group:{}:*"),
    "AWS::Lambda::Function": ("lambda", "function:{}"),
    "AWS::CodeBuild::Project": ("codebuild", "project/{}"),
    "AWS::SQS::Queue": ("sqs", "{}"),
    "AWS::StepFunctions::StateMachine": ("states", "stateMachine:{}"),
}
_STACK_ID = re.compile(r"^Triton-(?P<stage>[a-z][a-z0-9]*)-(?:Endpoint-(?P<endpoint>.+)|(?P<kind>Build|Artifacts))$")


@functools.cache
def longest_region() -> str:
    """The longest region name of the commercial (`aws`) partition, from botocore's endpoints.json."""
    import botocore

    data = json.loads((Path(os.path.dirname(botocore.__file__)) / "data" / "endpoints.json").read_text())
    (aws,) = (p for p in data["partitions"] if p["partition"] == PARTITION)
    return max(sorted(aws["regions"]), key=len)


@dataclass
class PolicySize:
    stack: str
    logical_id: str
    size: int

    @property
    def owner(self) -> str:
        """The endpoint (or stack) the policy belongs to, for messages."""
        named = _STACK_ID.match(self.stack)
        if named and named["endpoint"]:
            return f"endpoint {named['endpoint']!r}"
        return f"stack {self.stack}"


@dataclass
class RolePolicies:
    """One role's policies across the stage's templates: its inline policies and its attached managed ones."""

    stack: str
    logical_id: str
    inline: list[PolicySize] = field(default_factory=list)
    managed: list[PolicySize] = field(default_factory=list)
    managed_arns: int = 0  # ManagedPolicyArns on the role itself (AWS-managed or imported)

    @property
    def inline_size(self) -> int:
        return sum(p.size for p in self.inline)

    @property
    def attached_count(self) -> int:
        return self.managed_arns + len(self.managed)

    @property
    def name(self) -> str:
        return f"role {self.logical_id} (stack {self.stack})"

    def contributors(self) -> list[tuple[str, int]]:
        """(owner, characters) of its inline policies by owner, largest first."""
        by_owner: dict[str, int] = {}
        for policy in self.inline:
            by_owner[policy.owner] = by_owner.get(policy.owner, 0) + policy.size
        return sorted(by_owner.items(), key=lambda item: (-item[1], item[0]))


class _Resolver:
    """Worst-case values of CloudFormation expressions over one stage's templates (by stack name)."""

    def __init__(self, templates: Mapping[str, dict]) -> None:
        self.templates = templates
        self.exports: dict[str, tuple[str, Any]] = {}
        for stack, template in templates.items():
            for output in template.get("Outputs", {}).values():
                name = output.get("Export", {}).get("Name")
                if isinstance(name, str):
                    self.exports[name] = (stack, output["Value"])

    def pseudo(self, stack: str, name: str) -> str | None:
        return {
            "AWS::AccountId": ACCOUNT,
            "AWS::Region": longest_region(),
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": URL_SUFFIX,
            "AWS::StackName": stack,
            "AWS::StackId": f"arn:{PARTITION}:cloudformation:{longest_region()}:{ACCOUNT}:stack/{stack}/{KEY_ID}",
            "AWS::NoValue": "",
        }.get(name)

    def resource_ref(self, stack: str, logical_id: str) -> str:
        template = self.templates[stack]
        pseudo = self.pseudo(stack, logical_id)
        if pseudo is not None:
            return pseudo
        if logical_id in template.get("Parameters", {}):
            default = template["Parameters"][logical_id].get("Default")
            return str(default) if default is not None else UNKNOWN
        resource = template.get("Resources", {}).get(logical_id)
        if resource is None:
            return UNKNOWN
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::S3::Bucket":
            return self.value(stack, props["BucketName"]) if "BucketName" in props else BUCKET_NAME
        if kind == "AWS::KMS::Key":
            return KEY_ID
        if kind in ("AWS::IAM::Role", "AWS::IAM::ManagedPolicy"):
            name_prop = "RoleName" if kind == "AWS::IAM::Role" else "ManagedPolicyName"
            name = self.value(stack, props[name_prop]) if name_prop in props else NAME
            return name if kind == "AWS::IAM::Role" else self._iam_arn("policy", name)
        if kind == "AWS::SNS::Topic":
            name = self._name(stack, logical_id, props, "TopicName", 256)
            return f"arn:{PARTITION}:sns:{longest_region()}:{ACCOUNT}:{name}"
        if kind == "AWS::SQS::Queue":
            name = self._name(stack, logical_id, props, "QueueName", 80)
            return f"https://sqs.{longest_region()}.{URL_SUFFIX}/{ACCOUNT}/{name}"
        if kind in _NAME_PROPERTIES:
            return self._name(stack, logical_id, props, *_NAME_PROPERTIES[kind])
        return UNKNOWN

    def _name(self, stack: str, logical_id: str, props: dict, prop: str, limit: int) -> str:
        """The configured name, or the one CloudFormation generates (`<stack>-<logical id>-<13 random>`, cut to the
        type's limit)."""
        if prop in props:
            return str(self.value(stack, props[prop]))
        return f"{stack}-{logical_id}-{'R' * 13}"[:limit]

    def _iam_arn(self, kind: str, name: str) -> str:
        return f"arn:{PARTITION}:iam::{ACCOUNT}:{kind}/{name}"

    def attribute(self, stack: str, logical_id: str, attribute: str) -> str:
        resource = self.templates[stack].get("Resources", {}).get(logical_id)
        if resource is None or attribute != "Arn":
            return UNKNOWN
        kind = resource["Type"]
        ref = self.resource_ref(stack, logical_id)
        if kind == "AWS::S3::Bucket":
            return f"arn:{PARTITION}:s3:::{ref}"
        if kind == "AWS::KMS::Key":
            return f"arn:{PARTITION}:kms:{longest_region()}:{ACCOUNT}:key/{ref}"
        if kind == "AWS::IAM::Role":
            return self._iam_arn("role", ref)
        if kind in _ARN_FORMATS:
            service, resource = _ARN_FORMATS[kind]
            return f"arn:{PARTITION}:{service}:{longest_region()}:{ACCOUNT}:{resource.format(ref)}"
        if kind == "AWS::SNS::Topic":
            return ref
        return UNKNOWN

    def value(self, stack: str, node: Any) -> Any:
        """`node` with every intrinsic function replaced by its worst-case value."""
        if isinstance(node, list):
            return [self.value(stack, item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) != 1:
            return {key: self.value(stack, item) for key, item in node.items()}
        ((function, argument),) = node.items()
        try:
            return self._function(stack, function, argument)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError):
            return UNKNOWN  # an expression of a shape this module does not model: the conservative length

    def _function(self, stack: str, function: str, argument: Any) -> Any:
        if function == "Ref":
            return self.resource_ref(stack, argument)
        if function == "Fn::GetAtt":
            logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
            return self.attribute(stack, logical_id, attribute)
        if function == "Fn::ImportValue":
            name = self.value(stack, argument)
            exporter = self.exports.get(name)
            return self.value(exporter[0], exporter[1]) if exporter else UNKNOWN
        if function == "Fn::Join":
            separator, items = argument
            return str(separator).join(str(item) for item in self.value(stack, items))
        if function == "Fn::Split":
            separator, text = argument
            return str(self.value(stack, text)).split(separator)
        if function == "Fn::Select":
            index, items = argument
            items = self.value(stack, items)
            index = int(self.value(stack, index))
            return items[index] if isinstance(items, list) and index < len(items) else UNKNOWN
        if function == "Fn::Sub":
            return self._sub(stack, argument)
        if function == "Fn::FindInMap":
            return self._find_in_map(stack, argument)
        if function == "Fn::If":
            _, yes, no = argument
            return max((self.value(stack, yes), self.value(stack, no)), key=lambda v: len(_compact(v)))
        return {function: self.value(stack, argument)}

    def _find_in_map(self, stack: str, argument: list) -> Any:
        """A mapping's value; for a top key that is not there (the region resolved to the longest name), the longest
        value any top key has."""
        name, top, second = (self.value(stack, item) for item in argument)
        mapping = self.templates[stack].get("Mappings", {}).get(name, {})
        rows = [mapping[top]] if top in mapping else list(mapping.values())
        values = [str(row[second]) for row in rows if second in row]
        return max(values, key=len) if values else UNKNOWN

    def _sub(self, stack: str, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument

        def replace(match: re.Match) -> str:
            name = match[1]
            if name in variables:
                return str(self.value(stack, variables[name]))
            if "." in name and not name.startswith("AWS::"):
                return str(self.attribute(stack, *name.split(".", 1)))
            return str(self.resource_ref(stack, name))

        return re.sub(r"\$\{(?!!)([^}]+)\}", replace, text)

    def role_of(self, stack: str, entry: Any) -> tuple[str, str]:
        """(stack, logical id) of the role a policy's `Roles` entry names; ("", resolved name) for a role outside
        the stage's templates."""
        if isinstance(entry, dict) and set(entry) == {"Ref"}:
            resource = self.templates[stack].get("Resources", {}).get(entry["Ref"], {})
            if resource.get("Type") == "AWS::IAM::Role":
                return stack, entry["Ref"]
        for name in _imported_names(entry):
            exporter = self.exports.get(name)
            if exporter:
                logical_id = _referenced_id(exporter[1])
                if logical_id:
                    return exporter[0], logical_id
        return "", str(self.value(stack, entry))


def _imported_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, item in node.items():
            if key == "Fn::ImportValue" and isinstance(item, str):
                yield item
            else:
                yield from _imported_names(item)
    elif isinstance(node, list):
        for item in node:
            yield from _imported_names(item)


def _referenced_id(value: Any) -> str | None:
    if isinstance(value, dict) and "Ref" in value:
        return value["Ref"]
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        attribute = value["Fn::GetAtt"]
        return attribute[0] if isinstance(attribute, list) else attribute.split(".", 1)[0]
    return None


def _compact(value: Any) -> str:
    return re.sub(r"\s", "", json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def policy_size(document: Any, templates: Mapping[str, dict], stack: str) -> int:
    """IAM's size of one policy document of `stack`'s template: worst-case values, white space not counted."""
    return len(_compact(_Resolver(templates).value(stack, document)))


def role_policies(templates: Mapping[str, dict]) -> list[RolePolicies]:
    """Every role that one stage's templates (stack name -> template) attach policies to, with their sizes."""
    resolver = _Resolver(templates)
    roles: dict[tuple[str, str], RolePolicies] = {}

    def role(key: tuple[str, str]) -> RolePolicies:
        return roles.setdefault(key, RolePolicies(*key))

    for stack, template in templates.items():
        for logical_id, resource in template.get("Resources", {}).items():
            kind, props = resource.get("Type"), resource.get("Properties", {})
            if kind == "AWS::IAM::Role":
                entry = role((stack, logical_id))
                entry.managed_arns += len(props.get("ManagedPolicyArns", []))
                for inline in props.get("Policies", []):
                    size = len(_compact(resolver.value(stack, inline["PolicyDocument"])))
                    entry.inline.append(PolicySize(stack, f"{logical_id}.Policies", size))
            elif kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                size = len(_compact(resolver.value(stack, props.get("PolicyDocument", {}))))
                for named in props.get("Roles", []):
                    entry = role(resolver.role_of(stack, named))
                    (entry.inline if kind == "AWS::IAM::Policy" else entry.managed).append(
                        PolicySize(stack, logical_id, size)
                    )
    return sorted(roles.values(), key=lambda r: (r.stack, r.logical_id))


def role_policy_refusals(templates: Mapping[str, dict]) -> list[str]:
    """One line per role of the stage over an IAM quota, naming the stage, the role, the size, what adds most, and
    what to do; empty when every role is within them."""
    refusals = []
    for entry in role_policies(templates):
        named = _STACK_ID.match(entry.stack)
        where = f"stage {named['stage']}, {entry.name}" if named else entry.name
        if entry.inline_size > ROLE_POLICY_SIZE_QUOTA:
            most = ", ".join(f"{owner} {size:,}" for owner, size in entry.contributors()[:4])
            refusals.append(
                f"{where}: its inline policies total {entry.inline_size:,} characters (worst case, white space not "
                f"counted), over IAM's {ROLE_POLICY_SIZE_QUOTA:,} per role ({QUOTA_SOURCE}: role policy size); the "
                f"most: {most}. Every endpoint of a stage adds to the stage's one execution role: split the "
                "endpoints over several stages (each has its own role)."
            )
        if entry.attached_count > ATTACHED_POLICIES_PER_ROLE_QUOTA:
            refusals.append(
                f"{where}: {entry.attached_count} managed policies attached, over IAM's default "
                f"{ATTACHED_POLICIES_PER_ROLE_QUOTA} per role ({QUOTA_SOURCE}); split the endpoints over several "
                "stages."
            )
        for policy in entry.managed:
            if policy.size > MANAGED_POLICY_SIZE_QUOTA:
                refusals.append(
                    f"{where}: managed policy {policy.logical_id} of {policy.owner} is {policy.size:,} characters, "
                    f"over IAM's {MANAGED_POLICY_SIZE_QUOTA:,} per managed policy ({QUOTA_SOURCE})."
                )
    return refusals


def assembly_stages(directory: Path | str) -> dict[str, dict[str, dict]]:
    """{assembly folder: {stack name: template}} of a cloud assembly and its nested ones (a pipeline's stages):
    each folder holds one stage's stacks (the stage app) or one pipeline stage's."""
    directory = Path(directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    stages: dict[str, dict[str, dict]] = {str(directory): {}}
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        properties = artifact.get("properties", {})
        if artifact.get("type") == "aws:cloudformation:stack":
            template = json.loads((directory / properties["templateFile"]).read_text())
            stages[str(directory)][properties.get("stackName", artifact_id)] = template
        elif artifact.get("type") == "cdk:cloud-assembly":
            stages.update(assembly_stages(directory / properties["directoryName"]))
    return stages


def assembly_refusals(directory: Path | str) -> list[str]:
    """`role_policy_refusals` of every stage in a synthesized cloud assembly (app.py's check after synth)."""
    return [line for templates in assembly_stages(directory).values() for line in role_policy_refusals(templates)]
