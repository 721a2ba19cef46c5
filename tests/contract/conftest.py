"""Every template of every configuration the project ships, synthesized once per session.

The deploy-contract tests (tests/contract/test_*_rules.py) check AWS, CloudFormation, SageMaker,
CodeBuild and Triton rules over all of them: each stage's app (config/dev.yaml, config/prod.yaml), the
pipeline app with its nested stage assemblies (as `make synth` writes both), every stage in examples/config/
and tests/configs/, and the purpose-built configs the area tests synthesize (serving's custom endpoints,
the pipeline's cross-account promotion).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from contract_helpers import ShippedTemplate, read_assembly_templates

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"_contract_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


def _cdk_context() -> dict:
    return json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]


def synth_like_app_py(config_dir: Path, stage: str) -> Path:
    """Synthesize one stage's app exactly as app.py does (`-c stage=...`, with its promotion source)."""
    from stacks.app_factory import create_app
    from triton_cdk.config import load_stage

    config = load_stage(stage, config_dir)
    source = load_stage(config.promote_from, config_dir) if config.promote_from else None
    outdir = tempfile.mkdtemp(prefix=f"contract-{stage}-")
    app, _ = create_app(config, promotion_source=source, outdir=outdir, context=_cdk_context())
    app.synth()
    return Path(outdir)


def synth_pipeline_like_app_py(config_dir: Path) -> Path:
    """The pipeline app as app.py writes it (`-c pipeline=true`): its stages are nested assemblies."""
    from stacks.app_factory import create_pipeline_app
    from triton_cdk.config.pipeline import load_pipeline

    outdir = tempfile.mkdtemp(prefix="contract-pipeline-")
    app, _ = create_pipeline_app(
        *load_pipeline(config_dir / "pipeline.yaml", config_dir), outdir=outdir, context=_cdk_context()
    )
    app.synth()
    return Path(outdir)


def _stage_files(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml") if p.stem != "pipeline") if folder.is_dir() else []


def _config_dirs(tmp: Path) -> list[tuple[Path, str]]:
    """(config folder, label prefix) of every shipped and test configuration."""
    dirs = [(PROJECT_ROOT / "config", "config"), (PROJECT_ROOT / "examples" / "config", "examples/config")]
    dirs.append((PROJECT_ROOT / "tests" / "configs", "tests/configs"))
    # Purpose-built configs the area tests synthesize, written to files so they go through the same loader.
    serving = _load_module(PROJECT_ROOT / "tests" / "serving" / "serving_helpers.py")
    custom_dir = tmp / "serving-custom"
    custom_dir.mkdir()
    serving.write_config(custom_dir, serving.custom_document())
    dirs.append((custom_dir, "tests/serving:custom"))
    pipeline = _load_module(PROJECT_ROOT / "tests" / "pipeline" / "pipeline_helpers.py")
    cross_dir = tmp / "pipeline-cross-account"
    pipeline.write_documents(cross_dir, pipeline.cross_account_documents())
    dirs.append((cross_dir, "tests/pipeline:cross-account"))
    return dirs


@pytest.fixture(scope="session")
def shipped_assemblies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{label ("config/dev", "tests/configs/test", ...): cloud assembly folder} of every configuration."""
    assemblies = {}
    for folder, prefix in _config_dirs(tmp_path_factory.mktemp("contract-configs")):
        for stage in _stage_files(folder):
            assemblies[f"{prefix}/{stage}"] = synth_like_app_py(folder, stage)
        if (folder / "pipeline.yaml").is_file():
            assemblies[f"{prefix}/pipeline"] = synth_pipeline_like_app_py(folder)
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
