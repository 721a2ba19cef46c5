"""What `make deploy|diff|destroy|deploy-pipeline` check before AWS, and when they synthesize again (issue #27).

Sources: the shipped configs' placeholders (config/dev.yaml `artifacts.bucket_name`, config/pipeline.yaml
`source.connection_arn`, read from the shipped copy tests/shipped_config/ since a user fills in config/;
examples/config/*.yaml); boto3's credential chain (`Session.get_credentials()` returns
None when no provider finds any, boto3 docs "Credentials"), which is the chain the CDK CLI's "Unable to resolve
AWS account to use" comes from; CloudFormation `DeleteStack` / `ListStacks` (API reference), stubbed with
botocore's Stubber so the calls are checked against botocore's service model; `cdk destroy` asks
"Are you sure you want to delete: ... (y/n)?" unless `--force` (CDK CLI reference).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from synth_helpers import SHIPPED_CONFIG_DIR

from stacks import assembly_fingerprint, deploy_preflight, stage_teardown
from stacks.deploy_preflight import find_placeholders, main, pipeline_files, profile_from_cdk_args, stage_files

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class _Session:
    """A boto3 session stand-in: fixed credentials (or none), a stubbed CloudFormation client."""

    def __init__(self, credentials: bool = True, region: str | None = "us-east-1", client=None, **kwargs) -> None:
        self.credentials, self.region_name, self.client_, self.kwargs = credentials, region, client, kwargs

    def get_credentials(self):
        return object() if self.credentials else None

    def client(self, service: str, region_name: str):
        assert service == "cloudformation"
        return self.client_


def _factory(**session_kwargs):
    calls: list[dict] = []

    def factory(**kwargs):
        calls.append(kwargs)
        return _Session(**session_kwargs)

    factory.calls = calls  # type: ignore[attr-defined]
    return factory


def _config_dir(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "config"
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


# --- item 1: placeholders ---------------------------------------------------------------------------------------


def test_the_shipped_placeholders_are_found_with_file_field_and_line() -> None:
    shipped = SHIPPED_CONFIG_DIR
    (bucket,) = find_placeholders(shipped / "dev.yaml")
    assert (bucket.field, bucket.value) == ("artifacts.bucket_name", "triton-models-dev-replace-me")
    assert shipped.joinpath("dev.yaml").read_text().splitlines()[bucket.line - 1].strip().startswith("bucket_name:")
    (connection,) = find_placeholders(shipped / "pipeline.yaml")
    assert connection.field == "source.connection_arn" and connection.value.endswith("connection/REPLACE-ME")
    assert "CodeConnections" in connection.message() and "globally unique" in bucket.message()
    for example in sorted((PROJECT_ROOT / "examples" / "config").glob("*.yaml")):
        assert [p.field for p in find_placeholders(example)] == ["artifacts.bucket_name"], example


@pytest.mark.parametrize("value", ["replace-me", "REPLACE_ME", "Replace Me", "x-replaceme-y"])
def test_any_string_value_matching_replace_me_is_a_placeholder_with_a_generic_hint(tmp_path, value) -> None:
    folder = _config_dir(tmp_path, dev=f"stage: dev\nendpoints:\n  - name: a\n    role_arn: '{value}'\n")
    (found,) = find_placeholders(folder / "dev.yaml")
    assert (found.field, found.line, found.value) == ("endpoints[0].role_arn", 4, value)
    hint = deploy_preflight.GENERIC
    assert (
        found.message()
        == f"{folder / 'dev.yaml'}:4: endpoints[0].role_arn: {value!r} is a placeholder; set it to {hint}"
    )


def test_keys_comments_and_unreadable_files_are_not_placeholders(tmp_path) -> None:
    folder = _config_dir(tmp_path, dev="# replace-me\nreplace_me: 1\nname: replacement\n", bad="a: [\n")
    assert find_placeholders(folder / "dev.yaml") == []
    assert find_placeholders(folder / "bad.yaml") == []  # synth reports the YAML error, naming file and line
    assert find_placeholders(folder / "missing.yaml") == []


def test_a_stage_is_checked_with_the_stages_it_promotes_from_and_the_pipeline_with_its_stages() -> None:
    shipped = SHIPPED_CONFIG_DIR
    assert stage_files("prod", shipped) == [shipped / "prod.yaml", shipped / "dev.yaml"]  # prod copies dev's bucket
    assert pipeline_files(shipped) == [shipped / "pipeline.yaml", shipped / "dev.yaml", shipped / "prod.yaml"]


def test_a_promote_from_cycle_ends(tmp_path) -> None:
    folder = _config_dir(tmp_path, a="promote_from: b\n", b="promote_from: a\n")
    assert stage_files("a", folder) == [folder / "a.yaml", folder / "b.yaml"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["deploy", "--stage", "dev"], ["`make deploy` refused", "config/dev.yaml:11: artifacts.bucket_name"]),
        (["deploy", "--stage", "prod"], ["`make deploy STAGE=prod` refused", "config/dev.yaml:11:"]),
        (
            ["deploy-pipeline"],
            ["`make deploy-pipeline` refused", "config/pipeline.yaml:12: source.connection_arn", "config/dev.yaml:11"],
        ),
    ],
)
def test_deploy_refuses_a_placeholder_before_asking_for_credentials(argv, expected, capsys, shipped_checkout) -> None:
    factory = _factory()
    assert main(argv, session_factory=factory) == 1
    err = capsys.readouterr().err
    assert all(text in err for text in expected), err
    assert "nothing was deployed" in err and factory.calls == []


def test_an_example_stage_names_its_own_file(capsys, monkeypatch) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    assert main(["deploy", "--stage", "ensemble", "--config-dir", "examples/config"], session_factory=_factory()) == 1
    err = capsys.readouterr().err
    assert "`make deploy STAGE=ensemble CONFIG_DIR=examples/config` refused" in err
    assert "examples/config/ensemble.yaml:13: artifacts.bucket_name" in err


@pytest.mark.parametrize("command", ["diff", "destroy"])
def test_diff_and_destroy_do_not_refuse_placeholders(command, capsys, shipped_checkout) -> None:
    assert find_placeholders(shipped_checkout / "dev.yaml")  # there is one to refuse
    assert main([command, "--stage", "dev"], session_factory=_factory()) == 0
    assert capsys.readouterr().err == ""


def test_synth_warns_once_per_placeholder_without_failing(capsys, shipped_checkout) -> None:
    assert deploy_preflight.warn_placeholders(stage_files("dev", shipped_checkout)) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("WARNING: config/dev.yaml:11: artifacts.bucket_name:")
    assert err[0].endswith("(`make deploy` refuses it)")
    pipeline = [shipped_checkout / "pipeline.yaml"]
    assert deploy_preflight.warn_placeholders(pipeline, refused_by="make deploy-pipeline") == 1
    err = capsys.readouterr().err
    assert err.startswith("WARNING: config/pipeline.yaml:12: source.connection_arn:")
    assert err.rstrip().endswith("(`make deploy-pipeline` refuses it)")


def test_a_config_without_placeholders_goes_to_the_credentials_check(tmp_path, capsys) -> None:
    folder = _config_dir(tmp_path, dev="stage: dev\nartifacts: {bucket_name: triton-models-dev-123456789012}\n")
    assert main(["deploy", "--config-dir", str(folder)], session_factory=_factory()) == 0
    assert capsys.readouterr().err == ""


# --- item 4: credentials ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["deploy", "diff", "destroy"])
def test_without_credentials_one_message_names_the_command_and_how_to_pass_a_profile(tmp_path, command, capsys):
    folder = _config_dir(tmp_path, dev="stage: dev\n")
    assert main([command, "--config-dir", str(folder)], session_factory=_factory(credentials=False)) == 1
    err = capsys.readouterr().err
    cmd = f"make {command} CONFIG_DIR={folder}"
    assert err.startswith(f"ERROR: `{cmd}` needs AWS credentials, and none were found")
    assert f"`AWS_PROFILE=name {cmd}`" in err and f'`{cmd} CDK_ARGS="--profile name"`' in err
    assert len(err.strip().splitlines()) == 1


def test_with_a_credential_it_passes_and_uses_the_profile_of_cdk_args(tmp_path, capsys) -> None:
    folder = _config_dir(tmp_path, dev="stage: dev\n")
    factory = _factory()
    argv = ["diff", "--config-dir", str(folder), "--cdk-args=--profile team-dev --verbose"]
    assert main(argv, session_factory=factory) == 0
    assert factory.calls == [{"profile_name": "team-dev"}] and capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("cdk_args", "profile"),
    [
        ("", None),
        ("--profile a", "a"),
        ("--verbose --profile=b", "b"),
        ("--profile", None),
        ("'--profile' 'c d'", "c d"),
    ],
)
def test_the_profile_is_read_from_cdk_args(cdk_args, profile) -> None:
    assert profile_from_cdk_args(cdk_args) == profile


def test_with_the_real_chain_and_nothing_to_find_the_message_is_given(tmp_path, capsys, monkeypatch) -> None:
    """boto3's own chain (no variables, files or instance metadata), as on a fresh machine."""
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    for variable in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    folder = _config_dir(tmp_path, dev="stage: dev\n")
    assert main(["destroy", "--config-dir", str(folder)]) == 1
    assert "needs AWS credentials, and none were found" in capsys.readouterr().err
    assert main(["destroy", "--config-dir", str(folder), "--cdk-args=--profile nope"]) == 1
    assert "could not be resolved (The config profile (nope) could not be found)" in capsys.readouterr().err


