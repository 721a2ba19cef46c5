"""`recommend --dry-run`: the requests it would send, checked against botocore's real sagemaker service model.

Sources: botocore's sagemaker service model in the venv (shapes named in each test); SageMaker API reference
(ModelLatencyThreshold: "For custom load tests, specify the value as P95"; RecommendationJobPayloadConfig:
SamplePayloadUrl "must point to a single gzip compressed tar archive (.tar.gz suffix)"); SageMaker guide "Run a
custom load test" (InitialNumberOfUsers 1-3, SpawnRate 0-3, DurationInSeconds 120-3600).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import botocore.session
import pytest
import yaml
from botocore.validate import validate_parameters

from endpoint_client import recommend_request as rr
from endpoint_client.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "config" / "dev.yaml"
ROLE = "arn:aws:iam::123456789012:role/recommender"
CONFIG_PBTXT = """name: "bert_base"
max_batch_size: 64
input [ { name: "input_ids" data_type: TYPE_INT32 dims: [ 128 ] },
        { name: "attention_mask" data_type: TYPE_INT32 dims: [ 128 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


@pytest.fixture(scope="module")
def sagemaker_model():
    return botocore.session.get_session().get_service_model("sagemaker")


@pytest.fixture
def model_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.pbtxt"
    path.write_text(CONFIG_PBTXT)
    return path


def argv(model_config: Path, *extra: str, config: Path = DEV, types: str = "ml.g5.xlarge,ml.g5.2xlarge") -> list:
    return [
        "recommend",
        "--config",
        str(config),
        "--model",
        "bert_base",
        "--endpoint",
        "triton-bert",
        "--instance-types",
        types,
        "--slo-p99-ms",
        "100",
        "--role-arn",
        ROLE,
        "--region",
        "us-east-1",
        "--model-config",
        str(model_config),
        "--job-name",
        "ir-dev-bert",
        *extra,
    ]


def dry_run(capsys, args: list) -> dict:
    assert main([*args, "--dry-run", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_api_facts_from_the_service_model(sagemaker_model) -> None:
    """The members and enums the requests use exist in botocore's sagemaker model (CreateInferenceRecommendationsJob:
    RecommendationJobType, TrafficType, ContainerMode; EndpointInputConfigurations 1-10; CategoricalParameters 1-5
    with 1-3 values; ModelLatencyThresholds exactly 1; DescribeInferenceRecommendationsJob RecommendationJobStatus)."""
    job = sagemaker_model.operation_model("CreateInferenceRecommendationsJob").input_shape
    assert "Advanced" in job.members["JobType"].enum
    inputs = job.members["InputConfig"]
    assert "PHASES" in inputs.members["TrafficPattern"].members["TrafficType"].enum
    assert set(inputs.members["TrafficPattern"].members["Phases"].member.members) == {
        "InitialNumberOfUsers",
        "SpawnRate",
        "DurationInSeconds",
    }
    configurations = inputs.members["EndpointConfigurations"]
    assert (configurations.metadata["min"], configurations.metadata["max"]) == (1, 10)
    ranges = configurations.member.members["EnvironmentParameterRanges"].members["CategoricalParameterRanges"]
    assert ranges.metadata["max"] == 5
    assert ranges.member.members["Value"].metadata["max"] == 3
    payload = inputs.members["ContainerConfig"].members["PayloadConfig"]
    assert set(payload.members) == {"SamplePayloadUrl", "SupportedContentTypes"}
    stopping = job.members["StoppingConditions"]
    thresholds = stopping.members["ModelLatencyThresholds"]
    assert (thresholds.metadata["min"], thresholds.metadata["max"]) == (1, 1)
    assert set(thresholds.member.members) == {"Percentile", "ValueInMilliseconds"}
    assert "MaxInvocations" in stopping.members
    container = sagemaker_model.operation_model("CreateModel").input_shape.members["PrimaryContainer"]
    assert "SingleModel" in container.members["Mode"].enum
    status = sagemaker_model.operation_model("DescribeInferenceRecommendationsJob").output_shape.members["Status"]
    assert {"COMPLETED", "FAILED", "STOPPED", "IN_PROGRESS", "PENDING"} <= set(status.enum)
    assert rr.limit("CreateInferenceRecommendationsJob", "InputConfig", "EndpointConfigurations", key="max") == 10


def test_dry_run_requests_pass_botocore_validation(capsys, model_config, sagemaker_model) -> None:
    """botocore.validate.validate_parameters accepts every printed request against the real service model."""
    document = dry_run(capsys, argv(model_config, "--env-range", "SAGEMAKER_TRITON_THREAD_COUNT=4,8"))
    assert document["dry_run"] is True
    (job,) = document["jobs"]
    for operation in ("CreateModel", "CreateInferenceRecommendationsJob"):
        validate_parameters(job[operation], sagemaker_model.operation_model(operation).input_shape)
    request = job["CreateInferenceRecommendationsJob"]
    assert request["JobType"] == "Advanced"
    assert request["RoleArn"] == ROLE
    assert request["InputConfig"]["ModelName"] == job["CreateModel"]["ModelName"] == "ir-dev-bert"
    assert request["InputConfig"]["TrafficPattern"] == {
        "TrafficType": "PHASES",
        "Phases": [{"InitialNumberOfUsers": 1, "SpawnRate": 1, "DurationInSeconds": 120}],
    }
    assert [c["InstanceType"] for c in request["InputConfig"]["EndpointConfigurations"]] == [
        "ml.g5.xlarge",
        "ml.g5.2xlarge",
    ]
    assert request["InputConfig"]["EndpointConfigurations"][0]["EnvironmentParameterRanges"] == {
        "CategoricalParameterRanges": [{"Name": "SAGEMAKER_TRITON_THREAD_COUNT", "Value": ["4", "8"]}]
    }
    assert request["StoppingConditions"] == {
        "MaxInvocations": 3000,
        "ModelLatencyThresholds": [{"Percentile": "P95", "ValueInMilliseconds": 100}],
    }
    payload = request["InputConfig"]["ContainerConfig"]["PayloadConfig"]
    assert payload["SupportedContentTypes"] == ["application/json"]
    assert payload["SamplePayloadUrl"] == f"s3://{job['SamplePayload']['Bucket']}/{job['SamplePayload']['Key']}"
    assert payload["SamplePayloadUrl"].endswith(".tar.gz")


def test_the_model_is_the_stages(capsys, model_config) -> None:
    """Image, environment and ModelDataUrl come from the functions the stage's endpoint stack uses: triton_image,
    container_environment + the default model name (TritonModel), and the stage plan's artifact key."""
    from stacks.artifact_plan import model_artifact
    from stacks.container_environment import container_environment
    from stacks.stage_plan import plan_stage
    from stage_config import load_config
    from stage_config.loader import PROJECT_ROOT
    from triton_cdk.images import triton_image

    (job,) = dry_run(capsys, argv(model_config))["jobs"]
    config = load_config(DEV)
    artifact = model_artifact(config, config.model("bert_base"), "ml.g5.xlarge", PROJECT_ROOT)
    planned = plan_stage(config, PROJECT_ROOT).endpoint_artifacts("triton-bert").models[0]
    assert planned.key == artifact.key
    endpoint = next(e for e in config.endpoints if e.name == "triton-bert")
    container = job["CreateModel"]["PrimaryContainer"]
    assert container["ModelDataUrl"] == f"s3://{config.artifacts.bucket_name}/{artifact.key}"
    assert container["Image"] == triton_image(config.triton_release, "us-east-1", gpu=True).uri
    assert container["Environment"] == {
        **container_environment(endpoint.container),
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "bert_base",
    }
    assert container["Mode"] == "SingleModel"
    assert job["CreateModel"]["EnableNetworkIsolation"] is endpoint.network_isolation


def test_sample_payload_is_one_json_request_in_a_tar_gz(model_config) -> None:
    """SamplePayloadUrl: a single gzip tar; its file is a KServe v2 JSON request with the model's inputs."""
    tensors = rr.read_model_config_inputs(model_config, batch_size=2)
    archive, content_type = rr.payload_archive(tensors, rr.PayloadEncoding.JSON)
    assert (archive, content_type) == rr.payload_archive(tensors, rr.PayloadEncoding.JSON)  # deterministic bytes
    assert content_type == "application/json"
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        (member,) = tar.getmembers()
        body = json.loads(tar.extractfile(member).read())
    assert member.name == "payload-0.json" and member.isfile()
    assert {(i["name"], i["datatype"], tuple(i["shape"])) for i in body["inputs"]} == {
        ("input_ids", "INT32", (2, 128)),
        ("attention_mask", "INT32", (2, 128)),
    }


def test_bytes_inputs_go_binary(capsys, tmp_path) -> None:
    """An image ensemble takes raw bytes (TYPE_STRING), which JSON strings cannot carry: `--raw` with
    `--encoding binary` sends one binary+json body, its json-header-size fixed in SupportedContentTypes."""
    image = tmp_path / "cat.jpg"
    image.write_bytes(bytes(range(256)))
    args = [
        "recommend",
        "--config",
        str(ROOT / "examples" / "config" / "ensemble.yaml"),
        "--model",
        "image_classifier",
        "--instance-types",
        "ml.g5.xlarge",
        "--slo-p99-ms",
        "250",
        "--role-arn",
        ROLE,
        "--region",
        "us-east-1",
        "--raw",
        f"image={image}",
        "--job-name",
        "ir-ens",
    ]
    (job,) = dry_run(capsys, [*args, "--encoding", "binary"])["jobs"]
    (content_type,) = job["CreateInferenceRecommendationsJob"]["InputConfig"]["ContainerConfig"]["PayloadConfig"][
        "SupportedContentTypes"
    ]
    assert content_type.startswith("application/vnd.sagemaker-triton.binary+json;json-header-size=")
    assert main([*args, "--dry-run"]) == 1  # JSON: these bytes are not UTF-8
    assert "use the binary encoding" in capsys.readouterr().err


def test_one_job_per_artifact(capsys, model_config, tmp_path) -> None:
    """A TensorRT engine is built per GPU target: ml.g5 (sm86) and ml.g6 (ampere+) read different artifacts, so two
    models and two jobs; each job name keeps its suffix within SageMaker's 40-character cut."""
    data = yaml.safe_load(DEV.read_text())
    g6 = next(e for e in data["endpoints"] if e["name"] == "triton-bert") | {
        "name": "triton-bert-g6",
        "instance_type": "ml.g6.xlarge",
    }
    data["endpoints"].append(g6)
    config = tmp_path / "dev.yaml"
    config.write_text(yaml.safe_dump(data))
    jobs = dry_run(capsys, argv(model_config, config=config, types="ml.g5.xlarge,ml.g6.xlarge"))["jobs"]
    assert [j["CreateInferenceRecommendationsJob"]["JobName"] for j in jobs] == ["ir-dev-bert-1", "ir-dev-bert-2"]
    urls = {j["CreateModel"]["PrimaryContainer"]["ModelDataUrl"] for j in jobs}
    assert len(urls) == 2
    assert [
        [c["InstanceType"] for c in j["CreateInferenceRecommendationsJob"]["InputConfig"]["EndpointConfigurations"]]
        for j in jobs
    ] == [["ml.g5.xlarge"], ["ml.g6.xlarge"]]


def test_an_artifact_the_stage_does_not_build_is_refused(capsys, model_config) -> None:
    """dev builds bert_base for ml.g5 only; ml.g6 needs an ampere+ artifact nobody uploads."""
    assert main([*argv(model_config, types="ml.g5.xlarge,ml.g6.xlarge"), "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: --instance-types: ml.g6.xlarge") and "does not build" in err


def test_job_names_fit_the_api(sagemaker_model) -> None:
    """RecommendationJobName / ModelName patterns: letters, digits, inner hyphens (model names have '_')."""
    import re

    pattern = sagemaker_model.operation_model("CreateModel").input_shape.members["ModelName"].metadata["pattern"]
    for base, suffix in (("ir-dev-bert_base-20260101000000", None), ("x" * 80, "2"), ("a__b--c", "1")):
        name = rr.job_name(base, suffix)
        assert re.fullmatch(pattern, name) and len(name) <= rr.DERIVED_NAME_LIMIT
        if suffix:
            assert name.endswith(f"-{suffix}")


def test_default_job_name_starts_ir(capsys, model_config) -> None:
    """The role's policy (docs/performance.md) scopes SageMaker actions to `ir-*`; default names start with it."""
    import re

    args = argv(model_config)
    index = args.index("--job-name")
    (job,) = dry_run(capsys, [*args[:index], *args[index + 2 :]])["jobs"]
    name = job["CreateInferenceRecommendationsJob"]["JobName"]
    assert re.fullmatch(r"ir-dev-bert-base-\d{14}-[0-9a-f]{4}", name) and len(name) <= rr.DERIVED_NAME_LIMIT


def documented_policy() -> dict:
    text = (ROOT / "docs" / "performance.md").read_text()
    block = text.split("<!-- recommend-role-policy -->\n```json\n", 1)[1].split("```", 1)[0]
    return json.loads(block)


def test_documented_role_policy_is_least_privilege() -> None:
    """Every action of the documented role policy is a real IAM action (policy_sentry's offline IAM tables); the
    SageMaker ones are scoped to `ir-*` resources; `Resource: "*"` only where the action has no resource type."""
    from policy_sentry.querying.actions import get_action_data

    statements = documented_policy()["Statement"]
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for action in actions:
            assert "*" not in action
            service, name = action.split(":")
            data = get_action_data(service, name)
            assert data and data.get(service), f"{action} is not an IAM action"
            if resources == ["*"]:
                assert {row["resource_arn_format"] for row in data[service]} == {"*"}, action
            if service == "sagemaker":
                assert all(r.endswith("/ir-*") for r in resources), statement["Sid"]
    assert {s["Sid"] for s in statements} >= {"TestEndpoints", "ReadTheArtifactAndThePayload", "PullTheTritonImage"}


def test_documented_image_repository_is_the_triton_images() -> None:
    """The policy's ECR repository is the one triton_image names (account and repository in us-east-1)."""
    from triton_cdk.images import triton_image

    image = triton_image("24.09", "us-east-1", gpu=True)
    pull = next(s for s in documented_policy()["Statement"] if s["Sid"] == "PullTheTritonImage")
    assert pull["Resource"] == f"arn:aws:ecr:us-east-1:{image.account}:repository/{image.repository}"
