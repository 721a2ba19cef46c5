"""Where an asynchronous endpoint's requests and answers live in the stage's artifact bucket (issue #26 part 1).

One definition for the construct's props (the app maps it), the execution role's grant, the bucket's lifecycle
expiry and the `invoke-async` client, so that they never disagree. Keys under these prefixes are transient
(expired by a lifecycle rule); artifacts live under their content-addressed keys elsewhere in the bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

ASYNC_ROOT = "async-inference"


@dataclass(frozen=True)
class AsyncPrefixes:
    """S3 key prefixes (each ends with '/') of one asynchronous endpoint's inputs, outputs and failures."""

    input: str
    output: str
    failure: str


def async_prefixes(endpoint_name: str) -> AsyncPrefixes:
    """The prefixes of the endpoint named `endpoint_name` in the stage config (`endpoints[].name`)."""
    root = f"{ASYNC_ROOT}/{endpoint_name}"
    return AsyncPrefixes(input=f"{root}/input/", output=f"{root}/output/", failure=f"{root}/failure/")
