"""What the pipeline's roles may do (pure): IAM policy documents for preview and deploy.

Every role belongs to one environment (stack name) and reaches only that environment's state
objects and secrets key; where environments share an account, explicit denials keep it off the
others' state, secrets and (deploy) tagged resources, which its broad grants would otherwise
reach.

Preview (drift, the prod preview before approval, and pull requests where the environment
allows them): AWS's managed ReadOnlyAccess — `pulumi preview --refresh` reads every resource the
stacks own through its Describe/Get/List calls (iam:GetRolePolicy,
ec2:DescribeLaunchTemplateVersions, fsx:DescribeDataRepositoryAssociations...), which the
narrower ViewOnlyAccess lacks — plus reading its environment's state objects and decrypting
with the state key and its environment's secrets key. It writes nothing: pulumi/pulumi
pkg/backend/diy/backend.go (v3.x, ``Preview``) runs a dry run without taking the stack lock,
saving a checkpoint or writing history.

Deploy (`pulumi up` of the cluster and workload stacks): the AWS services behind every
resource type those programs declare (``services_for_types``; a test keeps the map complete
against the offline plans), IAM limited to roles, policies, instance profiles and OIDC
providers, read/write on its environment's state objects and keys, and explicit denials that
keep a deploy from widening its own trust, removing the state backend or rewriting the
bootstrap's state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
    # The scheduled checkpoint export (storage.checkpointExport).
    "scheduler": "scheduler",
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
DEPLOY_SERVICES = frozenset(
    {"autoscaling", "cloudwatch", "ec2", "ecr", "eks", "fsx", "iam", "kms", "logs", "s3", "scheduler", "ssm", "sts"}
)

# Look-ups every run makes whatever it declares (instance offerings, the caller's identity).
_ALWAYS = {"ec2", "eks", "sts"}


# What changes a role, an OIDC provider or who may use them (IAM's action names for roles and
# OIDC providers: Create/Delete/Update/Put/Attach/Detach/Tag/Untag/Add/Remove, and PassRole).
# Denied on the pipeline's own roles and provider; Get/List stay allowed.
PIPELINE_WRITE_ACTIONS = (
    "iam:Add*",
    "iam:Attach*",
    "iam:Create*",
    "iam:Delete*",
    "iam:Detach*",
    "iam:PassRole",
    "iam:Put*",
    "iam:Remove*",
    "iam:Tag*",
    "iam:Untag*",
    "iam:Update*",
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


# The Pulumi projects whose stacks the pipeline deploys (their Pulumi.yaml names; a test keeps
# them equal), and the bootstrap's own, which no pipeline role may write.
STACK_PROJECTS = ("trainium-eks", "trainium-workloads")
BOOTSTRAP_PROJECT = "trainium-bootstrap"
# The tag the cluster program puts on every taggable resource: the stack's name (__main__.py
# `tags`; the cluster config refuses to override it). Deploy roles are scoped by it.
STACK_TAG = "stack"


def stack_state_objects(bucket_arn: str, project: str, stack: str) -> list[str]:
    """The S3 objects the DIY backend keeps for one stack (pulumi/pulumi pkg/backend/diy, v3.259.0:
    store.go projectReferenceStore StackBasePath/HistoryDir/BackupDir, lock.go lockPath, state.go
    saveCheckpoint/backupTarget): ``.pulumi/stacks/<project>/<stack>.json`` (``.gz``/``.zst``
    when compressed, ``.bak`` beside it), ``.pulumi/locks/organization/<project>/<stack>/<id>.json``,
    ``.pulumi/history/<project>/<stack>/...`` and ``.pulumi/backups/<project>/<stack>/...``."""
    return [
        f"{bucket_arn}/.pulumi/stacks/{project}/{stack}.json*",
        f"{bucket_arn}/.pulumi/locks/organization/{project}/{stack}/*",
        f"{bucket_arn}/.pulumi/history/{project}/{stack}/*",
        f"{bucket_arn}/.pulumi/backups/{project}/{stack}/*",
    ]


def environment_state_objects(bucket_arn: str, environment: str) -> list[str]:
    return [o for project in STACK_PROJECTS for o in stack_state_objects(bucket_arn, project, environment)]


def bootstrap_state_objects(bucket_arn: str) -> list[str]:
    # `*` in an IAM resource ARN spans `/`: stacks/, locks/organization/, history/, backups/.
    return [f"{bucket_arn}/.pulumi/*/{BOOTSTRAP_PROJECT}/*"]


# Every S3 action that reads or changes an object's data or versions (Service Authorization
# Reference, "Actions defined by Amazon S3": GetObject, GetObjectVersion, GetObjectAttributes,
# GetObjectVersionAttributes, GetObjectTorrent, GetObjectVersionForReplication... all match
# `s3:GetObject*`; S3 API reference, GetObject: with a versionId "you must have the
# s3:GetObjectVersion permission ... s3:GetObject is not required"; RestoreObject brings an
# archived version back; ReplicateObject writes a replica). What a role must never do to state
# that is not its own: ReadOnlyAccess (s3:Get* on *) and `s3:*` would otherwise allow it, and the
# bucket is versioned.
OBJECT_ACCESS_ACTIONS = ("s3:GetObject*", "s3:PutObject*", "s3:DeleteObject*", "s3:RestoreObject", "s3:ReplicateObject")


def bootstrap_denials(bucket_arn: str, bootstrap_secrets_key_arn: str) -> list[dict[str, Any]]:
    """No pipeline role reads, writes or decrypts the bootstrap stack's own state: it names every
    role, key and trust policy, and the administrator's next bootstrap `up` acts on it with admin
    rights (an indirect way round KeepPipelineTrust). Its secrets are under a key of its own."""
    return [
        {
            "Sid": "KeepBootstrapState",
            "Effect": "Deny",
            "Action": list(OBJECT_ACCESS_ACTIONS),
            "Resource": bootstrap_state_objects(bucket_arn),
        },
        {"Sid": "KeepBootstrapSecrets", "Effect": "Deny", "Action": ["kms:*"], "Resource": bootstrap_secrets_key_arn},
    ]


def _meta(bucket_arn: str) -> str:
    # pulumi/pulumi pkg/backend/diy/meta.go: every login reads .pulumi/meta.yaml and writes it only
    # when it is missing (the administrator's first login, when the bootstrap state moved in).
    return f"{bucket_arn}/.pulumi/meta.yaml"


def state_read_statements(
    bucket_arn: str, state_key_arn: str, environment: str, secrets_key_arn: str
) -> list[dict[str, Any]]:
    return [
        {
            "Sid": "ListState",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
            "Resource": bucket_arn,
        },
        {
            "Sid": "ReadState",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": [_meta(bucket_arn), *environment_state_objects(bucket_arn, environment)],
        },
        # SSE-KMS: reading an object decrypts its data key with the bucket's key.
        {
            "Sid": "DecryptState",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:DescribeKey"],
            "Resource": state_key_arn,
        },
        # pulumi/pulumi pkg/cmd/pulumi/stack/secrets.go: a stack with an awskms:// provider
        # decrypts its data key even to preview.
        {
            "Sid": "DecryptOwnSecrets",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:DescribeKey"],
            "Resource": secrets_key_arn,
        },
    ]


def state_write_statements(
    bucket_arn: str, state_key_arn: str, environment: str, secrets_key_arn: str
) -> list[dict[str, Any]]:
    """An update takes a lock object, writes checkpoints, history and backups, then deletes the lock:
    all under its own environment's stacks."""
    return [
        {
            "Sid": "ListState",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
            "Resource": bucket_arn,
        },
        {"Sid": "ReadStateMeta", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": _meta(bucket_arn)},
        {
            "Sid": "WriteState",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Resource": environment_state_objects(bucket_arn, environment),
        },
        {
            "Sid": "UseStateKey",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            "Resource": state_key_arn,
        },
        {
            "Sid": "UseOwnSecretsKey",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            "Resource": secrets_key_arn,
        },
    ]


def other_environment_denials(bucket_arn: str, others: dict[str, str], *, deploy: bool) -> list[dict[str, Any]]:
    """What a role of one environment may never touch of the others sharing this account:
    ``others`` maps each other environment to its secrets key. Explicit denials, because
    ReadOnlyAccess (preview) and the deploy services' `kms:*`/`s3:*` on `*` would allow them."""
    if not others:
        return []
    names = sorted(others)
    statements: list[dict[str, Any]] = [
        {
            "Sid": "NoOtherEnvironmentsState",
            "Effect": "Deny",
            "Action": list(OBJECT_ACCESS_ACTIONS),
            "Resource": [o for env in names for o in environment_state_objects(bucket_arn, env)],
        },
        {
            "Sid": "NoOtherEnvironmentsSecrets",
            "Effect": "Deny",
            "Action": ["kms:*"],
            "Resource": [others[env] for env in names],
        },
    ]
    # IAM user guide, "Controlling access to AWS resources using tags": aws:ResourceTag is the
    # tag on the resource a request acts on, aws:RequestTag a tag the request sets. A resource
    # another environment's stack tagged is out of reach (reads too, where AWS authorizes them by
    # tag), and no deploy may tag one as theirs.
    statements.append(
        {
            "Sid": "NoOtherEnvironmentsResources",
            "Effect": "Deny",
            "Action": "*",
            "Resource": "*",
            "Condition": {"StringEquals": {f"aws:ResourceTag/{STACK_TAG}": names}},
        }
    )
    if deploy:
        statements.append(
            {
                "Sid": "NoTaggingAsOtherEnvironments",
                "Effect": "Deny",
                "Action": "*",
                "Resource": "*",
                "Condition": {"StringEquals": {f"aws:RequestTag/{STACK_TAG}": names}},
            }
        )
    return statements


def preview_policy(
    bucket_arn: str,
    state_key_arn: str,
    environment: str,
    secrets_key_arn: str,
    others: dict[str, str],
    bootstrap_secrets_key_arn: str,
) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            *state_read_statements(bucket_arn, state_key_arn, environment, secrets_key_arn),
            *bootstrap_denials(bucket_arn, bootstrap_secrets_key_arn),
            *other_environment_denials(bucket_arn, others, deploy=False),
        ],
    }


