"""`models:` schema for ensembles and Python execution environments (serving_facts/settings.py), and the
locked-requirements rule (model_build/requirements_lock.py)."""

from __future__ import annotations

import pytest
from ensemble_fixtures import pipe_settings
from pydantic import ValidationError

from model_build.errors import InvalidModelError
from model_build.requirements_lock import read_locked_requirements, requirements_problems
from serving_facts.settings import MAX_ENSEMBLE_STEPS, TENSOR_NAME_PATTERN, ModelSettings

STEPS = [
    {"model": "pre", "input_map": {"image": "image"}, "output_map": {"pixels": "pixels"}},
    {"model": "cnn", "input_map": {"input": "pixels"}, "output_map": {"logits": "logits"}},
    {"model": "post", "input_map": {"logits": "logits"}, "output_map": {"labels": "labels"}},
]


def ensemble(**extra) -> ModelSettings:
    return ModelSettings.model_validate(
        {"name": "pipe", "platform": "ensemble", "max_batch_size": 0, "ensemble": {"steps": STEPS}, **extra}
    )


def python_model(environment: dict, path: str = "models/pre") -> ModelSettings:
    return ModelSettings.model_validate(
        {"name": "pre", "platform": "python", "source": {"path": path}, "environment": environment}
    )


def test_ensemble_inputs_and_outputs_follow_the_steps():
    """Triton ensembles (server docs/user_guide/architecture.md, "Ensemble Models"): the ensemble's inputs
    feed the first steps and its outputs come from the last; here derived as tensors read by no step
    before being written (inputs) and written but read by none (outputs)."""
    settings = ensemble()
    assert settings.ensemble.inputs == ["image"]
    assert settings.ensemble.outputs == ["labels"]
    assert settings.composing_models == ["pre", "cnn", "post"]
    assert settings.needs_gpu_build is False and settings.uses_gpu is False
    assert settings.source is None


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"source": {"path": "x.onnx"}}, "'source'"),
        ({"instance_groups": [{"count": 1, "kind": "KIND_CPU"}]}, "'instance_groups'"),
        ({"dynamic_batching": {"enabled": False}}, "'dynamic_batching'"),
        ({"tensorrt": {"precision": "fp32"}}, "'tensorrt'"),
        ({"warmup": True}, "'warmup'"),
    ],
)
def test_ensemble_refuses_what_does_not_apply(extra, named):
    """core src/model_config_utils.cc ValidateEnsembleSchedulingConfig: "instance group should not be
    specified for ensemble", "model_warmup can not be specified for ensemble"; model_config.proto puts
    dynamic_batching and ensemble_scheduling in the same `oneof scheduling_choice`; an ensemble has no
    model file (no source, no TensorRT engine)."""
    with pytest.raises(ValidationError, match=named):
        ensemble(**extra)


def test_ensemble_needs_steps_and_other_platforms_refuse_them():
    """model_config.proto ModelEnsembling: `repeated Step step`; Triton: "must specify 'step' for ensemble"."""
    with pytest.raises(ValidationError, match="needs 'ensemble"):
        ModelSettings.model_validate({"name": "pipe", "platform": "ensemble"})
    with pytest.raises(ValidationError, match="at least 1 item"):
        ModelSettings.model_validate({"name": "pipe", "platform": "ensemble", "ensemble": {"steps": []}})
    with pytest.raises(ValidationError, match="applies to platform 'ensemble' only"):
        ModelSettings.model_validate(
            {"name": "m", "source": {"path": "m.onnx"}, "ensemble": {"steps": STEPS}, "platform": "onnxruntime_onnx"}
        )
    with pytest.raises(ValidationError, match="needs 'source'"):
        ModelSettings.model_validate({"name": "m", "platform": "onnxruntime_onnx"})


