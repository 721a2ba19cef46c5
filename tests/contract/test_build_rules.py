"""CodeBuild, CloudFormation and KMS rules the model build relies on, over every shipped template.

Each test names its source. The build stack's own behaviour is tested in tests/artifact_build; here the rules
hold for every template of every configuration the project ships (`shipped_templates`).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

from contract_helpers import ShippedTemplate, listed, resources_of, statements_of

ARTIFACT_TYPE = "Custom::TritonModelArtifact"
MAX_SERVICE_TIMEOUT = 3600  # CloudFormation: custom resource ServiceTimeout, 1..3600 seconds
MAX_WAIT_CONDITION_TIMEOUT = 43200  # AWS::CloudFormation::WaitCondition Timeout: at most 12 hours


def _by_app(shipped_templates: list[ShippedTemplate]) -> dict[str, list[ShippedTemplate]]:
    apps: dict[str, list[ShippedTemplate]] = defaultdict(list)
    for shipped in shipped_templates:
        apps[shipped.config].append(shipped)
    return apps


def _ref(value: object) -> str | None:
    return value.get("Ref") if isinstance(value, dict) else None


def test_no_build_project_limits_concurrency_below_the_builds_a_deployment_starts(shipped_templates) -> None:
    """AWS CodeBuild User Guide, "Builds in AWS CodeBuild": "If the build project has a concurrent build
    limit set, builds return an error if the number of running builds reaches the concurrent build limit
    for the project"; without one they queue. Every ensure-artifact resource of a project may start its
    build in the same deployment, so a limit below their number fails that deployment."""
    checked = 0
    problems = []
    for shipped in shipped_templates:
        started: dict[str, int] = defaultdict(int)
        for artifact in resources_of(shipped.template, ARTIFACT_TYPE).values():
            if project := _ref(artifact["Properties"].get("ProjectName")):
                started[project] += 1
        for logical_id, project in resources_of(shipped.template, "AWS::CodeBuild::Project").items():
            if not started.get(logical_id):
                continue
            checked += 1
            limit = project["Properties"].get("ConcurrentBuildLimit")
            if limit is not None and limit < started[logical_id]:
                problems.append(f"{shipped.label}: {logical_id} limit {limit} < {started[logical_id]} builds")
    assert checked, "no build project started by ensure-artifact resources: the rule would pass vacuously"
    assert not problems, "\n".join(problems)


def _role_identity(shipped: ShippedTemplate, value: object) -> tuple[str, str] | None:
    """(stack, logical id) of a role named by GetAtt / Ref, or by an import of CDK's generated export."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return shipped.stack, value["Fn::GetAtt"][0]
    if ref := _ref(value):
        return shipped.stack, ref
    if isinstance(value, dict) and isinstance(value.get("Fn::ImportValue"), str):
        stack, _, output = value["Fn::ImportValue"].partition(":")
        if match := re.match(r"ExportsOutput(?:FnGetAtt|Ref)([A-Za-z0-9]+?[0-9A-F]{8})", output):
            return stack, match.group(1)
    # A role the artifact stack exports under a fixed name (`<stack>-BuildRoleArn`): the ARN itself, or the role
    # name CDK derives from it (Fn::Select over Fn::Split of the imported ARN) in a policy's Roles.
    names = re.findall(r'"Fn::ImportValue": "([^"]+-[A-Za-z]+RoleArn)"', json.dumps(value))
    if len(set(names)) == 1:
        stack, _, export = names[0].rpartition("-")
        return stack, export
    return None


def _role_statements(app: list[ShippedTemplate]) -> dict[tuple[str, str], list[dict]]:
    found: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for shipped in app:
        for policy in resources_of(shipped.template, "AWS::IAM::Policy").values():
            for role in policy["Properties"].get("Roles", []):
                if identity := _role_identity(shipped, role):
                    found[identity] += statements_of(policy["Properties"]["PolicyDocument"])
        for logical_id, role in resources_of(shipped.template, "AWS::IAM::Role").items():
            for inline in role["Properties"].get("Policies", []):
                found[(shipped.stack, logical_id)] += statements_of(inline["PolicyDocument"])
    return found


