"""Send an encoded request to an endpoint: SageMaker runtime (boto3) or a local Triton SageMaker service.

Both answer with the reply's body and Content-Type, or raise EndpointError / ModelNotReadyError
naming the model and carrying the server's own message.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

from endpoint_client.codec import EncodedRequest, error_message
from endpoint_client.errors import (
    EndpointClientError,
    EndpointError,
    EndpointUnreachableError,
    InvalidInputError,
    ModelNotReadyError,
)
from endpoint_client.limits import MAX_PAYLOAD_BYTES

TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
# InvokeEndpoint's InferenceComponentName travels as this header; its name rule is the API's
# (botocore sagemaker-runtime model: InferenceComponentHeader, max 63, the pattern below).
INFERENCE_COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"
INFERENCE_COMPONENT_NAME = re.compile(r"[a-zA-Z0-9](?:[-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?")


@dataclass(frozen=True)
class Reply:
    body: bytes
    content_type: str | None


class Transport(Protocol):
    def send(
        self, request: EncodedRequest, *, target_model: str | None = None, inference_component: str | None = None
    ) -> Reply: ...

    def describe(self, target_model: str | None) -> str:
        """How errors name the model: the TargetModel, else the endpoint."""
        ...


class SageMakerTransport:
    """`sagemaker-runtime` `invoke_endpoint`; `TargetModel` routes a multi-model endpoint's request."""

    def __init__(
        self, endpoint_name: str, *, client: Any = None, region: str | None = None, model_name: str | None = None
    ) -> None:
        if client is None:
            import boto3  # only this transport needs it; `invoke --url` works without AWS configuration
            from botocore.exceptions import BotoCoreError

            try:
                client = boto3.client("sagemaker-runtime", region_name=region)
            except BotoCoreError as error:  # NoRegionError above all
                raise EndpointClientError(
                    f"endpoint {endpoint_name}: {error} (give --region or set AWS_REGION)"
                ) from error
        self.endpoint_name = endpoint_name
        self.client = client
        self.model_name = model_name  # only for messages: the model a single-model endpoint serves

    def describe(self, target_model: str | None) -> str:
        model = target_model or self.model_name
        return f"{model} on endpoint {self.endpoint_name}" if model else f"endpoint {self.endpoint_name}"

    def send(
        self, request: EncodedRequest, *, target_model: str | None = None, inference_component: str | None = None
    ) -> Reply:
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs: dict[str, Any] = {
            "EndpointName": self.endpoint_name,
            "Body": request.body,
            "ContentType": request.content_type,
        }
        if target_model:
            kwargs["TargetModel"] = target_model
        if inference_component:
            kwargs["InferenceComponentName"] = inference_component
        model = self.describe(target_model or inference_component)
        try:
            response = self.client.invoke_endpoint(**kwargs)
        except ClientError as error:
            raise _endpoint_error(model, error.response) from error
        except BotoCoreError as error:  # no credentials, no region, connection refused...
            raise EndpointError(model, str(error)) from error
        body = response["Body"].read(MAX_PAYLOAD_BYTES + 1)  # the service caps replies; never trust that blindly
        if len(body) > MAX_PAYLOAD_BYTES:
            raise EndpointError(model, f"the reply is over {MAX_PAYLOAD_BYTES} bytes, SageMaker's limit; not read")
        return Reply(body, response.get("ContentType"))


def _endpoint_error(model: str, response: dict[str, Any]) -> EndpointError:
    error = response.get("Error", {})
    code = error.get("Code", "")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    message = error.get("Message", "") or code
    if code == "ModelNotReadyException":
        return ModelNotReadyError(model, message, status=status, code=code)
    if code == "ModelError":
        # The container's own reply is in OriginalMessage (Triton's {"error": "..."}): surface that.
        original = response.get("OriginalMessage") or error.get("OriginalMessage")
        original_status = response.get("OriginalStatusCode") or error.get("OriginalStatusCode")
        if original:
            message = error_message(str(original).encode())
        return EndpointError(model, message, status=int(original_status) if original_status else status, code=code)
    return EndpointError(model, message, status=status, code=code or None)


