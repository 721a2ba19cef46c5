"""File fingerprints of model sources: what identifies a model's source bytes (and an INT8 model's local calibration
cache) in its content address (serving_facts.content_address.artifact_digest), without fetching anything remote.

An ONNX source whose tensors live in external data files is fingerprinted with those files: they
are served bytes too, and a key that ignored them would keep naming the old weights.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from model_build.errors import ModelBuildError
from model_build.model_tree import SKIPPED_DIRS
from model_build.onnx_external import ExternalDataError, MalformedModelError, external_data
from serving_facts.content_address import EXPORT_RECIPE_VERSION

if TYPE_CHECKING:
    from serving_facts.settings import ModelSettings, ModelSource

_CHUNK = 1024 * 1024


class SourceError(ModelBuildError, ValueError):
    """A model source that cannot be fingerprinted (an ONNX file whose external data is missing or
    lies outside its folder). The message names the file."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@functools.lru_cache(maxsize=1024)
def _cached_file_sha256(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(Path(path))


def _source_file_sha256(path: Path) -> str:
    """file_sha256, once per file version: one synth fingerprints a source for every endpoint and
    stage that uses it, and a model file can be gigabytes. Size and mtime key the cache, so an
    edited file is hashed again."""
    info = path.stat()
    return _cached_file_sha256(str(path), info.st_size, info.st_mtime_ns)


def tree_sha256(root: Path) -> str:
    """Digest of a folder: relative paths and bytes of every file, in sorted order. Files under a `__pycache__`
    folder are left out, as the packager leaves them out of the archive (model_build.model_tree): running a Python
    model's model.py once must not change its artifact key (and rebuild it)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root)
        if SKIPPED_DIRS.intersection(relative.parts):
            continue
        digest.update(relative.as_posix().encode() + b"\0" + _source_file_sha256(path).encode() + b"\n")
    return digest.hexdigest()


def file_fingerprint(path: Path) -> str:
    """`file:<sha256>` of a single-file source; for an ONNX model with external data, followed by
    `+data:<sha256 of each location and its file's sha256>`, so changing only a data file changes
    the key. A file that is not a well-formed ONNX protobuf is fingerprinted by its bytes alone (the
    model checks refuse it later, naming the file)."""
    fingerprint = f"file:{_source_file_sha256(path)}"
    if path.suffix.lower() != ".onnx":
        return fingerprint
    try:
        files = external_data(path)
    except ExternalDataError as error:
        raise SourceError(f"{path}: {error}") from None
    except MalformedModelError:
        return fingerprint
    if not files:
        return fingerprint
    listing = "".join(f"{item.location}\0{_source_file_sha256(item.path)}\n" for item in files)
    return f"{fingerprint}+data:{hashlib.sha256(listing.encode()).hexdigest()}"


def source_fingerprint(source: ModelSource, base_dir: Path) -> str:
    """What identifies the source bytes without fetching anything remote.

    Local files are hashed. An S3 URI is taken as given (pin it with ?versionId=); an export
    recipe is identified by its name and recipe version.
    """
    if source.path is not None:
        path = (base_dir / source.path).resolve()
        if path.is_dir():
            return f"tree:{tree_sha256(path)}"
        if not path.is_file():
            raise FileNotFoundError(f"model source {source.path!r} not found under {base_dir}")
        return file_fingerprint(path)
    if source.s3_uri is not None:
        return f"s3:{source.s3_uri}"
    return f"export:{source.export}:v{EXPORT_RECIPE_VERSION}"


def int8_calibration_cache(settings: ModelSettings) -> str | None:
    """The `tensorrt.calibration_cache` the build reads (trtexec --calib, model_build.calibration): an INT8
    TensorRT model's; None for every other model (a cache beside another precision is not read)."""
    if settings.platform != "tensorrt_plan" or settings.tensorrt.precision != "int8":
        return None
    return settings.tensorrt.calibration_cache


def calibration_fingerprint(settings: ModelSettings, base_dir: Path) -> str | None:
    """`file:<sha256>` of a local calibration cache the build reads, else None.

    The cache decides the INT8 engine's scales, so its bytes are part of the content address: a new cache at
    the same path must give a new key (the path alone is in the build settings). An s3:// cache is taken as
    given, as an s3:// source is (its URI is in the build settings; pin it with ?versionId=).
    """
    cache = int8_calibration_cache(settings)
    if cache is None or cache.startswith("s3://"):
        return None
    path = (base_dir / cache).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"tensorrt.calibration_cache {cache!r} not found under {base_dir}")
    return f"file:{_source_file_sha256(path)}"