def _s3_source_bucket(location: object) -> object:
    """The bucket part of a project's S3 `Source.Location` ("bucket/key", maybe an Fn::Join)."""
    if isinstance(location, str):
        return location.split("/", 1)[0]
    parts = location["Fn::Join"][1]
    return parts[0]


def test_every_codebuild_role_reading_an_s3_source_may_locate_its_bucket(shipped_templates) -> None:
    """AWS CodeBuild User Guide, "Allow CodeBuild to interact with other AWS services": the minimum
    service-role policy grants s3:GetBucketAcl and s3:GetBucketLocation (statement "S3BucketIdentity")
    besides s3:GetObject, for builds whose source is in S3."""
    checked = 0
    problems = []
    for app in _by_app(shipped_templates).values():
        statements = _role_statements(app)
        for shipped in app:
            for logical_id, project in resources_of(shipped.template, "AWS::CodeBuild::Project").items():
                source = project["Properties"]["Source"]
                if source.get("Type") != "S3":
                    continue
                checked += 1
                part = _s3_source_bucket(source["Location"])
                bucket = part if isinstance(part, str) else json.dumps(part)
                role = _role_identity(shipped, project["Properties"]["ServiceRole"])
                granted = {
                    action
                    for statement in statements.get(role, [])
                    if statement.get("Effect") == "Allow"
                    and any(r == "*" or bucket in json.dumps(r) for r in listed(statement["Resource"]))
                    for action in listed(statement["Action"])
                }
                missing = {"s3:GetBucketAcl", "s3:GetBucketLocation"} - granted
                if missing:
                    problems.append(f"{shipped.label}: {logical_id} role {role} lacks {sorted(missing)} on {bucket}")
    assert checked, "no CodeBuild project with an S3 source: the rule would pass vacuously"
    assert not problems, "\n".join(problems)


def test_every_artifact_resource_times_out_after_the_function_that_answers_it(shipped_templates) -> None:
    """AWS CloudFormation User Guide, custom resources: `ServiceTimeout` (1..3600 s, default 3600) is how
    long CloudFormation waits for the response. It must exceed the timeout of the function behind the
    ServiceToken (the CDK Provider framework's onEvent function, which reports our handler's own error),
    or CloudFormation's generic timeout message replaces ours."""
    checked = 0
    problems = []
    for shipped in shipped_templates:
        functions = resources_of(shipped.template, "AWS::Lambda::Function")
        for logical_id, resource in resources_of(shipped.template, ARTIFACT_TYPE).items():
            checked += 1
            timeout = resource["Properties"].get("ServiceTimeout")
            token = resource["Properties"]["ServiceToken"]
            function = functions.get(token.get("Fn::GetAtt", [None])[0]) if isinstance(token, dict) else None
            if timeout is None:
                problems.append(f"{shipped.label}: {logical_id} has no ServiceTimeout")
            elif not 1 <= int(timeout) <= MAX_SERVICE_TIMEOUT:
                problems.append(f"{shipped.label}: {logical_id} ServiceTimeout {timeout} outside 1..3600")
            elif function is None or int(timeout) <= function["Properties"].get("Timeout", 3):
                problems.append(f"{shipped.label}: {logical_id} ServiceTimeout {timeout} <= its function's timeout")
    assert checked, "no ensure-artifact resource: the rule would pass vacuously"
    assert not problems, "\n".join(problems)


