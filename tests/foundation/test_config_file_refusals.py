"""Hostile and careless configuration files are refused with file, field and line, never a traceback: the file
itself (encodings, duplicate keys, aliases, tags, size, nesting), bounded values, model sources inside the project,
and app.py end to end (issue #12 items 3 and 4). Every refusal is a ConfigError, fast, short, and names the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from synth_helpers import shipped_path

from model_build.config_yaml import MAX_DEPTH, MAX_FILE_BYTES
from stage_config import ConfigError, load_config
from stage_config.app import (
    BUCKET_POLICY_BASE_BYTES,
    BUCKET_POLICY_BYTES_PER_READER,
    BUCKET_POLICY_HEADROOM_BYTES,
    BUCKET_POLICY_LIMIT_BYTES,
    MAX_READER_ACCOUNTS,
)

ROOT = Path(__file__).resolve().parents[2]
DEV_TEXT = shipped_path("config/dev.yaml").read_text()
DEV = yaml.safe_load(DEV_TEXT)


def refused(path: Path, **kwargs) -> str:
    # This process's CPU time, not the wall clock: other work on a shared machine must not fail the bound.
    started = time.process_time()
    with pytest.raises(ConfigError) as error:
        load_config(path, **kwargs)
    message = str(error.value)
    assert time.process_time() - started < 3, "a refusal must be quick"
    assert str(path) in message
    assert len(message) < 20_000, "an error message must not echo the whole input"
    assert "Traceback" not in message
    return message


def write(tmp_path: Path, text: str | bytes, name: str = "dev.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def dumped(tmp_path: Path, document: dict) -> Path:
    return write(tmp_path, yaml.safe_dump(document, sort_keys=False))


# --- the file itself ---------------------------------------------------------------------------


def test_duplicate_key_is_refused_with_both_lines(tmp_path):
    text = DEV_TEXT.replace('triton_release: "24.09"', 'triton_release: "24.09"\ntriton_release: "25.04"')
    message = refused(write(tmp_path, text))
    line = text.splitlines().index('triton_release: "25.04"') + 1
    assert (
        f"key 'triton_release' appears twice in one mapping (first on line {line - 1}); remove one (line {line})"
        in (message)
    )


def test_duplicate_nested_key_is_refused(tmp_path):
    text = DEV_TEXT.replace("      max_capacity: 2\n", "      max_capacity: 2\n      max_capacity: 9\n", 1)
    assert "appears twice" in refused(write(tmp_path, text))


def test_merge_keys_may_be_overridden(tmp_path):
    """YAML merge keys: explicit keys beside `<<` override merged ones; that is not a duplicate."""
    document = yaml.safe_load(DEV_TEXT)
    text = yaml.safe_dump(document, sort_keys=False).replace(
        "alarms:\n    latency_p99_ms: 500", "alarms: &alarms\n    latency_p99_ms: 500", 1
    )
    text = text.replace("alarms:\n    latency_p99_ms: 100", "alarms:\n    <<: *alarms\n    latency_p99_ms: 100", 1)
    config = load_config(write(tmp_path, text))
    assert config.endpoints[1].alarms.latency_p99_ms == 100


@pytest.mark.parametrize(
    ("encoding", "expected"), [("utf-16", "is UTF-16; save it as UTF-8"), ("latin-1", "not UTF-8 (byte 0xe9")]
)
def test_other_encodings_are_refused(tmp_path, encoding, expected):
    text = DEV_TEXT.replace("# Stage", "# Stagé")
    assert expected in refused(write(tmp_path, text.encode(encoding)))


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    assert load_config(write(tmp_path, b"\xef\xbb\xbf" + DEV_TEXT.encode())).stage == "dev"


def test_directory_instead_of_file(tmp_path):
    (tmp_path / "dev.yaml").mkdir()
    assert "is a directory; expected a YAML file" in refused(tmp_path / "dev.yaml")


def test_fifo_instead_of_file_does_not_block(tmp_path):
    os.mkfifo(tmp_path / "dev.yaml")
    assert "is not a regular file" in refused(tmp_path / "dev.yaml")


def test_oversized_file(tmp_path):
    text = DEV_TEXT + "#" * MAX_FILE_BYTES
    assert f"larger than {MAX_FILE_BYTES // 1024} KiB" in refused(write(tmp_path, text))


def test_deep_nesting(tmp_path):
    depth = 20_000  # Python's recursion limit is ~1000: safe_load itself would crash
    assert f"nested deeper than {MAX_DEPTH} levels" in refused(write(tmp_path, "stage: " + "[" * depth + "]" * depth))


def test_alias_bomb_is_refused_quickly_with_a_short_message(tmp_path):
    """The review's 2.7 KB bomb produced a 226 MB error message."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join(f'*a{i - 1}' for _ in range(9))}]" for i in range(1, 10)]
    text = "\n".join(lines) + "\nmodels: *a9\n"
    assert len(text) < 3000
    assert "once aliases are expanded" in refused(write(tmp_path, text))


