"""The artifact store: KMS key, versioned model bucket, its access-log bucket, explicit policy.

Stateful: it lives in its own stack, RETAINed, and its construct ids are a public contract
(they make the logical ids that snapshots pin).
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from serving_facts.content_address import MODEL_PREFIX
from triton_cdk.errors import InvalidPropsError
from triton_cdk.grants import grant_statements
from triton_cdk.guard import acknowledge_guard, restrict_grants_to_aws_services
from triton_cdk.nag import acknowledge

__all__ = ["ACCESS_LOG_TARGET_RULES", "ArtifactStore", "ImportedArtifactStore", "list_models_statement"]

# S3 User Guide, "Enabling Amazon S3 server access logging": a target bucket's default encryption can
# only be SSE-S3 ("SSE-KMS is not supported"), it can't have Object Lock, and it should not itself be logged.
ACCESS_LOG_TARGET_RULES = {
    "s3_bucket_default_encryption_kms_check": "S3 delivers server access logs only to an SSE-S3 bucket "
    "(S3 User Guide, 'Enabling Amazon S3 server access logging': SSE-KMS is not supported).",
    "s3_bucket_object_lock_enabled_check": "S3 can't deliver server access logs to a bucket with Object Lock "
    "(same page).",
    "s3_bucket_logging_enabled_check": "This is the access-log target; logging it would log its own log deliveries.",
    "s3_bucket_versioning_enabled_check": "Access logs are written once by S3's log delivery and expire by "
    "lifecycle; there is no version to keep.",
    "s3_event_notifications_enabled_check": "Nothing acts on log deliveries; the logs are read when investigating.",
}


class _ArtifactStoreBase(Construct):
    """What owned and imported stores share: the model prefix and the identity-policy grants on it."""

    bucket_arn: str
    key_arn: str
    model_prefix: str

    @property
    def model_objects_arn(self) -> str:
        return f"{self.bucket_arn}/{self.model_prefix}*"

    def grant_read_models(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow `grantee` to read and list the model prefix and decrypt it with the store's key.

        In the bucket's own account an identity policy is enough (the bucket policy denies only plain HTTP and
        foreign encryption; it names no principals to admit). A role of another account also needs the bucket
        policy's statement: `ArtifactStore.allow_account_read` / `allow_model_read`.
        """
        return grant_statements(
            grantee,
            [
                iam.PolicyStatement(
                    sid="ReadModels",
                    actions=["s3:GetObject", "s3:GetObjectVersion"],
                    resources=[self.model_objects_arn],
                ),
                list_models_statement(self.bucket_arn, self.model_prefix),
                iam.PolicyStatement(
                    sid="DecryptModels", actions=["kms:Decrypt", "kms:DescribeKey"], resources=[self.key_arn]
                ),
            ],
        )

    def grant_write_models(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow `grantee` to write the model prefix (reading back what it wrote, multipart uploads included),
        list it and encrypt with the store's key: what a model build needs.

        A role of another stack also needs `ArtifactStore.allow_model_write` (the bucket policy).
        """
        return grant_statements(
            grantee,
            [
                iam.PolicyStatement(
                    sid="WriteModels",
                    actions=["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                    resources=[self.model_objects_arn],
                ),
                list_models_statement(self.bucket_arn, self.model_prefix),
                iam.PolicyStatement(
                    sid="EncryptModels",
                    actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                    resources=[self.key_arn],
                ),
            ],
        )

    def grant_read_archives(self, grantee: iam.IGrantable, keys: Sequence[str]) -> iam.Grant:
        """Allow `grantee` to read exactly these model objects (s3:GetObject) and decrypt them: for a reader
        that knows its keys (the pipeline's smoke test reads each served archive's config.pbtxt). No listing,
        no other object; `keys` must lie under the model prefix."""
        outside = [k for k in keys if not cdk.Token.is_unresolved(k) and not k.startswith(self.model_prefix)]
        if not keys or outside:
            raise InvalidPropsError(
                f"grant_read_archives: keys must be at least one key, each under {self.model_prefix!r}; "
                f"got {outside if keys else 'none'}"
            )
        return grant_statements(
            grantee,
            [
                iam.PolicyStatement(
                    sid="ReadModelArchives",
                    actions=["s3:GetObject"],
                    resources=[f"{self.bucket_arn}/{key}" for key in keys],
                ),
                iam.PolicyStatement(actions=["kms:Decrypt"], resources=[self.key_arn]),
            ],
        )


class ImportedArtifactStore(_ArtifactStoreBase):
    """A store defined elsewhere, for its grants (`ArtifactStore.from_store_attributes`).

    Props: bucket_arn, key_arn: the store's bucket and key; model_prefix: Default: - `models/`.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, bucket_arn: str, key_arn: str, model_prefix: str = MODEL_PREFIX
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket_arn = bucket_arn
        self.key_arn = key_arn
        self.model_prefix = model_prefix


class ArtifactStore(_ArtifactStoreBase):
    """Model artifacts, encrypted with a customer-managed key and served to SageMaker.

    Access is granted explicitly and per prefix: identity policies through `grant_read_models` /
    `grant_write_models` / `grant_read_archives`, and in the bucket policy `allow_model_read` for
    serving roles, `allow_model_write` for the build role.
    """

    @classmethod
    def from_store_attributes(
        cls, scope: Construct, construct_id: str, *, bucket_arn: str, key_arn: str, model_prefix: str = MODEL_PREFIX
    ) -> ImportedArtifactStore:
        """A store defined elsewhere, for its `grant_*`. `bucket_arn` / `key_arn` as the importing stack should
        reference them (e.g. a named export's `Fn::ImportValue`: referencing the bucket of another stack would
        make CDK add an export of its own). model_prefix: Default: - `models/`, as the store's default."""
        return ImportedArtifactStore(
            scope, construct_id, bucket_arn=bucket_arn, key_arn=key_arn, model_prefix=model_prefix
        )

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        noncurrent_version_expiration: cdk.Duration,
        access_log_expiration: cdk.Duration,
        bucket_name: str | None = None,
        model_prefix: str = MODEL_PREFIX,
    ) -> None:
        super().__init__(scope, construct_id)
        self.model_prefix = model_prefix

        self.key = kms.Key(
            self,
            "Key",
            description="Encrypts Triton model artifacts and the data they produce",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        restrict_grants_to_aws_services(self.key)
        # S3 server access logs can only be delivered to an SSE-S3 bucket, not SSE-KMS.
        self.log_bucket = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[s3.LifecycleRule(expiration=access_log_expiration)],
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        acknowledge(self.log_bucket, "AwsSolutions-S1", "This is the access-log destination; logging it would loop.")
        for rule, reason in ACCESS_LOG_TARGET_RULES.items():
            acknowledge_guard(self.log_bucket, rule, reason)

        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=bucket_name,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            versioned=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            server_access_logs_bucket=self.log_bucket,
            server_access_logs_prefix="artifacts/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    noncurrent_version_expiration=noncurrent_version_expiration,
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(7),
                )
            ],
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.bucket_arn = self.bucket.bucket_arn
        self.key_arn = self.key.key_arn
        self._deny_foreign_encryption()
        acknowledge_guard(
            self.bucket,
            "s3_bucket_object_lock_enabled_check",
            "Artifacts are write-once without it: keys are content-addressed, model_build upload and promotion "
            "write only absent keys and verify what exists, and versioning keeps any overwritten version. Object "
            "Lock can never be disabled once on, and locked versions (a withdrawn model too) outlive deletion.",
        )
        acknowledge_guard(
            self.bucket,
            "s3_event_notifications_enabled_check",
            "Nothing reacts to object events: the ensure-artifact resources and the pipeline look keys up "
            "when they need them; access is recorded by the access logs.",
        )

    def _deny_foreign_encryption(self) -> None:
        """Uploads that ask for another encryption or another key are refused.

        Only when the header is sent (`Null: false`): a PUT without it, and every UploadPart (which
        carries no encryption header), gets the bucket default, this key. `...IfExists` would not do:
        IAM evaluates an IfExists condition on an absent key as true ("IAM JSON policy elements:
        Condition operators"), so the deny would refuse every plain upload.
        """
        for condition_key, allowed in (
            ("s3:x-amz-server-side-encryption", "aws:kms"),
            ("s3:x-amz-server-side-encryption-aws-kms-key-id", self.key.key_arn),
        ):
            self.bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="DenyForeignEncryption" + ("Type" if condition_key.endswith("encryption") else "Key"),
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:PutObject"],
                    resources=[self.bucket.arn_for_objects("*")],
                    conditions={"StringNotEquals": {condition_key: allowed}, "Null": {condition_key: "false"}},
                )
            )

    def allow_log_groups(self, name_prefix: str) -> None:
        """CloudWatch Logs may use the key for this account's log groups named `<name_prefix>*` (the stage's
        stacks: CloudFormation names a log group `<stack>-<logical id>-<suffix>`). CloudWatch Logs User Guide,
        "Encrypt log data in CloudWatch Logs using AWS KMS": the regional logs principal, conditioned on the
        `kms:EncryptionContext:aws:logs:arn` of the log group."""
        stack = cdk.Stack.of(self)
        groups = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{name_prefix}*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowTheStageLogGroups",
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": groups}},
            )
        )

    def allow_model_read(self, role: iam.IRole, sid: str) -> None:
        """Bucket policy + key grant: `role` may read (and list) the model prefix only."""
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid=f"{sid}ReadModels",
                principals=[iam.ArnPrincipal(role.role_arn)],
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[self.model_objects_arn],
            )
        )
        self.bucket.add_to_resource_policy(
            list_models_statement(
                self.bucket.bucket_arn,
                self.model_prefix,
                sid=f"{sid}ListModels",
                principals=[iam.ArnPrincipal(role.role_arn)],
            )
        )

    def allow_account_read(self, account: str) -> None:
        """Another account (a later stage promoting these artifacts) may read and decrypt models.

        That account's own IAM policies still decide which of its roles may do so.
        """
        principal = iam.AccountPrincipal(account)
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid=f"Account{account}ReadModels",
                principals=[principal],
                actions=["s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectTagging"],
                resources=[self.model_objects_arn],
            )
        )
        # Promotion lists the source prefix to copy an unpacked (uncompressed) model folder.
        self.bucket.add_to_resource_policy(
            list_models_statement(
                self.bucket.bucket_arn, self.model_prefix, sid=f"Account{account}ListModels", principals=[principal]
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=f"Account{account}DecryptModels",
                principals=[principal],
                actions=["kms:Decrypt", "kms:DescribeKey"],
                resources=["*"],  # in a key policy "*" means this key
                conditions={"StringEquals": {"kms:ViaService": f"s3.{cdk.Aws.REGION}.amazonaws.com"}},
            )
        )

    def allow_model_write(self, role: iam.IRole, sid: str) -> None:
        """Bucket policy: `role` may write (and read back) the model prefix only."""
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid=f"{sid}WriteModels",
                principals=[iam.ArnPrincipal(role.role_arn)],
                actions=[
                    "s3:PutObject",
                    "s3:GetObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[self.model_objects_arn],
            )
        )


def list_models_statement(
    bucket_arn: str, model_prefix: str, *, sid: str = "ListModels", principals: list[iam.IPrincipal] | None = None
) -> iam.PolicyStatement:
    """s3:ListBucket on `bucket_arn`, only under `model_prefix` (the s3:prefix condition).

    Readers and writers of the models need it: without ListBucket a missing key answers 403 instead of
    404 (S3 API Reference, HeadObject), and promotion lists a prefix to copy an unpacked model folder.
    `principals` only in a resource (bucket) policy. Default: - an identity-policy statement.
    """
    return iam.PolicyStatement(
        sid=sid,
        principals=principals,
        actions=["s3:ListBucket"],
        resources=[bucket_arn],
        conditions={"StringLike": {"s3:prefix": [f"{model_prefix}*"]}},
    )
