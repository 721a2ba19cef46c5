"""The build stack: CodeBuild projects per build environment, ensure-artifact resources, promotion.

Synthesized apps come from conftest (once per session, with cdk-nag as app.py runs it).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from aws_cdk.assertions import Match, Template
from build_helpers import FLEET_ARN, PROJECT_ROOT, promote_documents, stage_stacks, write_configs
from synth_helpers import new_app

from model_build.cli import build_parser

ARTIFACT_TYPE = "Custom::TritonModelArtifact"


def resources(template: dict, kind: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def projects(template: dict) -> dict[str, dict]:
    return resources(template, "AWS::CodeBuild::Project")


def artifacts_by_model(template: dict) -> dict[str, dict]:
    found = {}
    for resource in resources(template, ARTIFACT_TYPE).values():
        props = resource["Properties"]
        found[
            f"{props['ModelName']}@{props['BuildEnvironment']['GPU_TARGET'] if 'BuildEnvironment' in props else ''}"
        ] = props
    return found


def statements(template: dict, logical_prefix: str) -> list[dict]:
    found = []
    for key, policy in resources(template, "AWS::IAM::Policy").items():
        if key.startswith(logical_prefix):
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def actions_of(statement: dict) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


# ---------------------------------------------------------------------------------------------
# The shipped dev config


@pytest.fixture(scope="module")
def dev_build(dev_synth) -> dict:
    return dev_synth.template(dev_synth.stacks["stage"].build)


def test_dev_builds_every_model_on_one_a10g_gpu_project(dev_build):
    assert len(projects(dev_build)) == 1
    template = Template.from_json(dev_build)
    template.has_resource_properties(
        "AWS::CodeBuild::Project",
        {
            "Environment": {
                "Type": "LINUX_GPU_CONTAINER",
                "ComputeType": "BUILD_GENERAL1_SMALL",
                "PrivilegedMode": False,
                "ImagePullCredentialsType": "SERVICE_ROLE",
                "Image": {
                    "Fn::Join": [
                        "",
                        Match.array_with([Match.string_like_regexp(r"/sagemaker-tritonserver:24\.09-py3$")]),
                    ]
                },
            },
            "Source": {"Type": "S3", "BuildSpec": "buildspec.yml"},
            "TimeoutInMinutes": 120,
            "QueuedTimeoutInMinutes": 60,
            "EncryptionKey": Match.any_value(),
            "LogsConfig": {"CloudWatchLogs": {"Status": "ENABLED", "GroupName": Match.any_value()}},
        },
    )
    # No project limit: builds over CodeBuild's limits queue instead of failing ("Builds in AWS CodeBuild").
    assert all("ConcurrentBuildLimit" not in p["Properties"] for p in projects(dev_build).values())
    template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})
    for group in resources(dev_build, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == 30


def test_dev_has_one_artifact_resource_per_model_with_its_key_and_build_inputs(dev_synth, dev_build):
    stage = dev_synth.stacks["stage"]
    expected = {a.key: a for located in stage.build.endpoint_artifacts for a in located.models}
    found = {
        props["Key"]: props for props in resources(dev_build, ARTIFACT_TYPE).values() for props in [props["Properties"]]
    }
    assert sorted(found) == sorted(expected)
    assert len(found) == 3  # bert_base serves two endpoints with one key
    for key, props in found.items():
        artifact = expected[key]
        environment = props["BuildEnvironment"]
        assert props["ModelName"] == artifact.model.name
        assert props["ProjectName"] == {"Ref": next(iter(projects(dev_build)))}
        assert environment["GPU_TARGET"] == "sm86"
        assert environment["EXPECT_TENSORRT"] == "10.4.0"
        assert environment["EXPECT_COMPUTE_CAPABILITY"] == "8.6"
        assert (environment["SOURCE_KIND"], environment["SOURCE_URI"]) == ("export", artifact.model.name)
        config = json.loads(environment["BUILD_CONFIG"])
        assert config["triton_release"] == "24.09"
        assert [m["name"] for m in config["models"]] == [artifact.model.name]
        assert "SourceBucket" not in props and "UncompressedPrefix" not in props


def test_multi_model_copies_go_to_the_endpoints_prefix(dev_synth, dev_build):
    mme = next(a for a in dev_synth.stacks["stage"].build.endpoint_artifacts if a.endpoint.mode == "multi_model")
    found = {p["Properties"]["ModelName"]: p["Properties"] for p in resources(dev_build, ARTIFACT_TYPE).values()}
    for artifact in mme.models:
        assert found[artifact.model.name]["CopyTo"] == [f"{mme.multi_model_prefix}{artifact.model.name}.tar.gz"]


def test_build_failures_notify_the_stacks_topic(dev_build):
    template = Template.from_json(dev_build)
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.codebuild"],
                "detail-type": ["CodeBuild Build State Change"],
                "detail": {
                    "build-status": ["FAILED", "FAULT", "STOPPED", "TIMED_OUT"],
                    "project-name": [{"Ref": next(iter(projects(dev_build)))}],
                },
            },
            "Targets": [Match.object_like({"Arn": {"Ref": Match.string_like_regexp("^NotificationsTopic")}})],
        },
    )
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


def wait_conditions(template: dict) -> dict[str, dict]:
    return resources(template, "AWS::CloudFormation::WaitCondition")


def test_each_build_is_waited_for_by_a_wait_condition_its_end_signals(dev_build):
    """The deployment waits on AWS::CloudFormation::WaitCondition (Timeout up to 12 h), not on the custom
    resource (at most 1 h): queue + build timeout + 15 min = (60 + 120 + 15) min here."""
    artifacts = resources(dev_build, ARTIFACT_TYPE)
    waits = wait_conditions(dev_build)
    handles = resources(dev_build, "AWS::CloudFormation::WaitConditionHandle")
    assert len(waits) == len(handles) == len(artifacts) == 3
    for logical_id, artifact in artifacts.items():
        handle = artifact["Properties"]["WaitHandle"]["Ref"]
        assert handle in handles
        (wait,) = [w for w in waits.values() if w["Properties"]["Handle"] == {"Ref": handle}]
        assert wait["Properties"]["Timeout"] == str((60 + 120 + 15) * 60)
        assert wait["Properties"]["Count"] == 1
        assert logical_id in wait["DependsOn"]
        assert artifact["Properties"]["ServiceTimeout"] == "1200"


def test_build_ends_invoke_the_signalling_function(dev_build):
    template = Template.from_json(dev_build)
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.codebuild"],
                "detail-type": ["CodeBuild Build State Change"],
                "detail": {
                    "build-status": ["SUCCEEDED", "FAILED", "FAULT", "STOPPED", "TIMED_OUT"],
                    "project-name": [{"Ref": next(iter(projects(dev_build)))}],
                },
            },
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Fn::GetAtt": [Match.string_like_regexp("^EnsureArtifactsOnBuildState"), "Arn"]},
                        "RetryPolicy": {"MaximumRetryAttempts": 8},
                    }
                )
            ],
        },
    )


def wait_ids(key: str, prefix: str | None = None, timeout_minutes: int = 60) -> set[str]:
    """Logical IDs of the handle and wait condition one artifact gets, from a minimal stack."""
    import aws_cdk as cdk
    from aws_cdk import aws_codebuild as codebuild

    from triton_cdk.artifact_build.ensure_artifact import ArtifactResourceProps, EnsureArtifacts

    stack = cdk.Stack(new_app(), "S")
    ensure = EnsureArtifacts(
        stack,
        "E",
        bucket_name="b",
        bucket_arn="arn:aws:s3:::b",
        key_arn="arn:aws:kms:us-east-1:111111111111:key/k",
        projects=[codebuild.Project.from_project_name(stack, "P", "p")],
        build_wait=cdk.Duration.minutes(timeout_minutes),
        log_retention=cdk.aws_logs.RetentionDays.ONE_DAY,
    )
    ensure.add_artifact(
        ArtifactResourceProps("m", "m", key, uncompressed_prefix=prefix, project_name="p", build_environment={})
    )
    template = Template.from_stack(stack).to_json()["Resources"]
    kinds = ("AWS::CloudFormation::WaitCondition", "AWS::CloudFormation::WaitConditionHandle")
    return {k for k, v in template.items() if v["Type"] in kinds}


def test_a_wait_condition_and_its_handle_are_new_whenever_a_build_may_start():
    """CloudFormation template reference, AWS::CloudFormation::WaitCondition: its properties cannot be
    updated, and a wait added in an update must use a new WaitConditionHandle (an old one may carry old
    signals). A new key, a newly wanted unpacked layout or a new timeout gives new logical IDs; the same
    artifact keeps them (no wait on an unchanged deployment)."""
    first = wait_ids("models/m/" + "a" * 64 + "/model.tar.gz")
    assert len(first) == 2
    assert wait_ids("models/m/" + "a" * 64 + "/model.tar.gz") == first
    assert wait_ids("models/m/" + "b" * 64 + "/model.tar.gz").isdisjoint(first)
    assert wait_ids("models/m/" + "a" * 64 + "/model.tar.gz", prefix="models/m/u/").isdisjoint(first)
    assert wait_ids("models/m/" + "a" * 64 + "/model.tar.gz", timeout_minutes=90).isdisjoint(first)


def test_build_project_policy_is_least_privilege(dev_build):
    found = statements(dev_build, "BuildA10GPolicy")
    by_sid = {s["Sid"]: s for s in found}
    assert sorted(by_sid) == ["EcrLogin", "LocateBuildSource", "PullTritonImage", "ReadBuildSources", "WriteOwnLogs"]
    # CodeBuild's service-role policy ("Allow CodeBuild to interact with other AWS services", statement
    # S3BucketIdentity): an S3 source needs these on its bucket.
    assert sorted(actions_of(by_sid["LocateBuildSource"])) == ["s3:GetBucketAcl", "s3:GetBucketLocation"]
    assert actions_of(by_sid["WriteOwnLogs"]) == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert by_sid["WriteOwnLogs"]["Resource"]["Fn::GetAtt"][0].startswith("BuildA10GLogs")
    assert actions_of(by_sid["ReadBuildSources"]) == ["s3:GetObject", "s3:GetObjectVersion"]
    # Negative: the build never gets more than that here (writes go through the artifact stack's
    # role policy, scoped to the model prefix).
    for statement in found:
        for action in actions_of(statement):
            assert not action.endswith("*"), action
            assert action not in {"s3:PutObject", "s3:DeleteObject", "iam:PassRole", "kms:CreateGrant"}, action
        if statement["Resource"] == "*":
            assert actions_of(statement) == ["ecr:GetAuthorizationToken"]


def test_the_artifact_stacks_build_role_is_not_widened(dev_synth):
    template = dev_synth.template(dev_synth.stacks["stage"].artifacts)
    sids = sorted(
        s.get("Sid", "")
        for key, policy in resources(template, "AWS::IAM::Policy").items()
        if key.startswith("BuildRole")
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )
    assert sids == ["EncryptModels", "ListModels", "WriteModels"]


def test_handler_role_is_least_privilege(dev_build):
    found = statements(dev_build, "EnsureArtifactsHandlerRole")
    by_sid = {s.get("Sid"): s for s in found}
    assert sorted(actions_of(by_sid["ReadWriteModels"])) == ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"]
    assert by_sid["ReadWriteModels"]["Resource"] == {
        "Fn::Join": ["", [{"Fn::ImportValue": "Triton-dev-Artifacts-ArtifactBucketArn"}, "/models/*"]]
    }
    assert by_sid["ListModels"]["Condition"] == {"StringLike": {"s3:prefix": ["models/*"]}}
    # cdk.json's @aws-cdk/aws-iam:minimizePolicies sorts actions; the order means nothing to IAM.
    assert sorted(actions_of(by_sid["RunModelBuilds"])) == [
        "codebuild:BatchGetBuilds",
        "codebuild:StartBuild",
        "codebuild:StopBuild",
    ]
    assert by_sid["RunModelBuilds"]["Resource"] == {"Fn::GetAtt": [next(iter(projects(dev_build))), "Arn"]}
    for statement in found:
        assert statement["Resource"] != "*", statement  # BUILD mode needs no wildcard resource
        for action in actions_of(statement):
            assert action not in {"s3:DeleteObject", "s3:*", "codebuild:*", "iam:PassRole"}, action
    assert "ReadSourceStageModels" not in by_sid


def test_endpoint_stacks_depend_on_the_build_stack(dev_synth):
    """Every SageMaker model is created after all ensure-artifact resources completed."""
    stage = dev_synth.stacks["stage"]
    manifest = json.loads((dev_synth.outdir / "manifest.json").read_text())
    assert stage.endpoints
    for endpoint in stage.endpoints.values():
        assert stage.build in endpoint.dependencies
        assert stage.build.artifact_id in manifest["artifacts"][endpoint.artifact_id]["dependencies"]


def test_dev_synth_is_warning_free(dev_synth):
    """No CDK warning on dev's build stack (cdk-nag and Guard judge dev in tests/contract/test_guard_rules.py)."""
    build = dev_synth.stacks["stage"].build.stack_name
    assert dev_synth.messages[build] == []