def test_steps_are_bounded_and_maps_are_not_empty():
    """Triton refuses a step without input_map or output_map ("must specify 'input_map' in step N",
    model_config_utils.cc BuildEnsembleGraph); the step count is ours (no Triton limit)."""
    step = {"model": "a", "input_map": {"x": "x"}, "output_map": {"y": "y"}}
    with pytest.raises(ValidationError, match=f"at most {MAX_ENSEMBLE_STEPS} items"):
        ModelSettings.model_validate(
            {"name": "p", "platform": "ensemble", "ensemble": {"steps": [step] * (MAX_ENSEMBLE_STEPS + 1)}}
        )
    with pytest.raises(ValidationError, match="input_map"):
        ModelSettings.model_validate(
            {"name": "p", "platform": "ensemble", "ensemble": {"steps": [{**step, "input_map": {}}]}}
        )


def test_a_tensor_is_written_by_one_step_only():
    """core model_config_utils.cc BuildEnsembleGraph: "ensemble tensor '<t>' can appear in an output map only
    once"."""
    steps = [
        {"model": "a", "input_map": {"x": "x"}, "output_map": {"y": "t"}},
        {"model": "b", "input_map": {"x": "x"}, "output_map": {"y": "t"}},
    ]
    with pytest.raises(ValidationError, match=r"\['t'\] are written by several steps"):
        ModelSettings.model_validate({"name": "p", "platform": "ensemble", "ensemble": {"steps": steps}})


def test_environment_is_for_python_models_inside_the_source_folder():
    """python_backend README, "Creating Custom Execution Environments": EXECUTION_ENV_PATH with
    $$TRITON_MODEL_DIRECTORY "must not escape from the $$TRITON_MODEL_DIRECTORY"; the model folder is
    what ships, so the file must be in the source folder."""
    assert python_model({"requirements": "models/pre/requirements.txt"}).environment.requirements
    assert python_model({"archive": "models/pre/env/conda.tar.gz"}).environment.archive
    with pytest.raises(ValidationError, match="inside the model's source folder 'models/pre'"):
        python_model({"requirements": "models/other/requirements.txt"})
    with pytest.raises(ValidationError, match="inside the model's source folder"):
        python_model({"archive": "models/pre/../x.tar.gz"})
    with pytest.raises(ValidationError, match=r"top-level requirements\.txt"):
        python_model({"requirements": "models/pre/deps/locked.txt"})
    with pytest.raises(ValidationError, match=r"\.tar\.gz file"):
        python_model({"archive": "models/pre/env.zip"})
    with pytest.raises(ValidationError, match="exactly one of 'requirements' or 'archive'"):
        python_model({"requirements": "models/pre/requirements.txt", "archive": "models/pre/e.tar.gz"})
    with pytest.raises(ValidationError, match="applies to platform 'python' only"):
        ModelSettings.model_validate(
            {
                "name": "m",
                "platform": "onnxruntime_onnx",
                "source": {"path": "m/model.onnx"},
                "environment": {"requirements": "m/requirements.txt"},
            }
        )


# Real-length digests (sha256: 64 hex digits), as pip-compile writes them.
NUMPY_HASH = "sha256:" + "0123abcd" * 8
PILLOW_HASH = "sha256:" + "deadbeef" * 8
LOCKED = f"""\
# generated by pip-compile
numpy==1.26.4 \\
    --hash={NUMPY_HASH}
pillow==11.0.0 --hash={PILLOW_HASH}  # imaging
"""


