"""Targeted rules of `check`: schema, Triton's single-model rules, GPU-dependent rules, ensembles, layout."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from model_fixtures import conda_pack_like, onnx_matching

from model_build.check import Problem, check_model_config, check_repository
from model_build.errors import InvalidModelError
from serving_facts.catalogue import UnknownInstanceTypeError

ONNX_MODEL = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
{extra}
"""


def onnx_config(name: str = "m", extra: str = "") -> str:
    return ONNX_MODEL.format(name=name, extra=extra)


def lines(problems: list[Problem]) -> list[str]:
    return [str(problem) for problem in problems]


def only_message(problems: list[Problem]) -> str:
    assert len(problems) == 1, lines(problems)
    return problems[0].message


def write_model(repo: Path, folder: str, config: str, files: dict[str, str] | None = None) -> Path:
    """REPO/<folder>/config.pbtxt plus `files` (relative path -> text; a path ending in / is a folder)."""
    model = repo / folder
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.pbtxt").write_text(textwrap.dedent(config))
    for relative, text in (files or {}).items():
        path = model / relative
        if relative.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        elif relative.endswith(".onnx") and not text:
            # check opens model files and refuses an empty one: write a real ONNX matching the config.
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(onnx_matching(textwrap.dedent(config)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return model


# ----------------------------------------------------------------------------------------------------
# Schema


def test_a_valid_config_has_no_problems():
    assert check_model_config(onnx_config(), model_name="m") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name: "m"\nplatfrom: "onnxruntime_onnx"', 'has no field named "platfrom"'),
        ('name: "m"\nplatform: "a"\nplatform: "b"', 'should not have multiple "platform" fields'),
        ('name: "m"\ninput [ { name: "x" data_type: TYPE_FLOAT32 dims: [1] } ]', "TYPE_FLOAT32"),
        ('name: "m"\nmax_batch_size: "eight"', "max_batch_size"),
    ],
)
def test_schema_errors_name_the_line_and_the_field(text, expected):
    problems = check_model_config(text, model_name="m")

    assert problems[0].rule == "schema"
    assert problems[0].message.startswith("failed to read text proto from m/config.pbtxt: ")
    assert expected in problems[0].message


# ----------------------------------------------------------------------------------------------------
# Platform and backend


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('name: "m"\nplatform: "onnxruntime"', "unexpected platform type 'onnxruntime' for m"),
        (
            'name: "m"\nbackend: "onnxruntime"\nplatform: "tensorrt_plan"',
            "unexpected 'platform' and 'backend' pair, got:tensorrt_plan, onnxruntime",
        ),
        (
            'name: "m"',
            "Invalid model name: Could not determine backend for model 'm' with no backend in model configuration.",
        ),
    ],
)
def test_platform_and_backend_must_be_known_and_agree(config, expected):
    assert expected in only_message(check_model_config(config, model_name="m"))


def test_a_config_checked_alone_needs_a_name():
    assert lines(check_model_config('platform: "onnxruntime_onnx"')) == [
        "(unnamed): name: model configuration must specify 'name' [name]"
    ]


def test_ensemble_scheduling_belongs_to_ensembles_only():
    config = onnx_config(extra='ensemble_scheduling { step [ { model_name: "a" } ] }')

    assert only_message(check_model_config(config)) == (
        "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble"
    )


def test_a_custom_backend_is_read_from_a_dotted_folder_name():
    config = 'input [ { name: "x" data_type: TYPE_FP32 dims: [1] } ]'

    assert check_model_config(config, model_name="model.identity") == []


def test_an_empty_name_is_filled_from_the_folder_and_a_different_name_is_refused():
    assert check_model_config(onnx_config(name=""), model_name="m") == []
    assert only_message(check_model_config(onnx_config(name="other"), model_name="m")) == (
        "unexpected directory name 'm' for model 'other', directory name must equal model name"
    )


# ----------------------------------------------------------------------------------------------------
# Inputs, outputs, batch inputs


