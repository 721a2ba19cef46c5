"""Runs model_build/buildspec.yml's phases for real in bash, against moto_server, with stand-ins for
the two GPU tools only (nvidia-smi and trtexec: shell scripts that answer like the real ones), and for the build
check of a TensorRT build a stand-in secondary source `endpoint_client` (its build_check_cli records its arguments,
writes a report or fails like the real one; the real check runs against a CPU Triton in
tests/client/test_build_report_triton.py).

Everything else is real: the S3 download of the source, `model_build config/build/check/package/
upload`, the unpacked layout's upload order and the archive uploaded last. The install phase's
`pip install` lines are skipped (offline; the venv already has the packages).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import onnx
import pytest
import yaml
from build_helpers import PROJECT_ROOT
from onnx import TensorProto, helper

from triton_cdk.artifact_build.requests import build_config_document

pytestmark = pytest.mark.moto  # starts moto_server on a loopback port


BANNER = "&&&& RUNNING TensorRT.trtexec [TensorRT v100400] # trtexec"
KEY = "models/tiny/" + "d" * 64 + "/model.tar.gz"
UNPACKED = "models/tiny/" + "d" * 64 + "/uncompressed/"
REPORT = "models/tiny/" + "d" * 64 + "/report.json"  # the build report beside the archive


def write_tools(bin_dir: Path, *, gpu: str = "NVIDIA A10G, 8.6") -> None:
    bin_dir.mkdir()
    # A wrapper, not a symlink: the venv is found next to the executable's own path.
    (bin_dir / "python3").write_text(f'#!/bin/bash\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/bash\necho '{gpu}'\n")
    # trtexec: the banner always; with --saveEngine=PATH it writes a stand-in engine there.
    (bin_dir / "trtexec").write_text(
        "#!/bin/bash\n"
        f"echo '{BANNER}'\n"
        'for arg in "$@"; do case "$arg" in --saveEngine=*) printf "engine:%s" "$*" > "${arg#--saveEngine=}";; esac; '
        "done\n"
    )
    for tool in ("python3", "nvidia-smi", "trtexec"):
        (bin_dir / tool).chmod(0o755)


FAKE_CHECK = """\
import json, os, sys
from pathlib import Path

args = sys.argv[1:]
Path(os.environ["CHECK_LOG"]).write_text(json.dumps(args))
if os.environ.get("FAKE_CHECK") == "fail":
    print("ERROR: model 'tiny' is outside its tolerance: output 'output': 3 of 12 elements", file=sys.stderr)
    sys.exit(1)
value = lambda name: args[args.index(name) + 1]
report = {"schema_version": 1, "model": value("--model"), "artifact_key": value("--artifact-key"),
          "created_at": "2026-11-27T08:00:00+00:00", "host": {"gpu": "none (CPU)", "engine": "tensorrt"},
          "accuracy": {"passed": True, "input_source": "generated", "inputs": {}, "outputs": []}, "speed": [],
          "tuning": None}  # schema 1 (model_build.report_schema): `report --publish` validates it
Path(value("--out")).write_text(json.dumps(report))
"""


def write_check_source(folder: Path) -> Path:
    """A stand-in of the project's secondary source endpoint_client (as CodeBuild installs it)."""
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "build_check_cli.py").write_text(FAKE_CHECK)
    return folder


def tiny_onnx(path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["input"], ["output"])],
        "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def buildspec_script() -> str:
    spec = yaml.safe_load((PROJECT_ROOT / "model_build" / "buildspec.yml").read_text())
    lines = []
    for phase in ("install", "pre_build", "build"):
        for command in spec["phases"][phase]["commands"]:
            if "pip install" in command or "pip --version" in command:
                continue
            # CodeBuild (buildspec 0.2) runs the commands in one shell and stops at the first failure.
            lines.append(
                f"{{\n{command}\n}}\nrc=$?; if [ $rc -ne 0 ]; then echo 'PHASE {phase} FAILED' >&2; exit $rc; fi"
            )
    return "\n".join(lines)


def settings_document(platform: str = "tensorrt_plan") -> str:
    from serving_facts.settings import ModelSettings
    from triton_cdk.artifact_keys import ModelArtifact

    model = ModelSettings.model_validate(
        {"name": "tiny", "source": {"s3_uri": "s3://sources/tiny.onnx"}, "platform": platform, "max_batch_size": 4}
    )
    return build_config_document("24.09", ModelArtifact(model=model, digest="d" * 64, source="s", build_plan=None))


