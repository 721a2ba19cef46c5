"""The one way tests synthesize a CDK app: as `make synth` runs app.py, each app once per session.

Every app gets cdk.json's context (the feature flags the CDK CLI passes to app.py), cdk-nag and the Guard
rules (triton_cdk/nag.py `enable_checks`), and is synthesized into its own temporary folder. Apps built
from files (a stage of a config folder, the pipeline of a config folder, purpose-built documents written
to files) are cached per process, so every test area and the contract tests share one synth of each.

tests/conftest.py puts this folder on sys.path (pytest's rootdir conftest): `from synth_helpers import ...`.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# jsii prints an end-of-life banner on Node 20 unless told not to; set before aws_cdk loads.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = PROJECT_ROOT / "config"
EXAMPLES_CONFIG_DIR = PROJECT_ROOT / "examples" / "config"
# config/ as the project ships it, byte for byte (same comments, same line numbers): the input of every test that
# asserts the shipped example's values (its placeholders, no account, `owner/repo`, ...). A user fills in config/
# before the first deploy (README, "Before the first deploy") and commits it, so neither the working tree nor
# `git show HEAD:config/...` is the shipped example then, and the pipeline's `make test` runs from a source
# artifact without .git. Tests that check what will be deployed (the contract tests, snapshots, dev_app, prod_app,
# pipeline_app) keep reading CONFIG_DIR. tests/shipped_config/README.md says when to update the copy.
SHIPPED_CONFIG_DIR = PROJECT_ROOT / "tests" / "shipped_config" / "config"


def shipped_path(relative: str | Path) -> Path:
    """A project file as shipped, by its path in the project: `config/...` is the shipped copy's (SHIPPED_CONFIG_DIR),
    anything else (examples/config/..., tests/configs/...) the project's own, which a user does not edit."""
    relative = Path(relative)
    if relative.parts[:1] == ("config",):
        return SHIPPED_CONFIG_DIR.parent / relative
    return PROJECT_ROOT / relative


def config_is_as_shipped() -> bool:
    """Whether config/ holds exactly the shipped files (the project's own checkout), not a user's filled-in ones."""
    shipped = {p.name: p.read_bytes() for p in SHIPPED_CONFIG_DIR.glob("*.yaml")}
    return {p.name: p.read_bytes() for p in CONFIG_DIR.glob("*.yaml")} == shipped


def read_shipped_config(name: str) -> dict:
    """The shipped `config/<name>.yaml` (SHIPPED_CONFIG_DIR) as a YAML document, a fresh copy on every call."""
    return yaml.safe_load((SHIPPED_CONFIG_DIR / f"{name}.yaml").read_text())