def test_self_referencing_alias(tmp_path):
    assert "nested deeper than" in refused(write(tmp_path, "models: &a [*a]\n"))


@pytest.mark.parametrize(
    ("tag", "shown"),
    [
        ("!!python/object/apply:os.system ['true']", "!!python/object/apply:os.system"),
        ("!!python/name:os.system", "!!python/name:os.system"),
        ("!custom 1", "!custom"),
    ],
)
def test_tags_are_refused_cleanly(tmp_path, tag, shown):
    message = refused(write(tmp_path, DEV_TEXT.replace("stage: dev", f"stage: {tag}")))
    assert f"tag '{shown}' is not allowed; a configuration holds plain YAML data" in message
    assert message.endswith("(line 2)")


def test_binary_is_not_a_string(tmp_path):
    assert "stage: Input should be a valid string" in refused(
        write(tmp_path, DEV_TEXT.replace("stage: dev", "stage: !!binary ZGV2"))
    )


def test_two_documents_and_empty_file(tmp_path):
    assert "expected a single document" in refused(write(tmp_path, DEV_TEXT + "\n---\nstage: dev\n"))
    assert "the file is empty" in refused(write(tmp_path, ""))
    assert "expected a mapping at the top level, got a list" in refused(write(tmp_path, "- 1\n"))


# --- values -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("max_capacity", True, "Input should be a valid integer (got True)"),
        ("max_capacity", "1.0e+66", "Input should be a valid integer (got 1e+66)"),
        ("max_capacity", 10**66, "Input should be less than or equal to 1000"),
        ("max_capacity", 2.0, "Input should be a valid integer (got 2.0)"),
        ("gpu_utilization_percent", ".nan", "Input should be a finite number"),
    ],
)
def test_numbers_are_strict_and_bounded(tmp_path, field, value, expected):
    text = yaml.safe_dump(DEV, sort_keys=False)
    old = f"{field}: {DEV['endpoints'][0]['autoscaling'][field]}"
    shown = value if isinstance(value, str) else json.dumps(value) if isinstance(value, bool) else value
    text = text.replace(old, f"{field}: {str(shown).lower() if isinstance(value, bool) else shown}", 1)
    message = refused(write(tmp_path, text))
    assert f"endpoints[0].autoscaling.{field}: {expected}" in message
    assert "(line " in message


def test_echoed_values_are_clipped(tmp_path):
    document = {**DEV, "triton_release": "9" * 100_000}
    message = refused(dumped(tmp_path, document))
    assert "(100002 characters)" in message and len(message) < 2_000


