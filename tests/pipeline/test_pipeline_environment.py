"""Setting dev's account and region must not break `make synth` / `make test` for someone who does not use the
pipeline yet (issue #27 item 2).

CDK Pipelines needs the pipeline stack's own environment once a stage names one (aws-cdk-lib pipelines:
cross-environment actions need an explicit account and region on the pipeline stack). A pipeline without one
deploys from the first stage's environment and says so on stderr; `make synth` synthesizes the pipeline only once
config/pipeline.yaml is set up (no placeholder left), `make synth-pipeline` always.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from synth_helpers import PROJECT_ROOT, SHIPPED_CONFIG_DIR, cdk_context

from stacks.deploy_preflight import main as preflight
from stage_config import ConfigError
from stage_config.pipeline import load_pipeline

DEV_ACCOUNT = 'account: "222222222222"\nregion: us-east-1\n'
PROD_ACCOUNT = 'account: "333333333333"\nregion: us-east-1\n'


def _configs(tmp_path: Path, dev_env: str, pipeline_env: str = "", prod_env: str = "") -> Path:
    """config/ as shipped (tests/shipped_config/: no account or region, the pipeline not set up), whatever the
    user has put in config/ (a user who set dev's account, as the README says, must not change what these tests
    check), with the given lines added to dev, the pipeline and prod."""
    folder = tmp_path / "config"
    shutil.copytree(SHIPPED_CONFIG_DIR, folder)
    for name, lines in (("dev.yaml", dev_env), ("pipeline.yaml", pipeline_env), ("prod.yaml", prod_env)):
        path = folder / name
        path.write_text(lines + path.read_text())
    return folder


def test_the_pipeline_takes_the_first_stages_environment_and_says_so(tmp_path: Path, capsys) -> None:
    folder = _configs(tmp_path, 'account: "222222222222"\nregion: eu-west-1\n')
    pipeline, stages = load_pipeline(folder / "pipeline.yaml", folder)
    assert (pipeline.account, pipeline.region) == ("222222222222", "eu-west-1")
    assert stages["dev"].account == "222222222222"
    err = capsys.readouterr().err
    assert "the pipeline deploys from the environment of stage 'dev' (222222222222, eu-west-1)" in err


def test_the_pipelines_own_environment_wins(tmp_path: Path, capsys) -> None:
    folder = _configs(
        tmp_path,
        'account: "222222222222"\nregion: eu-west-1\n',
        pipeline_env='account: "222222222222"\nregion: us-east-1\n',
    )
    pipeline, _ = load_pipeline(folder / "pipeline.yaml", folder)
    assert (pipeline.account, pipeline.region) == ("222222222222", "us-east-1")
    assert "WARNING" not in capsys.readouterr().err


def test_a_stage_with_a_region_only_still_needs_the_pipelines_environment(tmp_path: Path) -> None:
    folder = _configs(tmp_path, "region: eu-west-1\n")
    with pytest.raises(ConfigError, match="so the pipeline needs its own: set account and region"):
        load_pipeline(folder / "pipeline.yaml", folder)


def test_the_pipeline_app_synthesizes_with_devs_environment(tmp_path: Path) -> None:
    """The user's case end to end: dev has an account and region, the pipeline does not."""
    from stacks.app_factory import create_pipeline_app

    folder = _configs(tmp_path, 'account: "222222222222"\nregion: us-east-1\n')
    app, stack = create_pipeline_app(
        *load_pipeline(folder / "pipeline.yaml", folder), outdir=str(tmp_path / "out"), context=cdk_context()
    )
    app.synth()
    assert (stack.account, stack.region) == ("222222222222", "us-east-1")


def test_make_synth_leaves_out_a_pipeline_not_set_up(tmp_path: Path, capsys) -> None:
    folder = _configs(tmp_path, "")
    assert preflight(["pipeline-configured", "--config-dir", str(folder)]) == 3
    assert "is not set up yet (placeholder: source.connection_arn)" in capsys.readouterr().err
    pipeline = folder / "pipeline.yaml"
    pipeline.write_text(
        pipeline.read_text().replace("connection/REPLACE-ME", "connection/0a1b2c3d-0000-4000-8000-000000000000")
    )
    assert preflight(["pipeline-configured", "--config-dir", str(folder)]) == 0
    assert preflight(["pipeline-configured", "--config-dir", str(tmp_path / "nowhere")]) == 3


def test_make_synth_runs_the_pipeline_only_when_configured() -> None:
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    assert "synth: synth-stage\n\t@if $(BIN)/python -m stacks.deploy_preflight pipeline-configured" in makefile


def test_a_pipeline_not_set_up_across_accounts_is_synthesized_for_checking(tmp_path: Path, capsys) -> None:
    """dev and prod in two accounts, config/pipeline.yaml untouched (its connection still a placeholder): the user
    deploys the stages alone, so loading (and `make test`'s pipeline synth) must not refuse; `make deploy-pipeline`
    still refuses the placeholder, and once the pipeline is set up its own account is required again."""
    folder = _configs(tmp_path, DEV_ACCOUNT, prod_env=PROD_ACCOUNT)
    pipeline, stages = load_pipeline(folder / "pipeline.yaml", folder)
    assert (pipeline.account, pipeline.region) == ("222222222222", "us-east-1")
    assert stages["prod"].account == "333333333333"
    err = capsys.readouterr().err
    assert "not set up yet (placeholder: source.connection_arn)" in err and "for checking only" in err
    assert "WARNING" in err and "add 333333333333 to config/dev.yaml artifacts.reader_accounts" in err
    assert preflight(["deploy-pipeline", "--config-dir", str(folder)]) != 0
    configured = folder / "pipeline.yaml"
    configured.write_text(
        configured.read_text().replace("connection/REPLACE-ME", "connection/0a1b2c3d-0000-4000-8000-000000000000")
    )
    with pytest.raises(ConfigError, match="so the pipeline needs its own: set account and region") as refused:
        load_pipeline(configured, folder)
    assert "artifacts.reader_accounts" in str(refused.value)  # set up: every problem refuses again


def test_make_test_synthesizes_the_pipeline_of_two_accounts_not_set_up(tmp_path: Path) -> None:
    """The same case through the pipeline app, as `make test` synthesizes config/pipeline.yaml."""
    from stacks.app_factory import create_pipeline_app

    folder = _configs(tmp_path, DEV_ACCOUNT, prod_env=PROD_ACCOUNT)
    app, stack = create_pipeline_app(
        *load_pipeline(folder / "pipeline.yaml", folder), outdir=str(tmp_path / "out"), context=cdk_context()
    )
    app.synth()
    assert (stack.account, stack.region) == ("222222222222", "us-east-1")
