"""Where a Triton model's artifacts live in S3, and how SageMaker must read them.

Three shapes, one factory each (like aws-sagemaker-alpha's `ModelData.from_bucket`):
- `from_archive`: one `model.tar.gz` holding the model folder at its root (single-model mode);
- `from_uncompressed_prefix`: the same folder unpacked under a prefix (`ModelDataSource`,
  `CompressionType: None`), which skips the download-and-untar step for large models;
- `from_multi_model_prefix`: a prefix holding one `<model>.tar.gz` per model (`Mode: MultiModel`).

Access is not granted here: the serving role lives in the stateful artifact stack, and adding
statements to it from an endpoint stack would make the two stacks depend on each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from triton_cdk.errors import InvalidPropsError

__all__ = ["Mode", "TritonModelData"]

Mode = Literal["SingleModel", "MultiModel"]


@dataclass(frozen=True)
class TritonModelData:
    bucket: s3.IBucket
    key: str
    mode: Mode
    compressed: bool = True

    @classmethod
    def from_archive(cls, bucket: s3.IBucket, key: str) -> TritonModelData:
        if not key.endswith(".tar.gz"):
            raise InvalidPropsError(f"a single-model archive must be a .tar.gz object, got key {key!r}")
        return cls(bucket, key, "SingleModel")

    @classmethod
    def from_uncompressed_prefix(cls, bucket: s3.IBucket, prefix: str) -> TritonModelData:
        if not prefix.endswith("/"):
            raise InvalidPropsError(
                f"an uncompressed model location must be an S3 prefix ending in '/', got {prefix!r}"
            )
        return cls(bucket, prefix, "SingleModel", compressed=False)

    @classmethod
    def from_multi_model_prefix(cls, bucket: s3.IBucket, prefix: str) -> TritonModelData:
        if not prefix.endswith("/"):
            raise InvalidPropsError(f"a multi-model location must be an S3 prefix ending in '/', got {prefix!r}")
        return cls(bucket, prefix, "MultiModel")

    @property
    def s3_url(self) -> str:
        return self.bucket.s3_url_for_object(self.key)

    def container_properties(self) -> dict:
        """The `ContainerDefinition` fields that name the artifacts (keyword args of the L1)."""
        if not self.compressed:
            return {
                "model_data_source": sagemaker.CfnModel.ModelDataSourceProperty(
                    s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                        s3_uri=self.s3_url, s3_data_type="S3Prefix", compression_type="None"
                    )
                )
            }
        return {"model_data_url": self.s3_url}
