"""An INT8 model's calibration cache reaches its GPU build (issue #22 B8).

Source: trtexec only reads a calibration cache (`--calib=<file>`, "Read INT8 calibration cache file", TensorRT
samples/common/sampleOptions.cpp). The build host has neither the project's files nor a configured s3:// object,
so the build stack ships a local `tensorrt.calibration_cache` as an asset and passes its address as
CALIBRATION_URI (an s3:// cache is passed as configured), grants the build role s3:GetObject on exactly that
object, and `model_build build` fetches it (model_build/calibration.py). The cache decides the engine's scales,
so its bytes are part of the content address (model_build/key.py).

The stage is tests/configs/int8.yaml, which the deploy-contract tests also synthesize (tests/contract).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from build_helpers import PROJECT_ROOT
from synth_helpers import synth_stage
from test_build_buildspec_run import KEY, run_buildspec  # noqa: F401 (a fixture)

from model_build import preflight
from model_build.key import calibration_fingerprint
from serving_facts.content_address import artifact_digest
from serving_facts.settings import ModelSettings
from stacks.artifact_plan import endpoint_artifacts
from stage_config import load_stage
from triton_cdk.artifact_build.requests import build_config_document
from triton_cdk.artifact_keys import ModelArtifact

TEST_CONFIGS = PROJECT_ROOT / "tests" / "configs"
LOCAL_CACHE = PROJECT_ROOT / "tests" / "configs" / "int8" / "image_cnn.calibration.cache"
S3_CACHE = "s3://int8-calibration-caches/image_cnn/calibration.cache?versionId=v1"


@pytest.fixture(scope="module")
def int8():
    return synth_stage("int8", TEST_CONFIGS, checks=False)  # checked in tests/contract


def _artifacts(build: dict) -> dict[str, dict]:
    return {
        r["Properties"]["ModelName"]: r["Properties"]
        for r in build["Resources"].values()
        if r["Type"] == "Custom::TritonModelArtifact"
    }


def _joined(value) -> str:
    """A Fn::Sub's text, or a Fn::Join of strings and references as one string, references shown as {ref}."""
    if isinstance(value, str):
        return value
    if "Fn::Sub" in value:
        return value["Fn::Sub"]
    separator, parts = value["Fn::Join"]
    return separator.join(part if isinstance(part, str) else "{ref}" for part in parts)


def _calibration_asset(synth) -> dict:
    """The build stack's file asset whose bytes are the local cache (from the assembly's asset manifest)."""
    manifest = json.loads((synth.outdir / "Triton-int8-Build.assets.json").read_text())
    found = [
        entry
        for entry in manifest["files"].values()
        if entry["source"].get("packaging") == "file"
        and (synth.outdir / entry["source"]["path"]).read_bytes() == LOCAL_CACHE.read_bytes()
    ]
    assert len(found) == 1, manifest["files"]
    return found[0]


def test_a_local_cache_is_shipped_as_an_asset_and_set_as_calibration_uri(int8):
    build = int8.template_of("Triton-int8-Build")
    asset = _calibration_asset(int8)
    object_key = next(iter(asset["destinations"].values()))["objectKey"]
    environment = _artifacts(build)["image_cnn_int8"]["BuildEnvironment"]
    uri = _joined(environment["CALIBRATION_URI"])
    assert uri.startswith("s3://") and uri.endswith(f"/{object_key}"), uri
    assert json.loads(environment["BUILD_CONFIG"])["models"][0]["tensorrt"]["precision"] == "int8"


def test_an_s3_cache_is_passed_as_configured(int8):
    environment = _artifacts(int8.template_of("Triton-int8-Build"))["image_cnn_s3_int8"]["BuildEnvironment"]
    assert environment["CALIBRATION_URI"] == S3_CACHE


