"""What the pipeline's roles may do (pure): IAM policy documents for preview and deploy.

Preview (pull requests, drift): AWS's managed ReadOnlyAccess — `pulumi preview --refresh`
reads every resource the stacks own through its Describe/Get/List calls (iam:GetRolePolicy,
ec2:DescribeLaunchTemplateVersions, fsx:DescribeDataRepositoryAssociations...), which the
narrower ViewOnlyAccess lacks — plus reading the state bucket and decrypting with the state
key. It writes nothing: pulumi/pulumi pkg/backend/diy/backend.go (v3.x, ``Preview``) runs a
dry run without taking the stack lock, saving a checkpoint or writing history.

Deploy (`pulumi up` of the cluster and workload stacks): the AWS services behind every
resource type those programs declare (``services_for_types``; a test keeps the map complete
against the offline plans), IAM limited to roles, policies, instance profiles and OIDC
providers, read/write on the state bucket and key, and explicit denials that keep a deploy
from widening its own trust or removing the state backend.
"""

from __future__ import annotations

from typing import Any, Iterable

PREVIEW_MANAGED_POLICY = "ReadOnlyAccess"

# Provider module (the part after `aws:` in a type token) -> IAM service prefix.
_MODULE_SERVICE = {
    "autoscaling": "autoscaling",
    "ec2": "ec2",
    "vpc": "ec2",
    "ecr": "ecr",
    "eks": "eks",
    "fsx": "fsx",
    "iam": "iam",
    "kms": "kms",
    "s3": "s3",
    "ssm": "ssm",
}
# Type tokens whose service differs from their module's.
_TYPE_SERVICES = {
    "aws:cloudwatch/logGroup:LogGroup": {"logs"},
    "aws:cloudwatch/dashboard:Dashboard": {"cloudwatch"},
    "aws:cloudwatch/metricAlarm:MetricAlarm": {"cloudwatch"},
    # A FSx data repository association reads and watches the linked bucket as the caller.
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": {"fsx", "s3"},
    # pulumi-eks's component: the control plane, its IAM roles and OIDC provider, its security
    # groups, and the SSM look-up of the node AMI.
    "eks:index:Cluster": {"eks", "iam", "ec2", "ssm"},
}
# The services the deploy roles may manage: what ``services_for_types`` finds in the cluster
# and workload programs (tests/test_bootstrap.py checks the plans of every stack against it).
DEPLOY_SERVICES = frozenset({"autoscaling", "cloudwatch", "ec2", "ecr", "eks", "fsx", "iam", "kms", "logs", "s3", "ssm", "sts"})

# Look-ups every run makes whatever it declares (instance offerings, the caller's identity).
_ALWAYS = {"ec2", "eks", "sts"}


# What changes a role, an OIDC provider or who may use them (IAM's action names for roles and
# OIDC providers: Create/Delete/Update/Put/Attach/Detach/Tag/Untag/Add/Remove, and PassRole).
# Denied on the pipeline's own roles and provider; Get/List stay allowed.
PIPELINE_WRITE_ACTIONS = (
    "iam:Add*", "iam:Attach*", "iam:Create*", "iam:Delete*", "iam:Detach*", "iam:PassRole", "iam:Put*",
    "iam:Remove*", "iam:Tag*", "iam:Untag*", "iam:Update*",
)


class UnmappedType(ValueError):
    pass


def services_for_types(types: Iterable[str]) -> set[str]:
    """IAM services `pulumi up` calls to manage resources of ``types`` (Kubernetes, random and
    component types call none); an AWS type nobody mapped is an error, not a silent gap."""
    services = set(_ALWAYS)
    for type_ in types:
        if type_ in _TYPE_SERVICES:
            services |= _TYPE_SERVICES[type_]
        elif type_.startswith("aws:"):
            module = type_.split(":")[1].split("/")[0]
            if module not in _MODULE_SERVICE:
                raise UnmappedType(f"{type_}: no IAM service mapped in bootstrap/permissions.py")
            services.add(_MODULE_SERVICE[module])
    return services


