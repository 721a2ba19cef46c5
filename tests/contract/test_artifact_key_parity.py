"""`python -m model_build key` prints exactly the artifact keys the synthesized templates use, for every shipped
stage config (config/, examples/config/, tests/configs/) and the pipeline app's stages (issue #23 item 5: one
function computes a key, stacks/artifact_plan.py; the command asks it instead of re-implementing it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from contract_helpers import read_assembly_templates
from synth_helpers import CONFIG_DIR, PROJECT_ROOT

from model_build import cli
from stage_config import AppConfig, load_stage

# models/<name>/<digest>/... : an archive (model.tar.gz) or its unpacked layout (uncompressed/).
ARTIFACT_PATH = re.compile(r"models/([A-Za-z0-9][A-Za-z0-9_-]*)/([0-9a-f]{64})/")
FOLDERS = (CONFIG_DIR, PROJECT_ROOT / "examples" / "config", PROJECT_ROOT / "tests" / "configs")
STAGE_FILES = sorted(path for folder in FOLDERS for path in folder.glob("*.yaml") if path.stem != "pipeline")


def served_on(config: AppConfig) -> set[tuple[str, str]]:
    """(model, instance type) of every model each endpoint serves (an ensemble's composing ones too), its shadow
    variant's model on the shadow's instance type included."""
    served = set()
    for endpoint in config.endpoints:
        served |= {(model.name, endpoint.instance_type) for model in config.served_models(endpoint.models)}
        if endpoint.shadow is not None:
            shadow = endpoint.shadow
            served |= {(model.name, shadow.instance_type) for model in config.served_models([shadow.model])}
    return served


def printed_keys(config: AppConfig, config_file: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    """`model_build key --instance-type` of every model on every instance type the stage serves it on."""
    keys = set()
    for model, instance in sorted(served_on(config)):
        argv = ["key", "--config", str(config_file), "--model", model, "--instance-type", instance]
        assert cli.main([*argv, "--base-dir", str(PROJECT_ROOT)]) == 0, capsys.readouterr().err
        keys.add(capsys.readouterr().out.strip())
    return keys


def template_keys(label: str, assembly: Path) -> set[str]:
    """The archive keys `models/<name>/<digest>/model.tar.gz` the templates of an assembly point at."""
    found = set()
    for shipped in read_assembly_templates(label, assembly):
        found |= set(ARTIFACT_PATH.findall(json.dumps(shipped.template)))
    return {f"models/{name}/{digest}/model.tar.gz" for name, digest in found}


def test_every_shipped_stage_config_is_compared():
    labels = {f"{path.parent.relative_to(PROJECT_ROOT)}/{path.stem}" for path in STAGE_FILES}
    assert {"config/dev", "config/prod", "examples/config/ensemble", "tests/configs/int8"} <= labels


@pytest.mark.parametrize("config_file", STAGE_FILES, ids=lambda path: path.relative_to(PROJECT_ROOT).as_posix())
def test_model_build_key_prints_the_keys_the_templates_use(config_file: Path, capsys, shipped_assemblies) -> None:
    config = load_stage(config_file.stem, config_file.parent)
    label = f"{config_file.parent.relative_to(PROJECT_ROOT).as_posix()}/{config_file.stem}"
    expected = template_keys(config_file.stem, shipped_assemblies[label])
    assert expected, f"{config_file}: no artifact key found in its templates"
    assert printed_keys(config, config_file, capsys) == expected


def test_the_pipeline_stages_use_the_keys_model_build_key_prints(capsys, shipped_assemblies) -> None:
    """The pipeline app builds the same stage stacks inside CDK Pipelines stages (config/pipeline.yaml)."""
    from stage_config.pipeline import load_pipeline

    _, stages = load_pipeline(CONFIG_DIR / "pipeline.yaml", CONFIG_DIR)
    printed = set()
    for config in stages.values():
        printed |= printed_keys(config, CONFIG_DIR / f"{config.stage}.yaml", capsys)
    assert printed == template_keys("config/pipeline", shipped_assemblies["config/pipeline"])