@pytest.mark.parametrize(
    ("tensor", "expected"),
    [
        ('name: "x" data_type: TYPE_FP32', "model input 'x' must specify 'dims' for m"),
        ('name: "x" data_type: TYPE_FP32 dims: [ -2 ]', "model input 'x' dimension must be integer >= 1"),
        ('name: "x" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 3, 4 ]', "model input NHWC/NCHW require 3 dims"),
        (
            'name: "x" data_type: TYPE_FP32 dims: [ 4 ] is_shape_tensor: true',
            "shape tensors are only supported for TensorRT platform for m",
        ),
        ("data_type: TYPE_FP32 dims: [ 4 ]", "model input must specify 'name' for m"),
    ],
)
def test_input_rules(tensor, expected):
    config = f'name: "m"\nplatform: "onnxruntime_onnx"\ninput [ {{ {tensor} }} ]'

    assert expected in only_message(check_model_config(config))


def test_reshape_with_matching_variable_chunks_passes():
    """[2, 4, -1, 6] -> [8, -1, 1, 6]: 2 * 4 = 8 and 6 = 1 * 6 (Triton's own example)."""
    tensor = 'name: "x" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] reshape { shape: [ 8, -1, 1, 6 ] }'

    assert check_model_config(f'name: "m"\nplatform: "onnxruntime_onnx"\ninput [ {{ {tensor} }} ]') == []


def test_every_broken_tensor_is_reported_with_its_field():
    config = """
    name: "m"
    platform: "onnxruntime_onnx"
    input [ { name: "a" dims: [ 1 ] }, { name: "b" data_type: TYPE_FP32 dims: [ 0 ] } ]
    output [ { name: "c" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ 2 ] } } ]
    """

    problems = check_model_config(config)

    assert [(problem.field, problem.rule) for problem in problems] == [
        ("input[0].data_type", "io"),
        ("input[1].dims", "io"),
        ("output[0].reshape", "io"),
    ]


def test_batch_output_target_must_be_an_output():
    extra = 'batch_output [ { target_name: "NOPE" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT0" } ]'

    assert only_message(check_model_config(onnx_config(extra=extra))) == "unknown target output name 'NOPE' for m"


def test_batch_input_data_type_must_be_int32_or_fp32():
    extra = 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "B" data_type: TYPE_FP16 source_input: "INPUT0" } ]'

    problems = check_model_config(onnx_config(extra=extra))

    assert only_message(problems) == "batch input data type must be TYPE_INT32 or TYPE_FP32 for m"


# ----------------------------------------------------------------------------------------------------
# Batching and sequence controls


def test_max_batch_size_must_not_be_negative():
    config = onnx_config().replace("max_batch_size: 8", "max_batch_size: -1")

    assert only_message(check_model_config(config)) == "'max_batch_size' must be non-negative value for m"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "dynamic_batching { preferred_batch_size: [ 16 ] }",
            "dynamic batching preferred size must be <= max batch size for m",
        ),
        ("dynamic_batching { preferred_batch_size: [ 0 ] }", "dynamic batching preferred size must be positive for m"),
        (
            "dynamic_batching { priority_levels: 2 default_priority_level: 1 preserve_ordering: true }",
            "Only one priority level is allowed when 'preserve_ordering' is true for m",
        ),
    ],
)
def test_dynamic_batching_rules(extra, expected):
    assert only_message(check_model_config(onnx_config(extra=extra))) == expected


@pytest.mark.parametrize(
    ("control", "expected"),
    [
        (
            "{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 }",
            "unexpected data type for control CONTROL_SEQUENCE_CORRID for m. Allowed data types are TYPE_UINT64, "
            "TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
        ),
        (
            "{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1, 2 ] }",
            "sequence batching control 'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_START for m",
        ),
        (
            "{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ] }",
            "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and "
            "'bool_false_true' for CONTROL_SEQUENCE_START for m",
        ),
        (
            "{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 int32_false_true: [ 0, 1 ] }",
            "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' "
            "for CONTROL_SEQUENCE_CORRID for m",
        ),
    ],
)
def test_sequence_control_rules(control, expected):
    extra = f'sequence_batching {{ control_input [ {{ name: "C" control [ {control} ] }} ] }}'

    assert only_message(check_model_config(onnx_config(extra=extra))) == expected


def test_one_control_tensor_used_for_two_kinds_is_reported_once():
    extra = """sequence_batching { control_input [
      { name: "C" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
      { name: "C" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] } ] }"""

    assert only_message(check_model_config(onnx_config(extra=extra))) == (
        "sequence batching control tensor 'C' is specified for multiple control kinds for m"
    )


