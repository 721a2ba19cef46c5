"""TensorRT build plan (trtexec argv), `trt-command`, `build` and the release table.

`build` needs an NVIDIA GPU and TensorRT, which this machine lacks: its refusal is tested as is.
The mismatch refusals and the happy path of the runner are exercised with small fake `nvidia-smi`
and `trtexec` programs written by the tests. They imitate those tools' command-line interface
(nvidia-smi's `--query-gpu=name,compute_cap --format=csv,noheader` line, trtexec's
`[TensorRT vNNNNNN]` banner and `--saveEngine=`), so this tests our code against the tools'
interface; it does not claim an engine was built. bench/GPU.md records the run on a real GPU.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

import export_like_models
import pytest
from onnx_fixtures import (
    SHARED_VALID,
    dynamic_batch_model,
    fixed_model,
    needs_shared,
    path_with,
    sequence_model,
    settings,
    write_executable,
)

from model_build import cli
from model_build.errors import InvalidModelError, MissingToolError, ModelBuildError
from model_build.onnx_inspect import inspect_model
from model_build.trt import (
    DEFAULT_TRTEXEC,
    detect_gpus,
    tensorrt_version_from_banner,
    trtexec_argv,
)
from serving_facts import releases

ENGINE = Path("/repo/m/1/model.plan")
CACHE = Path("/cache/m.timing")


@pytest.fixture
def dyn(tmp_path) -> Path:
    return dynamic_batch_model(tmp_path / "dyn.onnx")


def argv_for(onnx_path: Path, **fields) -> list[str]:
    return trtexec_argv(inspect_model(onnx_path), settings("m", **fields), engine_path=ENGINE, timing_cache=CACHE)


# --- golden argv -------------------------------------------------------------------------------


def test_default_argv_is_fp16_with_batch_profile(dyn):
    assert argv_for(dyn, max_batch_size=16, dynamic_batching={"preferred_batch_sizes": [4, 8]}) == [
        DEFAULT_TRTEXEC,
        f"--onnx={dyn}",
        "--saveEngine=/repo/m/1/model.plan",
        "--fp16",
        "--minShapes=x:1x4",
        "--optShapes=x:8x4",
        "--maxShapes=x:16x4",
        "--memPoolSize=workspace:4096",
        "--timingCacheFile=/cache/m.timing",
        "--skipInference",
    ]


@pytest.mark.parametrize(
    ("precision", "flags"),
    [("fp32", []), ("fp16", ["--fp16"]), ("best", ["--best"]), ("int8", ["--int8", "--calib=/data/calib.cache"])],
)
def test_precision_flags(dyn, precision, flags):
    trt = {"precision": precision}
    if precision == "int8":
        trt["calibration_cache"] = "/data/calib.cache"
    argv = argv_for(dyn, tensorrt=trt)
    assert argv[3 : 3 + len(flags)] == flags
    assert argv[3 + len(flags)].startswith("--minShapes=")
    assert not {"--fp16", "--best", "--int8"} - set(flags) & set(argv)


def test_int8_from_s3_needs_a_local_cache(dyn):
    with pytest.raises(ModelBuildError, match=r"calibration_cache s3://b/calib\.cache is in S3; download it"):
        argv_for(dyn, tensorrt={"precision": "int8", "calibration_cache": "s3://b/calib.cache"})


def test_compatibility_workspace_and_opt_batch(dyn):
    argv = argv_for(
        dyn,
        max_batch_size=32,
        tensorrt={
            "workspace_mib": 1024,
            "hardware_compatibility": "ampere+",
            "version_compatible": True,
            "opt_batch_size": 4,
        },
    )
    assert argv[-5:] == [
        "--memPoolSize=workspace:1024",
        "--timingCacheFile=/cache/m.timing",
        "--hardwareCompatibilityLevel=ampere+",
        "--versionCompatible",
        "--skipInference",
    ]
    assert "--optShapes=x:4x4" in argv and "--maxShapes=x:32x4" in argv


def test_opt_batch_defaults_to_max_without_preferred_sizes(dyn):
    argv = argv_for(dyn, max_batch_size=12)
    assert "--optShapes=x:12x4" in argv and "--hardwareCompatibilityLevel=ampere+" not in argv


def test_dynamic_sequence_axis_combines_with_shapes(tmp_path):
    path = sequence_model(tmp_path / "seq.onnx")
    shapes = [
        {"input": "tokens", "min": [1], "opt": [128], "max": [512]},
        {"input": "mask", "min": [1], "opt": [128], "max": [512]},
    ]
    argv = argv_for(
        path, max_batch_size=64, dynamic_batching={"preferred_batch_sizes": [16, 32]}, tensorrt={"shapes": shapes}
    )
    assert argv[4:7] == [
        "--minShapes=tokens:1x1,mask:1x1",
        "--optShapes=tokens:32x128,mask:32x128",
        "--maxShapes=tokens:64x512,mask:64x512",
    ]


def test_dynamic_dims_without_shapes_are_refused(tmp_path):
    path = sequence_model(tmp_path / "seq.onnx")
    with pytest.raises(
        InvalidModelError,
        match=r"seq\.onnx: input 'tokens' \(shape \[-1, -1\]\) has dynamic axes \[1\] besides the batch axis; "
        r"TensorRT needs their range: add tensorrt\.shapes",
    ):
        argv_for(path)


def test_shape_rank_mismatch_is_refused(tmp_path):
    path = sequence_model(tmp_path / "seq.onnx")
    with pytest.raises(InvalidModelError, match=r"tensorrt\.shapes for 'tokens' has rank 2, but the input's non-batch"):
        argv_for(path, tensorrt={"shapes": [{"input": "tokens", "min": [1, 1], "opt": [1, 1], "max": [1, 1]}]})


def test_static_unbatched_model_takes_no_shape_flags(tmp_path):
    path = fixed_model(tmp_path / "fixed.onnx", leading=4)
    argv = argv_for(path, max_batch_size=0, dynamic_batching={"enabled": False})
    assert not [a for a in argv if "Shapes=" in a]


def trtexec_shapes(flag: str) -> dict[str, list[int]]:
    """trtexec's own parse of a --minShapes/--optShapes/--maxShapes value, ported line by line from
    NVIDIA/TensorRT samples/common/sampleOptions.cpp (release/8.6 and main): `getShapesBuild` splits the
    list on ',', `splitNameAndValue` takes a quoted name (exactly two "'") or splits on the last ':',
    `removeSingleQuotationMarks` drops the quotes, dims are split on 'x'."""
    shapes = {}
    for item in flag.split(","):
        quoted = item.split("'")
        if len(quoted) != 1:
            if len(quoted) != 3:
                raise ValueError(
                    f"Found invalid number of 's when parsing {item}. Expected: 2, received: {len(quoted) - 1}"
                )
            name, value = quoted[0] + quoted[1], quoted[2][1:]
        else:
            parts = item.split(":")
            name, value = ":".join(parts[:-1]), parts[-1]
        shapes["".join(name.split("'"))] = [int(dim) for dim in value.split("x")]
    return shapes


def shape_flags(argv: list[str]) -> dict[str, dict[str, list[int]]]:
    return {
        which: trtexec_shapes(arg.split("=", 1)[1])
        for arg in argv
        for which in ("min", "opt", "max")
        if arg.startswith(f"--{which}Shapes=")
    }


def test_tf_style_names_reach_trtexec_intact(tmp_path):
    """tf2onnx names ("input_1:0") need no quotes: trtexec takes the value after the last ':'."""
    path = export_like_models.tf_style(tmp_path / "tf.onnx")

    argv = argv_for(path, max_batch_size=4)

    assert shape_flags(argv) == {
        "min": {"input_1:0": [1, 224, 224, 3]},
        "opt": {"input_1:0": [4, 224, 224, 3]},
        "max": {"input_1:0": [4, 224, 224, 3]},
    }


def test_bert_like_shape_flags_parse_back_to_the_profile(tmp_path):
    path = export_like_models.bert_like(tmp_path / "bert.onnx")
    shapes = [{"input": name, "min": [1], "opt": [128], "max": [512]} for name in export_like_models.BERT_INPUTS]

    flags = shape_flags(argv_for(path, max_batch_size=8, tensorrt={"shapes": shapes}))

    assert flags["max"] == {name: [8, 512] for name in export_like_models.BERT_INPUTS}
    assert flags["min"] == {name: [1, 1] for name in export_like_models.BERT_INPUTS}


@pytest.mark.parametrize("name", ["a,b", "it's", "'quoted'", "x,'y'"])
def test_names_trtexec_cannot_parse_are_refused(name, tmp_path):
    """Quoting does not help: the flag is split on ',' before quotes are read, and a name with a quote
    of its own makes more than two."""
    path = export_like_models.named_inputs(tmp_path / "n.onnx", [name])

    with pytest.raises(InvalidModelError, match=r"trtexec cannot parse a shape flag for a name that contains ','"):
        argv_for(path, max_batch_size=2)
    quoted = f"'{name}':1x4"
    assert trtexec_shapes_or_error(quoted) != {name: [1, 4]}  # what quoting would have given trtexec


def trtexec_shapes_or_error(flag: str) -> dict | str:
    try:
        return trtexec_shapes(flag)
    except ValueError as error:
        return str(error)


def test_a_static_input_with_a_comma_takes_no_flag_and_passes(tmp_path):
    path = export_like_models.named_inputs(tmp_path / "n.onnx", ["a,b"], shape=[4, 8])

    argv = argv_for(path, max_batch_size=0, dynamic_batching={"enabled": False})

    assert not [arg for arg in argv if "Shapes=" in arg]


def test_inputs_sharing_a_dim_param_need_one_range(tmp_path):
    """NvInfer.h ITensor::setDimensionName: "Dimensions with the same non-empty name must be equal at
    runtime"; onnx-tensorrt names each input dimension after its ONNX dim_param."""
    path = export_like_models.bert_like(tmp_path / "bert.onnx")
    shapes = [{"input": name, "min": [1], "opt": [128], "max": [512]} for name in export_like_models.BERT_INPUTS]
    shapes[1] = {"input": "attention_mask", "min": [1], "opt": [64], "max": [256]}

    with pytest.raises(
        InvalidModelError,
        match=r"inputs 'input_ids' \(axis 1\) and 'attention_mask' \(axis 1\) share the ONNX dimension 'sequence', "
        r"so TensorRT needs one range for both, but min/opt/max are 1/128/512 and 1/64/256",
    ):
        argv_for(path, max_batch_size=8, tensorrt={"shapes": shapes})