def findings(report: dict) -> list[tuple[str, str, str]]:
    """Every validation finding (cdk-nag AwsSolutions, CloudFormation validation) in the app."""
    assert report is not None, "no validation-report.json: cdk-nag did not run"
    assert {r["pluginName"] for r in report["pluginReports"]} >= {"AwsSolutions"}
    return [
        (r["pluginName"], v["ruleName"], c["constructPath"])
        for r in report["pluginReports"]
        for v in r["violations"]
        for c in v["violatingConstructs"]
    ] + [(r["pluginName"], r["conclusion"], "") for r in report["pluginReports"] if r["conclusion"] != "success"]


def cfn_lint(*files: Path) -> subprocess.CompletedProcess:
    executable = Path(sys.executable).with_name("cfn-lint")
    return subprocess.run(
        [str(executable), "--non-zero-exit-code", "warning", "--", *map(str, files)], capture_output=True, text=True
    )


def test_cfn_lint_is_clean_on_the_build_templates(dev_synth, variants_synth):
    files = [dev_synth.template_file(dev_synth.stacks["stage"].build)]
    files += [variants_synth.template_file(s) for name, s in variants_synth.stacks.items() if name.endswith("-build")]
    result = cfn_lint(*files)
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------
# Variants: every build environment, fleets, sources, layouts, promotion


