"""The library entry point: numpy arrays in, numpy arrays out.

client = EndpointClient.for_endpoint("my-endpoint")            # SageMaker runtime (boto3)
client = EndpointClient.for_url("http://127.0.0.1:8080")       # `make local`
outputs = client.invoke({"INPUT0": a, "INPUT1": b}, target_model="add_sub.tar.gz")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from endpoint_client.codec import Encoding, decode_response, encode_request
from endpoint_client.errors import EndpointError, InvalidInputError
from endpoint_client.limits import MAX_PAYLOAD_BYTES
from endpoint_client.retry import RetryPolicy
from endpoint_client.transport import LocalTransport, SageMakerTransport, Transport


@dataclass
class EndpointClient:
    transport: Transport
    encoding: Encoding = Encoding.BINARY
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @classmethod
    def for_endpoint(
        cls, endpoint_name: str, *, region: str | None = None, model_name: str | None = None, **options
    ) -> EndpointClient:
        """`model_name` (optional) names a single-model endpoint's model in error messages."""
        return cls(SageMakerTransport(endpoint_name, region=region, model_name=model_name), **options)

    @classmethod
    def for_url(cls, url: str, *, model_name: str | None = None, **options) -> EndpointClient:
        return cls(LocalTransport(url, model_name=model_name), **options)

    def invoke(
        self,
        inputs: Mapping[str, np.ndarray],
        *,
        target_model: str | None = None,
        inference_component: str | None = None,
        outputs: Sequence[str] = (),
    ) -> dict[str, np.ndarray]:
        """One inference; retries ModelNotReadyException per `retry`; raises EndpointError on a refusal.

        `target_model` picks a multi-model endpoint's model, `inference_component` an inference component.
        """
        if target_model and inference_component:
            raise InvalidInputError("give a target model (multi-model endpoint) or an inference component, not both")
        request = encode_request(inputs, outputs=outputs, encoding=self.encoding)
        if len(request.body) > MAX_PAYLOAD_BYTES:  # refused here, not as a broken pipe when the server hangs up
            raise InvalidInputError(
                f"the request is {len(request.body)} bytes ({self.encoding} encoding); SageMaker real-time "
                f"endpoints accept at most {MAX_PAYLOAD_BYTES} bytes: send smaller batches"
                + (" or the binary encoding" if self.encoding is Encoding.JSON else "")
            )
        # Only a component request passes the new keyword: transports written before it keep working.
        component = {"inference_component": inference_component} if inference_component else {}
        reply = self.retry.call(lambda: self.transport.send(request, target_model=target_model, **component))
        try:
            return decode_response(reply.body, reply.content_type)
        except Exception as error:  # tritonclient raises assorted errors on a reply it cannot read
            raise EndpointError(
                self.transport.describe(target_model or inference_component),
                f"unreadable reply ({reply.content_type}, {len(reply.body)} bytes): {error}",
            ) from error


@dataclass(frozen=True)
class SmokeResult:
    target_model: str | None
    outputs: dict[str, np.ndarray]


def smoke_test(
    client: EndpointClient,
    models: Sequence[tuple[str | None, Mapping[str, np.ndarray]]],
    *,
    inference_component: str | None = None,
) -> list[SmokeResult]:
    """Invoke each (target model or None, inputs) once; fail on the first error or a non-finite output.

    For a pipeline's post-deployment check: a single-model endpoint passes [(None, inputs)], a
    multi-model endpoint one entry per `<name>.tar.gz`.
    """
    results = []
    for target_model, inputs in models:
        outputs = client.invoke(inputs, target_model=target_model, inference_component=inference_component)
        if not outputs:
            raise EndpointError(client.transport.describe(target_model), "the reply carried no outputs")
        for name, array in outputs.items():
            if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
                raise EndpointError(client.transport.describe(target_model), f"output {name!r} has NaN or Inf values")
        results.append(SmokeResult(target_model, outputs))
    return results
