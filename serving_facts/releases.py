"""What each Triton release known to the SageMaker SDK ships: TensorRT, CUDA, lowest GPU it runs on.

A TensorRT engine only loads on the TensorRT version that built it (unless built
version-compatible) and on the GPU architecture it was built for (unless hardware-compatible):
NVIDIA's TensorRT support matrix, see ../shared/README.md. The CodeBuild GPU build therefore
passes `--expect-tensorrt <tensorrt_version(release)>` to `model_build build`, and the CDK app
refuses an endpoint whose GPU the release does not support.

Sources, checked with the project's search tool on 2026-11-22:
- CUDA version and minimum compute capability: NVIDIA's Triton release notes,
  https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-<YY-MM>.html
  ("Release 23.12 is based on CUDA 12.3.2", "Release 25.04 is based on CUDA 12.9.0 ... supports CUDA
  compute capability 7.5 and later", "Release 26.05 is based on CUDA 13.2.1 ... 7.5 and later").
  Seen for 23.12, 24.05 (12.4.1 per the MXNet 24.05 notes), 25.04 and 26.05; the CUDA of 24.01,
  24.03, 24.09 and 25.09 was not re-checked (informational only: no rule reads it).
- TensorRT per release: NVIDIA's frameworks containers of the same month ship the same TensorRT
  (MXNet release notes 24.05 list "NVIDIA TensorRT 10.0.1.6"). The main `py3` Triton images list
  TensorRT only in the Frameworks Support Matrix, which the search index does not hold; rows marked
  `tensorrt_verified=False` below come from that matrix as remembered and were NOT re-checked here. The
  build's `--expect-tensorrt` check (trtexec's own banner) is what guards a wrong row.
- Data types a TensorRT model's config may use: triton-inference-server/tensorrt_backend, branch
  r<YY.MM>, `src/tensorrt_utils.cc` `ConvertDataTypeToTrtType` (the config type -> TensorRT type map;
  any other type fails the backend's `ValidateIO` with "unsupported datatype"). r23.12..r24.03 map
  FP32, FP16, INT8, UINT8, INT32, BOOL; r24.05 adds INT64; r24.06 and later add BF16 (commit fd867b7,
  "Support BF16 data type in TensorRT backend"). Read from the fetched mirror on 2026-11-24.
- What an ONNX input becomes in the engine: onnx/onnx-tensorrt `convertDtype` (branch 8.6-GA
  `onnx2trt_utils.cpp`; 10.0-GA and main `importerUtils.cpp`), used by `importInput` for every network
  input. TensorRT 8.6 maps INT64 -> kINT32 and DOUBLE -> kFLOAT and has no BF16; TensorRT 10 keeps
  INT64 and BF16 and still maps DOUBLE -> kFLOAT. Any other ONNX type fails the import.
"""

from __future__ import annotations

from dataclasses import dataclass

from serving_facts.errors import ServingFactError


@dataclass(frozen=True)
class TritonRelease:
    release: str  # "24.09"
    tensorrt: str  # "10.4.0.26"
    cuda: str
    min_compute_capability: str  # lowest GPU the release's TensorRT/Triton runs on
    tensorrt_verified: bool  # False: value not re-checked against a primary source (see module doc)
    upstream: str | None = None  # NGC month the release is built on, when it differs

    @property
    def tensorrt_major(self) -> int:
        return int(self.tensorrt.split(".")[0])

    @property
    def tensorrt_config_types(self) -> frozenset[str]:
        """Triton data types the release's TensorRT backend accepts in a config (see module doc)."""
        types = {"TYPE_FP32", "TYPE_FP16", "TYPE_INT8", "TYPE_UINT8", "TYPE_INT32", "TYPE_BOOL"}
        if self.release >= "24.05":
            types.add("TYPE_INT64")
        if self.release >= "24.06":
            types.add("TYPE_BF16")
        return frozenset(types)

    @property
    def tensorrt_type_casts(self) -> dict[str, str]:
        """Graph input/output types the release's ONNX parser turns into another engine type (see module doc).

        TensorRT 8.6 has no INT64 tensor at all, so INT64 inputs and outputs are INT32 in the engine.
        """
        return {"TYPE_INT64": "TYPE_INT32"} if self.tensorrt_major < 10 else {}

    @property
    def tensorrt_major_minor(self) -> str:
        return ".".join(self.tensorrt.split(".")[:2])

    @property
    def ngc_tensorrt_image(self) -> str:
        """NVIDIA's TensorRT container carrying the same TensorRT (trtexec at /usr/src/tensorrt/bin)."""
        return f"nvcr.io/nvidia/tensorrt:{self.upstream or self.release}-py3"