@pytest.fixture(scope="module")
def mixed(variants_synth) -> dict:
    return variants_synth.template(variants_synth.stacks["mixed-build"])


def test_each_build_environment_gets_its_own_project(mixed):
    environments = {
        key.removeprefix("Build")[:-8]: props["Properties"]["Environment"] for key, props in projects(mixed).items()
    }
    assert environments["A10G"]["ComputeType"] == "BUILD_GENERAL1_SMALL"
    assert environments["A10G"]["Type"] == "LINUX_GPU_CONTAINER"
    assert environments["V100"]["ComputeType"] == "BUILD_GENERAL1_LARGE"
    assert environments["V100"]["Type"] == "LINUX_GPU_CONTAINER"
    assert environments["Package"]["Type"] == "LINUX_CONTAINER"
    assert environments["Package"]["Image"].startswith("aws/codebuild/standard:")
    assert all(env["PrivilegedMode"] is False for env in environments.values())
    for props in projects(mixed).values():
        assert props["Properties"]["TimeoutInMinutes"] == 90
        assert props["Properties"]["QueuedTimeoutInMinutes"] == 30
        assert props["Properties"]["ConcurrentBuildLimit"] == 3  # >= the 3 artifacts of the A10G project
    for group in resources(mixed, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == 14


def test_ampere_targets_build_on_the_a10g_with_hardware_compatibility(mixed):
    found = artifacts_by_model(mixed)
    g5, g6 = found["resnet50@sm86"], found["resnet50@ampere+"]
    assert g5["Key"] != g6["Key"]
    assert (
        json.loads(g6["BuildEnvironment"]["BUILD_CONFIG"])["models"][0]["tensorrt"]["hardware_compatibility"]
        == "ampere+"
    )
    assert (
        json.loads(g5["BuildEnvironment"]["BUILD_CONFIG"])["models"][0]["tensorrt"]["hardware_compatibility"] == "none"
    )
    assert g6["BuildEnvironment"]["EXPECT_COMPUTE_CAPABILITY"] == "8.6"
    assert g5["ProjectName"] == g6["ProjectName"]
    # The unpacked single-model endpoint on g6 asks for the unpacked layout; the g5 MME for its copy.
    assert g6["UncompressedPrefix"] == g6["Key"].replace("model.tar.gz", "uncompressed/")
    assert g6["CopyTo"] == []
    assert "UncompressedPrefix" not in g5 and len(g5["CopyTo"]) == 1


def test_p3_builds_on_the_v100_project(mixed):
    p3 = artifacts_by_model(mixed)["local_trt@sm70"]
    assert p3["BuildEnvironment"]["EXPECT_COMPUTE_CAPABILITY"] == "7.0"
    assert p3["ProjectName"]["Ref"].startswith("BuildV100")


def test_local_onnx_sources_ship_as_assets_the_build_may_read(mixed):
    local = artifacts_by_model(mixed)["local_trt@sm70"]["BuildEnvironment"]
    assert local["SOURCE_KIND"] == "file"
    uri = json.dumps(local["SOURCE_URI"])
    assert "s3://" in uri and ".onnx" in uri
    readable = json.dumps([s for s in statements(mixed, "BuildV100Policy") if s["Sid"] == "ReadBuildSources"])
    assert re.search(r"[0-9a-f]{64}\.onnx", readable)


def test_s3_sources_are_passed_and_readable(mixed):
    s3 = artifacts_by_model(mixed)["s3_trt@sm86"]["BuildEnvironment"]
    assert (s3["SOURCE_KIND"], s3["SOURCE_URI"]) == ("s3", "s3://model-sources-bucket/onnx/model.onnx?versionId=v1")
    readable = next(s for s in statements(mixed, "BuildA10GPolicy") if s["Sid"] == "ReadBuildSources")
    assert {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::model-sources-bucket/onnx/model.onnx"]]} in (
        readable["Resource"]
    )


def test_engine_builds_get_the_build_check_as_a_secondary_source_they_may_read(mixed):
    """CodeBuild User Guide, "Multiple input sources and output artifacts sample": a secondary source has a
    `sourceIdentifier` and is installed in $CODEBUILD_SRC_DIR_<sourceIdentifier> (the buildspec links
    $CODEBUILD_SRC_DIR_endpoint_client); the role reads it as it reads the primary source (S3 GetObject on the
    asset's object, GetBucketAcl/GetBucketLocation on its bucket). Every project also gets serving_facts, the facts
    model_build imports (issue #23 item 1); projects that build no engine get no check."""
    for key, project in projects(mixed).items():
        properties = project["Properties"]
        name = key.removeprefix("Build")[:-8]
        by_identifier = {source["SourceIdentifier"]: source for source in properties["SecondarySources"]}
        if name == "Package":
            assert set(by_identifier) == {"serving_facts"}
            continue
        assert set(by_identifier) == {"serving_facts", "endpoint_client"}
        secondary = by_identifier["endpoint_client"]
        assert secondary["Type"] == "S3"
        location = json.dumps(secondary["Location"])
        object_key = re.search(r"[0-9a-f]{64}\.zip", location).group(0)
        assert object_key != re.search(r"[0-9a-f]{64}\.zip", json.dumps(properties["Source"]["Location"])).group(0)
        readable = next(s for s in statements(mixed, f"Build{name}Policy") if s["Sid"] == "ReadBuildSources")
        assert object_key in json.dumps(readable["Resource"])


def test_every_build_reads_the_shared_facts_as_a_secondary_source(mixed):
    """model_build imports serving_facts (issue #23 item 1): each project ships it as the secondary source
    `serving_facts` (the buildspec links $CODEBUILD_SRC_DIR_serving_facts) and its role may read that object."""
    from stacks.build_stack import FACTS_SOURCE_DIR

    assert (FACTS_SOURCE_DIR / "catalogue.py").is_file() and FACTS_SOURCE_DIR.name == "serving_facts"
    for key, project in projects(mixed).items():
        properties = project["Properties"]
        [facts] = [s for s in properties["SecondarySources"] if s["SourceIdentifier"] == "serving_facts"]
        object_key = re.search(r"[0-9a-f]{64}\.zip", json.dumps(facts["Location"])).group(0)
        name = key.removeprefix("Build")[:-8]
        readable = next(s for s in statements(mixed, f"Build{name}Policy") if s["Sid"] == "ReadBuildSources")
        assert object_key in json.dumps(readable["Resource"])


def test_the_build_check_source_is_the_endpoint_client_package():
    """The secondary source's asset is endpoint_client (the check and what it imports), without caches."""
    from stacks.build_stack import CHECK_SOURCE_DIR

    assert (CHECK_SOURCE_DIR / "build_check_cli.py").is_file() and CHECK_SOURCE_DIR.name == "endpoint_client"


def test_models_without_a_gpu_build_are_packaged_on_cpu(mixed):
    cpu = artifacts_by_model(mixed)["cpu_onnx@portable"]
    assert cpu["ProjectName"]["Ref"].startswith("BuildPackage")
    assert (cpu["BuildEnvironment"]["EXPECT_TENSORRT"], cpu["BuildEnvironment"]["EXPECT_COMPUTE_CAPABILITY"]) == (
        "",
        "",
    )
    assert cpu["BuildEnvironment"]["PLATFORM"] == "onnxruntime_onnx"
    package_policy = statements(mixed, "BuildPackagePolicy")
    assert {s["Sid"] for s in package_policy} == {
        "WriteOwnLogs",
        "ReadBuildSources",
        "LocateBuildSource",
    }  # no image pull


def test_a_t4_fleet_builds_g4dn_targets_on_the_fleet(variants_synth):
    template = variants_synth.template(variants_synth.stacks["fleet-build"])
    (project,) = projects(template).values()
    environment = project["Properties"]["Environment"]
    assert environment["Fleet"] == {"FleetArn": FLEET_ARN}
    assert environment["ComputeType"] == "CUSTOM_INSTANCE_TYPE"
    assert environment["Type"] == "LINUX_GPU_CONTAINER"
    (artifact,) = resources(template, ARTIFACT_TYPE).values()
    assert artifact["Properties"]["BuildEnvironment"]["GPU_TARGET"] == "sm75"
    assert artifact["Properties"]["BuildEnvironment"]["EXPECT_COMPUTE_CAPABILITY"] == "7.5"


def test_promotion_creates_no_build_and_copies_from_the_source_bucket(variants_synth):
    template = variants_synth.template(variants_synth.stacks["prod2-build"])
    assert projects(template) == {}
    assert resources(template, "AWS::Events::Rule") == {}
    source_template = variants_synth.template(variants_synth.stacks["dev2-build"])
    source_keys = sorted(r["Properties"]["Key"] for r in resources(source_template, ARTIFACT_TYPE).values())
    found = [r["Properties"] for r in resources(template, ARTIFACT_TYPE).values()]
    assert sorted(p["Key"] for p in found) == source_keys  # same bytes, same keys: promoted, not rebuilt
    for props in found:
        assert props["SourceBucket"] == "triton-dev2-artifacts"
        assert "ProjectName" not in props and "BuildEnvironment" not in props
    by_sid = {s.get("Sid"): s for s in statements(template, "EnsureArtifactsHandlerRole")}
    assert by_sid["ReadSourceStageModels"]["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::triton-dev2-artifacts/models/*"]]
    }
    assert actions_of(by_sid["ReadSourceStageModels"]) == ["s3:GetObject", "s3:GetObjectVersion"]
    decrypt = by_sid["DecryptSourceStageModels"]
    assert actions_of(decrypt) == ["kms:Decrypt"]
    # dev2 fixes its account and region (us-east-1), prod2 deploys to eu-west-1: S3 decrypts dev2's objects
    # in dev2's region, with dev2's keys, for dev2's bucket only.
    assert decrypt["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":kms:us-east-1:111111111111:key/*"]]
    }
    source_arn = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::triton-dev2-artifacts"]]}
    assert decrypt["Condition"] == {
        "StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"},
        "StringLike": {
            "kms:EncryptionContext:aws:s3:arn": [
                source_arn,
                {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::triton-dev2-artifacts/models/*"]]},
            ]
        },
    }
    assert all(r["Properties"]["SourceRegion"] == "us-east-1" for r in resources(template, ARTIFACT_TYPE).values())
    assert wait_conditions(template) == {}  # promotion copies inside the resource: nothing to wait for
    assert "RunModelBuilds" not in by_sid
    assert not any(a.startswith("codebuild:") for s in by_sid.values() for a in actions_of(s))


def test_variants_are_nag_clean_and_warning_free(variants_synth):
    ours = {s.stack_name for s in variants_synth.stacks.values()}
    assert all(variants_synth.messages[name] == [] for name in ours)
    assert findings(variants_synth.report) == []


def test_promotion_from_a_stage_without_a_bucket_name_is_refused(tmp_path):
    from stacks.promotion import PromotionError
    from stage_config import load_config

    source, target = promote_documents()
    source["artifacts"] = {}
    folder = write_configs(tmp_path, source, target)
    with pytest.raises(PromotionError) as raised:
        stage_stacks(new_app(), load_config(folder / "prod2.yaml"), folder)
    assert str(raised.value) == (
        "stage 'prod2' promotes from 'dev2', whose artifacts.bucket_name is not set; set artifacts.bucket_name in "
        "config/dev2.yaml (and list this stage's account in its artifacts.reader_accounts when it deploys elsewhere)"
    )


# ---------------------------------------------------------------------------------------------
# The buildspec calls model_build the way its CLI accepts


def buildspec_commands() -> list[str]:
    spec = yaml.safe_load((PROJECT_ROOT / "model_build" / "buildspec.yml").read_text())
    assert spec["version"] == 0.2
    return [command for phase in spec["phases"].values() for command in phase["commands"]]


def test_buildspec_commands_are_valid_bash():
    for command in buildspec_commands():
        result = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert result.returncode == 0, (command, result.stderr)


def test_buildspec_model_build_calls_parse_with_the_cli():
    values = {
        "WORK": "/tmp/w",
        "MODEL_NAME": "resnet50",
        "TRTEXEC": "/usr/src/tensorrt/bin/trtexec",
        "SOURCE_URI": "resnet50",
        "EXPECT_TENSORRT": "10.4.0.26",
        "EXPECT_COMPUTE_CAPABILITY": "8.6",
        "ARTIFACT_BUCKET": "b",
        "ARTIFACT_KEY": "models/resnet50/x/model.tar.gz",
        "UNCOMPRESSED_PREFIX": "models/resnet50/x/uncompressed/",
        "file": "resnet50/config.pbtxt",
        "TRITONSERVER": "/opt/tritonserver/bin/tritonserver",
    }
    text = "\n".join(buildspec_commands()).replace("\\\n", " ")
    calls = re.findall(r"python3 -m model_build ([^\n;|)]+)", text)
    subcommands = {call.split()[0] for call in calls}
    assert subcommands == {"export", "config", "build", "check", "package", "upload", "report"}
    parser = build_parser()
    for call in calls:
        expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], call.split(" --print-requirements")[0])
        args = parser.parse_args(shlex.split(expanded))
        assert args.command == call.split()[0]
    build_call = next(c for c in calls if c.startswith("build "))
    assert "--expect-tensorrt" in build_call and "--expect-compute-capability" in build_call
    # The archive key is written by the last upload; only the build report (beside it, report --publish) follows.
    upload, report = (c.strip().splitlines()[1].strip() + c for c in buildspec_commands()[-2:])
    assert upload.startswith("python3 -m model_build upload") and '--key "$ARTIFACT_KEY"' in upload
    assert report.startswith("python3 -m model_build report") and "--publish" in report
    # The build check's call parses with its own parser (endpoint_client/build_check_cli.py).
    from endpoint_client.build_check_cli import build_parser as check_parser

    (check,) = re.findall(r"python3 -m endpoint_client\.build_check_cli ([^\n;|)]+)", text)
    for samples_uri, samples in (("s3://b/samples.npz", "/tmp/w/samples.npz"), ("", None)):
        # ${SAMPLES_URI:+--samples ...}: bash's "alternate value", only where SAMPLES_URI is set and not empty.
        given = re.sub(r"\$\{SAMPLES_URI:\+([^}]*)\}", lambda m, uri=samples_uri: m.group(1) if uri else "", check)
        args = check_parser().parse_args(shlex.split(re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], given)))
        assert (args.tritonserver, args.out) == (Path("/opt/tritonserver/bin/tritonserver"), Path("/tmp/w/report.json"))
        assert args.samples == samples


@pytest.mark.parametrize("release", ["23.12", "24.05", "24.09", "25.04", "26.05"])
def test_expected_tensorrt_matches_what_trtexecs_banner_can_show(release):
    """`build --expect-tensorrt` compares with trtexec's banner, which carries major.minor.patch only."""
    from model_build.trt import tensorrt_version_from_banner
    from serving_facts.releases import same_tensorrt, tensorrt_version
    from triton_cdk.artifact_build.requests import expected_tensorrt

    major, minor, patch = (int(p) for p in tensorrt_version(release).split(".")[:3])
    number = major * 10000 + minor * 100 + patch if major >= 9 else major * 1000 + minor * 100 + patch
    banner = f"&&&& RUNNING TensorRT.trtexec [TensorRT v{number}] # trtexec"
    assert same_tensorrt(tensorrt_version_from_banner(banner), expected_tensorrt(release))
    assert not same_tensorrt("9.9.9", expected_tensorrt(release))


def test_handlers_are_the_unbundled_handler_folder(dev_build):
    functions = {
        f["Properties"]["Handler"]: f["Properties"]
        for f in resources(dev_build, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"].startswith("index.")
    }
    assert sorted(functions) == ["index.on_build_state", "index.on_event"]
    for props in functions.values():
        assert props["Runtime"] == "python3.14"
        assert props["LoggingConfig"]["LogGroup"]["Ref"].startswith("EnsureArtifacts")  # own group, with retention
    assert functions["index.on_event"]["Timeout"] == 14 * 60
    handler_dir = PROJECT_ROOT / "triton_cdk" / "artifact_build" / "handlers" / "ensure_artifact"
    assert sorted(p.name for p in handler_dir.iterdir() if p.name != "__pycache__") == ["index.py"]
    imports = re.findall(r"^(?:import|from) (\w+)", (handler_dir / "index.py").read_text(), re.MULTILINE)
    assert set(imports) <= {
        "__future__",
        "base64",
        "collections",
        "json",
        "logging",
        "os",
        "time",
        "typing",
        "urllib",
        "boto3",
        "botocore",
    }


def test_the_wait_follows_the_config(mixed):
    # mixed: queue 30 + build 90 + 15 minutes margin.
    assert {w["Properties"]["Timeout"] for w in wait_conditions(mixed).values()} == {str((30 + 90 + 15) * 60)}


def test_a_project_limit_below_the_builds_one_deployment_starts_is_refused(tmp_path):
    """ "Builds in AWS CodeBuild": with a project concurrent build limit, builds over it return an error."""
    from build_helpers import mixed_document

    from stage_config import ConfigError, load_config
    from triton_cdk.errors import TritonCdkError

    document = mixed_document()
    document["build"]["concurrency"] = 2
    folder = write_configs(tmp_path, document)
    roots = (PROJECT_ROOT, PROJECT_ROOT.parent / "shared")
    # The loader refuses it first, naming file, field and line (stage_config/build_concurrency.py) ...
    with pytest.raises(ConfigError, match=r"mixed\.yaml: build\.concurrency: 2 is below the 3 artifacts the A10G"):
        load_config(folder / "mixed.yaml", source_roots=roots)
    # ... and the stack, counting its own requests, agrees for a config built in code (a clean TritonCdkError).
    document["build"].pop("concurrency")
    folder = write_configs(tmp_path / "code", document)
    config = load_config(folder / "mixed.yaml", source_roots=roots)
    config = config.model_copy(update={"build": config.build.model_copy(update={"concurrency": 2})})
    with pytest.raises(TritonCdkError) as raised:
        stage_stacks(new_app(), config, folder)
    assert str(raised.value).startswith(
        "stage 'mixed': build.concurrency: 2 is below the 3 artifacts the A10G build project may build at once"
    )