def deploy_policy(
    services: frozenset[str],
    account: str,
    partition: str,
    bucket_arn: str,
    state_key_arn: str,
    protected_role_arns: list[str],
    oidc_provider_arn: str,
    environment: str,
    secrets_key_arn: str,
    others: dict[str, str],
    bootstrap_secrets_key_arn: str,
) -> dict[str, Any]:
    iam_arn = f"arn:{partition}:iam::{account}"
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ManageStackServices",
            "Effect": "Allow",
            "Action": sorted(f"{s}:*" for s in services - {"iam", "sts", "s3"}),
            "Resource": "*",
        },
        # Buckets the stacks own, never the state bucket: its objects are reached only through
        # WriteState below (this environment's stacks), so `s3:*` cannot write another's state.
        *(
            [
                {
                    "Sid": "ManageStackBuckets",
                    "Effect": "Allow",
                    "Action": "s3:*",
                    "NotResource": [bucket_arn, f"{bucket_arn}/*"],
                }
            ]
            if "s3" in services
            else []
        ),
        {
            "Sid": "ManageStackIdentities",
            "Effect": "Allow",
            "Action": "iam:*",
            "Resource": [
                f"{iam_arn}:role/*",
                f"{iam_arn}:policy/*",
                f"{iam_arn}:instance-profile/*",
                f"{iam_arn}:oidc-provider/*",
            ],
        },
        # AWS-managed policies the stacks attach (AmazonEKSWorkerNodePolicy...): read only, and
        # nobody can change those anyway.
        {
            "Sid": "ReadManagedPolicies",
            "Effect": "Allow",
            "Action": ["iam:GetPolicy", "iam:GetPolicyVersion"],
            "Resource": f"arn:{partition}:iam::aws:policy/*",
        },
        {"Sid": "ReadIdentity", "Effect": "Allow", "Action": ["sts:GetCallerIdentity"], "Resource": "*"},
        *state_write_statements(bucket_arn, state_key_arn, environment, secrets_key_arn),
        # A deploy must not edit its own trust or the preview role's, nor the provider they trust.
        # Reads stay allowed: the cluster program's aws.iam.get_session_context calls
        # iam:GetRole on the caller's own role (terraform-provider-aws
        # internal/service/iam/session_context_data_source.go), and an explicit Deny would win.
        {
            "Sid": "KeepPipelineTrust",
            "Effect": "Deny",
            "Action": list(PIPELINE_WRITE_ACTIONS),
            "Resource": sorted([*protected_role_arns, oidc_provider_arn]),
        },
        # ...nor take the state backend away from under every stack.
        {
            "Sid": "KeepStateBucket",
            "Effect": "Deny",
            "Action": [
                "s3:DeleteBucket",
                "s3:DeleteBucketPolicy",
                "s3:PutBucketPolicy",
                "s3:PutBucketVersioning",
                "s3:PutEncryptionConfiguration",
                "s3:PutBucketPublicAccessBlock",
                "s3:PutLifecycleConfiguration",
                "s3:PutBucketOwnershipControls",
                "s3:PutReplicationConfiguration",
                "s3:PutBucketNotification",
            ],
            "Resource": bucket_arn,
        },
        # ...nor purge the state's history: versioning keeps every earlier checkpoint only while
        # nobody may delete a version (an update needs Get/Put/DeleteObject, never a version).
        {
            "Sid": "KeepStateHistory",
            "Effect": "Deny",
            "Action": ["s3:DeleteObjectVersion"],
            "Resource": f"{bucket_arn}/*",
        },
        # ...nor read or rewrite the bootstrap's own state and secrets.
        *bootstrap_denials(bucket_arn, bootstrap_secrets_key_arn),
        {
            "Sid": "KeepStateKey",
            "Effect": "Deny",
            "Action": [
                "kms:ScheduleKeyDeletion",
                "kms:DisableKey",
                "kms:PutKeyPolicy",
                "kms:DisableKeyRotation",
                "kms:DeleteAlias",
                "kms:UpdateAlias",
                "kms:CreateGrant",
            ],
            "Resource": sorted({state_key_arn, secrets_key_arn}),
        },
        *other_environment_denials(bucket_arn, others, deploy=True),
    ]
    return {"Version": "2012-10-17", "Statement": statements}