def test_every_build_wait_outlasts_codebuilds_own_timeouts(shipped_templates) -> None:
    """CloudFormation template reference, AWS::CloudFormation::WaitCondition: Timeout at most 43200 s; a
    wait added in an update needs a new WaitConditionHandle. The wait must outlast the project's queued
    plus build timeouts (CodeBuild project QueuedTimeoutInMinutes, TimeoutInMinutes), so CodeBuild's own
    TIMED_OUT, reported with the build id and logs, comes before the wait condition's generic timeout."""
    checked = 0
    problems = []
    for shipped in shipped_templates:
        projects = resources_of(shipped.template, "AWS::CodeBuild::Project")
        artifacts = resources_of(shipped.template, ARTIFACT_TYPE)
        by_handle = {_ref(a["Properties"].get("WaitHandle")): (k, a) for k, a in artifacts.items()}
        waits = resources_of(shipped.template, "AWS::CloudFormation::WaitCondition")
        for logical_id, artifact in artifacts.items():
            if "ProjectName" in artifact["Properties"] and not _ref(artifact["Properties"].get("WaitHandle")):
                problems.append(f"{shipped.label}: build-mode {logical_id} has no wait condition handle")
        for logical_id, wait in waits.items():
            handle = _ref(wait["Properties"]["Handle"])
            if handle not in by_handle:
                continue
            checked += 1
            artifact_id, artifact = by_handle[handle]
            project = projects[_ref(artifact["Properties"]["ProjectName"])]["Properties"]
            budget = (project.get("QueuedTimeoutInMinutes", 480) + project.get("TimeoutInMinutes", 60)) * 60
            timeout = int(wait["Properties"]["Timeout"])
            if not budget < timeout <= MAX_WAIT_CONDITION_TIMEOUT:
                problems.append(f"{shipped.label}: {logical_id} Timeout {timeout} vs build budget {budget} s")
            if artifact_id not in listed(wait.get("DependsOn", [])):
                problems.append(f"{shipped.label}: {logical_id} does not wait for {artifact_id} to start the build")
    assert checked, "no build wait condition: the rule would pass vacuously"
    assert not problems, "\n".join(problems)


def test_every_build_project_reports_its_end_to_the_deployment(shipped_templates) -> None:
    """The wait conditions learn a build's end from EventBridge "CodeBuild Build State Change" events
    (CodeBuild User Guide, "Build notifications input format reference"): every project an ensure-artifact
    resource starts must route SUCCEEDED and every failed state to a Lambda target."""
    checked = 0
    problems = []
    for shipped in shipped_templates:
        started = {
            _ref(a["Properties"]["ProjectName"])
            for a in resources_of(shipped.template, ARTIFACT_TYPE).values()
            if "ProjectName" in a["Properties"]
        }
        routed: set[str] = set()
        for rule in resources_of(shipped.template, "AWS::Events::Rule").values():
            detail = rule["Properties"].get("EventPattern", {}).get("detail", {})
            states = set(detail.get("build-status", []))
            lambda_target = any(
                isinstance(t.get("Arn"), dict)
                and t["Arn"].get("Fn::GetAtt", [""])[0] in resources_of(shipped.template, "AWS::Lambda::Function")
                for t in rule["Properties"].get("Targets", [])
            )
            if lambda_target and {"SUCCEEDED", "FAILED", "FAULT", "STOPPED", "TIMED_OUT"} <= states:
                routed |= {_ref(p) for p in detail.get("project-name", [])}
        checked += len(started)
        for project in sorted(started - routed):
            problems.append(f"{shipped.label}: no rule routes the end of {project}'s builds to a function")
    assert checked, "no ensure-artifact build: the rule would pass vacuously"
    assert not problems, "\n".join(problems)


def _stack_regions(shipped: ShippedTemplate) -> str | None:
    """The stack's region from its assembly manifest; None when environment-agnostic."""
    manifest = json.loads((shipped.path.parent / "manifest.json").read_text())
    for artifact in manifest["artifacts"].values():
        if artifact.get("type") == "aws:cloudformation:stack" and shipped.path.name == artifact["properties"].get(
            "templateFile"
        ):
            region = artifact.get("environment", "").rsplit("/", 1)[-1]
            return None if region.startswith("unknown") else region
    return None


def _folder(shipped: ShippedTemplate) -> str:
    """ "config/prod:assembly-x" -> "config", "tests/pipeline:cross-account/prod" -> "tests/pipeline:cross-account":
    the folder whose stages may promote from each other (a purpose-built folder's label holds a colon of its own,
    so only a nested assembly's suffix is cut: two folders' buckets of one name must not be mixed up)."""
    return shipped.config.split(":assembly-")[0].rsplit("/", 1)[0]