_RELEASES = [
    # TensorRT 8.6 era: Triton release notes say compute capability 6.0+ (Pascal and newer).
    TritonRelease("23.12", "8.6.1.6", "12.3.2", "6.0", tensorrt_verified=False),
    TritonRelease("24.01", "8.6.1.6", "12.3.2", "6.0", tensorrt_verified=False),
    TritonRelease("24.03", "8.6.3", "12.4.0", "6.0", tensorrt_verified=False),
    # TensorRT 10.x "has been compiled to support all NVIDIA hardware with capability SM 7.0 or higher"
    # (TensorRT 10.1 support matrix), so Pascal is out although Triton's notes still say 6.0; Volta
    # (7.0) runs until TensorRT 10.5 (../shared/README.md).
    TritonRelease("24.05", "10.0.1.6", "12.4.1", "7.0", tensorrt_verified=True),
    TritonRelease("24.09", "10.4.0.26", "12.6.1", "7.0", tensorrt_verified=False),
    # TensorRT 10.5+ dropped Volta and Triton 25.03+ needs compute capability >= 7.5 (release notes).
    TritonRelease("25.04", "10.9.0.34", "12.9.0", "7.5", tensorrt_verified=False),
    TritonRelease("25.09", "10.13.3.9", "13.0.1", "7.5", tensorrt_verified=False),
    # Triton 26.05 is built on the 26.04 upstream containers (../shared/README.md): match TensorRT by
    # version, not by tag. 10.14.1.48 is what Triton's compatibility table lists for the 26.05
    # trtllm-python image; the plain py3 image's TensorRT was not found in the search index.
    TritonRelease("26.05", "10.14.1.48", "13.2.1", "7.5", tensorrt_verified=False, upstream="26.04"),
]

RELEASES: dict[str, TritonRelease] = {r.release: r for r in _RELEASES}

# Types some release's TensorRT backend accepts: what a config may say when the release is not known.
ANY_TENSORRT_CONFIG_TYPE: frozenset[str] = frozenset().union(*(r.tensorrt_config_types for r in _RELEASES))


class UnknownReleaseError(ServingFactError):
    pass


def release(name: str) -> TritonRelease:
    try:
        return RELEASES[str(name)]
    except KeyError:
        raise UnknownReleaseError(
            f"unknown Triton release {name!r}; releases known to the SageMaker SDK: {', '.join(RELEASES)}"
        ) from None


def tensorrt_version(release_name: str) -> str:
    """Full TensorRT version the release's Triton image serves engines with, e.g. "10.4.0.26"."""
    return release(release_name).tensorrt


def ngc_tensorrt_image(release_name: str) -> str:
    return release(release_name).ngc_tensorrt_image


def _cc(value: str) -> tuple[int, int]:
    major, _, minor = str(value).partition(".")
    return int(major), int(minor or 0)


def supports_compute_capability(release_name: str, compute_capability: str) -> bool:
    """Whether the release's Triton/TensorRT runs on a GPU of this compute capability ("8.6")."""
    return _cc(compute_capability) >= _cc(release(release_name).min_compute_capability)


def same_tensorrt(found: str, expected: str) -> bool:
    """Versions match on every component both give: "10.4" and "10.4.0" match "10.4.0.26".

    trtexec's banner carries major.minor.patch only (v100400), the tables give the build too;
    a container never mixes two builds of one patch release.
    """
    have, want = found.strip().split("."), expected.strip().split(".")
    common = min(len(have), len(want))
    return common >= 2 and have[:common] == want[:common]