def test_independent_dim_params_may_differ(tmp_path):
    path = export_like_models.bert_like(tmp_path / "bert.onnx", mask_axis="mask_sequence")
    shapes = [{"input": name, "min": [1], "opt": [128], "max": [512]} for name in export_like_models.BERT_INPUTS]
    shapes[1] = {"input": "attention_mask", "min": [1], "opt": [64], "max": [256]}

    flags = shape_flags(argv_for(path, max_batch_size=8, tensorrt={"shapes": shapes}))

    assert flags["max"]["attention_mask"] == [8, 256] and flags["max"]["input_ids"] == [8, 512]


def test_the_unbatched_refusal_names_no_batch_axis(tmp_path):
    path = sequence_model(tmp_path / "seq.onnx")

    with pytest.raises(InvalidModelError) as raised:
        argv_for(path, max_batch_size=0, dynamic_batching={"enabled": False})

    message = str(raised.value)
    assert "has dynamic axes [0, 1] (max_batch_size 0: no batch axis)" in message
    assert "besides the batch axis" not in message


def test_fixed_batch_dim_is_refused_for_tensorrt_too(tmp_path):
    path = fixed_model(tmp_path / "fixed.onnx", leading=4)
    with pytest.raises(InvalidModelError, match=r"input 'x' has a fixed leading dim 4"):
        argv_for(path, max_batch_size=8)


