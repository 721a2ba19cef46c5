"""The check: a resource's literal properties against botocore's constraints (min/max length or value or count,
pattern, enum) of the API members `mapping.MAPPINGS` maps them to."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.loaders import Loader
from botocore.model import ListShape, MapShape, OperationModel, ServiceModel, Shape, StructureShape

from triton_cdk.api_constraints.java_regex import full_match
from triton_cdk.api_constraints.mapping import MAPPINGS, NotChecked, ResourceMapping, in_scope

__all__ = [
    "CheckResult",
    "ConfigFieldHint",
    "SkippedPattern",
    "Violation",
    "check_resource",
    "check_template",
    "check_template_file",
    "is_intrinsic",
    "service_model",
    "stack_of",
]

# (stack, resource type, property path) -> the config field behind it, or None: supplied by the app.
ConfigFieldHint = Callable[[str, str, str], str | None]


@functools.cache
def service_model(service: str) -> ServiceModel:
    """botocore's model of `service` (its newest API version shipped), loaded once; no session needed."""
    return ServiceModel(Loader().load_service_model(service, "service-2"), service_name=service)


@functools.cache
def _operation(service: str, operation: str) -> OperationModel:
    return service_model(service).operation_model(operation)


@dataclass(frozen=True)
class Violation:
    """One literal that the API would refuse."""

    stack: str
    logical_id: str
    resource_type: str
    property_path: str  # "ProductionVariants[0].InstanceType"
    value: Any
    constraint: str  # "at most 63 characters", "one of ml.t2.medium, ..."
    service: str  # botocore's name: "sagemaker"
    operation: str  # "CreateEndpoint"
    member: str  # the input member's path: "ProductionVariants.InstanceType"
    shape: str  # the shape that states the constraint: "ProductionVariantInstanceType"
    config_field: str | None = None
    construct_path: str | None = None  # the resource's `aws:cdk:path` metadata, where the synth wrote it

    @property
    def source(self) -> str:
        """Where the constraint is stated, e.g. "botocore sagemaker (2017-07-24) CreateEndpoint: EndpointName (shape
        EndpointName)"."""
        version = service_model(self.service).api_version
        return f"botocore {self.service} ({version}) {self.operation}: {self.member} (shape {self.shape})"

    @property
    def message(self) -> str:
        where = f" [{self.construct_path}]" if self.construct_path else ""
        text = (
            f"{self.stack}: {self.logical_id}{where} ({self.resource_type}) property {self.property_path}: "
            f"{_shown(self.value)} breaks the API's constraint: {self.constraint} "
            f"[source: {self.source}]"
        )
        if self.config_field:
            text += f"; set by the config field {self.config_field}"
        return text


@dataclass(frozen=True)
class SkippedPattern:
    resource_type: str
    property_path: str
    source: str
    pattern: str
    reason: str


@dataclass
class CheckResult:
    violations: list[Violation] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)  # "AWS::S3::Bucket:WebsiteConfiguration.IndexDocument"
    skipped_patterns: list[SkippedPattern] = field(default_factory=list)
    checked_values: int = 0

    def extend(self, other: CheckResult) -> None:
        self.violations += other.violations
        self.uncovered += other.uncovered
        self.skipped_patterns += other.skipped_patterns
        self.checked_values += other.checked_values


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    if isinstance(value, str):
        text += f" ({len(value)} characters)"
    return text


def is_intrinsic(value: Any) -> bool:
    """A value CloudFormation resolves at deploy time: {"Ref": ...} or {"Fn::...": ...}."""
    return (
        isinstance(value, dict)
        and len(value) == 1
        and (next(iter(value)) == "Ref" or next(iter(value)).startswith("Fn::"))
    )


def _member(shape: StructureShape, name: str) -> tuple[str, Shape] | None:
    """`name`'s member of `shape`: the same name, else the one that differs only by case (CodeBuild's camelCase)."""
    members = shape.members
    if name in members:
        return name, members[name]
    folded = {key.lower(): key for key in members}
    key = folded.get(name.lower())
    return (key, members[key]) if key else None


