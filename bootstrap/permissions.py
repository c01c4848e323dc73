"""What the pipeline's roles may do (pure): IAM policy documents for preview, deploy and the
permissions boundary of the roles the stacks create.

Every role belongs to one environment (stack name) and reaches only that environment's state
objects and secrets key; where environments share an account, explicit denials keep it off the
others' state, secrets, data buckets and tagged resources, which its grants would otherwise
reach.

Preview (drift, the prod preview before approval, and pull requests where the environment
allows them): AWS's job-function ViewOnlyAccess plus the reads a `pulumi preview --refresh` of
each declared type makes (``reads_for_types``), reading its environment's state objects and
decrypting with the state key and its environment's secrets key, and denials of every data read
(objects, secret and parameter values, other keys, log events). It writes nothing: pulumi/pulumi
pkg/backend/diy/backend.go (v3.x, ``Preview``) runs a dry run without taking the stack lock,
saving a checkpoint or writing history.

Deploy (`pulumi up` of the cluster and workload stacks): the AWS services behind every
resource type those programs declare (``services_for_types``; a test keeps the map complete
against the offline plans of every stack and variant), IAM within the environment's permissions
boundary (``stack_identity_statements``, ``boundary_policy``), read/write on its environment's
state objects and keys, and explicit denials that keep a deploy from widening its own trust,
removing the state backend or rewriting the bootstrap's state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# AWS's job-function policy for seeing what exists (List/Describe across services) without
# reading data: no s3:GetObject, no secret or parameter values (unlike ReadOnlyAccess's
# `s3:Get*`, `ssm:GetParameter*`... on everything). What a refresh reads beyond it is
# ``reads_for_types`` below.
PREVIEW_MANAGED_POLICY = "job-function/ViewOnlyAccess"

# Provider module (the part after `aws:` in a type token) -> IAM service prefix.
_MODULE_SERVICE = {
    # monitoring.prometheus: managed (Amazon Managed Service for Prometheus: IAM prefix `aps`).
    "amp": "aps",
    "autoscaling": "autoscaling",
    "ec2": "ec2",
    "vpc": "ec2",
    "ecr": "ecr",
    "eks": "eks",
    # storage.kind: efs.
    "efs": "elasticfilesystem",
    "fsx": "fsx",
    "iam": "iam",
    "kms": "kms",
    "s3": "s3",
    # The scheduled checkpoint export (storage.checkpointExport).
    "scheduler": "scheduler",
    "sns": "sns",
    "sqs": "sqs",
    "ssm": "ssm",
}
# Type tokens whose service differs from their module's.
_TYPE_SERVICES = {
    "aws:cloudwatch/logGroup:LogGroup": {"logs"},
    "aws:cloudwatch/dashboard:Dashboard": {"cloudwatch"},
    "aws:cloudwatch/metricAlarm:MetricAlarm": {"cloudwatch"},
    # EventBridge rules and targets live in the provider's cloudwatch module; their IAM prefix is
    # `events` (Service Authorization Reference, "Actions defined by Amazon EventBridge").
    "aws:cloudwatch/eventRule:EventRule": {"events"},
    "aws:cloudwatch/eventTarget:EventTarget": {"events"},
    # A FSx data repository association reads and watches the linked bucket as the caller.
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": {"fsx", "s3"},
    # pulumi-eks's component: the control plane, its IAM roles and OIDC provider, its security
    # groups, and the SSM look-up of the node AMI.
    "eks:index:Cluster": {"eks", "iam", "ec2", "ssm"},
}
# The services the deploy roles may manage: what ``services_for_types`` finds in the cluster
# and workload programs of every shipped stack and of each variant a stack file may switch on
# (nodeProvisioner: karpenter adds its interruption queue and EventBridge rules); tests/test_bootstrap.py
# plans them all and keeps this set equal to what they need.
DEPLOY_SERVICES = frozenset(
    {
        "aps",
        "autoscaling",
        "cloudwatch",
        "ec2",
        "ecr",
        "eks",
        "elasticfilesystem",
        "events",
        "fsx",
        "iam",
        "kms",
        "logs",
        "s3",
        "scheduler",
        "sns",
        "sqs",
        "ssm",
        "sts",
    }
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


# What `pulumi preview --refresh` reads of each resource type: the calls of its read function in
# hashicorp/terraform-provider-aws (internal/service/<module>/...: kms/key.go findKeyInfo
# DescribeKey, GetKeyPolicy, GetKeyRotationStatus, ListResourceTags; iam/role.go resourceRoleRead
# GetRole with the inline and attached policies' List/Get; the others' find* of the same name as
# their Describe/Get call), and for pulumi-eks's component the reads of its children (the EKS
# cluster, its service role and attachments, the cluster's OIDC provider, the kube-proxy add-on).
# ViewOnlyAccess already lists most List/Describe calls; these make the refresh independent of it.
_TYPE_READS: dict[str, tuple[str, ...]] = {
    # internal/service/amp find.go (read at 0eacb54): DescribeWorkspace and DescribeLoggingConfiguration,
    # DescribeRuleGroupsNamespace, DescribeScraper, DescribeAlertManagerDefinition; tags by ListTagsForResource.
    "aws:amp/alertManagerDefinition:AlertManagerDefinition": ("aps:DescribeAlertManagerDefinition",),
    "aws:amp/ruleGroupNamespace:RuleGroupNamespace": ("aps:DescribeRuleGroupsNamespace", "aps:ListTagsForResource"),
    "aws:amp/scraper:Scraper": ("aps:DescribeScraper", "aps:ListTagsForResource"),
    "aws:amp/workspace:Workspace": (
        "aps:DescribeWorkspace",
        "aps:DescribeLoggingConfiguration",
        "aps:ListTagsForResource",
    ),
    # internal/service/sns findTopicAttributesByARN: GetTopicAttributes, for the topic and its policy alike.
    "aws:sns/topic:Topic": ("sns:GetTopicAttributes", "sns:ListTagsForResource"),
    "aws:sns/topicPolicy:TopicPolicy": ("sns:GetTopicAttributes",),
    "aws:autoscaling/tag:Tag": ("autoscaling:DescribeTags",),
    "aws:cloudwatch/dashboard:Dashboard": ("cloudwatch:GetDashboard",),
    "aws:cloudwatch/eventRule:EventRule": ("events:DescribeRule", "events:ListTagsForResource"),
    "aws:cloudwatch/eventTarget:EventTarget": ("events:ListTargetsByRule",),
    "aws:cloudwatch/logGroup:LogGroup": ("logs:DescribeLogGroups", "logs:ListTagsForResource"),
    "aws:cloudwatch/metricAlarm:MetricAlarm": ("cloudwatch:DescribeAlarms", "cloudwatch:ListTagsForResource"),
    "aws:ec2/eip:Eip": ("ec2:DescribeAddresses", "ec2:DescribeAddressesAttribute"),
    "aws:ec2/internetGateway:InternetGateway": ("ec2:DescribeInternetGateways",),
    "aws:ec2/launchTemplate:LaunchTemplate": ("ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions"),
    "aws:ec2/natGateway:NatGateway": ("ec2:DescribeNatGateways",),
    "aws:ec2/placementGroup:PlacementGroup": ("ec2:DescribePlacementGroups",),
    "aws:ec2/routeTable:RouteTable": ("ec2:DescribeRouteTables",),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("ec2:DescribeRouteTables",),
    "aws:ec2/securityGroup:SecurityGroup": ("ec2:DescribeSecurityGroups",),
    "aws:ec2/subnet:Subnet": ("ec2:DescribeSubnets",),
    "aws:ec2/tag:Tag": ("ec2:DescribeTags",),
    "aws:ec2/vpc:Vpc": (
        "ec2:DescribeVpcs",
        "ec2:DescribeVpcAttribute",
        "ec2:DescribeRouteTables",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeNetworkAcls",
    ),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("ec2:DescribeVpcEndpoints", "ec2:DescribePrefixLists"),
    "aws:ec2/vpcIpv4CidrBlockAssociation:VpcIpv4CidrBlockAssociation": ("ec2:DescribeVpcs",),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": ("ecr:GetLifecyclePolicy",),
    # ecr/pull_through_cache_rule.go findPullThroughCacheRuleByRepositoryPrefix.
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": ("ecr:DescribePullThroughCacheRules",),
    "aws:ecr/repository:Repository": ("ecr:DescribeRepositories", "ecr:ListTagsForResource"),
    "aws:eks/accessEntry:AccessEntry": ("eks:DescribeAccessEntry",),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": ("eks:ListAssociatedAccessPolicies",),
    "aws:eks/addon:Addon": ("eks:DescribeAddon",),
    "aws:eks/nodeGroup:NodeGroup": ("eks:DescribeNodegroup",),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("eks:DescribePodIdentityAssociation",),
    # internal/service/efs (read at 0389f46): file_system.go resourceFileSystemRead DescribeFileSystems (tags
    # from its output) and DescribeLifecycleConfiguration; mount_target.go DescribeMountTargets and
    # DescribeMountTargetSecurityGroups; access_point.go DescribeAccessPoints.
    "aws:efs/accessPoint:AccessPoint": ("elasticfilesystem:DescribeAccessPoints",),
    "aws:efs/fileSystem:FileSystem": (
        "elasticfilesystem:DescribeFileSystems",
        "elasticfilesystem:DescribeLifecycleConfiguration",
    ),
    "aws:efs/mountTarget:MountTarget": (
        "elasticfilesystem:DescribeMountTargets",
        "elasticfilesystem:DescribeMountTargetSecurityGroups",
    ),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("fsx:DescribeDataRepositoryAssociations",),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("fsx:DescribeFileSystems", "fsx:ListTagsForResource"),
    "aws:iam/role:Role": ("iam:GetRole", "iam:ListRolePolicies", "iam:GetRolePolicy", "iam:ListAttachedRolePolicies"),
    "aws:iam/rolePolicy:RolePolicy": ("iam:GetRolePolicy",),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("iam:ListAttachedRolePolicies",),
    "aws:kms/alias:Alias": ("kms:ListAliases",),
    "aws:kms/key:Key": ("kms:DescribeKey", "kms:GetKeyPolicy", "kms:GetKeyRotationStatus", "kms:ListResourceTags"),
    # terraform-provider-aws internal/service/scheduler/schedule.go: Read calls GetSchedule (a schedule has no tags).
    "aws:scheduler/schedule:Schedule": ("scheduler:GetSchedule",),
    "aws:sqs/queue:Queue": ("sqs:GetQueueAttributes", "sqs:ListQueueTags"),
    "aws:sqs/queuePolicy:QueuePolicy": ("sqs:GetQueueAttributes",),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("ec2:DescribeSecurityGroupRules",),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("ec2:DescribeSecurityGroupRules",),
    "eks:index:Cluster": (
        "eks:DescribeCluster",
        "eks:DescribeAddon",
        "iam:GetRole",
        "iam:ListRolePolicies",
        "iam:ListAttachedRolePolicies",
        "iam:GetOpenIDConnectProvider",
    ),
}
# The look-ups the programs make whatever they declare (aws.*.get_* in __main__.py and infra/: the
# data sources' calls): the caller, zones, instance types and offerings, capacity reservations, the
# subnets and instances of a running cluster, its node groups, access entries and add-on builds, the
# file system's network interfaces.
_LOOKUP_READS = (
    "sts:GetCallerIdentity",
    "iam:GetRole",
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstances",
    # The file system's network interfaces, whose addresses the training namespaces' egress wall names.
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "eks:DescribeAccessEntry",
    "eks:DescribeAddonVersions",
    "eks:DescribeCluster",
    "eks:DescribeNodegroup",
    "eks:ListNodegroups",
)


def reads_for_types(types: Iterable[str]) -> set[str]:
    """The calls a preview with refresh makes for resources of ``types`` (Kubernetes, random and
    our own component types read nothing in AWS); an AWS or pulumi-eks type nobody mapped is an
    error, as in ``services_for_types``."""
    reads = set(_LOOKUP_READS)
    for type_ in types:
        if type_ in _TYPE_READS:
            reads |= set(_TYPE_READS[type_])
        elif type_.startswith(("aws:", "eks:")):
            raise UnmappedType(f"{type_}: no refresh reads mapped in bootstrap/permissions.py")
    return reads


# The reads the preview roles get: ``reads_for_types`` of every stack and variant's plans (a test
# keeps them equal).
PREVIEW_READS = frozenset({*_LOOKUP_READS, *(a for actions in _TYPE_READS.values() for a in actions)})


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
# that is not its own: the deploy's `s3:*` and any wide read on a preview role (ReadOnlyAccess's
# s3:Get* on *) would otherwise allow it, and the bucket is versioned.
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


def other_environment_denials(
    bucket_arn: str, others: dict[str, str], *, deploy: bool, data_buckets: dict[str, list[str]] | None = None
) -> list[dict[str, Any]]:
    """What a role of one environment may never touch of the others sharing this account:
    ``others`` maps each other environment to its secrets key, ``data_buckets`` to the names (or
    `*` patterns) of the buckets its stacks read. Explicit denials, because the deploy services'
    `kms:*`/`s3:*` on `*` (and any wide read a policy on a preview role may grant) would allow them."""
    if not others:
        return []
    names = sorted(others)
    s3 = bucket_arn.split(":::")[0]  # arn:<partition>:s3
    buckets = sorted({b for env in names for b in (data_buckets or {}).get(env, [])})
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
    # S3 objects carry no bucket tag, and s3:ResourceAccount is the same for every environment of
    # one account: the other environments' data buckets are denied by name (bucket and objects).
    if buckets:
        statements.append(
            {
                "Sid": "NoOtherEnvironmentsData",
                "Effect": "Deny",
                "Action": "s3:*",
                "Resource": [arn for b in buckets for arn in (f"{s3}:::{b}", f"{s3}:::{b}/*")],
            }
        )
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


# Every IAM action that changes an identity, a policy or a provider (IAM's write verbs; reads are
# Get*/List*/Simulate*/Generate*). What a role under the permissions boundary may never do outside
# the instance profiles and service-linked roles below.
IAM_WRITE_ACTIONS = (
    "iam:Add*",
    "iam:Attach*",
    "iam:Change*",
    "iam:Create*",
    "iam:Deactivate*",
    "iam:Delete*",
    "iam:Detach*",
    "iam:Enable*",
    "iam:Put*",
    "iam:Remove*",
    "iam:Reset*",
    "iam:Resync*",
    "iam:Set*",
    "iam:Tag*",
    "iam:Untag*",
    "iam:Update*",
    "iam:Upload*",
)
# Managed policies no deploy may attach to any role, boundary or not (the boundary would cap them,
# but a role that carries one is the very escalation the boundary exists to stop).
FORBIDDEN_MANAGED_POLICIES = ("AdministratorAccess", "IAMFullAccess", "PowerUserAccess")
# The services the stacks pass their roles to (iam:PassedToService; IAM user guide, "Granting a user
# permissions to pass a role to an AWS service"): EKS for the cluster's service role (eks.Cluster)
# and each managed node group's node role (aws.eks.NodeGroup nodeRoleArn); EKS Pod Identity for the
# roles of aws.eks.PodIdentityAssociation and of the add-ons' podIdentityAssociations. No stack
# resource hands a role to EC2 itself (the launch templates carry no instance profile; Karpenter's
# controller, not the deploy, passes its node role to ec2.amazonaws.com). EventBridge Scheduler for
# the scheduled checkpoint export's execution role (aws.scheduler.Schedule target roleArn; Scheduler
# user guide, "Set up the execution role": the caller needs iam:PassRole on it).
# The service-linked roles FSx makes for a file system's S3 links (FSx for Lustre user guide, "Using
# service-linked roles for Amazon FSx"; the driver's install.md above).
FSX_S3_LINK_ROLES = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*"
PASSED_TO_SERVICES = ("eks.amazonaws.com", "pods.eks.amazonaws.com", "scheduler.amazonaws.com")
# Granting actions the deploy may call only with the boundary in the request: IAM's service
# authorization reference supports iam:PermissionsBoundary on these (IAM user guide, "Permissions
# boundaries for IAM entities", the CreateOrChangeOnlyWithBoundary example).
BOUNDED_ROLE_ACTIONS = (
    "iam:AttachRolePolicy",
    "iam:CreateRole",
    "iam:DeleteRolePolicy",
    "iam:DetachRolePolicy",
    "iam:PutRolePolicy",
)


def stack_identity_statements(
    iam_arn: str, partition: str, environment: str, boundary_arn: str
) -> list[dict[str, Any]]:
    """What the deploy may do in IAM: read anything; create a role and grant it permissions only
    with ``boundary_arn`` as its permissions boundary and this environment's stack tag; put the
    boundary on (existing) roles of its own stack; change or pass only roles carrying that tag; the
    cluster's OIDC provider and AWS's service-linked roles.

    The `stack` tag is what the trust edits and PassRole are scoped by, so a role another stack
    tagged never changes hands. A role created with tags is authorized for iam:TagRole too, and
    the service authorization reference does not list iam:PermissionsBoundary for TagRole, so
    nothing here makes tagging depend on the boundary (a first deploy could otherwise fail on every
    new role): an untagged role made outside every stack can be tagged into this one by a merged
    change, which review must catch (docs/security.md, the pipeline's roles)."""
    role = f"{iam_arn}:role/*"
    own = {f"aws:ResourceTag/{STACK_TAG}": environment}
    return [
        {"Sid": "ReadIdentities", "Effect": "Allow", "Action": ["iam:Get*", "iam:List*"], "Resource": "*"},
        {
            "Sid": "GrantOnlyWithinTheBoundary",
            "Effect": "Allow",
            "Action": list(BOUNDED_ROLE_ACTIONS),
            "Resource": role,
            "Condition": {"StringEquals": {"iam:PermissionsBoundary": boundary_arn}},
        },
        {
            # Existing roles of this stack get the boundary on the first `up` that names it; a role
            # of anyone else's cannot be given it (and with it, this stack's tag).
            "Sid": "BoundOwnRoles",
            "Effect": "Allow",
            "Action": "iam:PutRolePermissionsBoundary",
            "Resource": role,
            "Condition": {"StringEquals": {"iam:PermissionsBoundary": boundary_arn, **own}},
        },
        {
            "Sid": "NewRolesCarryTheirStack",
            "Effect": "Deny",
            "Action": "iam:CreateRole",
            "Resource": role,
            "Condition": {"StringNotEquals": {f"aws:RequestTag/{STACK_TAG}": environment}},
        },
        {
            # Calls that carry no iam:PermissionsBoundary: only on this environment's own roles.
            "Sid": "ChangeOwnRoles",
            "Effect": "Allow",
            "Action": ["iam:DeleteRole", "iam:UpdateAssumeRolePolicy", "iam:UpdateRole", "iam:UpdateRoleDescription"],
            "Resource": role,
            "Condition": {"StringEquals": own},
        },
        {"Sid": "TagRoles", "Effect": "Allow", "Action": ["iam:TagRole", "iam:UntagRole"], "Resource": role},
        {
            "Sid": "NoMovingRolesBetweenStacks",
            "Effect": "Deny",
            "Action": ["iam:TagRole", "iam:UntagRole"],
            "Resource": "*",
            # The role already carries another stack's tag (IAM: a Null "false" test means the key
            # is present; absent at a new role's creation).
            "Condition": {
                "ForAnyValue:StringEquals": {"aws:TagKeys": [STACK_TAG]},
                "Null": {f"aws:ResourceTag/{STACK_TAG}": "false"},
                "StringNotEquals": {f"aws:ResourceTag/{STACK_TAG}": environment},
            },
        },
        {
            "Sid": "PassOwnRolesToTheStacksServices",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": role,
            "Condition": {"StringEquals": {**own, "iam:PassedToService": list(PASSED_TO_SERVICES)}},
        },
        {
            "Sid": "NoBoundaryRemoval",
            "Effect": "Deny",
            "Action": ["iam:DeleteRolePermissionsBoundary", "iam:DeleteUserPermissionsBoundary"],
            "Resource": "*",
        },
        {
            "Sid": "NoAdministratorPolicies",
            "Effect": "Deny",
            "Action": ["iam:AttachRolePolicy", "iam:PutRolePermissionsBoundary"],
            "Resource": "*",
            "Condition": {
                "ArnEquals": {
                    "iam:PolicyARN": [f"arn:{partition}:iam::aws:policy/{p}" for p in FORBIDDEN_MANAGED_POLICIES]
                }
            },
        },
        # pulumi-eks's cluster OIDC provider (create_oidc_provider): the GitHub one is kept by
        # KeepPipelineTrust.
        {
            "Sid": "ManageClusterOidcProviders",
            "Effect": "Allow",
            "Action": [
                "iam:AddClientIDToOpenIDConnectProvider",
                "iam:CreateOpenIDConnectProvider",
                "iam:DeleteOpenIDConnectProvider",
                "iam:RemoveClientIDFromOpenIDConnectProvider",
                "iam:TagOpenIDConnectProvider",
                "iam:UntagOpenIDConnectProvider",
                "iam:UpdateOpenIDConnectProviderThumbprint",
            ],
            "Resource": f"{iam_arn}:oidc-provider/*",
        },
        # EKS, its node groups, FSx and Auto Scaling create their service-linked roles on first use
        # as the caller; their policies are AWS's and cannot be edited.
        {
            "Sid": "CreateServiceLinkedRoles",
            "Effect": "Allow",
            "Action": "iam:CreateServiceLinkedRole",
            "Resource": f"{iam_arn}:role/aws-service-role/*",
        },
        # A file system linked to S3 gets a service-linked role of its own
        # (AWSServiceRoleForFSxS3Access_<fs-id>), whose policies FSx attaches and puts as the caller:
        # kubernetes-sigs/aws-fsx-csi-driver v1.9.0 docs/install.md grants these two on exactly this
        # path for that reason. No boundary can ride on a service-linked role, so they are allowed here
        # and nowhere else without one.
        {
            "Sid": "FsxS3LinkRoles",
            "Effect": "Allow",
            "Action": ["iam:AttachRolePolicy", "iam:PutRolePolicy"],
            "Resource": f"{iam_arn}:{FSX_S3_LINK_ROLES}",
        },
    ]


def boundary_policy(
    account: str,
    partition: str,
    environment: str,
    bucket_arn: str,
    key_arns: list[str],
    pipeline_arns: list[str],
    others: dict[str, str],
    data_buckets: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The permissions boundary of every role an environment's stacks create: the most such a role
    can do, whatever its own policies say (IAM user guide, "Permissions boundaries for IAM
    entities": effective permissions are the intersection). Everything the stacks' roles need
    (nodes, Pod Identity roles, CSI drivers, autoscalers, Karpenter's controller, training
    namespaces) stays allowed; what a role minted by a deploy could otherwise use to climb does not:
    IAM writes but for instance profiles (Karpenter's controller makes its own) and service-linked
    roles (the EKS cluster role and the FSx CSI driver create them), passing a role that is not
    this environment's, the state bucket and every pipeline key, the pipeline's roles, OIDC provider
    and this boundary, and (in a shared account) every other environment's resources."""
    iam_arn = f"arn:{partition}:iam::{account}"
    statements: list[dict[str, Any]] = [
        {"Sid": "UpToWhatItsOwnPoliciesGrant", "Effect": "Allow", "Action": "*", "Resource": "*"},
        {
            "Sid": "NoIdentityChanges",
            "Effect": "Deny",
            "Action": list(IAM_WRITE_ACTIONS),
            "NotResource": [f"{iam_arn}:instance-profile/*", f"{iam_arn}:role/aws-service-role/*"],
        },
        {
            "Sid": "PassOnlyThisEnvironmentsRoles",
            "Effect": "Deny",
            "Action": "iam:PassRole",
            "Resource": "*",
            "Condition": {"StringNotEquals": {f"aws:ResourceTag/{STACK_TAG}": environment}},
        },
        {"Sid": "NoPipelineState", "Effect": "Deny", "Action": "s3:*", "Resource": [bucket_arn, f"{bucket_arn}/*"]},
        {"Sid": "NoPipelineKeys", "Effect": "Deny", "Action": "kms:*", "Resource": sorted(key_arns)},
        {
            "Sid": "NoPipelineIdentities",
            "Effect": "Deny",
            "Action": ["iam:*", "sts:*"],
            "Resource": sorted(pipeline_arns),
        },
        *[
            s
            for s in other_environment_denials(bucket_arn, others, deploy=True, data_buckets=data_buckets)
            if s["Sid"] != "NoOtherEnvironmentsState"
        ],
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def preview_denials(
    partition: str, bucket_arn: str, environment: str, state_key_arn: str, secrets_key_arn: str
) -> list[dict[str, Any]]:
    """A preview sees what exists and reads no data: no object but its own stacks' state, no secret
    or parameter value, no decryption but with its state and secrets keys, no log events. Explicit,
    so that no managed policy AWS widens later (nor any other policy on the role) can add them."""
    return [
        {
            "Sid": "NoObjectsButOwnState",
            "Effect": "Deny",
            "Action": ["s3:GetObject*"],
            "NotResource": [_meta(bucket_arn), *environment_state_objects(bucket_arn, environment)],
        },
        {"Sid": "NoSecretValues", "Effect": "Deny", "Action": ["secretsmanager:GetSecretValue"], "Resource": "*"},
        # AWS's public parameters (/aws/service/..., the EKS AMI ids pulumi-eks's nodes/ami.ts reads
        # for node groups it makes, none here) are plain strings; the account's own may be
        # SecureStrings, and a String parameter's value is data all the same.
        {
            "Sid": "NoParameterValues",
            "Effect": "Deny",
            "Action": ["ssm:GetParameter*"],
            "NotResource": f"arn:{partition}:ssm:*::parameter/aws/service/*",
        },
        {
            "Sid": "DecryptOnlyOwnKeys",
            "Effect": "Deny",
            "Action": ["kms:Decrypt"],
            "NotResource": sorted({state_key_arn, secrets_key_arn}),
        },
        {
            "Sid": "NoLogEvents",
            "Effect": "Deny",
            "Action": [
                "logs:FilterLogEvents",
                "logs:GetLogEvents",
                "logs:GetLogRecord",
                "logs:GetQueryResults",
                "logs:StartLiveTail",
                "logs:StartQuery",
            ],
            "Resource": "*",
        },
    ]


def preview_policy(
    bucket_arn: str,
    state_key_arn: str,
    environment: str,
    secrets_key_arn: str,
    others: dict[str, str],
    bootstrap_secrets_key_arn: str,
    partition: str = "aws",
    reads: frozenset[str] = PREVIEW_READS,
    data_buckets: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "RefreshStackResources", "Effect": "Allow", "Action": sorted(reads), "Resource": "*"},
            *state_read_statements(bucket_arn, state_key_arn, environment, secrets_key_arn),
            *preview_denials(partition, bucket_arn, environment, state_key_arn, secrets_key_arn),
            *bootstrap_denials(bucket_arn, bootstrap_secrets_key_arn),
            *other_environment_denials(bucket_arn, others, deploy=False, data_buckets=data_buckets),
        ],
    }


# What the deploy calls on EFS (storage.kind: efs), not the whole service: the file system, its lifecycle, mount
# targets and access points, their tags (EFS authorizes TagResource for tags given on create: CreateFileSystem
# and CreateAccessPoint in the EFS API reference), and the reads of a refresh. terraform-provider-aws
# internal/service/efs at 0389f46: file_system.go CreateFileSystem, PutLifecycleConfiguration,
# UpdateFileSystem (a throughput mode change), DeleteFileSystem; mount_target.go CreateMountTarget,
# ModifyMountTargetSecurityGroups (a changed group), DeleteMountTarget; access_point.go CreateAccessPoint,
# DeleteAccessPoint; tags by TagResource/UntagResource. Nothing here reads or writes data: mounting is
# elasticfilesystem:Client*, which the nodes do without IAM.
EFS_DEPLOY_ACTIONS = (
    "elasticfilesystem:CreateAccessPoint",
    "elasticfilesystem:CreateFileSystem",
    "elasticfilesystem:CreateMountTarget",
    "elasticfilesystem:DeleteAccessPoint",
    "elasticfilesystem:DeleteFileSystem",
    "elasticfilesystem:DeleteMountTarget",
    "elasticfilesystem:DescribeAccessPoints",
    "elasticfilesystem:DescribeFileSystems",
    "elasticfilesystem:DescribeLifecycleConfiguration",
    "elasticfilesystem:DescribeMountTargetSecurityGroups",
    "elasticfilesystem:DescribeMountTargets",
    "elasticfilesystem:ModifyMountTargetSecurityGroups",
    "elasticfilesystem:PutLifecycleConfiguration",
    "elasticfilesystem:TagResource",
    "elasticfilesystem:UntagResource",
    "elasticfilesystem:UpdateFileSystem",
)


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
    boundary_arn: str,
    data_buckets: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    iam_arn = f"arn:{partition}:iam::{account}"
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ManageStackServices",
            "Effect": "Allow",
            "Action": sorted(f"{s}:*" for s in services - {"iam", "sts", "s3", "elasticfilesystem"}),
            "Resource": "*",
        },
        *(
            [{"Sid": "ManageEfs", "Effect": "Allow", "Action": list(EFS_DEPLOY_ACTIONS), "Resource": "*"}]
            if "elasticfilesystem" in services
            else []
        ),
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
        *stack_identity_statements(iam_arn, partition, environment, boundary_arn),
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
            "Resource": sorted([*protected_role_arns, oidc_provider_arn, boundary_arn]),
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
        *other_environment_denials(bucket_arn, others, deploy=True, data_buckets=data_buckets),
    ]
    return {"Version": "2012-10-17", "Statement": statements}