def test_onnxruntime_models_are_not_built(dyn):
    with pytest.raises(ModelBuildError, match=r"platform 'onnxruntime_onnx'; only tensorrt_plan models are built"):
        argv_for(dyn, platform="onnxruntime_onnx")


def test_trt_command_prints_shell_quoted_argv(dyn, tmp_path, capsys):
    code = cli.main(
        [
            "trt-command",
            "--onnx",
            str(dyn),
            "--name",
            "m",
            "--max-batch-size",
            "4",
            "--repository",
            "/repo",
            "--timing-cache",
            "/cache/m.timing",
            "--trtexec",
            "/opt/my trt/trtexec",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("'/opt/my trt/trtexec' --onnx=")
    assert shlex.split(printed) == trtexec_argv(
        inspect_model(dyn),
        settings("m", max_batch_size=4),
        engine_path=ENGINE,
        timing_cache=CACHE,
        trtexec="/opt/my trt/trtexec",
    )


def test_trt_command_refusal_goes_through_cli(tmp_path, capsys):
    path = sequence_model(tmp_path / "seq.onnx")
    assert cli.main(["trt-command", "--onnx", str(path), "--name", "m", "--repository", "/r"]) == 1
    assert "ERROR: " in (err := capsys.readouterr().err) and "has dynamic axes [1] besides the batch axis" in err


# --- `build` on this machine and with fake tools -----------------------------------------------

GPU_A10G = 'print("NVIDIA A10G, 8.6")\n'
GPU_T4 = 'print("Tesla T4, 7.5")\n'
TRTEXEC = """
import os, sys
print("&&&& RUNNING TensorRT.trtexec [TensorRT v100400] # trtexec " + " ".join(sys.argv[1:]))
if len(sys.argv) == 1:
    sys.exit(1)  # like the real tool: banner, help, non-zero exit
if os.environ.get("FAKE_TRTEXEC_FAIL"):
    print("[E] Error[4]: ITensor::getDimensions: Error Code 4: shape mismatch", file=sys.stderr)
    sys.exit(1)
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
with open(args["--saveEngine"], "wb") as f:
    f.write(b"fake-engine " + " ".join(sys.argv[1:]).encode())
with open(args["--timingCacheFile"], "wb") as f:
    f.write(b"timing")
"""


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """Fake nvidia-smi (A10G) and trtexec (TensorRT 10.4.0) on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_executable(bin_dir / "nvidia-smi", GPU_A10G)
    write_executable(bin_dir / "trtexec", TRTEXEC)
    monkeypatch.setenv("PATH", path_with(bin_dir))
    return bin_dir


def build_args(onnx_path: Path, repo: Path, *extra: str) -> list[str]:
    return [
        "build",
        "--onnx",
        str(onnx_path),
        "--name",
        "m",
        "--max-batch-size",
        "8",
        "--repository",
        str(repo),
        "--trtexec",
        "trtexec",
        "--timing-cache",
        str(repo.parent / "cache" / "m.timing"),
        *extra,
    ]


def test_build_without_gpu_exits_with_clear_message(dyn, tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert cli.main(build_args(dyn, tmp_path / "repo")) == 1
    assert capsys.readouterr().err.startswith(
        "ERROR: no NVIDIA GPU here (nvidia-smi not found). TensorRT engines must be built on a GPU"
    )
    assert not (tmp_path / "repo").exists()


def test_build_without_trtexec_exits_with_clear_message(dyn, tmp_path, tools, capsys):
    (tools / "trtexec").unlink()
    assert cli.main(build_args(dyn, tmp_path / "repo")) == 1
    assert "ERROR: TensorRT's trtexec not found at 'trtexec'. Build inside NVIDIA's TensorRT image" in (
        capsys.readouterr().err
    )


def test_build_with_failing_driver(dyn, tmp_path, tools, capsys):
    write_executable(
        tools / "nvidia-smi",
        "import sys\nprint(\"NVIDIA-SMI has failed because it couldn't "
        'communicate with the NVIDIA driver.")\nsys.exit(9)\n',
    )
    assert cli.main(build_args(dyn, tmp_path / "repo")) == 1
    assert "ERROR: nvidia-smi failed (exit 9: NVIDIA-SMI has failed" in capsys.readouterr().err


def test_build_refuses_tensorrt_mismatch(dyn, tmp_path, tools, capsys):
    assert cli.main(build_args(dyn, tmp_path / "repo", "--expect-tensorrt", "10.9.0.34")) == 1
    assert "ERROR: this build host has TensorRT 10.4.0, but the serving Triton release needs TensorRT 10.9.0.34" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "repo").exists()


def test_build_refuses_compute_capability_mismatch(dyn, tmp_path, tools, capsys):
    assert cli.main(build_args(dyn, tmp_path / "repo", "--expect-compute-capability", "8.9")) == 1
    assert (
        "ERROR: this build host's GPU is NVIDIA A10G (compute capability 8.6), but the serving instance needs 8.9"
    ) in capsys.readouterr().err


def test_build_refuses_ampere_plus_on_turing(dyn, tmp_path, tools, capsys):
    write_executable(tools / "nvidia-smi", GPU_T4)
    app_config = tmp_path / "dev.yaml"
    app_config.write_text(
        "triton_release: '24.09'\nmodels:\n  - name: m\n    source: {path: dyn.onnx}\n"
        "    tensorrt: {hardware_compatibility: ampere+}\n"
    )
    args = [
        "build",
        "--onnx",
        str(dyn),
        "--config",
        str(app_config),
        "--model",
        "m",
        "--repository",
        str(tmp_path / "repo"),
        "--trtexec",
        "trtexec",
        "--timing-cache",
        str(tmp_path / "t.cache"),
    ]
    assert cli.main(args) == 1
    assert "ERROR: hardware_compatibility ampere+ needs an Ampere-or-newer build GPU; this host has Tesla T4" in (
        capsys.readouterr().err
    )


def test_build_happy_path_writes_engine_and_record(dyn, tmp_path, tools, capsys):
    repo = tmp_path / "repo"
    code = cli.main(build_args(dyn, repo, "--expect-tensorrt", "10.4.0.26", "--expect-compute-capability", "8.6"))
    assert code == 0, capsys.readouterr().err
    engine = repo / "m" / "1" / "model.plan"
    assert engine.read_bytes().startswith(b"fake-engine --onnx=")
    info = json.loads((repo / "m" / "build-info.json").read_text())
    assert info["tensorrt_version"] == "10.4.0"
    assert (info["gpu_name"], info["compute_capability"]) == ("NVIDIA A10G", "8.6")
    assert info["source"]["sha256"] == hashlib.sha256(dyn.read_bytes()).hexdigest()
    assert info["engine_sha256"] == hashlib.sha256(engine.read_bytes()).hexdigest()
    assert f"--saveEngine={engine}" in info["argv"]  # the record names the final file, not the temp one
    assert info["options"]["tensorrt"]["precision"] == "fp16" and info["duration_s"] >= 0
    assert info["shape_profiles"] == [{"input": "x", "min": [1, 4], "opt": [8, 4], "max": [8, 4]}]
    assert sorted(p.name for p in (repo / "m").rglob("*")) == ["1", "build-info.json", "model.plan"]
    assert (tmp_path / "cache" / "m.timing").read_bytes() == b"timing"
    assert "built " in capsys.readouterr().err


def test_failed_build_leaves_nothing_half_written(dyn, tmp_path, tools, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_TRTEXEC_FAIL", "1")
    repo = tmp_path / "repo"
    assert cli.main(build_args(dyn, repo)) == 1
    err = capsys.readouterr().err
    assert "ERROR: trtexec failed for model 'm' (exit 1); no engine written." in err and "Error Code 4" in err
    assert [p.name for p in repo.rglob("*") if p.is_file()] == []


def test_failed_rebuild_keeps_previous_engine(dyn, tmp_path, tools, monkeypatch):
    repo = tmp_path / "repo"
    assert cli.main(build_args(dyn, repo)) == 0
    before = (repo / "m" / "1" / "model.plan").read_bytes()
    monkeypatch.setenv("FAKE_TRTEXEC_FAIL", "1")
    assert cli.main(build_args(dyn, repo)) == 1
    assert (repo / "m" / "1" / "model.plan").read_bytes() == before
    assert not [p for p in repo.rglob("*.tmp")]


@needs_shared
def test_build_triton_simple_model_with_fake_tools(tmp_path, tools):
    onnx_path = SHARED_VALID / "simple" / "1" / "model.onnx"
    assert cli.main(build_args(onnx_path, tmp_path / "repo")) == 0
    argv = json.loads((tmp_path / "repo" / "m" / "build-info.json").read_text())["argv"]
    assert "--minShapes=INPUT0:1x16,INPUT1:1x16" in argv and "--maxShapes=INPUT0:8x16,INPUT1:8x16" in argv


# --- tool parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("banner", "version"),
    [
        ("&&&& RUNNING TensorRT.trtexec [TensorRT v8601] # trtexec", "8.6.1"),
        ("&&&& RUNNING TensorRT.trtexec [TensorRT v90300] # trtexec", "9.3.0"),
        ("&&&& RUNNING TensorRT.trtexec [TensorRT v100400] # trtexec", "10.4.0"),
        ("&&&& RUNNING TensorRT.trtexec [TensorRT v101303] # trtexec", "10.13.3"),
        ("no banner at all", None),
    ],
)
def test_tensorrt_banner(banner, version):
    assert tensorrt_version_from_banner(banner) == version


def test_detect_gpus_reads_every_gpu(tmp_path, monkeypatch):
    write_executable(
        tmp_path / "nvidia-smi", 'print("Tesla V100-SXM2-16GB, 7.0")\nprint("Tesla V100-SXM2-16GB, 7.0")\n'
    )
    monkeypatch.setenv("PATH", path_with(tmp_path))
    assert [(g.name, g.compute_capability) for g in detect_gpus()] == [("Tesla V100-SXM2-16GB", "7.0")] * 2


def test_detect_gpus_with_no_gpu_listed(tmp_path, monkeypatch):
    write_executable(tmp_path / "nvidia-smi", 'print("No devices were found")\n')
    monkeypatch.setenv("PATH", path_with(tmp_path))
    with pytest.raises(MissingToolError, match=r"nvidia-smi listed no GPU \(output: 'No devices were found'\)"):
        detect_gpus()


# --- releases ----------------------------------------------------------------------------------


def test_releases_cover_exactly_the_sagemaker_sdk_versions():
    from importlib import resources

    table = json.loads(
        resources.files("sagemaker.core").joinpath("image_uri_config/sagemaker-tritonserver.json").read_text()
    )
    assert sorted(releases.RELEASES) == sorted(table["versions"])


def test_release_lookups():
    assert releases.tensorrt_version("24.09") == "10.4.0.26"
    assert releases.ngc_tensorrt_image("24.09") == "nvcr.io/nvidia/tensorrt:24.09-py3"
    assert releases.ngc_tensorrt_image("26.05") == "nvcr.io/nvidia/tensorrt:26.04-py3"
    with pytest.raises(releases.UnknownReleaseError, match=r"unknown Triton release '24.10'; releases known"):
        releases.tensorrt_version("24.10")


@pytest.mark.parametrize(
    ("release", "cc", "supported"),
    [
        ("23.12", "7.0", True),
        ("24.09", "7.0", True),
        ("25.04", "7.0", False),
        ("25.04", "7.5", True),
        ("26.05", "9.0", True),
        ("24.05", "6.1", False),
        ("26.05", "10.0", True),
    ],
)
def test_supports_compute_capability(release, cc, supported):
    assert releases.supports_compute_capability(release, cc) is supported


@pytest.mark.parametrize(
    ("found", "expected", "same"),
    [
        ("10.4.0", "10.4.0.26", True),
        ("10.4.0", "10.4", True),
        ("10.4.0", "10.9.0.34", False),
        ("8.6.1", "8.6.1.6", True),
        ("10.13.3", "10.1", False),
    ],
)
def test_same_tensorrt(found, expected, same):
    assert releases.same_tensorrt(found, expected) is same
