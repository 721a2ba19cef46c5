"""Ensembles deploy as one content-addressed artifact holding every composing model folder.

Sources:
- Triton's `docker/sagemaker/serve`: in single-model mode `SAGEMAKER_TRITON_DEFAULT_MODEL_NAME` names the model
  to load when the repository holds several folders (an ensemble and its composing models).
- Triton's `src/sagemaker_server.cc` (SageMakerMMELoadModel): a multi-model `TargetModel` archive that holds
  several model folders is loaded through the one whose config.pbtxt matches `platform:(\\s)*"ensemble"`, so an
  ensemble's `<name>.tar.gz` carries its composing models beside it.
- CloudFormation `DependsOn` / AWS::CloudFormation::WaitCondition: the ensemble's build fetches its composing
  archives, so its resource must start only once their builds have signalled (their wait conditions).
Synthesized over the shipped example (examples/config/ensemble.yaml, single-model) and a multi-model test stage
(tests/configs/ensemblemme.yaml) that also serves a composing model on its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from synth_helpers import EXAMPLES_CONFIG_DIR, PROJECT_ROOT, synth_stage

from stacks.artifact_plan import endpoint_artifacts
from stacks.stage_plan import plan_stage
from stage_config import load_stage

TEST_CONFIGS = PROJECT_ROOT / "tests" / "configs"
COMPOSING = ["image_preprocess", "image_cnn", "image_postprocess"]
ENSEMBLE_REGEX = re.compile(r'platform:(\s)*"ensemble"')  # sagemaker_server.h platform_ensemble_regex_


@pytest.fixture(scope="module")
def single():
    return synth_stage("ensemble", EXAMPLES_CONFIG_DIR, checks=False)  # checked in tests/contract


@pytest.fixture(scope="module")
def multi():
    return synth_stage("ensemblemme", TEST_CONFIGS, checks=False)


def _artifact_resources(synth, stage: str) -> dict[str, dict]:
    build = synth.template_of(f"Triton-{stage}-Build")
    return {
        r["Properties"]["ModelName"]: {"id": lid, **r}
        for lid, r in build["Resources"].items()
        if r["Type"] == "Custom::TritonModelArtifact"
    }


def _located(stage: str, folder: Path):
    config = load_stage(stage, folder)
    return config, endpoint_artifacts(config, config.endpoints[0], PROJECT_ROOT)


@pytest.mark.parametrize("stage,folder", [("ensemble", EXAMPLES_CONFIG_DIR), ("ensemblemme", TEST_CONFIGS)])
def test_every_composing_model_is_an_artifact_of_its_own(stage, folder, single, multi):
    synth = single if stage == "ensemble" else multi
    resources = _artifact_resources(synth, stage)
    others = ["add_sub"] if stage == "ensemblemme" else []
    assert sorted(resources) == sorted([*COMPOSING, "image_classifier", *others])
    _, located = _located(stage, folder)
    ensemble = next(a for a in located.models if a.model.name == "image_classifier")
    for composing in ensemble.composing:
        assert resources[composing.model.name]["Properties"]["Key"] == composing.key


@pytest.mark.parametrize("stage,folder", [("ensemble", EXAMPLES_CONFIG_DIR), ("ensemblemme", TEST_CONFIGS)])
def test_the_ensemble_build_assembles_the_composing_archives_once_they_exist(stage, folder, single, multi):
    synth = single if stage == "ensemble" else multi
    build = synth.template_of(f"Triton-{stage}-Build")
    resources = _artifact_resources(synth, stage)
    ensemble = resources["image_classifier"]
    environment = ensemble["Properties"]["BuildEnvironment"]
    assert environment["PLATFORM"] == "ensemble"
    pairs = dict(pair.split("=", 1) for pair in environment["COMPOSING_KEYS"].split())
    assert pairs == {name: resources[name]["Properties"]["Key"] for name in COMPOSING}
    # It waits for each composing build's wait condition, i.e. for the archive to be uploaded.
    waits = {
        lid
        for lid, r in build["Resources"].items()
        if r["Type"] == "AWS::CloudFormation::WaitCondition"
        for name in COMPOSING
        if r["DependsOn"] == [resources[name]["id"]] or resources[name]["id"] in r.get("DependsOn", [])
    }
    assert len(waits) == len(COMPOSING)
    assert waits <= set(ensemble.get("DependsOn", []))


def test_python_environments_are_packed_in_the_serving_image(single):
    """model_build/python_env.py: the packed environment runs only with the interpreter that made it, so the
    build of a model with `environment.requirements` runs in the release's Triton image, not CodeBuild's."""
    build = single.template_of("Triton-ensemble-Build")
    projects = {lid: r["Properties"] for lid, r in build["Resources"].items() if r["Type"] == "AWS::CodeBuild::Project"}
    resources = _artifact_resources(single, "ensemble")
    project_of = {name: r["Properties"]["ProjectName"]["Ref"] for name, r in resources.items()}
    images = {lid: str(p["Environment"]["Image"]) for lid, p in projects.items()}
    assert "sagemaker-tritonserver:24.09-py3" in images[project_of["image_preprocess"]]
    assert projects[project_of["image_preprocess"]]["Environment"]["Type"] == "LINUX_CONTAINER"
    # Models with nothing to pack stay on the plain packaging image.
    assert images[project_of["image_postprocess"]] == "aws/codebuild/standard:7.0"
    assert project_of["image_classifier"] == project_of["image_postprocess"]


def test_a_single_model_endpoint_loads_the_ensemble(single):
    endpoint = single.template_of("Triton-ensemble-Endpoint-triton-ensemble")
    (model,) = [r for r in endpoint["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    container = model["Properties"]["PrimaryContainer"]
    assert container["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "image_classifier"
    url = "".join(part for part in container["ModelDataUrl"]["Fn::Join"][1] if isinstance(part, str))
    _, located = _located("ensemble", EXAMPLES_CONFIG_DIR)
    assert url.endswith(located.models[0].key)


def test_a_multi_model_endpoint_addresses_the_ensemble_archive(multi):
    resources = _artifact_resources(multi, "ensemblemme")
    _, located = _located("ensemblemme", TEST_CONFIGS)
    copies = resources["image_classifier"]["Properties"]["CopyTo"]
    assert copies == [f"{located.multi_model_prefix}image_classifier.tar.gz"]
    assert resources["add_sub"]["Properties"]["CopyTo"] == [f"{located.multi_model_prefix}add_sub.tar.gz"]
    # Composing models ship inside the ensemble's archive only: not addressable on their own.
    for name in COMPOSING:
        assert resources[name]["Properties"]["CopyTo"] == []


def test_the_generated_ensemble_config_is_the_one_sagemaker_multi_model_mode_loads():
    config_text = (PROJECT_ROOT / "examples" / "models" / "image_classifier" / "config.pbtxt").read_text()
    assert ENSEMBLE_REGEX.search(config_text)
    for name in COMPOSING:
        assert not ENSEMBLE_REGEX.search((PROJECT_ROOT / "examples" / "models" / name / "config.pbtxt").read_text())


def test_the_ensemble_key_follows_its_composing_models():
    """An ensemble's archive holds its composing folders: another GPU target for the TensorRT step (another
    instance family) must give the ensemble another key, the Python steps (portable) the same ones."""
    config, on_g5 = _located("ensemble", EXAMPLES_CONFIG_DIR)
    endpoint = config.endpoints[0].model_copy(update={"instance_type": "ml.g6.xlarge"})
    on_g6 = endpoint_artifacts(config, endpoint, PROJECT_ROOT)
    g5, g6 = on_g5.models[0], on_g6.models[0]
    assert g5.key != g6.key
    by_name = {a.model.name: a.key for a in g5.composing}
    assert {a.model.name: a.key == by_name[a.model.name] for a in g6.composing} == {
        "image_preprocess": True,
        "image_cnn": False,
        "image_postprocess": True,
    }


def test_promotion_copies_the_composing_artifacts_too():
    """A promoting stage never builds: every composing archive is copied beside the ensemble's, which its
    endpoint's archive does not replace (the ensemble archive already holds the folders, but a later ensemble
    or endpoint serving a composing model on its own finds its key in this stage's bucket too)."""
    import yaml
    from synth_helpers import config_folder, synthesize_config

    source = yaml.safe_load((EXAMPLES_CONFIG_DIR / "ensemble.yaml").read_text())
    target = {**source, "stage": "enprod", "promote_from": "ensemble", "artifacts": {}}
    folder = config_folder("ensemble-promotion", {"ensemble": source, "enprod": target})
    built, promoted = load_stage("ensemble", folder), load_stage("enprod", folder)
    plan = plan_stage(promoted, PROJECT_ROOT)
    assert sorted(plan.stage_artifacts()) == sorted([*COMPOSING, "image_classifier"])
    synth = synthesize_config(promoted, promotion_source=built)
    resources = _artifact_resources(synth, "enprod")
    assert sorted(resources) == sorted([*COMPOSING, "image_classifier"])
    assert sorted(r["Properties"]["Key"] for r in resources.values()) == plan.artifact_keys()
    for resource in resources.values():
        assert "BuildEnvironment" not in resource["Properties"]  # copied from the source bucket, never built
        assert resource["Properties"]["SourceBucket"] == source["artifacts"]["bucket_name"]


