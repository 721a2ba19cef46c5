"""The `EXECUTION_ENV_PATH` parameter of a python model with `environment:` in the stage config.

python_backend README ("Creating Custom Execution Environments"): the model's config names its
environment with `parameters { key: "EXECUTION_ENV_PATH" value { string_value: "..." } }`, and
`$$TRITON_MODEL_DIRECTORY` is replaced by the model's folder (src/python_be.cc). The packed
environment lands at `<model folder>/python_env.tar.gz` (model_build.python_env, through `package
--environment-python`); a prebuilt archive is used where it lies in the source folder.

`ensure_execution_env` adds the parameter to the user's config.pbtxt (appended as text, so the
user's comments and layout stay) or verifies the one already there; another value is refused.
"""

from __future__ import annotations

from pathlib import Path

from model_build.atomic import write_atomically
from model_build.errors import InvalidModelError, ModelBuildError
from serving_facts.settings import PACKED_ENVIRONMENT_NAME, ModelSettings, path_within

PARAMETER = "EXECUTION_ENV_PATH"
# model_build.check is imported in the functions that use it: it loads tritonclient.grpc (numpy, ml_dtypes,
# grpc), about 0.3 s, and every synth imports this module (bench/README.md, "Synth time").


def execution_env_value(settings: ModelSettings) -> str | None:
    """The parameter's value for this model, or None when it declares no environment."""
    environment = settings.environment
    if environment is None or settings.source is None or settings.source.path is None:
        return None
    from model_build.check.environment import MODEL_DIRECTORY_VARIABLE

    if environment.requirements is not None:
        return f"{MODEL_DIRECTORY_VARIABLE}/{PACKED_ENVIRONMENT_NAME}"
    inside = path_within(settings.source.path, environment.path)
    return f"{MODEL_DIRECTORY_VARIABLE}/{inside}"


def parameter_block(value: str) -> str:
    return f'\nparameters {{\n  key: "{PARAMETER}"\n  value {{ string_value: "{value}" }}\n}}\n'


def with_execution_env(text: str, value: str, shown: str) -> tuple[str, bool]:
    """(config text holding the parameter with `value`, whether it was added); refuses another value."""
    from model_build.check.schema import parse_config

    config, problems = parse_config(text, model=shown, source=shown)
    if config is None:
        raise InvalidModelError("\n".join(str(problem) for problem in problems))
    if PARAMETER in config.parameters:
        current = config.parameters[PARAMETER].string_value
        if current != value:
            raise InvalidModelError(
                f"{shown}: parameters {PARAMETER} is {current!r}, but the stage config's environment: needs "
                f"{value!r}; remove the parameter (model_build config adds it) or make them agree"
            )
        return text, False
    updated = text + ("" if text.endswith("\n") or not text else "\n") + parameter_block(value)
    checked, problems = parse_config(updated, model=shown, source=shown)
    if checked is None or checked.parameters[PARAMETER].string_value != value:
        raise InvalidModelError(f"{shown}: could not add {PARAMETER} to it: {problems}")
    return updated, True


def ensure_execution_env(model_dir: Path, settings: ModelSettings) -> str | None:
    """Add or verify EXECUTION_ENV_PATH in model_dir/config.pbtxt; returns what was done (None: nothing)."""
    value = execution_env_value(settings)
    if value is None:
        return None
    from model_build.model_tree import read_config_text, writable_model_folder

    writable_model_folder(Path(model_dir))  # a linked model folder would carry the write outside the repository
    config = Path(model_dir) / "config.pbtxt"
    try:
        text = read_config_text(config)  # a regular file only: no FIFO to wait on, no link to write through
    except FileNotFoundError:
        raise ModelBuildError(
            f"{config}: no config.pbtxt; a python model's folder (its source.path) holds its own config"
        ) from None
    updated, added = with_execution_env(text, value, str(config))
    if added:
        write_atomically(config, updated.encode("utf-8"))
        return f"added {PARAMETER} {value} to {config}"
    return f"verified {PARAMETER} {value} in {config}"
