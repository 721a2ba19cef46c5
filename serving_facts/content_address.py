"""Content addresses of model artifacts: the S3 keys every artifact lives under.

One function names every artifact, used by the CDK app at synth (stacks/artifact_plan.py), by the constructs (the
prefixes they grant and point at) and by the build: an unchanged model maps to the same key (never rebuilt), and
dev and prod, given the same model, release and GPU target, share the same bytes.

digest = sha256(canonical JSON of {schema, source fingerprint, build settings, Triton release, GPU target[, an INT8
model's local calibration cache]}); the source and cache fingerprints hash files (model_build.key). Standard library
only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from serving_facts.settings import ModelSettings

KEY_SCHEMA_VERSION = 1
MODEL_PREFIX = "models/"
# Under the model prefix so one grant covers both; "_" cannot start a model name, so no clash.
MULTI_MODEL_PREFIX = "models/_multi-model/"
# Bump when an export recipe (model_build export) changes what it produces.
EXPORT_RECIPE_VERSION = 1
# GPU target for artifacts that are not tied to a GPU architecture (ONNX Runtime, Python).
PORTABLE_TARGET = "portable"


def ensemble_source(composing_digests: Mapping[str, str]) -> str:
    """The source fingerprint of an ensemble: the digests of its composing models' artifacts (name -> digest).

    An ensemble's archive holds its composing model folders, so any change to one of them (its source,
    settings or GPU target) must give the ensemble a new key; the ensemble's own settings (its steps) are
    in `artifact_digest`'s build settings as for every model.
    """
    canonical = json.dumps(sorted(composing_digests.items()), separators=(",", ":"))
    return f"ensemble:{hashlib.sha256(canonical.encode()).hexdigest()}"


def artifact_digest(
    settings: ModelSettings, *, source: str, triton_release: str, gpu_target: str, calibration: str | None = None
) -> str:
    """sha256 hex of everything that determines the artifact's bytes. `calibration`: calibration_fingerprint's
    value; absent from the payload when None, so the keys of models without a local INT8 cache are unchanged."""
    payload = {
        "schema": KEY_SCHEMA_VERSION,
        "source": source,
        "build": settings.build_fingerprint(),
        "triton_release": triton_release,
        "gpu_target": gpu_target if settings.needs_gpu_build else PORTABLE_TARGET,
    }
    if calibration is not None:
        payload["calibration"] = calibration
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def model_artifact_key(model_name: str, digest: str) -> str:
    """S3 key of a model's archive (the model folder at the archive root)."""
    return f"{MODEL_PREFIX}{model_name}/{digest}/model.tar.gz"


def uncompressed_model_prefix(model_name: str, digest: str) -> str:
    """S3 prefix of a model's unpacked folder (SageMaker ModelDataSource, CompressionType None)."""
    return f"{MODEL_PREFIX}{model_name}/{digest}/uncompressed/"


def multi_model_prefix(model_keys: dict[str, str]) -> str:
    """S3 prefix of a multi-model endpoint: holds `<name>.tar.gz` for each of its models.

    Derived from the models' own keys, so a change to any model gives a new prefix (and a new
    SageMaker Model), while an unchanged set keeps its prefix.
    """
    canonical = json.dumps(sorted(model_keys.items()), separators=(",", ":"))
    return f"{MULTI_MODEL_PREFIX}{hashlib.sha256(canonical.encode()).hexdigest()}/"
