"""Names and ids in the config: what AWS, CDK or git would refuse at deploy (or later) is refused at load.

Each test's docstring names the rule's source.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import typing
from pathlib import Path

import pytest
from config_edits import ROOT, refusal, set_path, shipped, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from synth_helpers import shipped_path

from stage_config import AppConfig, load_config
from stage_config.app import bucket_name_problems
from stage_config.pipeline import PipelineConfig, branch_name_problem

CONFIG_CODE = sorted((ROOT / "stage_config").glob("*.py"))


def _schema_models(root: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    if root not in seen:
        seen.add(root)
        for field in root.model_fields.values():
            for tp in _types(field.annotation):
                if isinstance(tp, type) and issubclass(tp, BaseModel):
                    _schema_models(tp, seen)
    return seen


def _types(tp: object) -> typing.Iterator[object]:
    yield tp
    for arg in typing.get_args(tp):
        yield from _types(arg)


def _schema_patterns() -> list[tuple[str, str]]:
    """(model.field, pattern) of every `pattern=` constraint in the stage and pipeline schemas."""
    found = []
    for model in _schema_models(AppConfig, set()) | _schema_models(PipelineConfig, set()):
        for name, field in model.model_fields.items():
            metadata = list(field.metadata)
            for tp in _types(field.annotation):
                for annotated in getattr(tp, "__metadata__", ()):
                    metadata += [annotated, *getattr(annotated, "metadata", [])]
            found += [(f"{model.__name__}.{name}", m.pattern) for m in metadata if getattr(m, "pattern", None)]
    return sorted(set(found))


def test_schema_patterns_match_whole_values_with_ascii_classes():
    """pydantic's regex engine (Rust `regex`) searches unless anchored, and its \\d and \\w are Unicode-aware
    (regex crate docs, "Unicode"): `\\d{12}` took Arabic-Indic digits as an account id. Every schema pattern is
    anchored ^...$ and uses ASCII classes ([0-9], [A-Za-z0-9_]); \\s only inside a negated class."""
    patterns = _schema_patterns()
    assert len(patterns) >= 15
    for where, pattern in patterns:
        assert pattern.startswith("^") and pattern.endswith("$"), where
        assert not re.search(r"\\[dwDWbS]", pattern), f"{where}: {pattern} uses a Unicode-aware class"
        assert "\\s" not in re.sub(r"\[\^[^\]]*\]", "", pattern), f"{where}: {pattern} accepts Unicode spaces"


def test_config_code_matches_whole_values():
    """Python's re.match/re.search accept a trailing newline before `$` (and re.match ignores what follows the
    match): validation in the config code uses re.fullmatch (Python docs, re.fullmatch)."""
    for path in CONFIG_CODE:
        text = path.read_text()
        assert not re.search(r"\bre\.(match|search)\(", text), f"{path.name} validates with re.match/re.search"
        assert not re.search(r"r\"[^\"]*\\[dw]", text), f"{path.name} has a \\d or \\w pattern"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("account", "123456789012\n"),
        ("account", "\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660\u0661\u0662"),
        ("region", "us-east-1\n"),
        ("region", "us-east-\u0661"),
        ("stage", "dev\n"),
        ("artifacts.reader_accounts", ["123456789012\n"]),
        ("artifacts.reader_accounts", ["\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660\u0661\u0662"]),
        ("notifications.emails", ["ops@example.com\n"]),
        ("notifications.emails", ["ops@example.com\x01"]),
        ("endpoints.0.name", "triton-mme\n"),
        ("endpoints.1.models", ["bert_base\n"]),
    ],
)
def test_trailing_newlines_and_other_scripts_digits_are_refused(tmp_path, field, value):
    """AWS account ids are 12 ASCII digits and region names ASCII (AWS General Reference); SNS e-mail endpoints
    carry no control characters."""
    document = set_path(shipped(), field, value)
    if field in ("account", "region"):
        document.update({"account": "123456789012", "region": "us-east-1"}, **{field: value})
    message = refusal(write(tmp_path, document, "dev"))
    assert field.split(".")[0] in message, message


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("192.168.5.4", "look like an IP address"),
        ("my..bucket", "two adjacent periods"),
        ("my-.bucket", "dash next to a period"),
        ("my.-bucket", "dash next to a period"),
        ("xn--bucket", "must not start with 'xn--'"),
        ("sthree-bucket", "must not start with 'sthree-'"),
        ("sthree-configurator-x", "must not start with 'sthree-'"),
        ("amzn-s3-demo-bucket", "must not start with 'amzn-s3-demo-'"),
        ("bucket-s3alias", "must not end with '-s3alias'"),
        ("bucket--ol-s3", "must not end with '--ol-s3'"),
        ("bucket.mrap", "must not end with '.mrap'"),
        ("bucket--x-s3", "must not end with '--x-s3'"),
        ("bucket--table-s3", "must not end with '--table-s3'"),
        ("Bucket", "lowercase letters"),
        ("-bucket", "begin and end"),
        ("bucket.", "begin and end"),
        ("ab", "S3 allows 3 to 63"),
        ("b" * 64, "S3 allows 3 to 63"),
        ("bucket\n", "lowercase letters"),
    ],
)
def test_bucket_names_s3_or_cdk_refuse_are_refused(tmp_path, name, expected):
    """S3 User Guide, "General purpose bucket naming rules" (length, characters, adjacent periods, IP
    addresses, reserved prefixes xn-- sthree- amzn-s3-demo- and suffixes -s3alias --ol-s3 .mrap --x-s3
    --table-s3); aws-cdk-lib aws-s3 bucket.ts validateBucketName (a dash next to a period: a jsii error at
    synth)."""
    message = refusal(write(tmp_path, set_path(shipped(), "artifacts.bucket_name", name), "dev"))
    assert "artifacts.bucket_name: not a valid S3 bucket name" in message and expected in message, message


@pytest.mark.parametrize("name", ["triton-models-dev-replace-me", "a.b.c", "abc", "x" * 63, "my-bucket-s3alias1"])
def test_valid_bucket_names_pass(name):
    assert bucket_name_problems(name) == []


def test_endpoint_names_that_differ_only_by_case_are_refused(tmp_path):
    """SageMaker endpoint names are unique ignoring case: CreateEndpoint refuses "Dev-A" beside "dev-a"."""
    document = set_path(shipped(), "endpoints.1.name", "TRITON-MME")
    message = refusal(write(tmp_path, document, "dev"))
    assert "endpoints: endpoint names ['triton-mme', 'TRITON-MME'] are one name to SageMaker" in message


def _components(folder: Path, models: list[str], endpoints: list[tuple[str, list[str]]]) -> Path:
    document = shipped("examples/config/components.yaml")
    template = document["models"][1]
    document["models"] = [{**template, "name": name} for name in models]
    base = document["endpoints"][0]
    document["endpoints"] = [
        {
            **base,
            "name": name,
            "models": served,
            "inference_components": {
                **base["inference_components"],
                "components": {m: {"accelerators": 1, "copy_count": 1, "max_copies": 1} for m in served},
            },
        }
        for name, served in endpoints
    ]
    return write(folder, document)


def test_component_names_that_collide_are_refused(tmp_path):
    """InferenceComponentName is <stage>-<endpoint>-<model> with '_' as '-' (CreateInferenceComponent's name
    pattern has no '_'): models a_b and a-b, or endpoint x with model y-z beside endpoint x-y with model z, would
    name one component twice; SageMaker's names ignore case."""
    message = refusal(_components(tmp_path / "a", ["det_v1", "det-v1"], [("ep", ["det_v1", "det-v1"])]))
    assert "endpoints[0].models: model 'det-v1' would be component 'components-ep-det-v1', which endpoints[0] " in (
        message
    )
    message = refusal(_components(tmp_path / "b", ["y-z", "z"], [("x", ["y-z"]), ("x-y", ["z"])]))
    assert "endpoints[1].models: model 'z' would be component 'components-x-y-z'" in message
    message = refusal(_components(tmp_path / "c", ["Det", "det"], [("ep", ["Det", "det"])]))
    assert "endpoints[0].models: model 'det' would be component 'components-ep-det'" in message
    accepted = _components(tmp_path / "d", ["det_v1", "det-v2"], [("ep", ["det_v1", "det-v2"])])
    assert load_config(accepted).endpoints[0].models == ["det_v1", "det-v2"]


