"""An INT8 model's calibration cache, brought to the build host before `build` runs trtexec.

trtexec only *reads* a calibration cache (`--calib=<file>`, "Read INT8 calibration cache file": TensorRT
samples/common/sampleOptions.cpp). Inside the GPU build (model_build/buildspec.yml) the stage config's
`tensorrt.calibration_cache` names a file of the project or an S3 object, neither of which is on the build host,
so `model_build build` (without --calibration-cache) fetches it first:

- `CALIBRATION_URI` (environment, `s3://bucket/key[?versionId=...]`): the cache as the CDK app shipped it with
  the build (a local `calibration_cache` uploaded as an asset);
- else an `s3://` `calibration_cache` itself;
- else (a local path and nothing shipped) the build stops here, naming the field, before any engine is built:
  an INT8 build without its cache would otherwise calibrate nothing.

A model that is not INT8 needs nothing.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from model_build.atomic import atomic_path
from model_build.errors import ModelBuildError
from serving_facts.build_variables import CALIBRATION_URI
from serving_facts.settings import ModelSettings


def calibration_source(cache: str, shipped: str | None, where: str) -> str:
    """The s3:// URI to fetch the cache from, or a ModelBuildError saying why it cannot reach the build."""
    if shipped:
        if not shipped.startswith("s3://"):
            raise ModelBuildError(f"{CALIBRATION_URI}={shipped!r}: expected s3://bucket/key")
        return shipped
    if cache.startswith("s3://"):
        return cache
    raise ModelBuildError(
        f"{where}: tensorrt.calibration_cache {cache!r} is a file of the project, and this build was not given it "
        f"({CALIBRATION_URI} is not set): an INT8 engine built without its calibration cache is not calibrated. "
        "Give the cache as an s3:// URI the build can read, or use precision fp16"
    )


def _download(uri: str, out: Path) -> None:
    from model_build.upload import make_s3_client  # deferred: boto3

    parsed = urllib.parse.urlparse(uri)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    extra = {"VersionId": query["versionId"]} if "versionId" in query else None
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(out) as temporary:
            make_s3_client().download_file(parsed.netloc, parsed.path.lstrip("/"), str(temporary), ExtraArgs=extra)
    except Exception as error:  # botocore's ClientError / NoCredentialsError: the message names the cause
        raise ModelBuildError(f"cannot download the calibration cache {uri} ({error})") from None
    if out.stat().st_size == 0:
        raise ModelBuildError(f"the calibration cache {uri} is empty; regenerate it with a calibration run")


def fetch_calibration(settings: ModelSettings, out: Path, where: str, environ=os.environ) -> Path | None:
    """The INT8 model's calibration cache as a local file (fetched to `out` when it is remote; a local
    `calibration_cache` is used where it is when nothing was shipped and the file is here), or None when
    the model is not INT8."""
    if settings.platform != "tensorrt_plan" or settings.tensorrt.precision != "int8":
        return None
    cache = settings.tensorrt.calibration_cache or ""
    shipped = environ.get(CALIBRATION_URI)
    if not shipped and not cache.startswith("s3://") and Path(cache).is_file():
        return Path(cache)  # `build` on a workstation, from the project folder
    _download(calibration_source(cache, shipped, where), out)
    return out
