"""Every template of every configuration the project ships, synthesized once per session.

The deploy-contract tests (tests/contract/test_*_rules.py) check AWS, CloudFormation, SageMaker,
CodeBuild and Triton rules over all of them: each stage's app (config/dev.yaml, config/prod.yaml), the
pipeline app with its nested stage assemblies (as `make synth` writes both), every stage in examples/config/
and tests/configs/, and the purpose-built configs the area tests synthesize (serving's custom endpoints,
the pipeline's cross-account promotion).
"""

from __future__ import annotations

import fcntl
import functools
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cdklabs.cdk_validator_cfnguard import CfnGuardValidator
from contract_helpers import ShippedTemplate, plain_guard_findings, read_assembly_templates
from synth_helpers import PROJECT_ROOT, Synthesized, synth_pipeline, synth_stage


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


def _shared_folder(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """A folder every pytest-xdist worker of this run sees: a worker's basetemp is `<run>/popen-gwN`, so their
    parent is the run's own folder (pytest-xdist's documented recipe for session fixtures built once per run).
    A worker is told by its `workerinput`, not by the PYTEST_XDIST_WORKER variable, which a pytest started from
    inside a worker inherits (its basetemp's parent would be shared across runs)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if hasattr(config, "workerinput") else base) / "shipped-assemblies"
    folder.mkdir(exist_ok=True)
    return folder


def _synth_jobs() -> list[tuple[str, Callable[[], Synthesized]]]:
    """(label, synthesize) of every configuration, in the order of `_config_dirs`."""
    jobs: list[tuple[str, Callable[[], Synthesized]]] = []
    for folder, prefix in _config_dirs():
        jobs += [(f"{prefix}/{stage}", functools.partial(synth_stage, stage, folder)) for stage in _stage_files(folder)]
        if (folder / "pipeline.yaml").is_file():
            jobs.append((f"{prefix}/pipeline", functools.partial(synth_pipeline, folder)))
    return jobs


def _slug(label: str) -> str:
    """A label as a file name in the run's shared folder."""
    return label.replace("/", "_").replace(":", "_")


def _claim(lock_file: Path, *, wait: bool):
    """An exclusive lock on `lock_file` (held while the returned file is open), or None when another worker holds it
    and `wait` is False."""
    handle = lock_file.open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        handle.close()
        return None
    return handle


@pytest.fixture(scope="session")
def shipped_assemblies(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> dict[str, Path]:
    """{label ("config/dev", "tests/configs/test", ...): cloud assembly folder} of every configuration.

    Synthesized as app.py does (tests/synth_helpers.py), each configuration ONCE per test run: under pytest-xdist
    the workers share the assemblies through the run's folder (a lock per configuration; the first worker to claim
    one synthesizes it and writes where its assembly is, the others read that path). The workers start at
    different ends of the list and skip a configuration another worker is synthesizing, then wait for it at the
    end. The areas' fixtures of the same configurations synthesize again without the checks (checks=False).
    """
    shared = _shared_folder(tmp_path_factory, pytestconfig)
    jobs = _synth_jobs()
    labels = [label for label, _ in jobs]
    worker = getattr(pytestconfig, "workerinput", {}).get("workerid", "gw0")
    if worker.removeprefix("gw").isdigit() and int(worker.removeprefix("gw")) % 2:
        jobs = jobs[::-1]
    assemblies: dict[str, Path] = {}
    for wait in (False, True):
        for label, synthesize in jobs:
            if label in assemblies:
                continue
            slug = _slug(label)
            handle = _claim(shared / f"{slug}.lock", wait=wait)
            if handle is None:
                continue  # another worker is synthesizing it: come back to it after the rest
            with handle:
                written = shared / f"{slug}.path"
                if not written.is_file():
                    outdir = _synthesize_recording_guard(synthesize, shared / f"{slug}.guard-reference.json")
                    written.write_text(str(outdir))
                assemblies[label] = Path(written.read_text())
    return {label: assemblies[label] for label in labels}


@dataclass(frozen=True)
class GuardRecording:
    """What the plain cdklabs Guard plugin did during one configuration's synth (`_synthesize_recording_guard`)."""

    findings: set[tuple[str, str, str]]  # (rule, template path, logical id) of every violation it returned
    templates: set[str]  # the template paths it was given
    props: list[dict]  # the props of every CfnGuardValidator created: the reference is the default, {}


def _synthesize_recording_guard(synthesize: Callable[[], Synthesized], recording_file: Path) -> Path:
    """Synthesizes one configuration, writing to `recording_file` what the plain cdklabs Guard plugin did while the
    app's wrapper (triton_cdk/guard_plugin.py) ran it: the props it was created with, the templates it was given and
    (rule, template, logical id) of every violation it returned, before the wrapper and aws-cdk-lib touch the
    report. tests/contract/test_guard_rules.py compares that with the app's report, so the plugin's findings are
    not computed twice. Nothing is written when the synth was already cached in this process (the plugin did not
    run): the test then runs the plugin itself."""
    findings: set[tuple[str, str, str]] = set()
    templates: set[str] = set()
    props: list[dict] = []
    calls = 0
    plain_init, plain_validate = CfnGuardValidator.__init__, CfnGuardValidator.validate

    def recording_init(plugin: CfnGuardValidator, **given) -> None:
        props.append({name: repr(value) for name, value in given.items() if value is not None})
        plain_init(plugin, **given)

    def recording_validate(plugin: CfnGuardValidator, context):
        nonlocal calls
        report = plain_validate(plugin, context)
        calls += 1
        templates.update(str(Path(path).resolve()) for path in context.template_paths)
        findings.update(plain_guard_findings(report))
        return report

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CfnGuardValidator, "__init__", recording_init)
        patch.setattr(CfnGuardValidator, "validate", recording_validate)
        outdir = synthesize().outdir
    if calls:
        recording = {"findings": sorted(findings), "templates": sorted(templates), "props": props}
        recording_file.write_text(json.dumps(recording))
    return outdir


@pytest.fixture(scope="session")
def guard_reference(
    shipped_assemblies: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> dict[str, GuardRecording | None]:
    """{label: what the plain Guard plugin did during that configuration's synth, or None where not recorded}."""
    shared = _shared_folder(tmp_path_factory, pytestconfig)
    recorded: dict[str, GuardRecording | None] = {}
    for label in shipped_assemblies:
        file = shared / f"{_slug(label)}.guard-reference.json"
        if not file.is_file():
            recorded[label] = None
            continue
        recording = json.loads(file.read_text())
        recorded[label] = GuardRecording(
            {tuple(finding) for finding in recording["findings"]}, set(recording["templates"]), recording["props"]
        )
    return recorded


@pytest.fixture(scope="session")
def shipped_templates(shipped_assemblies: dict[str, Path]) -> list[ShippedTemplate]:
    templates = [t for label, folder in shipped_assemblies.items() for t in read_assembly_templates(label, folder)]
    assert templates, "no configuration found to synthesize"
    return templates


@pytest.fixture(scope="session")
def shipped_configs(shipped_templates: list[ShippedTemplate]) -> set[str]:
    """The labels of the configurations behind `shipped_templates` (top level, without nested assemblies)."""
    return {t.config.split(":assembly-")[0] for t in shipped_templates}
