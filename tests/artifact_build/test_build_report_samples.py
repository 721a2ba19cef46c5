"""`tensorrt.accuracy.samples` reaches the GPU build as an INT8 calibration cache does (issue 25 review, item 1).

The build check runs on the build host, which has neither the project's files nor the config's s3:// object: the
build stack ships a local .npz as an asset of its own and passes its address as SAMPLES_URI (an s3:// one is passed
as configured), grants the build role s3:GetObject on exactly that object, and the buildspec fetches it and passes
--samples (tests/artifact_build/test_build_buildspec_run.py). The file decides what the check compares, not the
archive's bytes, so the artifact key does not change with it (ModelSettings.build_fingerprint).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from synth_helpers import PROJECT_ROOT, config_folder, synth_stage

from stage_config.loader import ConfigError, load_config

LOCAL = "tests/configs/build_report/bert_base_inputs.npz"
REMOTE = "s3://build-report-samples/resnet50/inputs.npz?versionId=v1"


def _documents() -> dict[str, dict]:
    dev = yaml.safe_load((PROJECT_ROOT / "config" / "dev.yaml").read_text())
    sampled = copy.deepcopy(dev)
    for model in sampled["models"]:
        if model["name"] == "bert_base":
            model["tensorrt"]["accuracy"] = {"samples": LOCAL}
        if model["name"] == "resnet50":
            model["tensorrt"]["accuracy"] = {"samples": REMOTE}
    return {"dev": sampled}


@pytest.fixture(scope="module")
def sampled():
    return synth_stage("dev", config_folder("build-report-samples", _documents()))


def _artifacts(template: dict) -> dict[str, dict]:
    return {
        r["Properties"]["ModelName"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "Custom::TritonModelArtifact"
    }


def _joined(value) -> str:
    if isinstance(value, str):
        return value
    if "Fn::Sub" in value:
        return value["Fn::Sub"]
    separator, parts = value["Fn::Join"]
    return separator.join(part if isinstance(part, str) else "{ref}" for part in parts)


def test_samples_ship_as_an_asset_or_as_configured_and_the_role_reads_exactly_them(sampled, dev_synth):
    build = sampled.template_of("Triton-dev-Build")
    artifacts = _artifacts(build)
    manifest = json.loads((sampled.outdir / "Triton-dev-Build.assets.json").read_text())
    local = (PROJECT_ROOT / LOCAL).read_bytes()
    asset = [
        e for e in manifest["files"].values() if (sampled.outdir / e["source"]["path"]).is_file()
        and (sampled.outdir / e["source"]["path"]).read_bytes() == local
    ]  # fmt: skip
    assert len(asset) == 1
    object_key = next(iter(asset[0]["destinations"].values()))["objectKey"]
    assert _joined(artifacts["bert_base"]["BuildEnvironment"]["SAMPLES_URI"]).endswith(f"/{object_key}")
    assert artifacts["resnet50"]["BuildEnvironment"]["SAMPLES_URI"] == REMOTE
    assert "SAMPLES_URI" not in artifacts["yolov5s"]["BuildEnvironment"]
    policy = json.dumps(build)
    # The role reads exactly that object: its ARN names the key (no ?versionId).
    assert ':s3:::build-report-samples/resnet50/inputs.npz"' in policy
    # The key is the key: the same as dev's without samples.
    plain = _artifacts(dev_synth.template_of("Triton-dev-Build"))
    assert {name: a["Key"] for name, a in artifacts.items()} == {name: a["Key"] for name, a in plain.items()}


def test_a_samples_file_not_in_the_project_is_refused_at_load(tmp_path: Path):
    documents = _documents()
    documents["dev"]["models"][2]["tensorrt"]["accuracy"] = {"samples": "nowhere/inputs.npz"}
    (tmp_path / "dev.yaml").write_text(yaml.safe_dump(documents["dev"]))
    with pytest.raises(ConfigError, match=r"tensorrt.accuracy.samples.*no such file in the project"):
        load_config(tmp_path / "dev.yaml")