@dataclass
class _Walk:
    """The state of one resource's check."""

    stack: str
    logical_id: str
    resource_type: str
    mapping: ResourceMapping
    result: CheckResult
    hint: ConfigFieldHint | None
    construct_path: str | None

    def source(self, operation: str, members: list[str], shape: Shape) -> tuple[str, str, str, str]:
        return self.mapping.service, operation, ".".join(members) or "(input)", shape.name

    def violation(self, path: str, value: Any, constraint: str, source: tuple[str, str, str, str]) -> None:
        self.result.violations.append(
            Violation(
                self.stack,
                self.logical_id,
                self.resource_type,
                path,
                value,
                constraint,
                *source,
                config_field=self.hint(self.stack, self.resource_type, path) if self.hint else None,
                construct_path=self.construct_path,
            )
        )

    def value(self, value: Any, shape: Shape, path: str, table_path: str, operation: str, members: list[str]) -> None:
        if is_intrinsic(value):
            return
        if isinstance(shape, StructureShape):
            self.structure(value, shape, path, table_path, operation, members)
        elif isinstance(shape, ListShape):
            if not isinstance(value, list):
                self.violation(path, value, "a list", self.source(operation, members, shape))
                return
            self.count(value, shape, path, operation, members, "items")
            for index, item in enumerate(value):
                self.value(item, shape.member, f"{path}[{index}]", f"{table_path}[]", operation, members)
        elif isinstance(shape, MapShape):
            if not isinstance(value, dict):
                self.violation(path, value, "a map", self.source(operation, members, shape))
                return
            self.count(value, shape, path, operation, members, "entries")
            for key, item in value.items():
                self.scalar(key, shape.key, f"{path} key {key!r}", operation, members)
                self.value(item, shape.value, f"{path}[{key!r}]", f"{table_path}{{}}", operation, members)
        else:
            self.scalar(value, shape, path, operation, members)

    def count(self, value: list | dict, shape: Shape, path: str, operation: str, members: list[str], what: str) -> None:
        low, high = shape.metadata.get("min"), shape.metadata.get("max")
        if low is not None and len(value) < low:
            self.violation(
                path, value, f"at least {low} {what} (has {len(value)})", self.source(operation, members, shape)
            )
        if high is not None and len(value) > high:
            self.violation(
                path, value, f"at most {high} {what} (has {len(value)})", self.source(operation, members, shape)
            )

    def structure(
        self, value: Any, shape: StructureShape, path: str, table_path: str, operation: str, members: list[str]
    ) -> None:
        if not isinstance(value, dict):
            self.violation(path, value, "an object", self.source(operation, members, shape))
            return
        for key, item in value.items():
            child_path = f"{path}.{key}" if path else key
            child_table = f"{table_path}.{key}" if table_path else key
            rename = self.mapping.nested.get(child_table)
            if isinstance(rename, NotChecked):
                continue
            target_shape: Shape = shape
            target_members = list(members)
            names = (rename,) if isinstance(rename, str) else rename or (key,)
            for name in names:
                found = _member(target_shape, name) if isinstance(target_shape, StructureShape) else None
                if found is None:
                    self.result.uncovered.append(f"{self.resource_type}:{child_table}")
                    break
                target_members.append(found[0])
                target_shape = found[1]
            else:
                self.value(item, target_shape, child_path, child_table, operation, target_members)

    def scalar(self, value: Any, shape: Shape, path: str, operation: str, members: list[str]) -> None:
        self.result.checked_values += 1
        kind = shape.type_name
        source = self.source(operation, members, shape)
        metadata = shape.metadata
        if kind == "string":
            if isinstance(value, bool):
                value = str(value).lower()  # CloudFormation writes a boolean given for a string as "true"/"false"
            elif isinstance(value, int | float):
                value = str(value)
            if not isinstance(value, str):
                self.violation(path, value, "a string", source)
                return
            self.string(value, shape, path, source)
        elif kind in ("integer", "long"):
            number = _as_int(value)
            if number is None:
                self.violation(path, value, "a whole number", source)
                return
            self.bounds(number, metadata, path, source)
        elif kind in ("float", "double"):
            number = _as_float(value)
            if number is None:
                self.violation(path, value, "a number", source)
                return
            self.bounds(number, metadata, path, source)
        elif kind == "boolean" and not (
            isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false"))
        ):
            self.violation(path, value, "true or false", source)
        # timestamps and blobs: CloudFormation's own formats, nothing in the model to check

    def string(self, value: str, shape: Shape, path: str, source: tuple[str, str, str, str]) -> None:
        enum = shape.enum if hasattr(shape, "enum") else []
        if enum and value not in enum:
            listed = ", ".join(enum) if len(enum) <= 12 else ", ".join(enum[:12]) + f", ... ({len(enum)} values)"
            self.violation(path, value, f"one of {listed}", source)
            return
        low, high = shape.metadata.get("min"), shape.metadata.get("max")
        if low is not None and len(value) < low:
            self.violation(path, value, f"at least {low} characters", source)
        if high is not None and len(value) > high:
            self.violation(path, value, f"at most {high} characters", source)
        pattern = shape.metadata.get("pattern")
        if pattern:
            matched = full_match(pattern, value)
            if isinstance(matched, str):
                self.result.skipped_patterns.append(
                    SkippedPattern(self.resource_type, path, "{} {}: {} (shape {})".format(*source), pattern, matched)
                )
            elif not matched:
                self.violation(path, value, f"the whole value matches the pattern {pattern}", source)

    def bounds(self, number: float, metadata: dict, path: str, source: tuple[str, str, str, str]) -> None:
        low, high = metadata.get("min"), metadata.get("max")
        if low is not None and number < low:
            self.violation(path, number, f"at least {low}", source)
        if high is not None and number > high:
            self.violation(path, number, f"at most {high}", source)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
        return int(value)  # CloudFormation accepts a number written as a string
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None  # NaN and infinity are no JSON numbers
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", value):
        return float(value)
    return None