def test_the_build_role_reads_exactly_the_two_cache_objects(int8):
    """Least privilege: s3:GetObject(Version) on the asset object and the configured object (its key, without
    ?versionId=), in the statement that reads the model sources; nothing on their buckets as a whole."""
    build = int8.template_of("Triton-int8-Build")
    object_key = next(iter(_calibration_asset(int8)["destinations"].values()))["objectKey"]
    statements = [
        statement
        for r in build["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for statement in r["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == "ReadBuildSources"
    ]
    assert len(statements) == 1, statements
    (statement,) = statements
    assert statement["Action"] == ["s3:GetObject", "s3:GetObjectVersion"]
    resources = [_joined(resource) for resource in statement["Resource"]]
    assert "arn:{ref}:s3:::int8-calibration-caches/image_cnn/calibration.cache" in resources
    assert any(r.endswith(f"/{object_key}") for r in resources), resources
    assert not any(r.endswith("/*") or r.endswith(":::int8-calibration-caches") for r in resources), resources


def test_a_model_that_is_not_int8_gets_no_calibration_uri(dev_synth):
    """The shipped dev stage (no INT8 model): its builds' environments are unchanged."""
    stacks = [name for name in dev_synth.assembly.stacks if name.stack_name.endswith("-Build")]
    for stack in stacks:
        for properties in _artifacts(dev_synth.template_of(stack.stack_name)).values():
            assert "CALIBRATION_URI" not in properties.get("BuildEnvironment", {})


# --- the content address ----------------------------------------------------------------------------


def _int8(cache: str) -> ModelSettings:
    return ModelSettings.model_validate(
        {
            "name": "m",
            "platform": "tensorrt_plan",
            "source": {"s3_uri": "s3://sources/m.onnx"},
            "tensorrt": {"precision": "int8", "calibration_cache": cache},
        }
    )


def _digest(settings: ModelSettings, base_dir: Path) -> str:
    calibration = calibration_fingerprint(settings, base_dir)
    return artifact_digest(settings, source="s3:x", triton_release="24.09", gpu_target="sm86", calibration=calibration)


def test_a_new_cache_at_the_same_path_gives_a_new_key(tmp_path):
    (tmp_path / "c.cache").write_bytes(b"TRT-100400-EntropyCalibration2\ninput: 3c010a14\n")
    model = _int8("c.cache")
    before = _digest(model, tmp_path)
    (tmp_path / "c.cache").write_bytes(b"TRT-100400-EntropyCalibration2\ninput: 3c010a15\n")
    assert _digest(model, tmp_path) != before
    (tmp_path / "c.cache").write_bytes(b"TRT-100400-EntropyCalibration2\ninput: 3c010a14\n")
    assert _digest(model, tmp_path) == before


def test_keys_without_a_local_int8_cache_are_unchanged(tmp_path):
    """An s3:// cache is taken as given (its URI is in the build settings); other models have no cache: their
    digests are what they were before the calibration fingerprint existed."""
    s3_model = _int8("s3://caches/c.cache")
    assert calibration_fingerprint(s3_model, tmp_path) is None
    fp16 = ModelSettings.model_validate(
        {"name": "m", "platform": "tensorrt_plan", "source": {"s3_uri": "s3://sources/m.onnx"}}
    )
    assert calibration_fingerprint(fp16, tmp_path) is None
    plain = artifact_digest(fp16, source="s3:x", triton_release="24.09", gpu_target="sm86")
    assert _digest(fp16, tmp_path) == plain


def test_the_stage_plan_keys_the_local_cache_bytes():
    """The int8 stage's key is the digest with the cache's fingerprint (stacks/artifact_plan.py), as
    `python -m model_build key` computes it (model_build/commands/key.py)."""
    config = load_stage("int8", TEST_CONFIGS)
    located = endpoint_artifacts(config, config.endpoints[0], PROJECT_ROOT)
    artifact = next(a for a in located.models if a.model.name == "image_cnn_int8")
    without = artifact_digest(
        artifact.model, source=artifact.source, triton_release="24.09", gpu_target=artifact.gpu_target
    )
    assert artifact.digest != without
    assert artifact.digest == artifact_digest(
        artifact.model,
        source=artifact.source,
        triton_release="24.09",
        gpu_target=artifact.gpu_target,
        calibration=calibration_fingerprint(artifact.model, PROJECT_ROOT),
    )


def test_model_build_key_agrees_with_the_stage_plan(capsys):
    from model_build import cli

    config = load_stage("int8", TEST_CONFIGS)
    located = endpoint_artifacts(config, config.endpoints[0], PROJECT_ROOT)
    artifact = next(a for a in located.models if a.model.name == "image_cnn_int8")
    argv = ["key", "--config", str(TEST_CONFIGS / "int8.yaml"), "--model", "image_cnn_int8"]
    argv += ["--instance-type", "ml.g5.xlarge", "--base-dir", str(PROJECT_ROOT), "--json"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["key"] == artifact.key


# --- synth accepts what now reaches the build ----------------------------------------------------------


def test_synth_accepts_int8_caches_that_reach_the_build():
    assert preflight.LOCAL_CALIBRATION_SHIPPED and preflight.S3_CALIBRATION_READABLE
    for cache in ("models/c.cache", S3_CACHE, "s3://caches/c.cache"):
        assert preflight._calibration_problems(_int8(cache)) == []


@pytest.mark.parametrize("cache", ["s3://caches", "s3://caches/", "s3://Caches/c.cache", "s3://caches/c?x=1"])
def test_synth_refuses_an_s3_cache_that_is_not_an_object(cache):
    """The grant names an object ARN (bucket and key; S3 bucket naming rules: lower case, 3-63 characters), the
    form `source.s3_uri` must have too (serving_facts/settings.py)."""
    problems = preflight._calibration_problems(_int8(cache))
    assert [field for field, _ in problems] == ["tensorrt.calibration_cache"]
    assert "is not an S3 object: give s3://bucket/key" in problems[0][1]


# --- the buildspec runs `model_build build` with the shipped cache ----------------------------------------


def _int8_document(cache: str) -> str:
    model = ModelSettings.model_validate(
        {
            "name": "tiny",
            "source": {"s3_uri": "s3://sources/tiny.onnx"},
            "platform": "tensorrt_plan",
            "max_batch_size": 4,
            "tensorrt": {"precision": "int8", "calibration_cache": cache},
        }
    )
    return build_config_document("24.09", ModelArtifact(model=model, digest="d" * 64, source="s", build_plan=None))


@pytest.mark.moto
def test_the_buildspec_builds_with_the_shipped_cache(run_buildspec, s3, make_bucket):  # noqa: F811
    """CALIBRATION_URI (as the build stack sets it) is fetched and given to trtexec as --calib."""
    assets = make_bucket("assets")
    s3.put_object(Bucket=assets, Key="abc.cache", Body=LOCAL_CACHE.read_bytes())
    result = run_buildspec(
        BUILD_CONFIG=_int8_document("tests/configs/int8/image_cnn.calibration.cache"),
        CALIBRATION_URI=f"s3://{assets}/abc.cache",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    body = s3.get_object(Bucket=run_buildspec.bucket, Key=KEY)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
        engine = archive.extractfile("tiny/1/model.plan").read().decode()
    assert "--int8" in engine and "--calib=" in engine, engine


@pytest.mark.moto
def test_the_buildspec_stops_before_trtexec_without_the_cache(run_buildspec, s3):  # noqa: F811
    """What every INT8 build did before the stack shipped the cache: refused, naming the field, nothing uploaded."""
    result = run_buildspec(BUILD_CONFIG=_int8_document("models/absent.calibration.cache"))
    assert result.returncode != 0
    assert "tensorrt.calibration_cache" in result.stderr and "CALIBRATION_URI is not set" in result.stderr
    assert "Contents" not in s3.list_objects_v2(Bucket=run_buildspec.bucket)