# ----------------------------------------------------------------------------------------------------
# Instance groups and the target's GPUs


@pytest.mark.parametrize(
    ("group", "instance_type", "expected"),
    [
        ("kind: KIND_GPU gpus: [ 1 ]", None, None),
        ("kind: KIND_GPU gpus: [ 1 ]", "ml.g5.12xlarge", None),
        (
            "kind: KIND_GPU gpus: [ 1 ]",
            "ml.g5.xlarge",
            "instance group m_0 of model m specifies invalid or unsupported gpu id 1. GPUs with at least the minimum "
            "required CUDA compute compatibility are: 0 (instance type ml.g5.xlarge)",
        ),
        (
            "kind: KIND_GPU",
            "ml.m5.xlarge",
            "instance group m_0 of model m has kind KIND_GPU but no GPUs are available (instance type ml.m5.xlarge "
            "has no GPU)",
        ),
        # KIND_AUTO becomes KIND_CPU when a listed GPU is missing, and KIND_CPU may not list GPUs.
        ("kind: KIND_AUTO gpus: [ 0 ]", "ml.g5.xlarge", None),
        (
            "kind: KIND_AUTO gpus: [ 0 ]",
            "ml.c5.xlarge",
            "instance group m_0 of model m has kind KIND_CPU but specifies one or more GPUs",
        ),
        (
            "kind: KIND_MODEL gpus: [ 0 ]",
            None,
            "instance group m_0 of model m has kind KIND_MODEL but specifies one or more GPUs",
        ),
        (
            'name: "g" kind: KIND_CPU profile: [ "0" ]',
            None,
            # Sic: Triton's text has no space between the platform and "specifies".
            "instance group g of model m and platform onnxruntime_onnxspecifies profile field which is only "
            "supported for TensorRT models",
        ),
    ],
)
def test_instance_groups_are_judged_against_the_instance_types_gpus(group, instance_type, expected):
    """Texts of core src/model_config_utils.cc ValidateInstanceGroup, plus the instance type in parentheses."""
    problems = check_model_config(onnx_config(extra=f"instance_group [ {{ {group} }} ]"), instance_type=instance_type)

    assert lines(problems) == ([] if expected is None else [str(problems[0])])
    if expected is not None:
        assert only_message(problems) == expected


def test_with_the_release_the_unsupported_gpu_text_is_tritons_own_in_full():
    """ValidateInstanceGroup prints the minimum with std::to_string(double): 7.5 -> "7.500000"."""
    problems = check_model_config(
        onnx_config(extra="instance_group [ { kind: KIND_GPU gpus: [ 4 ] } ]"),
        instance_type="ml.g5.12xlarge",
        triton_release="25.09",
    )

    assert only_message(problems) == (
        "instance group m_0 of model m specifies invalid or unsupported gpu id 4. GPUs with at least the minimum "
        "required CUDA compute compatibility of 7.500000 are: 0, 1, 2, 3 (instance type ml.g5.12xlarge)"
    )


def test_a_gpu_below_the_releases_minimum_is_no_gpu_at_all():
    """GetSupportedGPUs drops GPUs below the minimum compute capability (V100 = 7.0 < 7.5 from Triton 25.03)."""
    config = onnx_config(extra="instance_group [ { kind: KIND_GPU } ]")

    assert check_model_config(config, instance_type="ml.p3.2xlarge", triton_release="24.09") == []
    assert only_message(check_model_config(config, instance_type="ml.p3.2xlarge", triton_release="25.09")) == (
        "instance group m_0 of model m has kind KIND_GPU but no GPUs are available (the GPU of instance type "
        "ml.p3.2xlarge has compute capability 7.0, below Triton 25.09's minimum 7.5)"
    )


def test_tensorrt_needs_a_gpu_instance_type():
    config = onnx_config().replace("onnxruntime_onnx", "tensorrt_plan")

    assert check_model_config(config, instance_type="ml.g6.xlarge") == []
    problem = check_model_config(config, instance_type="ml.c6i.xlarge")[0]
    assert (problem.rule, problem.field) == ("gpu-platform", "platform")
    assert "platform tensorrt_plan needs a GPU but instance type ml.c6i.xlarge has none" in problem.message


