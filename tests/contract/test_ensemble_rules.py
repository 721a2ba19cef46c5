"""Ensemble rules of SageMaker's Triton front end and CloudFormation, over every shipped configuration.

An ensemble ships as one archive holding its folder and every composing model's folder (the shared design,
issue #15). Sources, read in triton-inference-server/server (`fetch github:triton-inference-server/server`):
- `docker/sagemaker/serve`: in single-model mode a repository with more than one model folder starts only
  when `SAGEMAKER_TRITON_DEFAULT_MODEL_NAME` names one of them ("More than 1 model directory found in model
  repository ... set SAGEMAKER_TRITON_DEFAULT_MODEL_NAME to run the ensemble backend"); that folder must exist
  ("Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME ... does not exist"), and is loaded with
  `--model-control-mode=explicit --load-model=<it>`.
- `src/sagemaker_server.cc` (`SageMakerMMELoadModel`) and `src/sagemaker_server.h` (`platform_ensemble_regex_`):
  a multi-model `TargetModel` archive holding several model folders is registered as one repository, and the
  folder whose config.pbtxt matches `platform:(\\s)*"ensemble"` is the one mapped to the TargetModel name (the
  composing folders load as its dependencies). So multi-model endpoints can serve ensembles, provided the
  ensemble's generated config carries that text and no composing config does.
- CloudFormation `DependsOn` and `AWS::CloudFormation::WaitCondition`: the ensemble's build fetches its composing
  archives (COMPOSING_KEYS), so its ensure-artifact resource must wait for their wait conditions (archives
  uploaded), not merely for their resources (builds started).
"""

from __future__ import annotations

import re

import pytest
from contract_helpers import ShippedTemplate, resources_of
from synth_helpers import PROJECT_ROOT

from model_build.ensemble_config import generate_ensemble
from model_build.preflight import composing_config_text
from stage_config import load_stage

# src/sagemaker_server.h: platform_ensemble_regex_(R"(platform:(\s)*\"ensemble\")"), matched with RE2::PartialMatch.
SAGEMAKER_ENSEMBLE_REGEX = re.compile(r'platform:(\s)*"ensemble"')
ARTIFACT = "Custom::TritonModelArtifact"
STAGE_FOLDERS = (PROJECT_ROOT / "config", PROJECT_ROOT / "examples" / "config", PROJECT_ROOT / "tests" / "configs")


def _served_ensembles():
    """(label, config, endpoint, ensemble settings) for every ensemble an endpoint of a shipped stage serves."""
    found = []
    for folder in STAGE_FOLDERS:
        for path in sorted(folder.glob("*.yaml")):
            if path.stem == "pipeline":
                continue
            config = load_stage(path.stem, folder)
            for endpoint in config.endpoints:
                for name in endpoint.models:
                    if config.model(name).is_ensemble:
                        label = f"{path.relative_to(PROJECT_ROOT)}:{endpoint.name}:{name}"
                        found.append(pytest.param(config, endpoint, config.model(name), id=label))
    return found


SERVED_ENSEMBLES = _served_ensembles()


def test_a_shipped_configuration_serves_an_ensemble_on_each_endpoint_kind():
    modes = {endpoint.mode for _, endpoint, _ in (p.values for p in SERVED_ENSEMBLES)}
    assert {"single_model", "multi_model"} <= modes


@pytest.mark.parametrize("config,endpoint,ensemble", SERVED_ENSEMBLES)
def test_sagemaker_multi_model_mode_finds_the_ensemble_folder_by_its_config(config, endpoint, ensemble):
    """sagemaker_server.cc picks the archive's entry folder by `platform_ensemble_regex_` on each config.pbtxt:
    the generated ensemble config (model_build, the same code the build runs) must match it, no composing one."""
    composing = {}
    for name in ensemble.composing_models:
        text = composing_config_text(
            config.model(name),
            instance_type_name=endpoint.instance_type,
            triton_release=config.triton_release,
            base_dir=PROJECT_ROOT,
            fleet=config.build.fleet,
        )
        if text is None:
            pytest.skip(f"{name}: its config.pbtxt is known only in the build")
        composing[name] = text
    generated = generate_ensemble(ensemble, composing)
    assert SAGEMAKER_ENSEMBLE_REGEX.search(generated)
    assert {name: bool(SAGEMAKER_ENSEMBLE_REGEX.search(text)) for name, text in composing.items()} == dict.fromkeys(
        composing, False
    )