def test_reader_accounts_are_held_below_the_bucket_policy_limit(tmp_path):
    accounts = [str(100_000_000_000 + i) for i in range(MAX_READER_ACCOUNTS + 1)]
    message = refused(dumped(tmp_path, {**DEV, "artifacts": {**DEV["artifacts"], "reader_accounts": accounts}}))
    assert f"artifacts.reader_accounts: List should have at most {MAX_READER_ACCOUNTS} items" in message
    twice = ["111111111111", "111111111111"]
    assert "lists ['111111111111'] twice" in refused(
        dumped(tmp_path, {**DEV, "artifacts": {**DEV["artifacts"], "reader_accounts": twice}})
    )


def _resolved(node, template: dict):
    """A policy document as S3 stores it, every name at its longest (partition aws-us-gov, 63-character bucket)."""
    if isinstance(node, list):
        return [_resolved(item, template) for item in node]
    if not isinstance(node, dict):
        return node
    if "Ref" in node:
        return {"AWS::Partition": "aws-us-gov", "AWS::Region": "ap-southeast-7", "AWS::AccountId": "1" * 12}.get(
            node["Ref"], "b" * 63
        )
    if "Fn::GetAtt" in node:
        kind = template["Resources"][node["Fn::GetAtt"][0]]["Type"]
        return {"AWS::S3::Bucket": "arn:aws-us-gov:s3:::" + "b" * 63}.get(kind, "arn:aws-us-gov:iam::" + "r" * 90)
    if "Fn::Join" in node:
        separator, parts = node["Fn::Join"]
        return separator.join(_resolved(part, template) for part in parts)
    return {key: _resolved(value, template) for key, value in node.items()}


def test_bucket_policy_size_per_reader_account_is_what_the_bound_assumes():
    """S3 User Guide: "Bucket policies are limited to 20 KB in size". Measures the synthesized policy
    without readers and with MAX_READER_ACCOUNTS of them: the constants behind the bound hold."""
    from synth_helpers import new_app

    from stacks.artifact_stack import ArtifactStack
    from stage_config import load_stage

    base = load_stage("dev")
    app = new_app()  # cdk.json's context, as `make synth` runs app.py
    for count in (0, MAX_READER_ACCOUNTS):
        readers = [str(100_000_000_000 + i) for i in range(count)]
        config = base.model_copy(update={"artifacts": base.artifacts.model_copy(update={"reader_accounts": readers})})
        ArtifactStack(app, f"Artifacts{count}", config=config)
    assembly = app.synth()

    def policy_bytes(count: int) -> int:
        template = assembly.get_stack_by_name(f"Artifacts{count}").template
        (policy,) = [
            r["Properties"]["PolicyDocument"]
            for logical_id, r in template["Resources"].items()
            if r["Type"] == "AWS::S3::BucketPolicy" and "AccessLogs" not in logical_id
        ]
        return len(json.dumps(_resolved(policy, template), separators=(",", ":")))

    empty, full = policy_bytes(0), policy_bytes(MAX_READER_ACCOUNTS)
    assert empty <= BUCKET_POLICY_BASE_BYTES
    assert (full - empty) / MAX_READER_ACCOUNTS <= BUCKET_POLICY_BYTES_PER_READER
    assert full <= BUCKET_POLICY_LIMIT_BYTES - BUCKET_POLICY_HEADROOM_BYTES


def test_long_lists_do_not_stall(tmp_path):
    """The duplicate checks were O(n^2) (list.count per item); 20 000 names now take milliseconds."""
    from serving_facts.settings import repeated

    started = time.process_time()
    assert repeated([f"m{i}" for i in range(200_000)] + ["m7"]) == ["m7"]
    # Linear: ~0.2 s on an idle machine; quadratic would take hours. 3 s leaves room for a loaded shared machine.
    assert time.process_time() - started < 3
    document = {**DEV, "notifications": {"emails": [f"a{i}@example.com" for i in range(5_000)]}}
    assert "notifications.emails: List should have at most 400 items" in refused(dumped(tmp_path, document))


# --- source.path stays in the project ----------------------------------------------------------


