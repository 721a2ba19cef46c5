"""SageMaker's real-time limits, which the local endpoint holds every request to.

- Payload: the `sagemaker-runtime` service model (botocore `data/sagemaker-runtime/2017-05-13/
  service-2.json`, shape `BodyBlob`, the type of InvokeEndpoint's request and reply `Body`) says
  `"max": 6291456` (6 MiB). tests/client/test_client_request_check.py reads that model and fails if
  AWS changes it, so the number here follows the SDK rather than a blog post.
- Time: "A customer's model containers must respond to requests within 60 seconds" (InvokeEndpoint
  API reference).
"""

from __future__ import annotations

MAX_PAYLOAD_BYTES = 6_291_456  # botocore sagemaker-runtime BodyBlob "max"
INVOCATION_TIMEOUT_SECONDS = 60.0  # InvokeEndpoint API reference
MAX_CONTROL_BODY_BYTES = 64 * 1024  # the multi-model API's {"model_name", "url"}: small by nature
MME_LOAD_TIMEOUT_SECONDS = 300.0  # how long the local MME API waits for Triton to load a model
MME_UNLOAD_TIMEOUT_SECONDS = 350.0  # Triton's SageMaker service waits 350 s for an unload (sagemaker_server.h)
MAX_CONCURRENT_REQUESTS = 64  # beyond this the front answers 503 instead of starting more threads
CLIENT_SOCKET_TIMEOUT_SECONDS = 30.0  # a client that stops sending mid-request is dropped
REQUEST_READ_DEADLINE_SECONDS = 30.0  # ...and so is one still sending a request after this long, in all
# The front's connections (review LOW11: a thread per connection, no bound, a listen backlog of 5):
MAX_CONNECTIONS = 128  # client connections served at once, a thread each
MAX_REFUSING_CONNECTIONS = 32  # beyond those, connections being answered 503 (a short-lived thread each);
# beyond both, the front accepts nothing more until one ends: new connections wait in the listen backlog
LISTEN_BACKLOG = 1024  # connections the kernel holds for accept() (capped by net.core.somaxconn)
IDLE_CONNECTION_TIMEOUT_SECONDS = 5.0  # a connection with no request under way (keep-alive) is closed after this
REFUSAL_DEADLINE_SECONDS = 10.0  # an over-the-limit connection's request (and body, drained) must arrive by then
MAX_LOADED_MODELS = 16  # multi-model: each loaded model is a Triton model (a Python stub is ~40 MB)
MAX_ARCHIVE_MEMBERS = 10_000  # files in one extracted model archive
MAX_ARCHIVE_RATIO = 100  # extracted bytes per archive byte: a 1 MB archive may not fill 1 GB (a tar bomb)
MIN_ARCHIVE_ALLOWANCE_BYTES = 256 * 1024 * 1024  # ...but a small archive may always extract to this much