def test_an_unknown_instance_type_is_refused_with_suggestions():
    with pytest.raises(
        UnknownInstanceTypeError, match=r"unknown instance type 'ml\.g5\.xlarg' \(did you mean ml\.g5\.xlarge"
    ):
        check_model_config(onnx_config(), instance_type="ml.g5.xlarg")


# ----------------------------------------------------------------------------------------------------
# Ensembles


def ensemble_config(name: str, steps: str, *, max_batch_size: int = 8, data_type: str = "TYPE_FP32") -> str:
    return f"""
    name: "{name}"
    platform: "ensemble"
    max_batch_size: {max_batch_size}
    input [ {{ name: "IN" data_type: {data_type} dims: [ 16 ] }} ]
    output [ {{ name: "OUT" data_type: {data_type} dims: [ 16 ] }} ]
    ensemble_scheduling {{ step [ {steps} ] }}
    """


def step(model: str, source: str = "IN", target: str = "OUT", version: int = -1) -> str:
    return (
        f'{{ model_name: "{model}" model_version: {version} input_map {{ key: "INPUT0" value: "{source}" }} '
        f'output_map {{ key: "OUTPUT0" value: "{target}" }} }}'
    )


def onnx_model(repo: Path, name: str, extra: str = "") -> None:
    # A real ONNX file matching the config: check opens model files (model_io, model_tree rules).
    write_model(repo, name, onnx_config(name, extra), {"1/": ""})
    (repo / name / "1" / "model.onnx").write_bytes(onnx_matching(onnx_config(name, extra)))


def ensemble_model(repo: Path, name: str, config: str) -> None:
    write_model(repo, name, config, {"1/": ""})


def test_a_two_step_ensemble_passes(tmp_path):
    onnx_model(tmp_path, "first")
    onnx_model(tmp_path, "second")
    ensemble_model(
        tmp_path, "pipeline", ensemble_config("pipeline", step("first", target="mid") + "," + step("second", "mid"))
    )

    assert lines(check_repository(tmp_path)) == []


def test_an_ensemble_of_an_ensemble_passes(tmp_path):
    onnx_model(tmp_path, "leaf")
    ensemble_model(tmp_path, "inner", ensemble_config("inner", step("leaf")))
    outer = ensemble_config("outer", step("inner")).replace('"INPUT0"', '"IN"').replace('"OUTPUT0"', '"OUT"')
    ensemble_model(tmp_path, "outer", outer)

    assert lines(check_repository(tmp_path)) == []


def test_an_ensemble_that_contains_itself_is_a_cycle(tmp_path):
    ensemble_model(
        tmp_path, "loop", ensemble_config("loop", step("loop").replace("INPUT0", "IN").replace("OUTPUT0", "OUT"))
    )

    assert (
        only_message(check_repository(tmp_path)) == "circular dependency between ensembles: loop -> ... -> loop -> loop"
    )


def test_an_ensemble_naming_an_unknown_model_is_refused(tmp_path):
    ensemble_model(
        tmp_path,
        "pipeline",
        ensemble_config("pipeline", step("missing_b", "IN", "MID") + "," + step("missing_a", "MID")),
    )

    problems = check_repository(tmp_path, configs_only=True)

    assert [(problem.model, problem.rule) for problem in problems] == [("pipeline", "ensemble-unknown-model")]
    assert problems[0].message == (
        "ensemble pipeline contains models that are not available or ambiguous: missing_a, missing_b"
    )


def test_data_types_must_agree_between_steps(tmp_path):
    onnx_model(tmp_path, "first")
    ensemble_model(tmp_path, "pipeline", ensemble_config("pipeline", step("first"), data_type="TYPE_INT32"))

    assert only_message(check_repository(tmp_path)) == (
        "in ensemble pipeline, ensemble tensor IN: inconsistent data type: TYPE_INT32 is inferred from model "
        "pipeline while TYPE_FP32 is inferred from model first"
    )


def test_every_model_input_must_be_mapped(tmp_path):
    onnx_model(tmp_path, "two_inputs", 'input [ { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]')
    ensemble_model(tmp_path, "pipeline", ensemble_config("pipeline", step("two_inputs")))

    assert only_message(check_repository(tmp_path)) == (
        "in ensemble pipeline, input INPUT1 in model two_inputs is not mapped to any ensemble tensors"
    )