def _with_source(path: str, platform: str = "onnxruntime_onnx") -> dict:
    model = {"name": "local", "source": {"path": path}, "platform": platform, "instance_groups": [{"kind": "KIND_CPU"}]}
    return {**DEV, "models": [*DEV["models"], model]}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/etc/passwd", "resolves to /etc/passwd, outside the project root"),
        ("/root", "outside the project root"),
        ("../../../../etc/passwd", "resolves to /etc/passwd, outside the project root"),
        ("models/missing.onnx", "does not exist (paths are relative to the project root"),
        (".", "is the project root itself"),
        ("README.md/x", "does not exist"),
        ("a\x00b", "the value holds a NUL character"),  # refused before any path is resolved (loader)
        ("x" * 1000, "give a path inside the project"),
    ],
)
def test_source_paths_outside_or_missing_are_refused(tmp_path, path, expected):
    message = refused(dumped(tmp_path, _with_source(path)))
    assert "models[3].source.path: " in message and expected in message


def test_symlink_leaving_the_root_is_refused(tmp_path):
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "models" / "model.onnx").symlink_to("/etc/passwd")
    message = refused(dumped(tmp_path, _with_source("models/model.onnx")), source_roots=(root,))
    assert "resolves to /etc/passwd, outside the project root" in message
    folder = root / "pymodel"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("")
    (folder / "1" / "secret").symlink_to("/etc/passwd")
    message = refused(dumped(tmp_path, _with_source("pymodel", "python")), source_roots=(root,))
    assert "holds a symlink to /etc/passwd, outside the project root" in message


def test_python_model_folder_inside_the_project_is_accepted(tmp_path):
    config = load_config(dumped(tmp_path, _with_source("examples/models/add_sub", "python")))
    assert config.models[-1].source.path == "examples/models/add_sub"


# --- app.py end to end ----------------------------------------------------------------------------


def _synth(tmp_path: Path, text: str | bytes) -> subprocess.CompletedProcess:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    write(config_dir, text)
    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "CDK_CONTEXT_JSON": json.dumps({"stage": "dev", "config_dir": str(config_dir)}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    return subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DEV_TEXT.replace("max_capacity: 2", "max_capacity: 1000000", 1), "less than or equal to 1000"),
        (DEV_TEXT.replace("stage: dev", "stage: dev\nstage: dev"), "key 'stage' appears twice"),
        (DEV_TEXT.replace("{export: resnet50}", "{path: /etc/passwd}"), "outside the project root"),
        (DEV_TEXT.replace('triton_release: "24.09"', "triton_release: 2024-02-30"), "reads as a YAML date"),
        (
            DEV_TEXT.replace(
                "      latency_p99_ms: 500",
                "      latency_p99_ms: 500\n    container: {extra_environment: {SAGEMAKER_MULTI_MODEL: 'x'}}",
            ),
            "endpoints[0].container.extra_environment: extra_environment sets ['SAGEMAKER_MULTI_MODEL']",
        ),
    ],
    ids=["number out of range", "duplicate key", "source outside the project", "impossible date", "owned variable"],
)
def test_app_py_prints_the_problem_and_exits_1(tmp_path, text, expected):
    result = _synth(tmp_path, text)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.startswith("ERROR: invalid configuration\n") or "ERROR: invalid configuration\n" in (
        result.stderr
    )
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "cdk.out").glob("*.template.json"))


def test_docs_state_the_bounds_the_code_enforces():
    readme = (ROOT / "README.md").read_text()
    page = (ROOT / "docs" / "config-refusals.md").read_text()
    assert f"`[]`, at most {MAX_READER_ACCOUNTS}" in readme
    assert f"adds {BUCKET_POLICY_BYTES_PER_READER} bytes" in readme
    assert f"{BUCKET_POLICY_BYTES_PER_READER} bytes, so at most {MAX_READER_ACCOUNTS}" in page
    assert "500 resources per stack is refused at synth by aws-cdk-lib" in page  # test_stack_resource_limit.py