def test_locked_requirements_are_accepted():
    """The form `pip-compile --generate-hashes` writes: name==version with `\\` continued --hash options."""
    found, problems = requirements_problems(LOCKED)
    assert problems == []
    assert [(r.name, r.version, r.hashes) for r in found] == [
        ("numpy", "1.26.4", (NUMPY_HASH,)),
        ("pillow", "11.0.0", (PILLOW_HASH,)),
    ]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("pillow>=10", "is not locked"),
        ("pillow", "is not locked"),
        ("pillow==11.*", "is not locked"),
        ("-r other.txt", "options"),
        ("--index-url https://example.com/simple", "options"),
        ("-e ./src", "options"),
        ("pillow @ https://example.com/p.whl", "URLs and paths"),
        ("pillow==11.0.0; python_version > '3.8'", "environment markers"),
    ],
)
def test_unlocked_lines_are_refused_naming_the_line(line, why):
    """The environment is content-addressed on the file's bytes, so the file alone must fix what is installed."""
    _, problems = requirements_problems(f"numpy==1.26.4\n{line}\n")
    assert len(problems) == 1
    assert problems[0].startswith("line 2: ") and why in problems[0]


def test_numpy_is_required_and_hashes_are_all_or_none():
    """python_backend src/resources/triton_python_backend_utils.py: `import numpy as np`, run by the stub in
    the environment's interpreter; pip's hash-checking mode needs a hash on every requirement."""
    _, problems = requirements_problems("pillow==11.0.0\n")
    assert any("numpy is not listed" in p for p in problems)
    _, problems = requirements_problems(f"numpy==1.26.4 --hash={NUMPY_HASH}\npillow==11.0.0\n")
    assert any("hash-checking mode" in p and "pillow (line 2)" in p for p in problems)
    _, problems = requirements_problems("numpy==1.26.4\nNumPy==1.26.4\n")
    assert any("listed again" in p for p in problems)


def test_reading_a_file_names_it(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("numpy==1.26.4\npillow>=10\n")
    with pytest.raises(InvalidModelError, match=r"requirements.txt: line 2: 'pillow>=10' is not locked"):
        read_locked_requirements(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(InvalidModelError, match="not UTF-8"):
        read_locked_requirements(path)


# --- the ensemble interface and tensor names ---------------------------------------------------------


def test_a_one_letter_typo_is_refused_not_made_an_input():
    document = pipe_settings()
    document["ensemble"]["steps"][2]["input_map"] = {"logits": "logit"}
    with pytest.raises(ValidationError) as error:
        ModelSettings.model_validate(document)
    assert (
        "steps[2].input_map reads 'logit', which no step writes, so it would become an ensemble input; steps[1] "
        "writes 'logits'"
    ) in str(error.value)


def test_a_declared_interface_must_be_what_the_steps_make():
    document = pipe_settings(inputs=["image"], outputs=["labels"])
    settings = ModelSettings.model_validate(document)
    assert (settings.ensemble.inputs, settings.ensemble.outputs) == (["image"], ["labels"])
    assert ModelSettings.model_validate(settings.model_dump(mode="json")) == settings  # the build's document
    document["ensemble"]["steps"][2]["input_map"] = {"logits": "logit"}
    with pytest.raises(ValidationError, match=r"the steps also make \['logit'\] an ensemble input"):
        ModelSettings.model_validate(document)
    # Declared on purpose, an input near a written tensor is accepted, and the declared order is the config's.
    document["ensemble"]["inputs"] = ["logit", "image"]
    document["ensemble"]["outputs"] = ["labels", "logits"]
    assert ModelSettings.model_validate(document).ensemble.inputs == ["logit", "image"]


def test_undeclared_ensembles_dump_as_before():
    """No `inputs`/`outputs` key appears in the build document of an ensemble that does not declare them, so
    its artifact digest is unchanged."""
    assert set(ModelSettings.model_validate(pipe_settings()).model_dump(mode="json")["ensemble"]) == {"steps"}


@pytest.mark.parametrize("name", ["a\x00b", "a\nb", " ", "\t", "x y", "\x7f"])
def test_tensor_names_without_control_characters_or_whitespace(name):
    document = pipe_settings()
    document["ensemble"]["steps"][0]["input_map"] = {"image": name}
    with pytest.raises(ValidationError) as error:
        ModelSettings.model_validate(document)
    assert f"String should match pattern '{TENSOR_NAME_PATTERN}'" in str(error.value)
