"""One exception hierarchy: `endpoint_client.cli.main` prints these as `ERROR: <message>` and exits 1.

They subclass model_build's so a pipeline step that calls both catches one base class.
"""

from __future__ import annotations

from model_build.errors import ToolError


class EndpointClientError(ToolError):
    """A problem the user can fix: bad inputs, a missing tool, an endpoint that refused a request."""


class InvalidInputError(EndpointClientError, ValueError):
    """An input file, tensor spec or preset that cannot be turned into a request."""


class EndpointError(EndpointClientError):
    """The endpoint answered with an error: carries the model and the server's own message."""

    def __init__(self, model: str, message: str, *, status: int | None = None, code: str | None = None) -> None:
        self.model = model
        self.server_message = message
        self.status = status
        self.code = code
        where = f"HTTP {status}: " if status is not None else f"{code}: " if code else ""
        super().__init__(f"model {model!r}: {where}{message}")


class EndpointUnreachableError(EndpointClientError):
    """Nothing answered at the endpoint's address (connection refused, timeout, DNS)."""


class ModelNotReadyError(EndpointError):
    """SageMaker's ModelNotReadyException: a multi-model endpoint is still loading the model; retry later."""


class LocalEndpointError(EndpointClientError):
    """The local Triton endpoint could not be prepared or started (the message carries the server log tail)."""