def _kms_statements(template: dict) -> list[tuple[dict, bool]]:
    """(statement, in a key policy) for every statement conditioned on kms:ViaService."""
    found = []
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        found += [(s, False) for s in statements_of(policy["Properties"]["PolicyDocument"])]
    for role in resources_of(template, "AWS::IAM::Role").values():
        for inline in role["Properties"].get("Policies", []):
            found += [(s, False) for s in statements_of(inline["PolicyDocument"])]
    for key in resources_of(template, "AWS::KMS::Key").values():
        found += [(s, True) for s in statements_of(key["Properties"].get("KeyPolicy", {}))]
    return [(s, k) for s, k in found if any("kms:ViaService" in c for c in s.get("Condition", {}).values())]


def _names_no_key(statement: dict) -> bool:
    """An identity-policy statement that cannot name its key: `*` or a wildcard key ARN."""
    return any(r == "*" or ":key/*" in json.dumps(r) for r in listed(statement.get("Resource", [])))


def test_kms_via_service_names_the_region_of_the_bucket_s3_reads(shipped_templates) -> None:
    """AWS KMS Developer Guide, "kms:ViaService": the value is the service endpoint that calls KMS on the
    principal's behalf; S3 calls KMS in the region of the bucket whose object it encrypts or decrypts (a
    KMS key is regional). So a statement about another stage's bucket (named by the
    kms:EncryptionContext:aws:s3:arn condition) names that bucket's region, or any region when its
    stage's region is not fixed; every other S3 ViaService names the stack's own region."""
    # Stages promote from stages of the same config folder (config/prod from config/dev).
    buckets: dict[str, dict[str, str | None]] = defaultdict(dict)
    for shipped in shipped_templates:
        for bucket in resources_of(shipped.template, "AWS::S3::Bucket").values():
            if isinstance(name := bucket["Properties"].get("BucketName"), str):
                buckets[_folder(shipped)][name] = _stack_regions(shipped)
    checked = 0
    problems = []
    for shipped in shipped_templates:
        own_region = _stack_regions(shipped)
        for statement, key_policy in _kms_statements(shipped.template):
            conditions = statement["Condition"]
            via = next(c["kms:ViaService"] for c in conditions.values() if "kms:ViaService" in c)
            context = json.dumps(conditions.get("StringLike", {}).get("kms:EncryptionContext:aws:s3:arn", []))
            named = re.findall(r":s3:::([a-z0-9.-]+)", context)
            checked += 1
            if not key_policy and _names_no_key(statement) and not named:
                # Another stage's key (unknown ARN): which bucket, and so which region, must be said.
                problems.append(
                    f"{shipped.label}: {statement.get('Sid')} decrypts with keys it cannot name but does not "
                    "name the bucket (kms:EncryptionContext:aws:s3:arn), so its kms:ViaService region is unchecked"
                )
                continue
            if named:
                if named[0] not in buckets[_folder(shipped)]:
                    problems.append(f"{shipped.label}: {statement.get('Sid')} names bucket {named[0]} no stage makes")
                    continue
                region = buckets[_folder(shipped)][named[0]]
                expected = f"s3.{region}.amazonaws.com" if region else "s3.*.amazonaws.com"
                if via != expected:
                    problems.append(f"{shipped.label}: {statement.get('Sid')} ViaService {via}, bucket in {expected}")
            else:
                own = [{"Fn::Join": ["", ["s3.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}]
                if own_region:
                    own.append(f"s3.{own_region}.amazonaws.com")
                for value in listed(via):
                    s3 = isinstance(value, dict) or value.startswith("s3.")
                    if s3 and value not in own:
                        problems.append(
                            f"{shipped.label}: {statement.get('Sid')} ViaService {via} is not this region's"
                        )
    assert checked, "no kms:ViaService statement: the rule would pass vacuously"
    assert not problems, "\n".join(problems)
