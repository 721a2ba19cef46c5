"""SageMaker Triton image URIs, from the SageMaker SDK's own image URI table.

The table ships in `sagemaker-core` (`image_uri_config/sagemaker-tritonserver.json`, the file
`sagemaker.core.image_uris.retrieve` reads). Importing `sagemaker.core` costs ~3 s, so synth
reads the same file directly; tests check that every URI equals `image_uris.retrieve(...)`.
Images are `sagemaker-tritonserver:<YY.MM>-py3` (GPU) and `-py3-cpu` (../shared/README.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from triton_cdk.errors import InvalidPropsError, TritonCdkError
from triton_cdk.grants import grant_statements

__all__ = ["TritonImage", "TritonImageLookup", "known_triton_releases", "pull_image_statements", "triton_image"]

_TABLE = "sagemaker/core/image_uri_config/sagemaker-tritonserver.json"


@cache
def _table() -> dict:
    files = metadata.files("sagemaker-core") or []
    for file in files:
        if file.as_posix().endswith(_TABLE):
            return json.loads(Path(str(file.locate())).read_text())
    raise TritonCdkError(f"sagemaker-core is installed without {_TABLE}; reinstall requirements.txt")


def known_triton_releases() -> list[str]:
    """Triton releases the SageMaker SDK has images for, oldest first."""
    return sorted(_table()["versions"])


def _domain(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


@dataclass(frozen=True)
class TritonImage:
    account: str
    region: str
    repository: str
    tag: str

    @property
    def uri(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.{_domain(self.region)}/{self.repository}:{self.tag}"


def triton_image(release: str, region: str, *, gpu: bool) -> TritonImage:
    versions = _table()["versions"]
    if release not in versions:
        raise InvalidPropsError(
            f"Triton release {release!r} unknown to the SageMaker SDK; known: {', '.join(sorted(versions))}"
        )
    entry = versions[release]
    if region not in entry["registries"]:
        raise InvalidPropsError(
            f"no SageMaker Triton {release} image in region {region!r}; "
            f"available in: {', '.join(sorted(entry['registries']))}"
        )
    tag = entry["tag_prefix"] if gpu else f"{entry['tag_prefix']}-cpu"
    return TritonImage(entry["registries"][region], region, entry["repository"], tag)


class TritonImageLookup(Construct):
    """The image URI and ECR repository ARN for the stack's region, also env-agnostic.

    With a concrete region the values are plain strings; otherwise a CloudFormation mapping over
    every region the SDK lists resolves them at deploy time (Fn::FindInMap on AWS::Region).
    """

    def __init__(self, scope: Construct, construct_id: str, *, release: str) -> None:
        super().__init__(scope, construct_id)
        registries = _table()["versions"][release]["registries"]
        mapping = {
            region: {
                "gpu": triton_image(release, region, gpu=True).uri,
                "cpu": triton_image(release, region, gpu=False).uri,
                "account": account,
            }
            for region, account in sorted(registries.items())
        }
        self.release = release
        self._repository = _table()["versions"][release]["repository"]
        self._mapping = cdk.CfnMapping(self, "Images", mapping=mapping, lazy=True)

    def image_uri(self, *, gpu: bool) -> str:
        return self._mapping.find_in_map(cdk.Aws.REGION, "gpu" if gpu else "cpu")

    @property
    def account(self) -> str:
        """The AWS account that hosts the image in this region (the DLC registry)."""
        return self._mapping.find_in_map(cdk.Aws.REGION, "account")

    @property
    def repository_name(self) -> str:
        return self._repository

    @property
    def repository_arn(self) -> str:
        stack = cdk.Stack.of(self)
        return stack.format_arn(
            service="ecr", account=self.account, resource="repository", resource_name=self._repository
        )

    def grant_pull(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow `grantee` to log in to the image's registry and pull the Triton image (this region's repository)."""
        return grant_statements(grantee, pull_image_statements(self.repository_arn))


def pull_image_statements(repository_arn: str) -> list[iam.PolicyStatement]:
    """Identity-policy statements that pull an image from `repository_arn` (sids PullTritonImage, EcrLogin)."""
    return [
        iam.PolicyStatement(
            sid="PullTritonImage",
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            resources=[repository_arn],
        ),
        # ecr:GetAuthorizationToken has no resource type: it can only be granted on "*".
        iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
    ]
