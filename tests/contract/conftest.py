"""Every template of every configuration the project ships, synthesized once per session.

The deploy-contract tests (tests/contract/test_*_rules.py) check AWS, CloudFormation, SageMaker,
CodeBuild and Triton rules over all of them: each stage's app (config/dev.yaml, config/prod.yaml), the
pipeline app with its nested stage assemblies (as `make synth` writes both), every stage in examples/config/
and tests/configs/, and the purpose-built configs the area tests synthesize (serving's custom endpoints,
the pipeline's cross-account promotion).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from contract_helpers import ShippedTemplate, read_assembly_templates
from synth_helpers import PROJECT_ROOT, synth_pipeline, synth_stage


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"_contract_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


def _stage_files(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml") if p.stem != "pipeline") if folder.is_dir() else []


def _config_dirs() -> list[tuple[Path, str]]:
    """(config folder, label prefix) of every shipped and test configuration."""
    dirs = [(PROJECT_ROOT / "config", "config"), (PROJECT_ROOT / "examples" / "config", "examples/config")]
    dirs.append((PROJECT_ROOT / "tests" / "configs", "tests/configs"))
    # Purpose-built configs the area tests synthesize: the same folders, so one synth serves both.
    serving = _load_module(PROJECT_ROOT / "tests" / "serving" / "serving_helpers.py")
    dirs.append((serving.custom_config_folder(), "tests/serving:custom"))
    pipeline = _load_module(PROJECT_ROOT / "tests" / "pipeline" / "pipeline_helpers.py")
    dirs.append((pipeline.cross_account_folder(), "tests/pipeline:cross-account"))
    return dirs


@pytest.fixture(scope="session")
def shipped_assemblies() -> dict[str, Path]:
    """{label ("config/dev", "tests/configs/test", ...): cloud assembly folder} of every configuration.

    Synthesized as app.py does (tests/synth_helpers.py), shared with the area tests' fixtures.
    """
    assemblies = {}
    for folder, prefix in _config_dirs():
        for stage in _stage_files(folder):
            assemblies[f"{prefix}/{stage}"] = synth_stage(stage, folder).outdir
        if (folder / "pipeline.yaml").is_file():
            assemblies[f"{prefix}/pipeline"] = synth_pipeline(folder).outdir
    return assemblies


@pytest.fixture(scope="session")
def shipped_templates(shipped_assemblies: dict[str, Path]) -> list[ShippedTemplate]:
    templates = [t for label, folder in shipped_assemblies.items() for t in read_assembly_templates(label, folder)]
    assert templates, "no configuration found to synthesize"
    return templates


@pytest.fixture(scope="session")
def shipped_configs(shipped_templates: list[ShippedTemplate]) -> set[str]:
    """The labels of the configurations behind `shipped_templates` (top level, without nested assemblies)."""
    return {t.config.split(":assembly-")[0] for t in shipped_templates}
