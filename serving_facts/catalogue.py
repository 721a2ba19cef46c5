"""The instance catalogue: what each supported SageMaker `ml.*` type has.

Everything that depends on hardware reads it: config validation (GPU needed? single GPU for
multi-model?), GPU-count scaling of autoscaling targets and alarms, and build/serve matching.
GPU models and compute capabilities are from ../shared/README.md (checked against NVIDIA's and
AWS's tables). Standard library only: imported by the CDK app and by the build image.

Storage: ml.g4dn, g5, g6, g6e, p4d and p5 hosts have NVMe instance storage only, and SageMaker refuses a
`VolumeSizeInGB` on them (SageMaker Python SDK `sagemaker.utils.volume_size_supported`: families with a
"d" and g5; CreateEndpointConfig / ProductionVariant.VolumeSizeInGB; ../shared/README.md "Instance
storage"). `nvme_storage_only` records it per family.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import get_close_matches

from serving_facts.errors import ServingFactError


@dataclass(frozen=True)
class Gpu:
    model: str
    compute_capability: str  # "8.6"
    memory_gib: int
    architecture: str  # "Volta", "Turing", "Ampere", "Ada", "Hopper"

    @property
    def sm(self) -> str:
        """CUDA SM tag, e.g. "sm86": the GPU target of an exact-match TensorRT build."""
        return "sm" + self.compute_capability.replace(".", "")

    @property
    def is_ampere_or_newer(self) -> bool:
        return float(self.compute_capability) >= 8.0


T4 = Gpu("T4", "7.5", 16, "Turing")
A10G = Gpu("A10G", "8.6", 24, "Ampere")
L4 = Gpu("L4", "8.9", 24, "Ada")
L40S = Gpu("L40S", "8.9", 48, "Ada")
V100 = Gpu("V100", "7.0", 16, "Volta")
A100 = Gpu("A100", "8.0", 40, "Ampere")
H100 = Gpu("H100", "9.0", 80, "Hopper")
GPUS: dict[str, Gpu] = {gpu.model: gpu for gpu in (T4, A10G, L4, L40S, V100, A100, H100)}


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    gpu_count: int = 0
    gpu: Gpu | None = None
    nvme_storage_only: bool = False  # no EBS volume: VolumeSizeInGB is refused (module doc)

    @property
    def family(self) -> str:
        """ "ml.g5" for "ml.g5.xlarge"."""
        return self.name.rsplit(".", 1)[0]

    @property
    def has_gpu(self) -> bool:
        return self.gpu_count > 0


def _family(
    prefix: str, gpu: Gpu | None, sizes: list[tuple[str, int, int, int]], *, nvme_storage_only: bool = False
) -> list[InstanceType]:
    return [
        InstanceType(f"{prefix}.{size}", vcpus, memory, gpus, gpu if gpus else None, nvme_storage_only)
        for size, vcpus, memory, gpus in sizes
    ]


_GPU_SIZES_G5 = [
    ("xlarge", 4, 16, 1),
    ("2xlarge", 8, 32, 1),
    ("4xlarge", 16, 64, 1),
    ("8xlarge", 32, 128, 1),
    ("12xlarge", 48, 192, 4),
    ("16xlarge", 64, 256, 1),
    ("24xlarge", 96, 384, 4),
    ("48xlarge", 192, 768, 8),
]

_CATALOGUE: list[InstanceType] = [
    *_family(
        "ml.g4dn",
        T4,
        [
            ("xlarge", 4, 16, 1),
            ("2xlarge", 8, 32, 1),
            ("4xlarge", 16, 64, 1),
            ("8xlarge", 32, 128, 1),
            ("12xlarge", 48, 192, 4),
            ("16xlarge", 64, 256, 1),
        ],
        nvme_storage_only=True,
    ),
    *_family("ml.g5", A10G, _GPU_SIZES_G5, nvme_storage_only=True),
    *_family("ml.g6", L4, _GPU_SIZES_G5, nvme_storage_only=True),
    *_family(
        "ml.g6e",
        L40S,
        [
            ("xlarge", 4, 32, 1),
            ("2xlarge", 8, 64, 1),
            ("4xlarge", 16, 128, 1),
            ("8xlarge", 32, 256, 1),
            ("12xlarge", 48, 384, 4),
            ("16xlarge", 64, 512, 1),
            ("24xlarge", 96, 768, 4),
            ("48xlarge", 192, 1536, 8),
        ],
        nvme_storage_only=True,
    ),
    *_family("ml.p3", V100, [("2xlarge", 8, 61, 1), ("8xlarge", 32, 244, 4), ("16xlarge", 64, 488, 8)]),
    *_family("ml.p4d", A100, [("24xlarge", 96, 1152, 8)], nvme_storage_only=True),
    *_family("ml.p5", H100, [("48xlarge", 192, 2048, 8)], nvme_storage_only=True),
    # CPU types: for ONNX Runtime / Python-backend models on the `-py3-cpu` Triton image.
    *_family(
        "ml.c5", None, [("xlarge", 4, 8, 0), ("2xlarge", 8, 16, 0), ("4xlarge", 16, 32, 0), ("9xlarge", 36, 72, 0)]
    ),
    *_family(
        "ml.c6i", None, [("xlarge", 4, 8, 0), ("2xlarge", 8, 16, 0), ("4xlarge", 16, 32, 0), ("8xlarge", 32, 64, 0)]
    ),
    *_family(
        "ml.m5", None, [("xlarge", 4, 16, 0), ("2xlarge", 8, 32, 0), ("4xlarge", 16, 64, 0), ("12xlarge", 48, 192, 0)]
    ),
    *_family(
        "ml.m6i", None, [("xlarge", 4, 16, 0), ("2xlarge", 8, 32, 0), ("4xlarge", 16, 64, 0), ("8xlarge", 32, 128, 0)]
    ),
]

INSTANCE_TYPES: dict[str, InstanceType] = {instance.name: instance for instance in _CATALOGUE}


class UnknownInstanceTypeError(ServingFactError):
    pass


def instance_type(name: str) -> InstanceType:
    """Look up `name`; the error suggests the closest supported types."""
    try:
        return INSTANCE_TYPES[name]
    except KeyError:
        close = get_close_matches(name, INSTANCE_TYPES, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        families = sorted({i.family for i in _CATALOGUE})
        raise UnknownInstanceTypeError(
            f"unknown instance type {name!r}{hint}; supported families: {', '.join(families)}"
        ) from None
