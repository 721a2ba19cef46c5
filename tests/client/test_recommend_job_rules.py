"""`recommend`: job names are unique and never cut, the phase fits the job, the payload is deterministic and where
the role may read it, VPC endpoints get the documented permissions, and its proposals are lines the config loader
takes; each test names the rule's source."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_recommend_request import DEV, ROOT, argv, documented_policy, dry_run

from endpoint_client import recommend
from endpoint_client import recommend_request as rr
from endpoint_client.cli import main
from endpoint_client.recommend_job import ResultRow, proposed_lines

CONFIG_PBTXT = """name: "bert_base"
max_batch_size: 64
input [ { name: "input_ids" data_type: TYPE_INT32 dims: [ 128 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


@pytest.fixture
def model_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.pbtxt"
    path.write_text(CONFIG_PBTXT)
    return path


def without_job_name(args: list) -> list:
    index = args.index("--job-name")
    return [*args[:index], *args[index + 2 :]]


def refused(capsys, args: list) -> str:
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and "Traceback" not in err
    return err


# --- default job names are unique and never cut ---------------------------------------------------------


def test_default_job_name_keeps_the_full_time_and_a_random_part(monkeypatch) -> None:
    """CreateInferenceRecommendationsJob JobName: unique per account and region, and derived resource names are cut
    at 40 characters: a long stage/model part is shortened, the time to the second and a random part survive, and
    two runs in the same second differ."""
    monkeypatch.setattr(recommend.time, "gmtime", lambda: (2026, 11, 27, 5, 42, 24, 4, 331, 0))
    first = recommend.default_job_name("a-very-long-stage-name", "an_even_longer_model_name_v2")
    second = recommend.default_job_name("a-very-long-stage-name", "an_even_longer_model_name_v2")
    assert first != second
    for name in (first, second):
        assert re.fullmatch(r"ir-[a-zA-Z0-9-]+-20261127054224-[0-9a-f]{4}", name)
        for suffix in (None, "10"):
            derived = rr.job_name(name, suffix)
            assert len(derived) <= rr.DERIVED_NAME_LIMIT and derived.startswith(name)


def test_default_job_names_of_one_run_share_the_base(capsys, model_config, tmp_path) -> None:
    """One run's jobs (one per artifact) share the base and differ by the suffix."""
    (job,) = dry_run(capsys, without_job_name(argv(model_config)))["jobs"]
    name = job["CreateInferenceRecommendationsJob"]["JobName"]
    assert job["SamplePayload"]["Key"] == f"inference-recommender/{name}/payload.tar.gz"


# --- the phase fits the job -----------------------------------------------------------------------------


def test_phase_longer_than_the_job_is_refused(capsys, model_config) -> None:
    """SageMaker API reference, Phase.DurationInSeconds: "This value should not exceed JobDurationInSeconds"
    ."""
    err = refused(capsys, [*argv(model_config, "--duration", "600", "--job-duration", "300"), "--dry-run"])
    assert "--duration 600" in err and "--job-duration 300" in err
    assert main([*argv(model_config, "--duration", "300", "--job-duration", "300"), "--dry-run"]) == 0


# --- proposals the config loader takes ------------------------------------------------------------------


def merged(config_path: Path, lines: list[str], tmp_path: Path) -> Path:
    """The stage config with the proposed lines merged into the named endpoint, as a user would apply them."""
    data = yaml.safe_load(config_path.read_text())
    (proposal,) = yaml.safe_load("\n".join(lines))["endpoints"]
    endpoint = next(e for e in data["endpoints"] if e["name"] == proposal["name"])

    def merge(into: dict, extra: dict) -> None:
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    merge(endpoint, proposal)
    path = tmp_path / config_path.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


ROW = ResultRow("ir-x", "ml.g5.xlarge", {"SAGEMAKER_TRITON_THREAD_COUNT": "8"}, 1.4, 6.5e-6, 3600, 38)


def test_single_model_proposal_loads(tmp_path: Path) -> None:
    """The proposal is checked by the project's config loader (stage_config.load_config), not by eye."""
    from stage_config import load_config

    lines = proposed_lines(ROW, endpoint="triton-bert", safety_factor=0.5, mode="single_model")
    config = load_config(merged(DEV, lines, tmp_path))
    endpoint = next(e for e in config.endpoints if e.name == "triton-bert")
    assert endpoint.autoscaling.invocations_per_instance == 1800 and endpoint.container.thread_count == 8


def test_inference_component_proposal_uses_copy_scaling(tmp_path: Path) -> None:
    """On `mode: inference_components` the loader refuses `autoscaling` ("use inference_components.copy_scaling"):
    the proposal sets copy_scaling.invocations_per_copy instead, and the loader takes it."""
    from stage_config import load_config

    source = ROOT / "examples" / "config" / "components.yaml"
    row = ResultRow("ir-x", "ml.g5.12xlarge", {}, 7.0, 1e-5, 1000, 20)
    lines = proposed_lines(row, endpoint="triton-components", safety_factor=0.5, mode="inference_components")
    assert not any("autoscaling" in line for line in lines)
    config = load_config(merged(source, lines, tmp_path))
    endpoint = next(e for e in config.endpoints if e.name == "triton-components")
    assert endpoint.inference_components.copy_scaling.invocations_per_copy == 500


def test_multi_gpu_type_on_a_multi_model_endpoint_is_refused(capsys, model_config) -> None:
    """The config loader refuses a multi-GPU type on a multi-model endpoint (single-GPU instances only), so
    recommend refuses to test one for it before any job is paid for."""
    args = argv(model_config, types="ml.g5.12xlarge")
    args[args.index("bert_base")] = "resnet50"
    args[args.index("triton-bert")] = "triton-mme"
    err = refused(capsys, [*args, "--dry-run"])
    assert "ml.g5.12xlarge has 4 GPUs" in err and "multi-model" in err


# --- deterministic payload bytes ------------------------------------------------------------------------


def test_payload_archive_bytes_do_not_depend_on_the_time(monkeypatch) -> None:
    """RFC 1952: the gzip header's MTIME (bytes 4-7) is the time of compression unless given; tarfile's "w:gz"
    writes the current time. The archive is built with mtime 0, uid/gid 0 and no names, so the same inputs give
    the same bytes at any time."""
    import time

    tensors = {"input_ids": np.ones((1, 4), dtype=np.int32)}
    first, _ = rr.payload_archive(tensors, rr.PayloadEncoding.JSON)
    monkeypatch.setattr(time, "time", lambda: 2_000_000_000.0)
    second, _ = rr.payload_archive(tensors, rr.PayloadEncoding.JSON)
    assert first == second and first[4:8] == b"\0\0\0\0"
    assert gzip.decompress(first)  # still a gzip'd tar


# --- the payload where the role can read it -------------------------------------------------------------


@pytest.mark.parametrize(
    "uri", ["s3://some-other-bucket/inference-recommender/", "s3://triton-models-dev-replace-me/elsewhere/"]
)
def test_payload_outside_the_documented_prefix_is_refused(capsys, model_config, uri: str) -> None:
    """The documented role policy (docs/performance.md, "The role") grants s3:GetObject on the artifact bucket's
    inference-recommender/* only: a payload elsewhere would fail the job after it started."""
    err = refused(capsys, [*argv(model_config, "--payload-s3-uri", uri), "--dry-run"])
    assert "s3://triton-models-dev-replace-me/inference-recommender/" in err
    inside = "s3://triton-models-dev-replace-me/inference-recommender/mine/"
    assert main([*argv(model_config, "--payload-s3-uri", inside), "--dry-run"]) == 0


# --- VPC endpoints ---------------------------------------------------------------------------------------


def documented_vpc_statements() -> list[dict]:
    text = (ROOT / "docs" / "performance.md").read_text()
    block = text.split("<!-- recommend-role-policy-vpc -->\n```json\n", 1)[1].split("```", 1)[0]
    return json.loads(block)["Statement"]


def test_documented_vpc_permissions_are_the_create_model_ones() -> None:
    """A model with a VpcConfig needs the role to manage its network interfaces: the EC2 actions aws-cdk-lib's
    SageMakerCreateModel grants its role for a VPC model (aws-stepfunctions-tasks/lib/sagemaker/create-model.js),
    each a real IAM action, Resource "*" only where the action has no resource type (policy_sentry)."""
    from policy_sentry.querying.actions import get_action_data

    statements = documented_vpc_statements()
    actions = [a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    assert sorted(actions) == sorted(recommend.VPC_ROLE_ACTIONS)
    for statement in statements:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for action in statement["Action"]:
            service, name = action.split(":")
            data = get_action_data(service, name)
            assert data and data.get(service), action
            if resources == ["*"]:
                assert {row["resource_arn_format"] for row in data[service]} == {"*"}, action
    assert {s["Sid"] for s in documented_policy()["Statement"]}.isdisjoint({s["Sid"] for s in statements})


def test_vpc_endpoint_prints_the_extra_permissions(capsys, model_config, tmp_path) -> None:
    """recommend on an endpoint with `vpc` says the role needs the EC2 network-interface actions."""
    data = yaml.safe_load(DEV.read_text())
    endpoint = next(e for e in data["endpoints"] if e["name"] == "triton-bert")
    endpoint["vpc"] = {
        "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        "security_group_ids": ["sg-0123456789abcdef0"],
    }
    config = tmp_path / "dev.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main([*argv(model_config, config=config), "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "ec2:CreateNetworkInterface" in err and "The role" in err
    assert main([*argv(model_config), "--dry-run"]) == 0
    assert "ec2:" not in capsys.readouterr().err
