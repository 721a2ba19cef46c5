"""Invoke Triton models on SageMaker endpoints, and serve a packaged model locally as SageMaker would.

Library: `EndpointClient` (numpy in, numpy out), `LocalEndpoint` (a real CPU Triton on 127.0.0.1).
CLI: `python -m endpoint_client invoke ...` and `python -m endpoint_client local ...`.
"""

from endpoint_client.client import EndpointClient, SmokeResult, smoke_test
from endpoint_client.codec import Encoding, decode_response, encode_request
from endpoint_client.errors import (
    EndpointClientError,
    EndpointError,
    InvalidInputError,
    LocalEndpointError,
    ModelNotReadyError,
)
from endpoint_client.retry import RetryPolicy

__all__ = [
    "Encoding",
    "EndpointClient",
    "EndpointClientError",
    "EndpointError",
    "InvalidInputError",
    "LocalEndpointError",
    "ModelNotReadyError",
    "RetryPolicy",
    "SmokeResult",
    "decode_response",
    "encode_request",
    "smoke_test",
]