def test_component_names_sagemaker_refuses_are_refused(tmp_path):
    """botocore sagemaker InferenceComponentName: [a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])? - a model name that
    ends with '_' or '-' makes a name that ends with '-'."""
    message = refusal(_components(tmp_path, ["det_"], [("ep", ["det_"])]))
    assert "endpoints[0].models: component name 'components-ep-det-' of model 'det_' is not a valid" in message


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("subnet_ids", ["bad id"], "are not subnet- ids"),
        ("subnet_ids", ["subnet-123"], "are not subnet- ids"),
        ("subnet_ids", ["sg-0123456789abcdef0"], "are not subnet- ids"),
        ("subnet_ids", ["subnet-0123456789abcdef0", "subnet-0123456789abcdef0"], "listed twice"),
        ("security_group_ids", ["sg-" + "0" * 40], "are not sg- ids"),
        ("security_group_ids", ["sg-0123456789ABCDEF0"], "are not sg- ids"),
    ],
)
def test_bad_subnet_and_security_group_ids_are_refused(tmp_path, field, value, expected):
    """botocore sagemaker VpcConfig: SubnetId / SecurityGroupId at most 32 of [-0-9a-zA-Z]; EC2 User Guide,
    "Resource IDs": the type's prefix, a hyphen, 8 or 17 lowercase letters or digits."""
    vpc = {"subnet_ids": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-01234567"], field: value}
    message = refusal(write(tmp_path, set_path(shipped(), "endpoints.0.vpc", vpc), "dev"))
    assert f"endpoints[0].vpc.{field}: " in message and expected in message, message


def test_valid_vpc_ids_pass(tmp_path):
    vpc = {"subnet_ids": ["subnet-0123456789abcdef0", "subnet-01234567"], "security_group_ids": ["sg-89abcdef"]}
    assert load_config(write(tmp_path, set_path(shipped(), "endpoints.0.vpc", vpc), "dev")).endpoints[0].vpc


def test_a_stage_that_promotes_from_itself_is_refused(tmp_path):
    """A promoting stage never builds (stacks/promotion.py): promoting from itself copies what nobody builds."""
    message = refusal(write(tmp_path, set_path(shipped(), "promote_from", "dev"), "dev"))
    assert "dev.yaml: promote_from: stage 'dev' promotes from itself" in message


def test_a_promotion_cycle_is_refused_and_a_chain_is_not(tmp_path):
    """dev from prod and prod from dev: no stage of the cycle builds. staging from dev and prod from staging is
    a chain whose first stage builds."""
    write(tmp_path, set_path(shipped(), "promote_from", "prod"), "dev")
    prod = shipped("config/prod.yaml")
    write(tmp_path, prod, "prod")
    message = refusal(tmp_path / "prod.yaml")
    assert "prod.yaml: promote_from: promotion cycle prod -> dev -> prod" in message
    chain = tmp_path / "chain"
    write(chain, shipped(), "dev")
    write(chain, {**shipped("config/prod.yaml"), "stage": "staging", "promote_from": "dev"}, "staging")
    assert load_config(write(chain, {**prod, "promote_from": "staging"}, "prod")).promote_from == "staging"


@pytest.mark.parametrize(
    ("branch", "expected"),
    [
        ("ma\x01in", "control character"),
        ("ma\x7fin", "control character"),
        ("feature x", "' '"),
        ("a~1", "'~'"),
        ("a^", "'^'"),
        ("a:b", "':'"),
        ("a?", "'?'"),
        ("a*", "'*'"),
        ("a[b", "'['"),
        ("a\\b", "'\\\\'"),
        ("a..b", "holds '..'"),
        ("a@{1}", "holds '@{'"),
        ("@", "is '@'"),
        ("HEAD", "is HEAD"),
        ("-main", "starts with '-'"),
        ("/main", "'/'"),
        ("main/", "'/'"),
        ("a//b", "'/'"),
        ("main.", "ends with '.'"),
        ("a/.hidden", "starts with '.'"),
        ("main.lock", "ends with '.lock'"),
    ],
)
def test_branch_names_git_refuses_are_refused(branch, expected):
    """git-check-ref-format(1): rules 1, 3-10 and --branch (no leading '-', not HEAD)."""
    problem = branch_name_problem(branch)
    assert problem is not None and expected in problem, problem


def test_a_bad_branch_is_refused_in_the_pipeline_file(tmp_path):
    text = shipped_path("config/pipeline.yaml").read_text().replace("branch: main", 'branch: "main\\t"')
    (tmp_path / "pipeline.yaml").write_text(text)
    from stage_config.pipeline import ConfigError, load_pipeline_config

    with pytest.raises(ConfigError, match=r"pipeline\.yaml: source\.branch: not a git branch name: holds the control"):
        load_pipeline_config(tmp_path / "pipeline.yaml")


BRANCH_ALPHABET = st.sampled_from([*"ab/.-_~^:?*[\\ @{}\t\x7fé", "lock", "HEAD"])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(BRANCH_ALPHABET, min_size=1, max_size=8).map("".join))
def test_branch_names_agree_with_git_itself(branch):
    """Differential: `git check-ref-format --branch` is the oracle (outside a repository; '@' forms are left
    out, git expands them to other branches)."""
    if branch == "@" or "@{" in branch:
        return
    accepted = subprocess.run(["git", "check-ref-format", "--branch", branch], capture_output=True, cwd="/")
    assert (branch_name_problem(branch) is None) == (accepted.returncode == 0), branch
