"""The container environment: SageMaker's limits from botocore's model, and the variables the typed fields own.

Sources: botocore sagemaker (CreateModel ContainerDefinition.Environment): shapes EnvironmentMap (at most 100
entries), EnvironmentKey (pattern [a-zA-Z_][a-zA-Z0-9_]*, at most 1024), EnvironmentValue (at most 1024); the
member's documentation: "The maximum length of all keys and values in the map, combined, is 32 KB".
"""

from __future__ import annotations

import botocore.session
import pytest
from config_edits import refusal, set_path, shipped, write

from stacks.container_environment import container_environment
from stage_config import api_limits
from stage_config.container import OWNED_VARIABLES, ContainerSettings, typed_environment

SAGEMAKER = botocore.session.get_session().get_service_model("sagemaker")
AUTOSCALING = botocore.session.get_session().get_service_model("application-autoscaling")


def test_limits_are_botocores():
    """Each constant of api_limits is what botocore's own session states for its shape."""
    for service, model, shape, constant in [
        ("sagemaker", SAGEMAKER, "EnvironmentMap", api_limits.MAX_ENVIRONMENT_VARIABLES),
        ("sagemaker", SAGEMAKER, "EnvironmentKey", api_limits.MAX_ENVIRONMENT_KEY_BYTES),
        ("sagemaker", SAGEMAKER, "EnvironmentValue", api_limits.MAX_ENVIRONMENT_VALUE_BYTES),
        ("sagemaker", SAGEMAKER, "EndpointName", api_limits.MAX_ENDPOINT_NAME_LENGTH),
        ("sagemaker", SAGEMAKER, "VariantName", api_limits.MAX_VARIANT_NAME_LENGTH),
        ("sagemaker", SAGEMAKER, "InferenceComponentName", api_limits.MAX_INFERENCE_COMPONENT_NAME_LENGTH),
        ("sagemaker", SAGEMAKER, "Subnets", api_limits.MAX_SUBNETS),
        ("sagemaker", SAGEMAKER, "VpcSecurityGroupIds", api_limits.MAX_SECURITY_GROUPS),
        ("application-autoscaling", AUTOSCALING, "ScheduledActionName", api_limits.MAX_SCHEDULED_ACTION_NAME_LENGTH),
        ("application-autoscaling", AUTOSCALING, "ResourceIdMaxLen1600", api_limits.MAX_SCHEDULE_LENGTH),
    ]:
        assert model.shape_for(shape).metadata["max"] == constant, (service, shape)
    assert api_limits.ENVIRONMENT_KEY.pattern == SAGEMAKER.shape_for("EnvironmentKey").metadata["pattern"]
    assert api_limits.ENDPOINT_NAME.pattern == SAGEMAKER.shape_for("EndpointName").metadata["pattern"]
    operation = AUTOSCALING.operation_model("PutScheduledAction").input_shape.members
    assert operation["Schedule"].name == "ResourceIdMaxLen1600"


def _dev_with_environment(tmp_path, environment: dict, **container) -> str:
    document = set_path(shipped(), "endpoints.1.container", {"extra_environment": environment, **container})
    return refusal(write(tmp_path, document, "dev"))


@pytest.mark.parametrize("variable", sorted(OWNED_VARIABLES))
def test_owned_variables_are_a_config_error_not_a_synth_traceback(tmp_path, variable):
    """The typed fields, the default model (per mode), SAGEMAKER_MULTI_MODEL (SageMaker's, multi-model) and
    SAGEMAKER_TRITON_PING_MODE (overwritten by Triton's docker/sagemaker/serve) are not extra variables."""
    message = _dev_with_environment(tmp_path, {variable: "1"})
    assert f"endpoints[1].container.extra_environment: extra_environment sets ['{variable}']" in message


@pytest.mark.parametrize("key", ["1ABC", "MY-VAR", "MY VAR", "ÄRGER", "A=B", "", "A\n"])
def test_keys_outside_sagemakers_pattern_are_refused(tmp_path, key):
    """botocore sagemaker EnvironmentKey: [a-zA-Z_][a-zA-Z0-9_]* (a whole-value match)."""
    message = _dev_with_environment(tmp_path, {key: "x"})
    assert "are not environment variable names ([a-zA-Z_][a-zA-Z0-9_]*, botocore sagemaker" in message, message


def test_values_are_counted_in_utf8_bytes(tmp_path):
    """EnvironmentValue: at most 1024 (bytes, the API reference says): 400 'é' are 800 bytes, 600 are 1200."""
    assert ContainerSettings(extra_environment={"A": "é" * 512}).extra_environment
    message = _dev_with_environment(tmp_path, {"A": "é" * 600})
    assert "the values of ['A'] are over 1024 bytes" in message
    message = _dev_with_environment(tmp_path, {}, additional_args="é" * 600)
    assert "endpoints[1].container.additional_args: is 1200 bytes in UTF-8; SageMaker allows 1024" in message


def test_the_count_includes_the_variables_the_typed_fields_set(tmp_path):
    """EnvironmentMap: at most 100 entries in all. The typed fields set some (log verbosity always), and a
    single-model endpoint adds SAGEMAKER_TRITON_DEFAULT_MODEL_NAME: 98 extra variables are too many there."""
    extra = {f"V{i}": "1" for i in range(98)}
    message = _dev_with_environment(tmp_path, extra, thread_count=4)
    assert "endpoints[1].container.extra_environment: the container would get 101 variables (3 set by" in message


def test_the_total_includes_the_typed_fields(tmp_path):
    """ContainerDefinition.Environment: "The maximum length of all keys and values in the map, combined, is 32 KB"."""
    extra = {f"V{i:02d}": "x" * 1000 for i in range(32)} | {"V32": "x" * 619}
    assert sum(len(k) + len(v) for k, v in extra.items()) == 32_718  # under 32768 on its own
    message = _dev_with_environment(tmp_path, extra)
    assert "the container's variables total" in message and "SageMaker allows 32768 per container" in message


def test_a_valid_environment_reaches_the_container():
    settings = ContainerSettings(thread_count=4, extra_environment={"OMP_NUM_THREADS": "1", "_X": ""})
    environment = container_environment(settings)
    assert environment == {**typed_environment(settings), "OMP_NUM_THREADS": "1", "_X": ""}
    assert environment["SAGEMAKER_TRITON_THREAD_COUNT"] == "4"