def check_resource(stack: str, logical_id: str, resource: dict, hint: ConfigFieldHint | None = None) -> CheckResult:
    """The gate over one resource of a template (nothing for types outside `MAPPINGS`; an in-scope type that is not
    mapped is reported in `uncovered`). `hint` names the config field behind a violation."""
    result = CheckResult()
    resource_type = resource.get("Type", "")
    mapping = MAPPINGS.get(resource_type)
    properties = resource.get("Properties") or {}
    if mapping is None:
        if in_scope(resource_type):
            result.uncovered.append(f"{resource_type}: no mapping to a botocore operation")
        return result
    if not isinstance(properties, dict):  # e.g. a whole Fn::If: resolved at deploy time
        return result
    metadata = resource.get("Metadata")
    construct_path = metadata.get("aws:cdk:path") if isinstance(metadata, dict) else None
    walk = _Walk(stack, logical_id, resource_type, mapping, result, hint, construct_path)
    own = _operation(mapping.service, mapping.operation)
    for key, value in properties.items():
        target = mapping.top.get(key)
        if isinstance(target, NotChecked):
            continue
        if target is None:
            walk.structure({key: value}, own.input_shape, "", "", mapping.operation, [])
            continue
        operation = _operation(mapping.service, target.operation)
        shape: Shape = operation.input_shape
        for name in target.member:
            shape = shape.members[name]
        if target.each:
            if is_intrinsic(value):
                continue
            if not isinstance(value, list):
                walk.violation(key, value, "a list", walk.source(target.operation, list(target.member), shape))
                continue
            for index, item in enumerate(value):
                walk.value(item, shape, f"{key}[{index}]", f"{key}[]", target.operation, list(target.member))
        else:
            walk.value(value, shape, key, key, target.operation, list(target.member))
    return result


def check_template(template: dict, stack: str = "", hint: ConfigFieldHint | None = None) -> CheckResult:
    """The gate over every resource of one CloudFormation template."""
    result = CheckResult()
    for logical_id, resource in (template.get("Resources") or {}).items():
        if isinstance(resource, dict):
            result.extend(check_resource(stack, logical_id, resource, hint))
    return result


def stack_of(template_path: str | Path) -> str:
    """The name of the stack whose template `template_path` is: its `stackName` in the cloud assembly's
    manifest beside it (a pipeline stage's nested assembly names its files by artifact id), else the file's
    name without `.template.json`."""
    path = Path(template_path)
    return _stack_names(str(path.parent)).get(path.name) or path.name.removesuffix(".template.json")


def _stack_names(assembly_dir: str) -> dict[str, str]:
    """{template file name: stack name} from a cloud assembly's manifest.json; {} where it has none (yet)."""
    try:
        manifest = json.loads((Path(assembly_dir) / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    names = {}
    for artifact in (manifest.get("artifacts") or {}).values():
        properties = artifact.get("properties") or {}
        if artifact.get("type") == "aws:cloudformation:stack" and properties.get("templateFile"):
            names[properties["templateFile"]] = properties.get("stackName") or artifact.get("displayName") or ""
    return names


def check_template_file(template_path: str | Path, hint: ConfigFieldHint | None = None) -> CheckResult:
    return check_template(json.loads(Path(template_path).read_text()), stack_of(template_path), hint)