def _refusals(document: dict) -> str:
    from synth_helpers import config_folder

    from stage_config import ConfigError

    folder = config_folder(
        f"ensemble-refusal-{len(document['endpoints'][0]['models'])}-{document['endpoints'][0]['mode']}"
        f"-{document['endpoints'][0].get('uncompressed_model_data', False)}",
        {"ensemble": document},
    )
    with pytest.raises(ConfigError) as raised:
        load_stage("ensemble", folder)
    return str(raised.value)


def _example_document() -> dict:
    import yaml

    return yaml.safe_load((EXAMPLES_CONFIG_DIR / "ensemble.yaml").read_text())


def test_a_composing_model_ships_in_one_multi_model_archive_only():
    """sagemaker_server.cc registers each TargetModel archive as a repository of its own: the same composing
    model in two archives would be two models of one name; refused at config load until proven on Triton."""
    document = _example_document()
    document["endpoints"][0].update({"mode": "multi_model", "models": ["image_classifier", "image_cnn"]})
    document["endpoints"][0].pop("autoscaling", None)
    message = _refusals(document)
    assert "endpoints[0].models" in message and "'image_cnn' would ship in the archives of" in message


def test_an_ensemble_is_not_served_from_uncompressed_model_data():
    """An S3 prefix holds no empty folder, and an ensemble's version folder is empty; Triton's core refuses a
    model without a version ("at least one version must be available")."""
    document = _example_document()
    document["endpoints"][0]["uncompressed_model_data"] = True
    message = _refusals(document)
    assert "endpoints[0].uncompressed_model_data" in message and "'image_classifier' is an ensemble" in message