@functools.cache
def _cdk_json_context() -> str:
    return json.dumps(json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"])


def cdk_context() -> dict:
    """cdk.json's context: the CDK CLI passes it to app.py on `make synth`, so every test app gets it too."""
    return json.loads(_cdk_json_context())


def new_app(outdir: Path | str | None = None, **extra_context: Any):
    """A `cdk.App` as the CLI starts app.py: cdk.json's context (plus `extra_context`), its own outdir."""
    import aws_cdk as cdk

    outdir = outdir or tempfile.mkdtemp(prefix="cdk-test-")
    return cdk.App(outdir=str(outdir), context={**cdk_context(), **extra_context})


def _stack_name(stack_or_name: Any) -> str:
    return stack_or_name if isinstance(stack_or_name, str) else stack_or_name.stack_name


@dataclass
class Synthesized:
    """One synthesized app: its stacks (what the builder returned), templates, validation report, messages.

    `stacks` is what built the app: a `StageStacks` (stage apps), a `PipelineStack` (the pipeline app) or
    a dict of stacks (apps a test puts together). Templates are read from the cloud assembly.
    """

    app: Any
    stacks: Any
    assembly: Any
    config: Any = None
    _templates: dict[str, dict] = field(default_factory=dict, repr=False)

    @property
    def outdir(self) -> Path:
        return Path(self.assembly.directory)

    directory = outdir  # the pipeline tests' name for it

    @functools.cached_property
    def report(self) -> dict | None:
        """validation-report.json: what cdk-nag, the Guard rules and CloudFormation validation found."""
        path = self.outdir / "validation-report.json"
        return json.loads(path.read_text()) if path.is_file() else None

    # --- any stack, by stack object or stack name -----------------------------------------------------

    def template_file(self, stack: Any = None) -> Path:
        stack = self.stack if stack is None else stack
        if isinstance(stack, str):
            return self.outdir / self.assembly.get_stack_by_name(stack).template_file
        return self.outdir / f"{stack.artifact_id}.template.json"

    def template_of(self, stack: Any = None) -> dict:
        """The template of `stack` (object or name); the pipeline stack when the app has only that."""
        path = self.template_file(stack)
        if str(path) not in self._templates:
            self._templates[str(path)] = json.loads(path.read_text())
        return self._templates[str(path)]

    @property
    def template(self) -> _TemplateLookup:
        """`synth.template(stack)` -> that stack's template; `synth.template[...]` reads the pipeline stack's."""
        return _TemplateLookup(self)

    def messages_of(self, stack: Any) -> list[tuple[str, str, str]]:
        """CDK's annotations on one stack: (level, construct path, text)."""
        artifact = self.assembly.get_stack_by_name(_stack_name(stack))
        return [(str(m.level), m.id, str(m.entry.data)) for m in artifact.messages]

    def resources(self, resource_type: str, stack: Any = None) -> dict[str, dict]:
        """{logical id: resource} of one CloudFormation type in `stack` (default: the pipeline stack)."""
        return {k: v for k, v in self.template_of(stack)["Resources"].items() if v["Type"] == resource_type}

    # --- stage apps: endpoint stacks by endpoint name -------------------------------------------------

    @functools.cached_property
    def raw(self) -> dict[str, dict]:
        """Endpoint name -> its stack's template."""
        return {name: self.template_of(stack) for name, stack in self.stacks.endpoints.items()}

    @functools.cached_property
    def templates(self) -> dict[str, Any]:
        """Endpoint name -> its stack's template as an `aws_cdk.assertions.Template`."""
        from aws_cdk.assertions import Template

        return {name: Template.from_json(template) for name, template in self.raw.items()}

    def template_files(self) -> list[Path]:
        return [self.template_file(stack) for stack in self.stacks.endpoints.values()]

    @functools.cached_property
    def messages(self) -> dict[str, list[tuple[str, str, str]]]:
        """Endpoint name -> the annotations on its stack (stage apps); stack name -> them (other apps)."""
        if hasattr(self.stacks, "endpoints"):
            return {name: self.messages_of(stack) for name, stack in self.stacks.endpoints.items()}
        return {artifact.stack_name: self.messages_of(artifact.stack_name) for artifact in self.assembly.stacks}

    # --- the pipeline app --------------------------------------------------------------------------------

    @property
    def stack(self) -> Any:
        """The app's one top-level stack (the pipeline app's `PipelineStack`)."""
        return self.stacks

    def pipeline_stages(self) -> list[dict]:
        (pipeline,) = self.resources("AWS::CodePipeline::Pipeline").values()
        return pipeline["Properties"]["Stages"]

    def stage_templates(self, stage_id: str) -> dict[str, dict]:
        """Every template of a pipeline stage's nested assembly, by stack name."""
        folder = self.outdir / f"assembly-{self.stack.stack_name}-{stage_id}"
        manifest = json.loads((folder / "manifest.json").read_text())
        templates = {}
        for artifact in manifest["artifacts"].values():
            if artifact["type"] == "aws:cloudformation:stack":
                name = artifact["properties"].get("stackName")
                templates[name] = json.loads((folder / artifact["properties"]["templateFile"]).read_text())
        return templates


class _TemplateLookup(dict):
    """Both shapes the areas used: `synth.template(stack)` and `synth.template["Resources"]` (pipeline)."""

    def __init__(self, synth: Synthesized) -> None:
        self._synth = synth
        stack = synth.stacks
        super().__init__(synth.template_of(stack) if hasattr(stack, "artifact_id") else {})

    def __call__(self, stack: Any = None) -> dict:
        return self._synth.template_of(stack)


# ---------------------------------------------------------------------------------------------------------
# Synthesis


def synthesize_built(build: Callable[[Any], Any], outdir: Path | str | None = None, *, config: Any = None):
    """An app a test puts together: `build(app)` adds stacks (returns them); checks on, as app.py has them."""
    from triton_cdk.nag import enable_checks

    app = new_app(outdir)
    stacks = build(app)
    enable_checks(app)
    return Synthesized(app, stacks, app.synth(), config)


def synthesize_config(
    config: Any, outdir: Path | str | None = None, *, promotion_source: Any = None, checks: bool = True
) -> Synthesized:
    """One stage's app from a loaded `AppConfig`, built by the app's own factory (as app.py)."""
    from stacks.app_factory import create_app

    outdir = outdir or tempfile.mkdtemp(prefix=f"cdk-{config.stage}-")
    app, stacks = create_app(
        config, promotion_source=promotion_source, checks=checks, outdir=str(outdir), context=cdk_context()
    )
    return Synthesized(app, stacks, app.synth(), config)


@functools.cache
def synth_stage(stage: str, config_dir: Path = CONFIG_DIR, *, checks: bool = True) -> Synthesized:
    """`cdk synth -c stage=<stage> [-c config_dir=<config_dir>]`: once per session per (stage, folder, checks).

    `checks=False` (no cdk-nag, Guard, API-constraint gate or CloudFormation default rules: the same templates in
    a fifth of the time) is for the areas' fixtures of configurations the contract tests' `shipped_assemblies`
    synthesize with every check in the same run: those checks run once per configuration there.
    """
    from stage_config import load_stage

    config = load_stage(stage, config_dir)
    source = load_stage(config.promote_from, config_dir) if config.promote_from else None
    return synthesize_config(config, promotion_source=source, checks=checks)


@functools.cache
def synth_pipeline(config_dir: Path = CONFIG_DIR, *, checks: bool = True) -> Synthesized:
    """`cdk synth -c pipeline=true [-c config_dir=...]`: the pipeline stack, its stages as nested assemblies.
    `checks`: as in `synth_stage`."""
    from stacks.app_factory import create_pipeline_app
    from stage_config.pipeline import load_pipeline

    outdir = tempfile.mkdtemp(prefix="cdk-pipeline-")
    pipeline_config, stage_configs = load_pipeline(config_dir / "pipeline.yaml", config_dir)
    app, stack = create_pipeline_app(
        pipeline_config, stage_configs, checks=checks, outdir=outdir, context=cdk_context()
    )
    return Synthesized(app, stack, app.synth(), pipeline_config)


_DOCUMENT_FOLDERS: dict[str, tuple[str, Path]] = {}


def config_folder(label: str, documents: dict[str, dict]) -> Path:
    """A folder holding `documents` as `<name>.yaml`, written once per session per label.

    The same label must always mean the same documents (checked), so that areas share its synth.
    """
    text = json.dumps(documents, sort_keys=True, default=str)
    if label in _DOCUMENT_FOLDERS:
        written, folder = _DOCUMENT_FOLDERS[label]
        assert written == text, f"config folder {label!r} asked for with other documents"
        return folder
    folder = Path(tempfile.mkdtemp(prefix=f"configs-{label.replace('/', '-').replace(':', '-')}-"))
    for name, document in documents.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(copy.deepcopy(document), sort_keys=False))
    _DOCUMENT_FOLDERS[label] = (text, folder)
    return folder