# --- item 3: the assembly fingerprint ---------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path) -> Path:
    """A small git project with a stage config and an ignored model file the config names."""
    root = tmp_path / "project"
    (root / "config").mkdir(parents=True)
    (root / "models").mkdir()
    (root / "config" / "dev.yaml").write_text("stage: dev\nmodels:\n  - {name: m, source: {path: models/m.onnx}}\n")
    (root / "models" / "m.onnx").write_bytes(b"onnx-1")
    (root / "app.py").write_text("print('app')\n")
    (root / ".gitignore").write_text("cdk.out/\nmodels/\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "app.py", ".gitignore"], cwd=root, check=True)
    (root / "cdk.out").mkdir()
    (root / "cdk.out" / "manifest.json").write_text("{}")
    return root


def _check(root: Path, stage: str = "dev", config_dir: str = "config") -> int:
    argv = ["--app", str(root / "cdk.out"), "--stage", stage, "--config-dir", config_dir, "--root", str(root)]
    return assembly_fingerprint.main(["check", *argv])


def _record(root: Path) -> None:
    """What `make synth-stage` runs around its `cdk synth`."""
    argv = ["--app", str(root / "cdk.out"), "--stage", "dev", "--config-dir", "config", "--root", str(root)]
    assert assembly_fingerprint.main(["begin", *argv]) == 0
    assert assembly_fingerprint.main(["record", *argv]) == 0


def test_an_assembly_whose_inputs_did_not_change_is_not_synthesized_again(project, capsys) -> None:
    assert _check(project) == 1  # nothing recorded yet
    assert "no recorded synth: synthesizing" in capsys.readouterr().out
    _record(project)
    assert _check(project) == 0
    assert "current (no input changed since its synth): not synthesized again" in capsys.readouterr().out
    (project / "cdk.out" / "template.json").write_text("{}")  # the assembly's own files are no input
    for name in (".venv/x", "tests/test_x.py", "docs/x.md", "NOTES.md"):  # never read by a synth
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text("x")
    assert _check(project) == 0


def test_another_synth_into_the_same_folder_is_noticed(project, capsys) -> None:
    """A manual `cdk synth -c stage=prod` into cdk.out rewrites its manifest but leaves dev's fingerprint: the
    deploy targets must not take prod's assembly for dev's (newcomer review, issue #27 item 3)."""
    _record(project)
    assert _check(project) == 0
    manifest = project / "cdk.out" / "manifest.json"
    manifest.write_text(manifest.read_text() + " ")
    capsys.readouterr()
    assert _check(project) == 1
    assert "written by another synth since: synthesizing" in capsys.readouterr().out


def test_an_edit_during_the_synth_is_not_masked_and_a_failed_synth_leaves_no_fingerprint(project) -> None:
    argv = ["--app", str(project / "cdk.out"), "--stage", "dev", "--config-dir", "config", "--root", str(project)]
    _record(project)
    assert assembly_fingerprint.main(["begin", *argv]) == 0
    assert _check(project) == 1  # the synth has begun: the old fingerprint is gone (a failed synth keeps it so)
    (project / "app.py").write_text("print('edited while synthesizing')\n")
    assert assembly_fingerprint.main(["record", *argv]) == 0
    assert _check(project) == 1


@pytest.mark.parametrize(
    "edit",
    [
        lambda root: (root / "config" / "dev.yaml").write_text("stage: dev\nmodels: []\n"),  # an untracked config
        lambda root: (root / "app.py").write_text("print('changed')\n"),  # a tracked file
        lambda root: (root / "models" / "m.onnx").write_bytes(b"onnx-2"),  # ignored, but the config names it
        lambda root: (root / "app.py").unlink(),  # listed by git, deleted
        lambda root: (root / "new.py").write_text(""),  # a new file
    ],
    ids=["config", "tracked", "ignored-model", "deleted", "new-file"],
)
def test_a_changed_input_is_noticed(project, edit) -> None:
    _record(project)
    edit(project)
    assert _check(project) == 1


def test_a_config_folder_under_an_excluded_folder_still_counts(project) -> None:
    (project / "tests" / "configs").mkdir(parents=True)
    (project / "tests" / "configs" / "dev.yaml").write_text("stage: dev\n")
    argv = [
        "--app",
        str(project / "cdk.out"),
        "--stage",
        "dev",
        "--config-dir",
        "tests/configs",
        "--root",
        str(project),
    ]
    assert assembly_fingerprint.main(["begin", *argv]) == 0 and assembly_fingerprint.main(["record", *argv]) == 0
    assert assembly_fingerprint.main(["check", *argv]) == 0
    (project / "tests" / "configs" / "dev.yaml").write_text("stage: dev\nmodels: []\n")
    assert assembly_fingerprint.main(["check", *argv]) == 1


def test_a_config_folder_outside_the_project_counts(project, tmp_path) -> None:
    outside = _config_dir(tmp_path, dev="stage: dev\n")
    argv = ["--app", str(project / "cdk.out"), "--stage", "dev", "--config-dir", str(outside), "--root", str(project)]
    assert assembly_fingerprint.main(["begin", *argv]) == 0 and assembly_fingerprint.main(["record", *argv]) == 0
    assert assembly_fingerprint.main(["check", *argv]) == 0
    (outside / "dev.yaml").write_text("stage: dev\ntriton_release: '99.99'\n")
    assert assembly_fingerprint.main(["check", *argv]) == 1


def test_another_stage_or_folder_or_a_missing_manifest_is_not_current(project) -> None:
    _record(project)
    assert _check(project, stage="prod") == 1
    assert _check(project, config_dir="examples/config") == 1
    (project / "cdk.out" / "manifest.json").unlink()
    assert _check(project) == 1


def test_outside_a_git_work_tree_nothing_is_recorded_and_every_target_synthesizes(tmp_path) -> None:
    root = tmp_path / "no-git"
    (root / "cdk.out").mkdir(parents=True)
    (root / "cdk.out" / "manifest.json").write_text("{}")
    if assembly_fingerprint.input_files(root) is not None:
        pytest.skip("the temporary folder lies inside a git work tree")
    argv = ["--app", str(root / "cdk.out"), "--stage", "dev", "--root", str(root)]
    assert assembly_fingerprint.main(["begin", *argv]) == 0
    assert assembly_fingerprint.main(["record", *argv]) == 0
    assert not (root / "cdk.out" / assembly_fingerprint.FINGERPRINT_FILE).exists()
    assert assembly_fingerprint.main(["check", *argv]) == 1


# --- item 3: destroy without an assembly ------------------------------------------------------------------------

WHEN = datetime(2026, 11, 27, tzinfo=UTC)
DEPLOYED = ["Triton-dev-Artifacts", "Triton-dev-Build", "Triton-dev-Endpoint-a", "Triton-dev-SmokeAccess"]


def _summary(name: str) -> dict:
    return {"StackName": name, "StackStatus": "UPDATE_COMPLETE", "CreationTime": WHEN, "StackId": f"arn:{name}"}


def _cloudformation(deletes: list[str]):
    client = boto3.client("cloudformation", region_name="eu-west-1", aws_access_key_id="t", aws_secret_access_key="t")
    stubber = Stubber(client)
    summaries = [*map(_summary, DEPLOYED), _summary("Triton-dev2-Build"), _summary("Other")]
    stubber.add_response("list_stacks", {"StackSummaries": summaries}, {"StackStatusFilter": stale_stacks_filter()})
    for name in deletes:
        stubber.add_response("delete_stack", {}, {"StackName": name})
        gone = {"StackName": name, "StackStatus": "DELETE_COMPLETE", "CreationTime": WHEN}
        stubber.add_response("describe_stacks", {"Stacks": [gone]}, {"StackName": name})  # the waiter: deleted
    stubber.activate()
    return client, stubber


def stale_stacks_filter() -> list[str]:
    from stacks.stale_stacks import LIVE_STATUSES

    return list(LIVE_STATUSES)


ORDER = ["Triton-dev-Endpoint-a", "Triton-dev-Build", "Triton-dev-Artifacts"]


def test_without_an_assembly_destroy_asks_then_deletes_the_deployed_stacks_endpoints_first(tmp_path, capsys) -> None:
    client, stubber = _cloudformation(ORDER)
    folder = _config_dir(tmp_path, dev="stage: dev\nregion: eu-west-1\nmodels: [{source: {path: gone.onnx}}]\n")
    questions: list[str] = []
    argv = ["--stage", "dev", "--config-dir", str(folder)]
    factory = _factory(client=client, region=None)
    assert stage_teardown.main(argv, session_factory=factory, ask=lambda q: questions.append(q) or "y") == 0
    stubber.assert_no_pending_responses()
    assert questions == [f"Are you sure you want to delete: {', '.join(ORDER)} (y/n)? "]
    out = capsys.readouterr().out
    assert "its deployed stacks in eu-west-1" in out and "SmokeAccess" not in out and "dev2" not in out
    assert [line.split(":")[0] for line in out.splitlines() if line.endswith(": destroyed")] == ORDER


@pytest.mark.parametrize("answer", ["n", "", EOFError])
def test_without_a_yes_nothing_is_deleted(tmp_path, capsys, answer) -> None:
    client, stubber = _cloudformation([])
    folder = _config_dir(tmp_path, dev="stage: dev\n")

    def ask(question: str) -> str:
        if answer is EOFError:
            raise EOFError
        return answer

    assert (
        stage_teardown.main(
            ["--stage", "dev", "--config-dir", str(folder)], session_factory=_factory(client=client), ask=ask
        )
        == 0
    )
    stubber.assert_no_pending_responses()  # no delete_stack was called
    assert "Nothing was deleted." in capsys.readouterr().out


def test_without_a_terminal_it_refuses_as_cdk_destroy_does(tmp_path, capsys, monkeypatch) -> None:
    client, stubber = _cloudformation([])
    folder = _config_dir(tmp_path, dev="stage: dev\n")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    argv = ["--stage", "dev", "--config-dir", str(folder)]
    assert stage_teardown.main(argv, session_factory=_factory(client=client)) == 1
    stubber.assert_no_pending_responses()
    assert "no terminal is attached to confirm it; nothing was deleted (CDK_ARGS=--force" in capsys.readouterr().err


def test_force_in_cdk_args_deletes_without_asking(tmp_path) -> None:
    client, stubber = _cloudformation(ORDER)
    folder = _config_dir(tmp_path, dev="stage: dev\n")
    argv = ["--stage", "dev", "--config-dir", str(folder), "--cdk-args=--force --profile p"]

    def ask(question: str) -> str:
        raise AssertionError("asked")

    factory = _factory(client=client)
    assert stage_teardown.main(argv, session_factory=factory, ask=ask) == 0
    assert factory.calls == [{"profile_name": "p"}]
    stubber.assert_no_pending_responses()


def test_a_termination_protected_artifact_stack_stops_with_the_command_that_turns_it_off(tmp_path, capsys) -> None:
    client = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    stubber = Stubber(client)
    stubber.add_response("list_stacks", {"StackSummaries": [_summary("Triton-dev-Artifacts")]})
    message = "Stack [Triton-dev-Artifacts] cannot be deleted while TerminationProtection is enabled"
    stubber.add_client_error("delete_stack", "ValidationError", message)
    stubber.activate()
    folder = _config_dir(tmp_path, dev="stage: dev\n")
    argv = ["--stage", "dev", "--config-dir", str(folder), "--cdk-args=--force"]
    assert stage_teardown.main(argv, session_factory=_factory(client=client)) == 1
    err = capsys.readouterr().err
    assert "ERROR: Triton-dev-Artifacts: not deleted" in err
    assert "update-termination-protection --no-enable-termination-protection --stack-name Triton-dev-Artifacts" in err


def test_the_preflight_starts_at_once_without_the_cdk() -> None:
    """`make deploy|diff|destroy` run the preflight before anything else; it reads YAML and asks boto3 for
    credentials, so it must not load aws_cdk and jsii (about 8 s on a busy 2-core machine; newcomer review)."""
    code = "import sys, stacks.deploy_preflight, stacks.assembly_fingerprint; print('aws_cdk' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", result.stderr[-2000:]