def test_one_ensemble_on_two_gpu_families_is_two_artifacts():
    """Review finding: the ensemble's resource id named no build target ("portable"), so the same ensemble
    served on g5 (its TensorRT step built for sm86) and g6 (built ampere+) gave two keys under one construct id
    and synth stopped with a traceback. Its id now names the composing targets."""
    import yaml
    from synth_helpers import config_folder, synthesize_config

    document = yaml.safe_load((EXAMPLES_CONFIG_DIR / "ensemble.yaml").read_text())
    second = {**document["endpoints"][0], "name": "triton-ensemble-g6", "instance_type": "ml.g6.xlarge"}
    document["endpoints"].append(second)
    folder = config_folder("ensemble-two-families", {"ensemble": document})
    synth = synthesize_config(load_stage("ensemble", folder))
    build = synth.template_of("Triton-ensemble-Build")
    ensembles = {
        lid: r["Properties"]["Key"]
        for lid, r in build["Resources"].items()
        if r["Type"] == "Custom::TritonModelArtifact" and r["Properties"]["ModelName"] == "image_classifier"
    }
    assert len(ensembles) == 2 and len(set(ensembles.values())) == 2
    assert sorted(re.sub(r"[A-F0-9]{8}$", "", lid) for lid in ensembles) == [
        "EnsureArtifactsimageclassifierampereplus",
        "EnsureArtifactsimageclassifiersm86",
    ]