# ---------------------------------------------------------------------------------------------------------
# The same stage on both deploy paths (`make deploy` and the pipeline)


def _path_neutral(template: dict) -> dict:
    """A template without what only names where the stack sits in the app: CDK's `aws:cdk:path` metadata, the
    Provider framework's description (its construct path), logical ids CDK derives from the path of a construct
    outside the stack (an event rule target's Lambda permission)."""
    resources = {}
    for logical_id, resource in template.get("Resources", {}).items():
        resource = {k: v for k, v in resource.items() if k != "Metadata"}
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function" and "resource provider framework" in str(
            properties.get("Description", "")
        ):
            resource = {**resource, "Properties": {**properties, "Description": "<provider framework>"}}
        if resource["Type"] == "AWS::Lambda::Permission" and "EventRule" in logical_id:
            logical_id = f"<event rule permission for {properties['SourceArn']}>"
        resources[logical_id] = resource
    return {**template, "Resources": resources}


def deploy_path_differences(pipeline: Synthesized, stage: str, alone: Synthesized) -> list[tuple[str, str]]:
    """(stack, key) of every resource, output, rule, parameter or condition that differs between the stage's app
    (`alone`) and the pipeline's stage, beyond the path-derived names `_path_neutral` leaves out."""
    in_pipeline = pipeline.stage_templates(stage)
    names = sorted(path.name.removesuffix(".template.json") for path in alone.outdir.glob("*.template.json"))
    assert len(names) >= 3 and set(names) <= set(in_pipeline), (stage, names)  # SmokeAccess: pipeline only
    differing = []
    for name in names:
        piped, single = _path_neutral(in_pipeline[name]), _path_neutral(alone.template_of(name))
        keys = [
            (name, key)
            for section in ("Resources", "Outputs", "Rules", "Parameters", "Conditions")
            for key in sorted(set(piped.get(section, {})) | set(single.get(section, {})))
            if piped.get(section, {}).get(key) != single.get(section, {}).get(key)
        ]
        differing += keys or ([(name, "<another section>")] if piped != single else [])
    return differing