def test_an_ensemble_of_a_broken_model_says_which_and_why(tmp_path):
    write_model(
        tmp_path, "broken", onnx_config("broken").replace("dims: [ 16 ] }", "dims: [ 0 ] }", 1), {"1/model.onnx": ""}
    )
    ensemble_model(tmp_path, "pipeline", ensemble_config("pipeline", step("broken")))

    problems = check_repository(tmp_path)

    assert [problem.model for problem in problems] == ["broken", "pipeline"]
    assert problems[1].message == (
        "ensemble 'pipeline' depends on 'broken' which has no loaded version. Model 'broken' loading failed with "
        f"error: {problems[0].message}"
    )


def test_a_stray_folder_in_a_composing_model_does_not_hide_the_ensemble_rules(tmp_path):
    """Triton only warns about a non-version folder, so the ensemble is still checked against the model."""
    onnx_model(tmp_path, "first")
    (tmp_path / "first" / "notes").mkdir()
    ensemble_model(tmp_path, "pipeline", ensemble_config("pipeline", step("first"), max_batch_size=16))

    problems = check_repository(tmp_path)

    assert [(problem.model, problem.rule) for problem in problems] == [
        ("first", "version-folder"),
        ("pipeline", "ensemble-tensors"),
    ]
    assert problems[1].message == (
        "ensemble pipeline allows maximum batch size 16, but it contains model first which only allows maximum "
        "batch size to be 8"
    )


def test_a_required_version_must_be_loaded_under_the_version_policy(tmp_path):
    onnx_model(tmp_path, "first")
    (tmp_path / "first" / "2").mkdir()
    (tmp_path / "first" / "2" / "model.onnx").write_bytes(onnx_matching(onnx_config("first")))
    ensemble_model(tmp_path, "pipeline", ensemble_config("pipeline", step("first", version=1)))

    # The default policy loads only the latest version (2).
    assert only_message(check_repository(tmp_path)) == (
        "ensemble 'pipeline' depends on 'first' whose required version 1 is not loaded."
    )


# ----------------------------------------------------------------------------------------------------
# Layout


def test_the_folder_name_must_match_the_model_name(tmp_path):
    write_model(tmp_path, "folder", onnx_config("model"), {"1/model.onnx": ""})

    problems = check_repository(tmp_path)

    assert lines(problems) == [
        "model: name: unexpected directory name 'folder' for model 'model', directory name must equal model name "
        "[name-matches-folder]"
    ]


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        ("latest", "folder 'latest' is not a numeric version folder: Triton ignores it"),
        ("01", "version folder '01' has leading zeros: Triton ignores it; rename it 1"),
    ],
)
def test_version_folders_must_be_plain_numbers(folder, expected, tmp_path):
    write_model(tmp_path, "m", onnx_config(), {"1/model.onnx": "", f"{folder}/model.onnx": ""})

    for configs_only in (True, False):
        problems = check_repository(tmp_path, configs_only=configs_only)
        assert [(p.field, p.rule) for p in problems] == [(f"{folder}/", "version-folder")]
        assert expected in problems[0].message


@pytest.mark.parametrize(
    ("platform_line", "expected_file"),
    [
        ('platform: "tensorrt_plan"', "model.plan"),
        ('platform: "onnxruntime_onnx"', "model.onnx"),
        ('backend: "python"', "model.py"),
        ('platform: "pytorch_libtorch"', "model.pt"),
        ('platform: "onnxruntime_onnx"\ndefault_model_filename: "detector.onnx"', "detector.onnx"),
    ],
)
def test_each_version_folder_needs_the_file_its_platform_expects(platform_line, expected_file, tmp_path):
    config = onnx_config().replace('platform: "onnxruntime_onnx"', platform_line)
    write_model(tmp_path, "m", config, {"1/": "", "2/other.bin": ""})

    problems = check_repository(tmp_path)

    assert [(problem.field, problem.rule) for problem in problems] == [
        (f"1/{expected_file}", "model-file"),
        (f"2/{expected_file}", "model-file"),
    ]
    assert problems[0].message.startswith(f"version folder 1/ has no {expected_file}: ")
    assert check_repository(tmp_path, configs_only=True) == []
    for version in ("1", "2"):
        path = tmp_path / "m" / version / expected_file
        path.write_bytes(onnx_matching(config) if expected_file.endswith(".onnx") else b"")
    assert check_repository(tmp_path) == []