@pytest.fixture
def run_buildspec(tmp_path, s3, make_bucket, aws_env):
    bucket, sources = make_bucket("artifacts"), make_bucket("sources")
    onnx_file = tmp_path / "tiny.onnx"
    tiny_onnx(onnx_file)
    s3.upload_file(str(onnx_file), sources, "tiny.onnx")
    write_tools(tmp_path / "bin")
    check_source = write_check_source(tmp_path / "check-source")

    def run(**overrides) -> subprocess.CompletedProcess:
        environment = {
            **os.environ,
            "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "CODEBUILD_SRC_DIR": str(PROJECT_ROOT / "model_build"),
            "CODEBUILD_SRC_DIR_serving_facts": str(PROJECT_ROOT / "serving_facts"),
            "CODEBUILD_SRC_DIR_endpoint_client": str(check_source),
            "CHECK_LOG": str(tmp_path / "check-args.json"),
            "TRITONSERVER": str(tmp_path / "bin" / "tritonserver"),
            "WORK": str(tmp_path / "work"),
            "PYTHONPATH": str(tmp_path / "work" / "python"),
            "TRTEXEC": str(tmp_path / "bin" / "trtexec"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "MODEL_NAME": "tiny",
            "ARTIFACT_BUCKET": bucket,
            "ARTIFACT_KEY": KEY,
            "BUILD_CONFIG": settings_document(),
            "PLATFORM": "tensorrt_plan",
            "SOURCE_KIND": "s3",
            "SOURCE_URI": f"s3://{sources}/tiny.onnx",
            "GPU_TARGET": "sm86",
            "EXPECT_TENSORRT": "10.4.0",
            "EXPECT_COMPUTE_CAPABILITY": "8.6",
            "UNCOMPRESSED_PREFIX": "",
            "UNPACK_ONLY": "false",
            **overrides,
        }
        # CodeBuild runs the commands in the primary source's folder (python -m puts it first on sys.path).
        return subprocess.run(
            ["bash", "-c", buildspec_script()],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=environment["CODEBUILD_SRC_DIR"],
        )

    run.bucket = bucket
    run.check_log = tmp_path / "check-args.json"
    run.tritonserver = tmp_path / "bin" / "tritonserver"
    return run


def keys(s3, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def archive_members(s3, bucket: str) -> dict[str, bytes]:
    body = s3.get_object(Bucket=bucket, Key=KEY)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def test_a_gpu_build_checks_then_uploads_the_unpacked_layout_the_archive_and_the_report(run_buildspec, s3):
    """One TensorRT build with an unpacked layout, judged twice: what it uploads in which order, and the build
    report. docs/build.md "Build report": the check runs on the built repository with the serving image's
    tritonserver ($TRITONSERVER; Triton's build.py puts the server in /opt/tritonserver/bin), its report.json
    outside the repository (never in the archive), and the report goes beside the archive after the archive's
    upload."""
    result = run_buildspec(UNCOMPRESSED_PREFIX=UNPACKED)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert keys(s3, run_buildspec.bucket) == sorted(
        # REPORT: the build report, published after the archive (below)
        [KEY, REPORT, f"{UNPACKED}tiny/1/model.plan", f"{UNPACKED}tiny/build-info.json", f"{UNPACKED}tiny/config.pbtxt"]
    )
    members = archive_members(s3, run_buildspec.bucket)
    assert sorted(members) == ["tiny/1/model.plan", "tiny/build-info.json", "tiny/config.pbtxt"]
    info = json.loads(members["tiny/build-info.json"])
    assert (info["tensorrt_version"], info["gpu_name"], info["compute_capability"]) == ("10.4.0", "NVIDIA A10G", "8.6")
    assert b'platform: "tensorrt_plan"' in members["tiny/config.pbtxt"]
    # The upload order: unpacked files, the marker (config.pbtxt) last of them, then the archive (then the report).
    uploads = uploads_of(result)
    assert uploads[-1].startswith(f"s3://{run_buildspec.bucket}/{REPORT}")
    assert uploads[-3:-1] == [
        f"s3://{run_buildspec.bucket}/{UNPACKED}tiny/config.pbtxt",
        f"s3://{run_buildspec.bucket}/{KEY}",
    ]

    # The check and the report.
    args = json.loads(run_buildspec.check_log.read_text())
    given = dict(zip(args[::2], args[1::2], strict=True))
    work = Path(given["--repository"]).parent
    assert given.pop("--tritonserver") == str(run_buildspec.tritonserver)
    assert given == {
        "--config": str(work / "config.yaml"),
        "--model": "tiny",
        "--repository": str(work / "repo"),
        "--onnx": str(work / "source" / "model.onnx"),
        "--out": str(work / "report.json"),
        "--artifact-key": KEY,
    }
    assert "tiny/report.json" not in archive_members(s3, run_buildspec.bucket)
    # The archive, then its report (model_build upload prints "s3://...: uploaded").
    assert uploads[-2:] == [f"s3://{run_buildspec.bucket}/{KEY}", f"s3://{run_buildspec.bucket}/{REPORT}:"]
    report = json.loads(s3.get_object(Bucket=run_buildspec.bucket, Key=REPORT)["Body"].read())
    assert (report["model"], report["artifact_key"]) == ("tiny", KEY)
    assert result.stdout.index(f"s3://{run_buildspec.bucket}/{KEY}") < result.stdout.index(REPORT)


def test_a_build_on_the_wrong_gpu_fails_and_writes_nothing(run_buildspec, s3):
    result = run_buildspec(EXPECT_COMPUTE_CAPABILITY="7.5", UNCOMPRESSED_PREFIX=UNPACKED)
    assert result.returncode == 1
    assert "this build host's GPU is NVIDIA A10G (compute capability 8.6), but the serving instance needs 7.5" in (
        result.stderr
    )
    assert "PHASE build FAILED" in result.stderr
    assert keys(s3, run_buildspec.bucket) == []


def test_a_build_with_another_tensorrt_fails_and_writes_nothing(run_buildspec, s3):
    result = run_buildspec(EXPECT_TENSORRT="10.9.0")
    assert result.returncode == 1
    assert "this build host has TensorRT 10.4.0, but the serving Triton release needs TensorRT 10.9.0" in result.stderr
    assert keys(s3, run_buildspec.bucket) == []


def test_unpack_only_unpacks_the_existing_archive_without_rebuilding_or_checking(run_buildspec, s3):
    assert run_buildspec().returncode == 0
    archive = s3.head_object(Bucket=run_buildspec.bucket, Key=KEY)
    run_buildspec.check_log.unlink()
    # trtexec and the check's source are gone: an unpack must neither build nor run the check.
    result = run_buildspec(
        UNPACK_ONLY="true",
        UNCOMPRESSED_PREFIX=UNPACKED,
        TRTEXEC="/nonexistent/trtexec",
        CODEBUILD_SRC_DIR_endpoint_client="",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{UNPACKED}tiny/config.pbtxt" in keys(s3, run_buildspec.bucket)
    assert s3.head_object(Bucket=run_buildspec.bucket, Key=KEY)["ETag"] == archive["ETag"]
    assert not run_buildspec.check_log.exists()


def test_an_onnxruntime_model_is_packaged_without_gpu_tools(run_buildspec, s3):
    result = run_buildspec(
        PLATFORM="onnxruntime_onnx",
        BUILD_CONFIG=settings_document("onnxruntime_onnx"),
        TRTEXEC="/nonexistent/trtexec",
        EXPECT_TENSORRT="",
        EXPECT_COMPUTE_CAPABILITY="",
        GPU_TARGET="portable",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert sorted(archive_members(s3, run_buildspec.bucket)) == ["tiny/1/model.onnx", "tiny/config.pbtxt"]


def test_an_onnx_file_with_external_data_reaches_the_build_whole(run_buildspec, s3, tmp_path):
    """`onnx-zip`: the ONNX file and the files its tensors live in arrive together (onnx external data)."""
    import zipfile

    import numpy as np
    from onnx import numpy_helper

    folder = tmp_path / "ext"
    folder.mkdir()
    weight = numpy_helper.from_array(np.arange(3 * 3, dtype=np.float32).reshape(3, 3), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input", "w"], ["output"])],
        "ext",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(folder / "mine.onnx"), save_as_external_data=True, location="mine.weights",
                    size_threshold=0)  # fmt: skip
    archive = tmp_path / "source.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in ("mine.onnx", "mine.weights"):
            zipped.write(folder / name, name)
    sources = "sources-ext"
    s3.create_bucket(Bucket=sources)
    s3.upload_file(str(archive), sources, "asset.zip")
    result = run_buildspec(
        PLATFORM="onnxruntime_onnx",
        BUILD_CONFIG=settings_document("onnxruntime_onnx"),
        SOURCE_KIND="onnx-zip",
        SOURCE_URI=f"s3://{sources}/asset.zip#mine.onnx",
        TRTEXEC="/nonexistent/trtexec",
        EXPECT_TENSORRT="",
        EXPECT_COMPUTE_CAPABILITY="",
        GPU_TARGET="portable",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert sorted(archive_members(s3, run_buildspec.bucket)) == [
        "tiny/1/mine.weights", "tiny/1/model.onnx", "tiny/config.pbtxt",
    ]  # fmt: skip


# --- python environments and ensembles (issue #15) ------------------------------------------------------

sys.path.insert(0, str(PROJECT_ROOT / "tests" / "model_build"))
from ensemble_fixtures import pipeline_repository, tiny_wheel, write_pipeline  # noqa: E402

PIPE_KEY = "models/pipe/" + "e" * 64 + "/model.tar.gz"
PIPE_UNPACKED = "models/pipe/" + "e" * 64 + "/uncompressed/"
CPU_ONLY = {"TRTEXEC": "/nonexistent/trtexec", "EXPECT_TENSORRT": "", "EXPECT_COMPUTE_CAPABILITY": "",
            "GPU_TARGET": "portable"}  # fmt: skip


def members_of(s3, bucket: str, key: str) -> dict[str, bytes]:
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def one_model_document(model: dict) -> str:
    return json.dumps({"triton_release": "24.09", "models": [model]})


def test_a_python_model_gets_its_environment_packed_in_the_build(run_buildspec, s3, tmp_path):
    """python_backend README, "Creating Custom Execution Environments": the build (the serving image's python3;
    here the test's) packs `python_env.tar.gz` from the folder's locked requirements.txt into the archive and
    `model_build config` sets EXECUTION_ENV_PATH to it."""
    import zipfile

    write_pipeline(tmp_path / "project")
    folder = tmp_path / "project" / "models" / "pre"
    with zipfile.ZipFile(tmp_path / "pre.zip", "w") as zipped:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            zipped.write(path, path.relative_to(folder).as_posix())
    sources = "sources-python"
    s3.create_bucket(Bucket=sources)
    s3.upload_file(str(tmp_path / "pre.zip"), sources, "pre.zip")
    wheels = tmp_path / "wheels"
    tiny_wheel(wheels)
    model = {
        "name": "pre", "platform": "python", "source": {"path": "models/pre"},
        "environment": {"requirements": "models/pre/requirements.txt"}, "max_batch_size": 0,
        "dynamic_batching": {"enabled": False}, "instance_groups": [{"count": 1, "kind": "KIND_CPU"}],
    }  # fmt: skip
    result = run_buildspec(
        MODEL_NAME="pre",
        PLATFORM="python",
        BUILD_CONFIG=one_model_document(model),
        SOURCE_KIND="zip",
        SOURCE_URI=f"s3://{sources}/pre.zip",
        PIP_FIND_LINKS=f"{wheels} {os.environ.get('PIP_FIND_LINKS', '')}".strip(),
        **CPU_ONLY,
    )
    if result.returncode != 0 and "No matching distribution found for numpy" in result.stderr:
        pytest.skip("pip finds no numpy wheel here")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    members = members_of(s3, run_buildspec.bucket, KEY)
    assert "pre/python_env.tar.gz" in members
    assert b'string_value: "$$TRITON_MODEL_DIRECTORY/python_env.tar.gz"' in members["pre/config.pbtxt"]
    with tarfile.open(fileobj=io.BytesIO(members["pre/python_env.tar.gz"]), mode="r:gz") as environment:
        names = environment.getnames()
    assert "bin/activate" in names and any(n.startswith("lib/python3") and "/onlyenv/" in n for n in names)


@pytest.fixture
def composing_archives(tmp_path, s3, run_buildspec) -> str:
    """The composing models' archives in the artifact bucket, as their own builds left them; COMPOSING_KEYS."""
    from model_build.package import package_repository

    write_pipeline(tmp_path / "project")
    repo = pipeline_repository(tmp_path / "project")
    pairs = []
    for name in ("pre", "cnn", "post"):
        (artifact,) = package_repository(repo, tmp_path / "composing" / name, models=[name])
        key = f"models/{name}/" + name[0] * 64 + "/model.tar.gz"
        s3.upload_file(str(artifact.path), run_buildspec.bucket, key)
        pairs.append(f"{name}={key}")
    return " ".join(pairs)


def ensemble_document(tmp_path: Path) -> str:
    stage = yaml.safe_load((tmp_path / "project" / "stage.yaml").read_text())
    return one_model_document(next(m for m in stage["models"] if m["name"] == "pipe"))


def test_an_ensemble_build_packages_the_ensemble_with_its_composing_models(
    run_buildspec, s3, tmp_path, composing_archives
):
    """PLATFORM=ensemble: the composing archives are fetched from the artifact bucket, the ensemble's config is
    generated from their configs and checked with them (core ensemble_utils.cc rules), and one archive holds
    every folder; the unpacked layout's marker (the ensemble's config.pbtxt) and then the archive go last."""
    result = run_buildspec(
        MODEL_NAME="pipe",
        PLATFORM="ensemble",
        ARTIFACT_KEY=PIPE_KEY,
        BUILD_CONFIG=ensemble_document(tmp_path),
        SOURCE_KIND="none",
        SOURCE_URI="",
        COMPOSING_KEYS=composing_archives,
        UNCOMPRESSED_PREFIX=PIPE_UNPACKED,
        **CPU_ONLY,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    members = members_of(s3, run_buildspec.bucket, PIPE_KEY)
    assert {name.split("/")[0] for name in members} == {"cnn", "pipe", "post", "pre"}
    assert b'platform: "ensemble"' in members["pipe/config.pbtxt"]
    uploads = uploads_of(result)
    assert uploads[-2:] == [
        f"s3://{run_buildspec.bucket}/{PIPE_UNPACKED}pipe/config.pbtxt",
        f"s3://{run_buildspec.bucket}/{PIPE_KEY}",
    ]
    assert f"s3://{run_buildspec.bucket}/{PIPE_UNPACKED}cnn/1/model.onnx" in uploads


@pytest.mark.parametrize(
    ("drop", "expected"),
    [("post", "needs its composing models' configs first"), ("all", "PLATFORM=ensemble needs COMPOSING_KEYS")],
)
def test_an_ensemble_build_without_every_composing_model_writes_nothing(
    run_buildspec, s3, tmp_path, composing_archives, drop, expected
):
    keys_given = "" if drop == "all" else " ".join(p for p in composing_archives.split() if not p.startswith(drop))
    before = keys(s3, run_buildspec.bucket)
    result = run_buildspec(
        MODEL_NAME="pipe",
        PLATFORM="ensemble",
        ARTIFACT_KEY=PIPE_KEY,
        BUILD_CONFIG=ensemble_document(tmp_path),
        SOURCE_KIND="none",
        SOURCE_URI="",
        COMPOSING_KEYS=keys_given,
        UNCOMPRESSED_PREFIX=PIPE_UNPACKED,
        **CPU_ONLY,
    )
    assert result.returncode != 0
    assert expected in result.stderr
    assert keys(s3, run_buildspec.bucket) == before


def test_a_composing_archive_holding_another_folder_is_refused(run_buildspec, s3, tmp_path, composing_archives):
    pairs = dict(pair.split("=", 1) for pair in composing_archives.split())
    pairs["post"] = pairs["cnn"]  # an archive of cnn/ under post's name
    result = run_buildspec(
        MODEL_NAME="pipe",
        PLATFORM="ensemble",
        ARTIFACT_KEY=PIPE_KEY,
        BUILD_CONFIG=ensemble_document(tmp_path),
        SOURCE_KIND="none",
        SOURCE_URI="",
        COMPOSING_KEYS=" ".join(f"{name}={key}" for name, key in pairs.items()),
        **CPU_ONLY,
    )
    assert result.returncode != 0
    assert "must hold only the folder post/" in result.stderr


# --- the build check and its report (issue #25) --------------------------------------------------------


def uploads_of(result: subprocess.CompletedProcess) -> list[str]:
    return [line.split()[0] for line in result.stdout.splitlines() if line.startswith("s3://")]


def test_the_buildspec_gives_the_check_the_serving_images_tritonserver():
    """Triton server build.py (the image): `WORKDIR /opt/tritonserver` ... `ENV PATH /opt/tritonserver/bin`."""
    spec = yaml.safe_load((PROJECT_ROOT / "model_build" / "buildspec.yml").read_text())
    assert spec["env"]["variables"]["TRITONSERVER"] == "/opt/tritonserver/bin/tritonserver"
    check = next(c for c in spec["phases"]["build"]["commands"] if "build_check_cli" in c)
    assert '--tritonserver "$TRITONSERVER"' in check


def test_a_check_outside_the_tolerance_fails_the_build_before_any_upload(run_buildspec, s3):
    result = run_buildspec(UNCOMPRESSED_PREFIX=UNPACKED, FAKE_CHECK="fail")
    assert result.returncode == 1
    assert "output 'output': 3 of 12 elements" in result.stderr
    assert "PHASE build FAILED" in result.stderr
    assert keys(s3, run_buildspec.bucket) == []


def test_the_real_check_runs_from_the_secondary_source_and_stops_the_build(run_buildspec, s3):
    """The project's own endpoint_client as the secondary source: the buildspec's link and PYTHONPATH import it
    (model_build stays free of it), it takes the buildspec's arguments, and a host without the server fails the
    build before any upload, with the check's message in the log."""
    result = run_buildspec(
        CODEBUILD_SRC_DIR_endpoint_client=str(PROJECT_ROOT / "endpoint_client"),
        TRITONSERVER="/nonexistent/tritonserver",
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    # Refused before any measurement (endpoint_client.build_check_cli.check_files).
    assert "ERROR: --tritonserver /nonexistent/tritonserver: not an executable file" in result.stderr
    assert keys(s3, run_buildspec.bucket) == []


def test_a_tensorrt_build_without_the_check_source_stops_before_building(run_buildspec, s3):
    result = run_buildspec(CODEBUILD_SRC_DIR_endpoint_client="")
    assert result.returncode == 1
    assert "needs its secondary source endpoint_client" in result.stderr
    assert "PHASE install FAILED" in result.stderr
    assert keys(s3, run_buildspec.bucket) == []


def test_an_existing_report_is_kept(run_buildspec, s3):
    """Written once (docs/build.md): a rebuild of the same key publishes nothing over an earlier report."""
    s3.put_object(Bucket=run_buildspec.bucket, Key=REPORT, Body=b'{"schema_version": 1, "model": "earlier"}')
    result = run_buildspec()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "kept as it is" in result.stdout
    assert s3.get_object(Bucket=run_buildspec.bucket, Key=REPORT)["Body"].read() == (
        b'{"schema_version": 1, "model": "earlier"}'
    )


@pytest.mark.parametrize("platform", ["onnxruntime_onnx"])
def test_models_without_an_engine_run_no_check_and_publish_no_report(run_buildspec, s3, platform):
    result = run_buildspec(
        PLATFORM=platform,
        BUILD_CONFIG=settings_document(platform),
        CODEBUILD_SRC_DIR_endpoint_client="",  # a CPU project has no secondary source
        **CPU_ONLY,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert not run_buildspec.check_log.exists()
    assert keys(s3, run_buildspec.bucket) == [KEY]


def test_samples_uri_is_fetched_and_given_to_the_check(run_buildspec, s3):
    """tensorrt.accuracy.samples reaches the check as CALIBRATION_URI reaches trtexec: the build stack ships the
    .npz and sets SAMPLES_URI (stacks/build_stack.py `_samples`); the buildspec fetches it and passes --samples."""
    s3.put_object(Bucket=run_buildspec.bucket, Key="assets/samples.npz", Body=b"npz bytes")
    result = run_buildspec(SAMPLES_URI=f"s3://{run_buildspec.bucket}/assets/samples.npz")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    args = json.loads(run_buildspec.check_log.read_text())
    samples = Path(args[args.index("--samples") + 1])
    assert samples.name == "samples.npz" and samples.read_bytes() == b"npz bytes"
