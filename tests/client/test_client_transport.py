"""How SageMaker runtime errors (botocore's parsed error responses) become EndpointError."""

from __future__ import annotations

from endpoint_client.errors import ModelNotReadyError
from endpoint_client.transport import _endpoint_error


def response(code: str, message: str, status: int, **extra: object) -> dict:
    return {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}, **extra}


def test_validation_error_keeps_the_services_message() -> None:
    error = _endpoint_error("endpoint nope", response("ValidationError", "Endpoint nope of account 1 not found.", 400))

    assert str(error) == "model 'endpoint nope': HTTP 400: Endpoint nope of account 1 not found."
    assert error.code == "ValidationError"
    assert not isinstance(error, ModelNotReadyError)


def test_model_not_ready_is_its_own_type() -> None:
    error = _endpoint_error("bert.tar.gz on endpoint mme", response("ModelNotReadyException", "loading", 429))

    assert isinstance(error, ModelNotReadyError)
    assert error.status == 429


def test_model_error_reports_the_containers_status_and_message() -> None:
    error = _endpoint_error(
        "add_sub on endpoint e",
        response(
            "ModelError",
            'Received client error (400) from primary with message "..."',
            424,
            OriginalStatusCode=400,
            OriginalMessage='{"error":"inference request batch-size must be <= 8 for \'add_sub\'"}',
        ),
    )

    assert (
        str(error) == "model 'add_sub on endpoint e': HTTP 400: inference request batch-size must be <= 8 for 'add_sub'"
    )


def test_model_error_without_the_original_keeps_the_services_text() -> None:
    error = _endpoint_error("m", response("ModelError", "Received server error (500) from primary", 424))

    assert str(error) == "model 'm': HTTP 424: Received server error (500) from primary"