def test_a_tensorrt_engine_per_compute_capability_is_looked_up_for_the_target_gpu(tmp_path):
    config = (
        onnx_config().replace("onnxruntime_onnx", "tensorrt_plan")
        + 'cc_model_filenames { key: "8.6" value: "a10g.plan" }'
    )
    write_model(tmp_path, "m", config, {"1/a10g.plan": ""})

    assert check_repository(tmp_path, instance_type="ml.g5.xlarge") == []
    assert [p.field for p in check_repository(tmp_path, instance_type="ml.g4dn.xlarge")] == ["1/model.plan"]


def test_a_model_needs_a_version_folder_unless_only_configs_are_checked(tmp_path):
    write_model(tmp_path, "m", onnx_config())

    assert only_message(check_repository(tmp_path)).startswith(
        "at least one version must be available under the version policy of model 'm'"
    )
    assert check_repository(tmp_path, configs_only=True) == []


def test_an_ensemble_needs_a_version_folder_but_no_model_file(tmp_path):
    onnx_model(tmp_path, "first")
    write_model(tmp_path, "pipeline", ensemble_config("pipeline", step("first")))

    assert [(p.model, p.field) for p in check_repository(tmp_path)] == [("pipeline", "1/")]
    (tmp_path / "pipeline" / "1").mkdir()
    assert check_repository(tmp_path) == []


def test_label_files_and_python_environments_must_ship_with_the_model(tmp_path):
    config = """
    name: "m"
    backend: "python"
    input [ { name: "x" data_type: TYPE_STRING dims: [ -1 ] } ]
    output [ { name: "y" data_type: TYPE_STRING dims: [ -1 ] label_filename: "labels.txt" } ]
    parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }
    """
    write_model(tmp_path, "m", config, {"1/model.py": ""})

    assert [p.field for p in check_repository(tmp_path)] == [
        "output[0].label_filename",
        "parameters.EXECUTION_ENV_PATH",
    ]
    (tmp_path / "m" / "labels.txt").write_text("cat\n")
    (tmp_path / "m" / "env.tar.gz").write_bytes(conda_pack_like())  # a real packed environment
    assert check_repository(tmp_path) == []


def test_symbolic_links_are_refused(tmp_path):
    repo = tmp_path / "repo"
    onnx_model(repo, "m")
    (tmp_path / "real.onnx").write_text("")
    os.symlink(tmp_path / "real.onnx", repo / "m" / "1" / "linked.onnx")
    os.symlink(repo / "m", repo / "alias")

    problems = check_repository(repo)

    assert [(problem.model, problem.field, problem.rule) for problem in problems] == [
        ("(repository)", "alias", "no-symlinks"),
        ("m", "m/1/linked.onnx", "no-symlinks"),
    ]
    assert f"is a symbolic link (to {tmp_path / 'real.onnx'})" in problems[1].message


def test_a_config_at_the_repository_root_is_refused(tmp_path):
    onnx_model(tmp_path, "m")
    (tmp_path / "config.pbtxt").write_text(onnx_config())

    assert lines(check_repository(tmp_path))[0].startswith(
        "(repository): config.pbtxt: config.pbtxt at the repository root: SageMaker's Triton refuses to start"
    )


def test_a_folder_without_config_is_refused(tmp_path):
    onnx_model(tmp_path, "m")
    (tmp_path / ".ipynb_checkpoints").mkdir()

    assert [(p.model, p.rule) for p in check_repository(tmp_path)] == [(".ipynb_checkpoints", "layout-config")]


def test_an_empty_repository_is_refused(tmp_path):
    assert [p.rule for p in check_repository(tmp_path)] == ["layout-config"]


def test_a_path_that_is_not_a_folder_raises(tmp_path):
    with pytest.raises(InvalidModelError, match=r"model repository .*missing is not a folder"):
        check_repository(tmp_path / "missing")


def test_a_problem_prints_on_one_line():
    problem = Problem("m", "input[0]", "model input 'a\nb' must specify 'dims'", "io")

    assert str(problem) == "m: input[0]: model input 'a b' must specify 'dims' [io]"


