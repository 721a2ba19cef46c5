"""InvokeEndpointAsync: the request body goes to S3, SageMaker queues it, the answer appears as an S3 object.

The flow (SageMaker Developer Guide, "Invoke an Asynchronous Endpoint"; botocore's sagemaker-runtime service
model, operation InvokeEndpointAsync):
1. upload the body under the endpoint's input prefix, at a fresh key (a uuid: never over another request's);
2. `invoke_endpoint_async(EndpointName, InputLocation, ContentType, RequestTTLSeconds, InvocationTimeoutSeconds)`;
   the service answers 202 with `OutputLocation` and `FailureLocation`, the S3 URIs where the answer or the
   failure will be written;
3. poll both with `list_objects_v2(Prefix=<exact key>)` (bounded exponential backoff; `head_object` when the
   caller may not list) until one exists or `wait_timeout` passes; read it.

Limits are the service model's: RequestTTLSeconds 60-21600, InvocationTimeoutSeconds 1-3600, InputLocation
1-1024 characters matching ^(https|s3)://([^/]+)/?(.*)$ (tests read them from botocore).
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from endpoint_client.async_body import MAX_ASYNC_PAYLOAD_BYTES, StreamedBody
from endpoint_client.codec import BINARY_CONTENT_TYPE_PREFIX, JSON_CONTENT_TYPE, EncodedRequest, header_length
from endpoint_client.errors import EndpointClientError, EndpointError, InvalidInputError
from endpoint_client.transport import Reply, _endpoint_error

# botocore sagemaker-runtime model, InvokeEndpointAsyncInput members:
MIN_TTL_SECONDS, MAX_TTL_SECONDS = 60, 21600  # RequestTTLSecondsHeader
MIN_INVOCATION_TIMEOUT_SECONDS, MAX_INVOCATION_TIMEOUT_SECONDS = 1, 3600  # InvocationTimeoutSecondsHeader
MAX_INPUT_LOCATION_CHARS = 1024  # InputLocationHeader
# The answer is read into memory to be decoded (as `invoke` does); it may be as large as a request.
MAX_RESULT_BYTES = MAX_ASYNC_PAYLOAD_BYTES
MAX_HEADER_BYTES = 16 * 1024 * 1024  # the JSON header of an answer stored without its Content-Type
MAX_FAILURE_BYTES = 64 * 1024  # a failure object holds an error message
FIRST_POLL_SECONDS, MAX_POLL_SECONDS, POLL_GROWTH = 1.0, 15.0, 1.5
PROGRESS_EVERY_SECONDS = 10.0
UPLOAD_PROGRESS_BYTES = 8 * 1024 * 1024  # bodies from this size on report their upload's progress
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3 general purpose bucket naming rules (length, chars)


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def parse_s3_uri(text: str, where: str) -> S3Location:
    """`s3://bucket/key` (InvokeEndpointAsync's locations are S3 URIs); the key may be empty or a prefix."""
    if not text.startswith("s3://"):
        raise InvalidInputError(f"{where}: {text[:200]!r} is not an S3 URI (s3://bucket/prefix/)")
    bucket, _, key = text[len("s3://") :].partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise InvalidInputError(f"{where}: {bucket[:100]!r} is not an S3 bucket name (3-63 a-z, 0-9, '.', '-')")
    if not key.isprintable() or len(text) > MAX_INPUT_LOCATION_CHARS:
        raise InvalidInputError(f"{where}: the key must be printable and the URI at most {MAX_INPUT_LOCATION_CHARS}")
    return S3Location(bucket, key)


def check_ttl(value: int | None) -> None:
    if value is not None and not MIN_TTL_SECONDS <= value <= MAX_TTL_SECONDS:
        raise InvalidInputError(
            f"--ttl {value}: RequestTTLSeconds must be {MIN_TTL_SECONDS}-{MAX_TTL_SECONDS} "
            "(InvokeEndpointAsync, botocore sagemaker-runtime model)"
        )


def check_invocation_timeout(value: int | None) -> None:
    if value is not None and not MIN_INVOCATION_TIMEOUT_SECONDS <= value <= MAX_INVOCATION_TIMEOUT_SECONDS:
        raise InvalidInputError(
            f"--invocation-timeout {value}: InvocationTimeoutSeconds must be {MIN_INVOCATION_TIMEOUT_SECONDS}-"
            f"{MAX_INVOCATION_TIMEOUT_SECONDS} (InvokeEndpointAsync, botocore sagemaker-runtime model)"
        )


@dataclass(frozen=True)
class Submission:
    input_location: str
    output_location: S3Location
    failure_location: S3Location | None
    inference_id: str | None


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _error_code(error: Exception) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


class AsyncInvoker:
    """One asynchronous endpoint: `submit` a body, `wait` for its answer. boto3 clients are passed in."""

    def __init__(
        self,
        endpoint_name: str,
        input_prefix: S3Location,
        *,
        runtime: Any,
        s3: Any,
        progress: Callable[[str], None] = _stderr,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        transfer_config: Any = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        self.input_prefix = input_prefix
        self.runtime = runtime
        self.s3 = s3
        self.progress = progress
        self.clock = clock
        self.sleep = sleep
        self.transfer_config = transfer_config

    def describe(self) -> str:
        return f"endpoint {self.endpoint_name}"

    def upload(self, body: StreamedBody) -> S3Location:
        """The body at a fresh key under the input prefix, streamed (boto3's managed transfer: multipart past its
        threshold, one part in memory at a time)."""
        from botocore.exceptions import BotoCoreError, ClientError

        prefix = self.input_prefix.key
        key = f"{prefix}{'' if not prefix or prefix.endswith('/') else '/'}{uuid.uuid4().hex}"
        location = S3Location(self.input_prefix.bucket, key)
        if len(location.uri) > MAX_INPUT_LOCATION_CHARS:
            raise InvalidInputError(
                f"input location {location.uri[:100]}...: over {MAX_INPUT_LOCATION_CHARS} characters "
                "(InvokeEndpointAsync InputLocation)"
            )
        sent, shown = [0], [0]

        def callback(count: int) -> None:  # s3transfer reports each chunk sent; a large body shows each tenth
            sent[0] += count
            tenth = sent[0] * 10 // max(body.size, 1)
            if body.size >= UPLOAD_PROGRESS_BYTES and tenth > shown[0]:
                shown[0] = tenth
                self.progress(f"uploaded {sent[0]} of {body.size} bytes")

        self.progress(f"uploading {body.size} bytes to {location.uri}")
        options: dict[str, Any] = {"ExtraArgs": {"ContentType": body.content_type}, "Callback": callback}
        if self.transfer_config is not None:
            options["Config"] = self.transfer_config
        try:
            with body.open() as stream:
                self.s3.upload_fileobj(stream, location.bucket, location.key, **options)
        except (ClientError, BotoCoreError) as error:
            raise EndpointClientError(f"{location.uri}: the upload failed ({error})") from error
        except Exception as error:  # s3transfer wraps a failure in its own exceptions
            if isinstance(error, EndpointClientError):
                raise
            raise EndpointClientError(f"{location.uri}: the upload failed ({error})") from error
        return location

    def submit(
        self,
        body: StreamedBody,
        *,
        ttl: int | None = None,
        invocation_timeout: int | None = None,
    ) -> Submission:
        from botocore.exceptions import BotoCoreError, ClientError

        check_ttl(ttl)
        check_invocation_timeout(invocation_timeout)
        if body.size > MAX_ASYNC_PAYLOAD_BYTES:
            raise InvalidInputError(f"the request is {body.size} bytes; at most {MAX_ASYNC_PAYLOAD_BYTES}")
        location = self.upload(body)
        kwargs: dict[str, Any] = {
            "EndpointName": self.endpoint_name,
            "InputLocation": location.uri,
            "ContentType": body.content_type,
        }
        if ttl is not None:
            kwargs["RequestTTLSeconds"] = ttl
        if invocation_timeout is not None:
            kwargs["InvocationTimeoutSeconds"] = invocation_timeout
        try:
            response = self.runtime.invoke_endpoint_async(**kwargs)
        except ClientError as error:
            raise _endpoint_error(self.describe(), error.response) from error
        except BotoCoreError as error:  # no credentials, no region, connection refused...
            raise EndpointError(self.describe(), str(error)) from error
        output = response.get("OutputLocation")
        if not output:
            raise EndpointError(self.describe(), "InvokeEndpointAsync named no OutputLocation")
        failure = response.get("FailureLocation")
        submission = Submission(
            location.uri,
            parse_s3_uri(output, "OutputLocation"),
            parse_s3_uri(failure, "FailureLocation") if failure else None,
            response.get("InferenceId"),
        )
        self.progress(f"queued as {submission.inference_id or '?'}; the answer will be at {output}")
        return submission

    def _exists(self, location: S3Location, denied: list[str]) -> bool:
        """Whether the object is there, by listing its exact key: s3:prefix is a condition key of s3:ListBucket
        (Service Authorization Reference; the request's Prefix), so a role allowed to list only the output and
        failure prefixes (the smoke role) gets an answer; HeadObject carries no prefix, and without an
        unconditional s3:ListBucket S3 answers 403 for a key not written yet (S3 API reference, HeadObject
        "Permissions"). The exact key is the first of the listing (keys come in UTF-8 binary order and it is a
        prefix of every other), so one key is asked for. A caller that may not list falls back on HeadObject."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            listed = self.s3.list_objects_v2(Bucket=location.bucket, Prefix=location.key, MaxKeys=1)
            return any(item.get("Key") == location.key for item in listed.get("Contents", []))
        except ClientError as error:
            if _error_code(error) not in ("403", "AccessDenied", "Forbidden"):
                raise EndpointClientError(f"{location.uri}: cannot check for it ({error})") from error
        except BotoCoreError as error:
            raise EndpointClientError(f"{location.uri}: cannot check for it ({error})") from error
        try:
            self.s3.head_object(Bucket=location.bucket, Key=location.key)
            return True
        except ClientError as error:
            code = _error_code(error)
            if code in ("404", "NoSuchKey", "NotFound"):
                return False
            if code in ("403", "AccessDenied", "Forbidden"):
                # Without s3:ListBucket, S3 answers 403 for a key that does not exist yet (S3 API reference,
                # HeadObject "Permissions"): keep waiting, and say so if it never appears.
                denied.append(location.uri)
                return False
            raise EndpointClientError(f"{location.uri}: cannot check for it ({error})") from error
        except BotoCoreError as error:
            raise EndpointClientError(f"{location.uri}: cannot check for it ({error})") from error

    def _read(self, location: S3Location, limit: int) -> tuple[bytes, str | None]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.s3.get_object(Bucket=location.bucket, Key=location.key)
            with response["Body"] as stream:
                data = stream.read(limit + 1)
        except (ClientError, BotoCoreError) as error:
            raise EndpointClientError(f"{location.uri}: cannot read it ({error})") from error
        if len(data) > limit:
            raise EndpointClientError(f"{location.uri}: over {limit} bytes; not read")
        return data, response.get("ContentType")

    def wait(self, submission: Submission, *, timeout: float) -> Reply:
        """The answer's body and Content-Type; EndpointError with the failure object's text if one appears."""
        start = self.clock()
        delay = FIRST_POLL_SECONDS
        last_note = start
        denied: list[str] = []
        try:
            while True:
                if self._exists(submission.output_location, denied):
                    body, content_type = self._read(submission.output_location, MAX_RESULT_BYTES)
                    self.progress(f"answer ready after {self.clock() - start:.0f} s: {submission.output_location.uri}")
                    return Reply(body, reply_content_type(body, content_type))
                failure = submission.failure_location
                if failure is not None and self._exists(failure, denied):
                    text, _ = self._read(failure, MAX_FAILURE_BYTES)
                    raise EndpointError(
                        self.describe(),
                        f"the request failed ({failure.uri}): {text.decode(errors='replace').strip()[:2000]}",
                    )
                now = self.clock()
                if now - start >= timeout:
                    hint = (
                        f"; S3 answered 403 for {denied[-1]}: without s3:ListBucket on the output and failure "
                        "prefixes a missing key reads as denied, so check the caller may list and read them"
                        if denied
                        else ""
                    )
                    raise EndpointError(
                        self.describe(),
                        f"no answer after {timeout:.0f} s (--wait-timeout); the request may still be queued: its "
                        f"answer will be at {submission.output_location.uri}{hint}",
                    )
                if now - last_note >= PROGRESS_EVERY_SECONDS:
                    self.progress(f"waiting for {submission.output_location.uri} ({now - start:.0f} s)")
                    last_note = now
                self.sleep(min(delay, max(timeout - (now - start), 0.0)))
                delay = min(delay * POLL_GROWTH, MAX_POLL_SECONDS)
        except KeyboardInterrupt:
            self.progress(
                f"stopped waiting; the request is still queued and its answer will be at "
                f"{submission.output_location.uri}"
            )
            raise


def reply_content_type(body: bytes, content_type: str | None) -> str:
    """The Content-Type that decodes `body`: the stored one when it carries Triton's header size, else one
    computed from the body (an answer stored as a file, or an S3 object whose type says only binary+json):
    the JSON header is the body's leading JSON object (KServe binary extension, `json-header-size`)."""
    if header_length(content_type) is not None:
        return content_type or JSON_CONTENT_TYPE
    text = body[:MAX_HEADER_BYTES].decode("latin-1")  # one character per byte: an index is a byte offset
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return content_type or JSON_CONTENT_TYPE  # not Triton's: the decoder says what is wrong with it
    return JSON_CONTENT_TYPE if end == len(body) else f"{BINARY_CONTENT_TYPE_PREFIX}{end}"


class AsyncSageMakerTransport:
    """The Transport protocol over InvokeEndpointAsync, so EndpointClient (and the smoke test) can use it."""

    def __init__(
        self,
        invoker: AsyncInvoker,
        *,
        wait_timeout: float,
        ttl: int | None = None,
        invocation_timeout: int | None = None,
        model_name: str | None = None,
    ) -> None:
        self.invoker = invoker
        self.wait_timeout = wait_timeout
        self.ttl = ttl
        self.invocation_timeout = invocation_timeout
        self.model_name = model_name

    def describe(self, target_model: str | None) -> str:
        model = target_model or self.model_name
        name = self.invoker.endpoint_name
        return f"{model} on asynchronous endpoint {name}" if model else f"asynchronous endpoint {name}"

    def send(
        self, request: EncodedRequest, *, target_model: str | None = None, inference_component: str | None = None
    ) -> Reply:
        if target_model or inference_component:
            raise InvalidInputError(
                "asynchronous endpoints serve one model: no target model or inference component (InvokeEndpointAsync "
                "takes neither)"
            )
        from endpoint_client.async_body import encoded_body

        submission = self.invoker.submit(
            encoded_body(request), ttl=self.ttl, invocation_timeout=self.invocation_timeout
        )
        return self.invoker.wait(submission, timeout=self.wait_timeout)
