"""A missing artifact is told from a denied one without s3:ListBucket on the whole bucket.

S3 HeadObject API reference: "If you don't have the s3:ListBucket permission, Amazon S3 returns an HTTP
status code 403 Forbidden error" for a missing key. Our roles may list only the models/ prefix (an
`s3:prefix` condition a HEAD request does not carry), so a HEAD of a missing key may well answer 403: the
handler and `model_build upload` then list the key's own prefix. Found by an independent template review.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from model_build.upload import existing_sha256

BUCKET, KEY = "artifacts", "models/m/" + "a" * 64 + "/model.tar.gz"


def stubbed(listed: list[str] | None):
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stubber = Stubber(client)
    stubber.add_client_error("head_object", "403", "Forbidden", http_status_code=403)
    if listed is None:
        stubber.add_client_error("list_objects_v2", "AccessDenied", http_status_code=403)
    else:
        stubber.add_response("list_objects_v2", {"Contents": [{"Key": k} for k in listed]})
    stubber.activate()
    return client


def test_upload_treats_a_403_on_an_unlisted_key_as_missing():
    assert existing_sha256(stubbed([]), BUCKET, KEY) is None
    assert existing_sha256(stubbed([KEY + ".other"]), BUCKET, KEY) is None  # a longer key is another object


@pytest.mark.parametrize("listed", [[KEY], None])
def test_upload_keeps_a_403_on_a_listed_key_or_a_denied_listing(listed):
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError):
        existing_sha256(stubbed(listed), BUCKET, KEY)


def test_the_handler_treats_a_403_on_an_unlisted_key_as_missing(handler):
    assert handler._head(stubbed([]), BUCKET, KEY) is None


@pytest.mark.parametrize("listed", [[KEY], None])
def test_the_handler_explains_a_real_403(handler, listed):
    with pytest.raises(handler.ArtifactError, match=r"access denied \(403\)"):
        handler._head(stubbed(listed), BUCKET, KEY)