# ----------------------------------------------------------------------------------------------------
# The TensorRT backend's own rules (triton-inference-server/tensorrt_backend)

TRT_MODEL = """
name: "bert"
platform: "tensorrt_plan"
max_batch_size: 8
input [ {{ name: "input_ids" data_type: {dtype} dims: [ -1 ] }} ]
output [ {{ name: "logits" data_type: TYPE_FP32 dims: [ 2 ] }} ]
{extra}
"""


def trt_config(dtype: str = "TYPE_INT32", extra: str = "") -> str:
    return TRT_MODEL.format(dtype=dtype, extra=extra)


@pytest.mark.parametrize("kind", ["KIND_CPU", "KIND_MODEL"])
def test_tensorrt_refuses_instances_that_are_not_gpu_instances(kind):
    """tensorrt_backend src/instance_state.cc: `Kind() != TRITONSERVER_INSTANCEGROUPKIND_GPU` -> this error."""
    problems = check_model_config(trt_config(extra=f"instance_group [ {{ kind: {kind} }} ]"), model_name="bert")

    assert lines(problems) == [
        f"bert: instance_group[0].kind: unable to load model 'bert', TensorRT backend supports only GPU device "
        f"(instance group bert_0 has kind {kind}; use KIND_GPU, or onnxruntime_onnx for CPU serving) [tensorrt-device]"
    ]


def test_tensorrt_kind_auto_is_a_cpu_instance_on_a_cpu_instance_type():
    """NormalizeInstanceGroup turns KIND_AUTO into KIND_CPU without GPUs; then the backend refuses it."""
    config = trt_config(extra="instance_group [ { kind: KIND_AUTO } ]")

    assert check_model_config(config, instance_type="ml.g5.xlarge") == []
    rules = {problem.rule for problem in check_model_config(config, instance_type="ml.c5.xlarge")}
    assert "tensorrt-device" in rules


@pytest.mark.parametrize(
    ("dtype", "release", "expected"),
    [
        # ConvertDataTypeToTrtType of each release branch (serving_facts/releases.py cites it).
        ("TYPE_INT64", "23.12", "unsupported datatypeTYPE_INT64 for input 'input_ids' for model 'bert'"),
        ("TYPE_INT64", "24.03", "unsupported datatypeTYPE_INT64 for input 'input_ids' for model 'bert'"),
        ("TYPE_INT64", "24.05", None),
        ("TYPE_INT64", "24.09", None),
        ("TYPE_INT64", None, None),  # some release takes it: not judged without --triton-release
        ("TYPE_BF16", "24.05", "unsupported datatype TYPE_BF16 for input 'input_ids' for model 'bert'"),
        ("TYPE_BF16", "24.09", None),
        ("TYPE_INT32", "23.12", None),
        ("TYPE_FP64", None, "unsupported datatype TYPE_FP64 for input 'input_ids' for model 'bert'"),
        ("TYPE_FP64", "26.05", "unsupported datatype TYPE_FP64 for input 'input_ids' for model 'bert'"),
        ("TYPE_STRING", "24.09", "unsupported datatype TYPE_STRING for input 'input_ids' for model 'bert'"),
        ("TYPE_UINT16", None, "unsupported datatype TYPE_UINT16 for input 'input_ids' for model 'bert'"),
    ],
)
def test_tensorrt_data_types_are_those_of_the_releases_backend(dtype, release, expected):
    problems = check_model_config(trt_config(dtype), model_name="bert", triton_release=release)

    if expected is None:
        assert lines(problems) == []
    else:
        assert [problem.rule for problem in problems] == ["tensorrt-data-type"]
        assert only_message(problems).startswith(expected + " (")


def test_other_platforms_keep_every_data_type():
    config = trt_config("TYPE_FP64").replace("tensorrt_plan", "onnxruntime_onnx")

    assert check_model_config(config, model_name="bert", triton_release="23.12") == []


def test_an_unknown_release_is_refused_by_the_cli(tmp_path, capsys):
    from model_build import cli

    write_model(tmp_path, "bert", trt_config())

    assert cli.main(["check", str(tmp_path), "--configs-only", "--triton-release", "99.99"]) == 1
    assert "--triton-release: unknown Triton release '99.99'" in capsys.readouterr().err
