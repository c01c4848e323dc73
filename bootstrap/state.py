"""The Pulumi state backend: an S3 bucket, the KMS key that encrypts it, and one KMS key per
environment behind that environment's ``awskms://`` secrets provider.

All protected and retained: `pulumi destroy` of the bootstrap stack (or a replacement) must
never take every stack's state or secrets with it. The keys are separate so that reading state
(which any preview needs) is not decrypting secrets, and a role of one environment, which may
use only its own secrets key, cannot decrypt another environment's secrets even where both
share this bucket (bootstrap/permissions.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

# AWS KMS: rotation yearly by default; the waiting period before a scheduled deletion (7-30 days).
KEY_DELETION_WINDOW_DAYS = 30


def tls_only_policy(bucket_arn: str) -> str:
    """S3 user guide, "Enforce encryption in transit": deny any request over plain HTTP."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [bucket_arn, f"{bucket_arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


@dataclass
class StateBackendArgs:
    bucket_name: str
    key_alias: str
    tags: dict[str, str]
    noncurrent_version_days: int = 90
    # Environment -> alias of its secrets key.
    secrets_key_aliases: dict[str, str] = field(default_factory=dict)
    # The tag key the deploy roles are scoped by (permissions.STACK_TAG): each secrets key carries
    # its environment's name, like every resource of that environment's stacks.
    stack_tag: str = "stack"
    # Alias of the key behind the bootstrap stack's own awskms:// secrets provider: none of the
    # environments' keys, which their pipeline roles decrypt (bootstrap/permissions.py
    # bootstrap_denials keeps every pipeline role off it).
    bootstrap_secrets_key_alias: str = "alias/trainium-pulumi-secrets-bootstrap"


class StateBackend(pulumi.ComponentResource):
    def __init__(self, name: str, args: StateBackendArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:bootstrap:StateBackend", name, None, opts)
        keep = pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True)
        child = pulumi.ResourceOptions(parent=self)

        def key_with_alias(resource_name: str, description: str, alias: str, tags: dict[str, str]) -> aws.kms.Key:
            key = aws.kms.Key(
                resource_name,
                description=description,
                enable_key_rotation=True,
                deletion_window_in_days=KEY_DELETION_WINDOW_DAYS,
                tags=tags,
                opts=keep,
            )
            aws.kms.Alias(f"{resource_name}-alias", name=alias, target_key_id=key.key_id, opts=child)
            return key

        self.key = key_with_alias(
            f"{name}-key",
            "Pulumi state bucket of the Trainium stacks (server-side encryption; never their secrets)",
            args.key_alias,
            args.tags,
        )
        self.secrets_keys: dict[str, aws.kms.Key] = {
            environment: key_with_alias(
                f"{name}-secrets-{environment}",
                f"Secrets (awskms:// secrets provider) of the {environment} stacks",
                alias,
                {**args.tags, args.stack_tag: environment},
            )
            for environment, alias in sorted(args.secrets_key_aliases.items())
        }
        self.bootstrap_secrets_key = key_with_alias(
            f"{name}-secrets-bootstrap",
            "Secrets (awskms:// secrets provider) of the bootstrap stack: no pipeline role may use it",
            args.bootstrap_secrets_key_alias,
            args.tags,
        )

        self.bucket = aws.s3.Bucket(f"{name}-bucket", bucket=args.bucket_name, tags=args.tags, opts=keep)
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=self.bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        # Versioning keeps every earlier checkpoint: a state file damaged by a bad import or an
        # interrupted write is restored from its previous version.
        aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=self.bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        # ...but not forever: every `pulumi up` writes several checkpoints, so overwritten versions
        # expire after the configured window (the current state is never touched).
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-history",
            bucket=self.bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-old-checkpoints",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=args.noncurrent_version_days,
                    ),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=7,
                    ),
                )
            ],
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=self.bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms",
                        kms_master_key_id=self.key.arn,
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-tls-only", bucket=self.bucket.id, policy=self.bucket.arn.apply(tls_only_policy), opts=child
        )
        self.register_outputs({"bucket": self.bucket.bucket, "keyArn": self.key.arn})