def state_read_statements(bucket_arn: str, key_arn: str) -> list[dict[str, Any]]:
    return [
        {"Sid": "ListState", "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": bucket_arn},
        {"Sid": "ReadState", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": f"{bucket_arn}/*"},
        {"Sid": "DecryptStateAndSecrets", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:DescribeKey"], "Resource": key_arn},
    ]


def state_write_statements(bucket_arn: str, key_arn: str) -> list[dict[str, Any]]:
    """An update takes a lock object, writes checkpoints, history and backups, then deletes the lock."""
    return [
        {"Sid": "ListState", "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": bucket_arn},
        {"Sid": "WriteState", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
         "Resource": f"{bucket_arn}/*"},
        {"Sid": "UseStateKey", "Effect": "Allow",
         "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"], "Resource": key_arn},
    ]


def preview_policy(bucket_arn: str, key_arn: str) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": state_read_statements(bucket_arn, key_arn)}


def deploy_policy(
    services: frozenset[str], account: str, partition: str, bucket_arn: str, key_arn: str,
    protected_role_arns: list[str], oidc_provider_arn: str,
) -> dict[str, Any]:
    iam_arn = f"arn:{partition}:iam::{account}"
    statements: list[dict[str, Any]] = [
        {"Sid": "ManageStackServices", "Effect": "Allow",
         "Action": sorted(f"{s}:*" for s in services - {"iam", "sts"}), "Resource": "*"},
        {"Sid": "ManageStackIdentities", "Effect": "Allow", "Action": "iam:*",
         "Resource": [f"{iam_arn}:role/*", f"{iam_arn}:policy/*", f"{iam_arn}:instance-profile/*",
                      f"{iam_arn}:oidc-provider/*"]},
        # AWS-managed policies the stacks attach (AmazonEKSWorkerNodePolicy...): read only, and
        # nobody can change those anyway.
        {"Sid": "ReadManagedPolicies", "Effect": "Allow", "Action": ["iam:GetPolicy", "iam:GetPolicyVersion"],
         "Resource": f"arn:{partition}:iam::aws:policy/*"},
        {"Sid": "ReadIdentity", "Effect": "Allow", "Action": ["sts:GetCallerIdentity"], "Resource": "*"},
        *state_write_statements(bucket_arn, key_arn),
        # A deploy must not edit its own trust or the preview role's, nor the provider they trust.
        # Reads stay allowed: the cluster program's aws.iam.get_session_context calls
        # iam:GetRole on the caller's own role (terraform-provider-aws
        # internal/service/iam/session_context_data_source.go), and an explicit Deny would win.
        {"Sid": "KeepPipelineTrust", "Effect": "Deny", "Action": list(PIPELINE_WRITE_ACTIONS),
         "Resource": sorted([*protected_role_arns, oidc_provider_arn])},
        # ...nor take the state backend away from under every stack.
        {"Sid": "KeepStateBucket", "Effect": "Deny",
         "Action": ["s3:DeleteBucket", "s3:DeleteBucketPolicy", "s3:PutBucketPolicy", "s3:PutBucketVersioning",
                    "s3:PutEncryptionConfiguration", "s3:PutBucketPublicAccessBlock", "s3:PutLifecycleConfiguration",
                    "s3:PutBucketOwnershipControls"],
         "Resource": bucket_arn},
        # ...nor purge the state's history: versioning keeps every earlier checkpoint only while
        # nobody may delete a version (an update needs Get/Put/DeleteObject, never a version).
        {"Sid": "KeepStateHistory", "Effect": "Deny", "Action": ["s3:DeleteObjectVersion"],
         "Resource": f"{bucket_arn}/*"},
        {"Sid": "KeepStateKey", "Effect": "Deny",
         "Action": ["kms:ScheduleKeyDeletion", "kms:DisableKey", "kms:PutKeyPolicy", "kms:DisableKeyRotation",
                    "kms:DeleteAlias", "kms:UpdateAlias"],
         "Resource": key_arn},
    ]
    return {"Version": "2012-10-17", "Statement": statements}