def _ensemble_artifacts(templates: list[ShippedTemplate]):
    """(template, logical id, resource) of each ensemble's ensure-artifact resource in BUILD mode."""
    for shipped in templates:
        for logical_id, resource in resources_of(shipped.template, ARTIFACT).items():
            if (resource["Properties"].get("BuildEnvironment") or {}).get("PLATFORM") == "ensemble":
                yield shipped, logical_id, resource


def test_an_ensemble_build_waits_for_every_composing_archive(shipped_templates):
    checked = 0
    for shipped, logical_id, resource in _ensemble_artifacts(shipped_templates):
        resources = shipped.template["Resources"]
        by_key = {r["Properties"]["Key"]: lid for lid, r in resources_of(shipped.template, ARTIFACT).items()}
        waits_of = {
            dependency: lid
            for lid, r in resources_of(shipped.template, "AWS::CloudFormation::WaitCondition").items()
            for dependency in r.get("DependsOn", [])
        }
        listed = resource["Properties"]["BuildEnvironment"]["COMPOSING_KEYS"]
        pairs = dict(pair.split("=", 1) for pair in listed.split())
        assert pairs, f"{shipped.label}: {logical_id} has no COMPOSING_KEYS"
        for name, key in pairs.items():
            composing = by_key.get(key)
            assert composing, f"{shipped.label}: {logical_id}: no ensure-artifact resource builds {name}'s {key}"
            assert resources[composing]["Properties"]["ModelName"] == name
            assert waits_of.get(composing) in resource.get("DependsOn", []), (
                f"{shipped.label}: {logical_id} does not wait for {name}'s archive ({composing})"
            )
        checked += 1
    assert checked, "no ensemble build in the shipped templates"


def _models(shipped: ShippedTemplate) -> list[dict]:
    return [r["Properties"] for r in resources_of(shipped.template, "AWS::SageMaker::Model").values()]


def _literal(value) -> str:
    """The literal text of a ModelDataUrl (an Fn::Join of the bucket name and the key)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(part for part in value["Fn::Join"][1] if isinstance(part, str))
    return ""


def test_single_model_endpoints_name_the_ensemble_they_serve(shipped_templates):
    """docker/sagemaker/serve: several model folders start only with SAGEMAKER_TRITON_DEFAULT_MODEL_NAME."""
    checked = 0
    by_config: dict[str, list[ShippedTemplate]] = {}
    for shipped in shipped_templates:
        by_config.setdefault(shipped.config, []).append(shipped)
    for config, templates in by_config.items():
        ensembles = {r["Properties"]["Key"]: r["Properties"]["ModelName"] for _, _, r in _ensemble_artifacts(templates)}
        for shipped in templates:
            for model in _models(shipped):
                container = model.get("PrimaryContainer") or {}
                if container.get("Mode") == "MultiModel":
                    continue
                url = _literal(container.get("ModelDataUrl"))
                for key, name in ensembles.items():
                    if url.endswith(key):
                        environment = container.get("Environment", {})
                        assert environment.get("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME") == name, (
                            f"{config}:{shipped.stack} serves ensemble {name} without naming it"
                        )
                        checked += 1
    assert checked, "no single-model endpoint serving an ensemble in the shipped templates"


def test_multi_model_endpoints_address_each_ensemble_archive_only(shipped_templates):
    """sagemaker_server.cc registers each TargetModel archive as a repository of its own: the ensemble's archive
    (`<prefix><ensemble>.tar.gz`) carries its composing folders, which get no TargetModel archive of their own
    beside it (the same folder in two registered repositories would be two models of one name)."""
    checked = 0
    for shipped, logical_id, resource in _ensemble_artifacts(shipped_templates):
        name = resource["Properties"]["ModelName"]
        copies = resource["Properties"].get("CopyTo", [])
        prefixes = {copy.removesuffix(f"{name}.tar.gz") for copy in copies}
        assert all(copy.endswith(f"/{name}.tar.gz") for copy in copies), f"{shipped.label}: {logical_id}: {copies}"
        composing = resource["Properties"]["BuildEnvironment"]["COMPOSING_KEYS"].split()
        names = [pair.split("=", 1)[0] for pair in composing]
        for other in resources_of(shipped.template, ARTIFACT).values():
            if other["Properties"]["ModelName"] in names:
                for copy in other["Properties"].get("CopyTo", []):
                    assert not any(copy.startswith(prefix) for prefix in prefixes), (
                        f"{shipped.label}: composing model {other['Properties']['ModelName']} addressable beside "
                        f"ensemble {name} at {copy}"
                    )
        checked += bool(copies)
    assert checked, "no multi-model endpoint serving an ensemble in the shipped templates"