def local_route(target_model: str | None, inference_component: str | None) -> tuple[str, dict[str, str]]:
    """The path and routing headers of a request to a local endpoint's SageMaker API (also the load test's)."""
    headers = {}
    if target_model:
        path = f"/models/{urllib.parse.quote(target_model, safe='')}/invoke"
        headers[TARGET_MODEL_HEADER] = target_model
    else:
        path = "/invocations"
    if inference_component:
        headers[INFERENCE_COMPONENT_HEADER] = inference_component
    return path, headers


class LocalTransport:
    """POST to a Triton SageMaker service (`make local`, or Triton's container run by hand).

    Single-model: `/invocations`. With a target model: Triton's multi-model route
    `/models/<name>/invoke`, the one SageMaker itself calls after loading the model. An inference
    component goes in the header SageMaker's runtime API uses for it.
    """

    def __init__(self, url: str, *, timeout: float = 60.0, model_name: str | None = None) -> None:
        try:
            parsed = urllib.parse.urlsplit(url)
            parsed.port  # noqa: B018 - raises ValueError for a port that is not a number or out of range
        except ValueError:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidInputError(f"--url must look like http://127.0.0.1:8080, got {url[:200]!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.model_name = model_name  # only for messages: the model a single-model endpoint serves

    def describe(self, target_model: str | None) -> str:
        model = target_model or self.model_name
        return f"{model} at {self.url}" if model else f"default model at {self.url}"

    def send(
        self, request: EncodedRequest, *, target_model: str | None = None, inference_component: str | None = None
    ) -> Reply:
        headers = {"Content-Type": request.content_type}
        if target_model and not (target_model.isascii() and target_model.isprintable()):
            # http.client sends headers as Latin-1 and refuses line breaks: say so instead of a traceback
            raise InvalidInputError(f"target model {target_model[:100]!r}: a local endpoint takes printable ASCII")
        path, routing = local_route(target_model, inference_component)
        headers.update(routing)
        model = self.describe(target_model or inference_component)
        try:
            status, body, content_type = http_request(
                "POST", self.url + path, request.body, headers, self.timeout, max_reply_bytes=MAX_PAYLOAD_BYTES
            )
        except EndpointUnreachableError as error:
            raise EndpointError(model, f"{error} (is `make local` running?)") from error
        if status == 200:
            return Reply(body, content_type)
        if status == 404 and target_model:
            raise EndpointError(model, "model is not loaded on this endpoint (Triton answered 404)", status=status)
        if status == 429:  # how a front that imitates SageMaker signals a model still loading
            raise ModelNotReadyError(model, error_message(body), status=status, code="ModelNotReadyException")
        raise EndpointError(model, error_message(body), status=status)


def http_request(
    method: str,
    url: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout: float,
    *,
    max_reply_bytes: int | None = None,
) -> tuple[int, bytes, str | None]:
    """One HTTP exchange with the standard library: (status, body, Content-Type); HTTP errors are answers.

    With `max_reply_bytes`, a longer reply is an EndpointClientError, read no further than the limit."""
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, _read(response, url, max_reply_bytes), response.headers.get("Content-Type")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, _read(error, url, max_reply_bytes), error.headers.get("Content-Type")
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        raise EndpointUnreachableError(f"cannot reach {url}: {reason}") from error


def _read(response: Any, url: str, limit: int | None) -> bytes:
    if limit is None:
        return response.read()
    data = response.read(limit + 1)
    if len(data) > limit:  # InvokeEndpoint's reply Body has the request's limit (botocore BodyBlob max)
        raise EndpointClientError(f"{url} sent a reply of more than {limit} bytes, SageMaker's limit; not read")
    return data


def json_request(method: str, url: str, payload: dict[str, Any] | None, timeout: float) -> tuple[int, bytes]:
    body = json.dumps(payload).encode() if payload is not None else None
    status, reply, _ = http_request(method, url, body, {"Content-Type": "application/json"}, timeout)
    return status, reply
