"""The pipeline template: stage order, approval before prod, smoke steps, least privilege, build once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipeline_helpers import DEV_BUCKET, PIPELINE_ACCOUNT, PROD_ACCOUNT
from synth_helpers import PROJECT_ROOT, Synthesized

from endpoint_client.smoke_plan import SmokePlan


def _actions(stage: dict) -> list[dict]:
    return sorted(stage["Actions"], key=lambda a: a["RunOrder"])


def _stage(pipeline: Synthesized, name: str) -> dict:
    return next(s for s in pipeline.pipeline_stages() if s["Name"] == name)


def _project(pipeline: Synthesized, action: dict) -> dict:
    ref = action["Configuration"]["ProjectName"]["Ref"]
    return pipeline.template["Resources"][ref]


def _env(project: dict) -> dict[str, object]:
    return {v["Name"]: v["Value"] for v in project["Properties"]["Environment"].get("EnvironmentVariables", [])}


def _buildspec(project: dict) -> dict:
    return json.loads(project["Properties"]["Source"]["BuildSpec"])


def _role_statements(pipeline: Synthesized, project: dict) -> list[dict]:
    role = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    policies = [p for p in pipeline.resources("AWS::IAM::Policy").values() if {"Ref": role} in p["Properties"]["Roles"]]
    return [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _smoke_action(stage: dict, name: str) -> dict:
    return next(a for a in stage["Actions"] if a["Name"] == name)


def test_stages_run_source_synth_selfmutation_dev_then_prod(default_pipeline):
    names = [s["Name"] for s in default_pipeline.pipeline_stages()]
    # CDK Pipelines adds "Assets" (publishing the stages' file assets) before the first deployment.
    assert [n for n in names if n != "Assets"] == ["Source", "Build", "UpdatePipeline", "dev", "prod"]
    assert "Assets" not in names or names.index("Assets") < names.index("dev")
    (pipeline,) = default_pipeline.resources("AWS::CodePipeline::Pipeline").values()
    assert pipeline["Properties"]["PipelineType"] == "V2"  # stage rollback (docs/pipeline.md) needs V2
    assert pipeline["Properties"]["Name"] == "triton-promotion"
    source = default_pipeline.pipeline_stages()[0]["Actions"][0]
    assert source["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    assert source["Configuration"]["FullRepositoryId"] == "owner/repo"
    assert source["Configuration"]["BranchName"] == "main"
    assert "REPLACE-ME" in source["Configuration"]["ConnectionArn"]


def test_synth_step_runs_the_tests_before_synth(default_pipeline):
    synth = _project(default_pipeline, _stage(default_pipeline, "Build")["Actions"][0])
    commands = _buildspec(synth)["phases"]["build"]["commands"]
    assert commands == ["make test", "make synth-pipeline PIPELINE_OUTDIR=cdk.out-pipeline"]
    assert _buildspec(synth)["artifacts"]["base-directory"] == "cdk.out-pipeline"


def test_each_stage_deploys_its_stacks_then_smoke_tests_last(default_pipeline):
    for name in ("dev", "prod"):
        actions = _actions(_stage(default_pipeline, name))
        deployed = {a["Name"].split(".")[0] for a in actions if a["ActionTypeId"]["Provider"] == "CloudFormation"}
        assert deployed == {
            f"Triton-{name}-Artifacts",
            f"Triton-{name}-Build",
            f"Triton-{name}-Endpoint-triton-mme",
            f"Triton-{name}-Endpoint-triton-bert",
            f"Triton-{name}-SmokeAccess",
        }
        last = actions[-1]
        assert last["Name"] == "SmokeTest"
        assert last["ActionTypeId"]["Provider"] == "CodeBuild"
        assert all(a["RunOrder"] < last["RunOrder"] for a in actions[:-1])


def test_approval_comes_first_in_prod_with_dev_smoke_summary(default_pipeline):
    prod = _actions(_stage(default_pipeline, "prod"))
    approval = prod[0]
    assert approval["ActionTypeId"]["Provider"] == "Manual"
    assert all(a["RunOrder"] > approval["RunOrder"] for a in prod[1:])
    dev_smoke = _smoke_action(_stage(default_pipeline, "dev"), "SmokeTest")
    namespace = dev_smoke["Namespace"]
    assert approval["Configuration"]["CustomData"] == (
        f"Promote to prod. dev smoke test: #{{{namespace}.SMOKE_SUMMARY}}"
    )
    assert len(approval["Configuration"]["CustomData"]) <= 500
    # dev's smoke build exports the variable the comment reads.
    spec = _buildspec(_project(default_pipeline, dev_smoke))
    assert spec["env"]["exported-variables"] == ["SMOKE_SUMMARY"]
    assert 'export SMOKE_SUMMARY="$(cat smoke-report/summary.txt)"' in spec["phases"]["build"]["commands"]
    assert not any(a["ActionTypeId"]["Provider"] == "Manual" for a in _stage(default_pipeline, "dev")["Actions"])


def test_smoke_step_gets_its_stage_plan_role_and_bucket(default_pipeline):
    for name in ("dev", "prod"):
        action = _smoke_action(_stage(default_pipeline, name), "SmokeTest")
        env = _env(_project(default_pipeline, action))
        plan = SmokePlan.from_json(env["SMOKE_PLAN"])
        assert plan.stage == name
        assert {e.deployed_name for e in plan.endpoints} == {f"{name}-triton-mme", f"{name}-triton-bert"}
        mme = next(e for e in plan.endpoints if e.name == "triton-mme")
        assert [m.target_model for m in mme.models] == ["resnet50.tar.gz", "yolov5s.tar.gz", "bert_base.tar.gz"]
        bert = next(e for e in plan.endpoints if e.name == "triton-bert")
        assert bert.models[0].target_model is None
        assert f":role/triton-{name}-smoke-" in json.dumps(env["SMOKE_ROLE_ARN"])
        # The bucket comes from the stage's artifact stack output, through a CodePipeline variable.
        action_env = json.loads(action["Configuration"]["EnvironmentVariables"])
        bucket = next(v for v in action_env if v["name"] == "ARTIFACT_BUCKET")
        artifacts_deploy = next(
            a for a in _stage(default_pipeline, name)["Actions"] if a["Name"] == f"Triton-{name}-Artifacts.Deploy"
        )
        assert bucket["value"] == f"#{{{artifacts_deploy['Namespace']}.ArtifactBucketName}}"


def test_smoke_step_installs_only_the_client_at_the_project_pins(default_pipeline):
    requirements = (PROJECT_ROOT / "requirements.txt").read_text().splitlines()
    expected = [line for line in requirements if line.startswith(("boto3==", "numpy==", "tritonclient["))]
    project = _project(default_pipeline, _smoke_action(_stage(default_pipeline, "dev"), "SmokeTest"))
    (install,) = _buildspec(project)["phases"]["install"]["commands"]
    assert install.startswith("python -m pip install --quiet ")
    assert sorted(part.strip("'") for part in install.split()[5:]) == sorted(expected)
    assert len(expected) == 3


def test_smoke_project_role_may_only_assume_its_stage_role(default_pipeline):
    for name in ("dev", "prod"):
        project = _project(default_pipeline, _smoke_action(_stage(default_pipeline, name), "SmokeTest"))
        statements = _role_statements(default_pipeline, project)
        actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
        assert not any(a.startswith("sagemaker:") for a in actions)
        assume = [s for s in statements if s["Action"] == "sts:AssumeRole"]
        assert len(assume) == 1
        assert f"role/triton-{name}-smoke-" in json.dumps(assume[0]["Resource"])
        other = "prod" if name == "dev" else "dev"
        assert f"triton-{other}-smoke" not in json.dumps(statements)


def test_stage_smoke_role_invokes_only_that_stages_endpoints(default_pipeline):
    for name in ("dev", "prod"):
        templates = default_pipeline.stage_templates(name)
        access = templates[f"Triton-{name}-SmokeAccess"]
        policies = [r for r in access["Resources"].values() if r["Type"] == "AWS::IAM::Policy"]
        statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
        invoke = next(s for s in statements if s["Action"] == "sagemaker:InvokeEndpoint")
        arns = json.dumps(invoke["Resource"])
        assert f"endpoint/{name}-triton-mme" in arns and f"endpoint/{name}-triton-bert" in arns
        assert len(invoke["Resource"]) == 2
        reads = next(s for s in statements if s["Action"] == "s3:GetObject")
        assert all("/models/" in json.dumps(r) and "*" not in json.dumps(r) for r in reads["Resource"])
        assert {s["Action"] if isinstance(s["Action"], str) else tuple(s["Action"]) for s in statements} == {
            "sagemaker:InvokeEndpoint",
            "s3:GetObject",
            "kms:Decrypt",
        }


def test_prod_reuses_dev_keys_and_has_no_build_project(default_pipeline):
    plans = {}
    for name in ("dev", "prod"):
        action = _smoke_action(_stage(default_pipeline, name), "SmokeTest")
        plan = SmokePlan.from_json(_env(_project(default_pipeline, action))["SMOKE_PLAN"])
        plans[name] = {m.artifact_key for e in plan.endpoints for m in e.models}
    assert plans["prod"] == plans["dev"]
    for stack_name, template in default_pipeline.stage_templates("prod").items():
        kinds = {r["Type"] for r in template.get("Resources", {}).values()}
        assert "AWS::CodeBuild::Project" not in kinds, f"{stack_name} has a CodeBuild project: prod must not build"
    # Nor does the pipeline itself start a build for prod: its prod actions deploy or smoke-test only.
    prod_codebuild = [
        a["Name"] for a in _stage(default_pipeline, "prod")["Actions"] if a["ActionTypeId"]["Provider"] == "CodeBuild"
    ]
    assert prod_codebuild == ["SmokeTest"]


def test_prod_endpoints_deploy_canary_with_auto_rollback(default_pipeline):
    endpoints = [
        r
        for template in default_pipeline.stage_templates("prod").values()
        for r in template.get("Resources", {}).values()
        if r["Type"] == "AWS::SageMaker::Endpoint"
    ]
    assert len(endpoints) == 2
    for endpoint in endpoints:
        deployment = endpoint["Properties"]["DeploymentConfig"]
        assert deployment["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == "CANARY"
        assert len(deployment["AutoRollbackConfiguration"]["Alarms"]) == 3


def test_dev_bucket_is_named_for_prod_to_copy_from(default_pipeline):
    artifacts = default_pipeline.stage_templates("dev")["Triton-dev-Artifacts"]
    buckets = [
        r["Properties"].get("BucketName") for r in artifacts["Resources"].values() if r["Type"] == "AWS::S3::Bucket"
    ]
    assert DEV_BUCKET in buckets


def test_artifact_bucket_is_kms_encrypted_and_tls_only(default_pipeline):
    (bucket,) = default_pipeline.resources("AWS::S3::Bucket").values()
    encryption = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    # Two keys: the artifact bucket's and the build logs' (triton_cdk/pipeline/logs.py); both rotate.
    keys = default_pipeline.resources("AWS::KMS::Key")
    assert len(keys) == 2 and all(k["Properties"]["EnableKeyRotation"] is True for k in keys.values())
    key_id = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ]["KMSMasterKeyID"]["Fn::GetAtt"][0]
    assert key_id in keys
    (policy,) = default_pipeline.resources("AWS::S3::BucketPolicy").values()
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )
    assert bucket["Properties"]["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] is True


def test_pipeline_templates_are_cfn_lint_clean(default_pipeline):
    templates = [str(default_pipeline.directory / f"{default_pipeline.stack.artifact_id}.template.json")]
    templates += sorted(str(p) for p in default_pipeline.directory.glob("assembly-*/*SmokeAccess*.template.json"))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--non-zero-exit-code", "warning", "--", *templates],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- cross-account, CodeCommit source, prod wave over two regions -----------------------------------


def test_cross_account_wave_deploys_prod_to_each_region_after_one_approval(cross_account_pipeline):
    stages = cross_account_pipeline.pipeline_stages()
    assert [s["Name"] for s in stages if s["Name"] != "Assets"] == ["Source", "Build", "UpdatePipeline", "dev", "prod"]
    assert stages[0]["Actions"][0]["ActionTypeId"]["Provider"] == "CodeCommit"
    assert stages[0]["Actions"][0]["Configuration"]["BranchName"] == "release"
    prod = _actions(stages[-1])
    assert prod[0]["ActionTypeId"]["Provider"] == "Manual"
    assert all(a["RunOrder"] > prod[0]["RunOrder"] for a in prod[1:])
    smoke = [a for a in prod if a["Name"].endswith(".SmokeTest")]
    assert sorted(a["Name"] for a in smoke) == ["prod-us-east-1.SmokeTest", "prod-us-west-2.SmokeTest"]
    assert {a["RunOrder"] for a in smoke} == {max(a["RunOrder"] for a in prod)}
    for region in ("us-east-1", "us-west-2"):
        (prepare,) = [a for a in prod if a["Name"] == f"prod-{region}.Triton-prod-Endpoint-triton-mme.Prepare"]
        assert prepare.get("Region", "us-east-1") == region  # no Region: the pipeline's own (us-east-1)
        # CDK Pipelines deploys through the target account's bootstrap roles (cdk bootstrap --trust).
        assert f"cdk-hnb659fds-deploy-role-{PROD_ACCOUNT}-{region}" in json.dumps(prepare["RoleArn"])
        assert f"cdk-hnb659fds-cfn-exec-role-{PROD_ACCOUNT}-{region}" in json.dumps(prepare["Configuration"])
        action = next(a for a in smoke if a["Name"] == f"prod-{region}.SmokeTest")
        env = _env(_project(cross_account_pipeline, action))
        assert env["SMOKE_ROLE_ARN"] == {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, f":iam::{PROD_ACCOUNT}:role/triton-prod-smoke-{region}"],
            ]
        }
        assert env["SMOKE_REGION"] == region
        plan = SmokePlan.from_json(env["SMOKE_PLAN"])
        assert {e.name: e.max_latency_ms for e in plan.endpoints} == {"triton-mme": 2000, "triton-bert": 300}


def test_cross_account_smoke_role_trusts_the_pipeline_account(cross_account_pipeline):
    templates = cross_account_pipeline.stage_templates("prod-us-west-2")
    access = templates["Triton-prod-SmokeAccess"]  # per stage (region) assembly
    (role,) = [r for r in access["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    assert role["Properties"]["RoleName"] == "triton-prod-smoke-us-west-2"
    principal = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["AWS"]
    assert PIPELINE_ACCOUNT in json.dumps(principal)
    policies = [r for r in access["Resources"].values() if r["Type"] == "AWS::IAM::Policy"]
    invoke = next(
        s
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "sagemaker:InvokeEndpoint"
    )
    assert f":sagemaker:us-west-2:{PROD_ACCOUNT}:endpoint/prod-triton-mme" in json.dumps(invoke["Resource"])


def test_cross_account_pipeline_hands_artifacts_to_target_accounts(cross_account_pipeline):
    # The artifact bucket's key (the other key, the build logs', stays in the pipeline account).
    (key,) = [k for k in cross_account_pipeline.resources("AWS::KMS::Key").values() if "logs." not in json.dumps(k)]
    policy = json.dumps(key["Properties"]["KeyPolicy"])
    assert PROD_ACCOUNT in policy


def test_pipeline_stages_deploy_the_stacks_make_deploy_deploys(default_pipeline):
    """Inside a CDK Stage a stack's name defaults to `<stage>-<id>`; the stage stacks set their names, so the
    pipeline updates the stacks `make deploy STAGE=dev` created instead of creating a second copy that would
    collide on their fixed names (bucket, endpoint, alarms). Found by an independent template review."""
    for stage in ("dev", "prod"):
        names = set(default_pipeline.stage_templates(stage))
        assert {f"Triton-{stage}-Artifacts", f"Triton-{stage}-Build"} <= names, names
        assert not [n for n in names if n.startswith(f"{stage}-Triton-")], names
