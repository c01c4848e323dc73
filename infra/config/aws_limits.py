"""Rules that mirror limits AWS itself enforces, which the plan can know from the stack file alone:
ARNs of another partition or region, default service quotas, Capacity Block sizes, add-on builds
made for another Kubernetes minor, durations in the wrong unit. Each refusal reads
``<key> = <value>: <why>; allowed: ...`` and says where the limit is documented, so a bad value
stops the program before any resource exists instead of part-way through `pulumi up`.

Quotas: AWS applies a default per account and region, and some can be raised. The plan cannot
read the applied value offline, so it holds a group to the default and lets a stack declare a
raised quota (``serviceQuotas``): a refusal that names the quota code costs one edit, whereas a
quota AWS refuses mid-deploy leaves a half-built cluster. Fixed quotas (tags per resource) have
no such key.
"""

from __future__ import annotations

import re
from typing import Any

from infra.config.models import (
    AcceleratorNodeGroupConfig,
    StackConfig,
    key_name,
)
from infra.facts.addons import KUBE_PROXY, build_version
from infra.facts.instances import NEURON_INSTANCE_TYPES

# ARN: arn:<partition>:<service>:<region>:<account>:<resource> (IAM user guide, "IAM ARNs";
# AWS General Reference, "Amazon Resource Names").
PARTITION_PREFIXES = (("cn-", "aws-cn"), ("us-gov-", "aws-us-gov"))


def region_partition(region: str) -> str:
    """The partition whose ARNs a region's resources carry: aws-cn for cn-*, aws-us-gov for us-gov-*."""
    return next((partition for prefix, partition in PARTITION_PREFIXES if region.startswith(prefix)), "aws")


def arn_region_problem(arn: str, region: str, what: str, why: str) -> str | None:
    """Why ``arn`` (already known to be the ARN of a ``what``, such as "KMS key") cannot serve a cluster
    in ``region``, or None. ``why`` says what needs the resource in the cluster's own region."""
    parts = arn.split(":")
    partition, service, arn_region = parts[1], parts[2], parts[3]
    wanted = region_partition(region)
    if partition != wanted:
        return (
            f"{'an' if what[0] in 'AEIOU' else 'a'} {what} of the {partition!r} partition, but {region} is in "
            f"{wanted!r} (partitions do not share resources); allowed: arn:{wanted}:{service}:{region}:..."
        )
    if arn_region != region:
        return f"in {arn_region}, but the cluster is in {region}; {why}; allowed: arn:{wanted}:{service}:{region}:..."
    return None


# FSx CreateFileSystem KmsKeyId: the key encrypts the file system where it lives. KMS keys are regional;
# even a multi-Region key is a separate key with its own ARN in each Region (AWS KMS developer guide,
# "Multi-Region keys in AWS KMS"), so the ARN names the Region it is used in.
KMS_WHY = "a KMS key encrypts only in its own Region (a multi-Region key has a replica ARN per Region)"

# Amazon EKS service quotas (EKS user guide, "Amazon EKS service quotas"): "Nodes per managed node
# group", default 450 (models.py DEFAULT_NODES_PER_MANAGED_NODE_GROUP), adjustable.
NODES_QUOTA_NAME = "Nodes per managed node group"
# Tags per resource: 50, not adjustable (EC2 user guide, "Tag restrictions"; Amazon EC2 Auto Scaling
# user guide, "Tag naming and usage restrictions"); only aws:-prefixed tags do not count.
MAX_TAGS_PER_RESOURCE = 50
# The most tags the program puts on one resource besides the stack's own `tags`: project, cluster and
# stack on every resource (__main__.py), Name (infra/components/network.py, accelerators.py, cluster.py,
# storage.py), and on a subnet kubernetes.io/cluster/<name> with either its kubernetes.io/role/... load
# balancer role or Karpenter's discovery tag (infra/components/network.py, __main__.py). A test counts
# them on every resource of the offline plan (tests/test_refusal_classes.py). Tags EKS adds itself to a
# managed group's instances are not counted: the plan cannot see them.
PROGRAM_TAGS_PER_RESOURCE = 6

# Capacity Blocks for ML (EC2 user guide, "Capacity Blocks for ML"): "Each Capacity Block can have up
# to 64 instances, and you can have up to 256 instances across Capacity Blocks"; of the Neuron types, offered for trn1.32xlarge and trn2.48xlarge (its "Supported
# instance types and Regions"). A new type is added here once that page lists it.
MAX_INSTANCES_PER_CAPACITY_BLOCK = 64
MAX_INSTANCES_ACROSS_CAPACITY_BLOCKS = 256
CAPACITY_BLOCK_TYPES = ("trn1.32xlarge", "trn2.48xlarge")
# UltraServers are bought as UltraServer Capacity Blocks, "each UltraServer corresponds to one Capacity
# Block", the UltraServer types being P6e-GB200 and Trn2, the latter in preview (EC2 user guide, "How
# Capacity Blocks work"): trn2u.48xlarge, four instances per UltraServer (ultraserver_nodes in
# infra/facts/instances.py). A group launching into one such block therefore holds one UltraServer.
ULTRASERVER_CAPACITY_BLOCK_TYPES = ("trn2u.48xlarge",)

# A Trainium node boots and joins (~5 min), registers its device plugins (~2 min), runs the burn-in
# (13 min at most, infra/specs/burn_in_objects.py) and pulls a 10+ GB training image (5-10 min)
# before its first step: a node that expires sooner never trains.
MIN_EXPIRE_AFTER_SECONDS = 3600
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def duration_seconds(duration: str) -> int | None:
    """Seconds of a Karpenter duration such as 1h30m, or None for Never and anything else."""
    parts = re.findall(r"([0-9]+)(s|m|h)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        return None
    return sum(int(n) * DURATION_UNITS[u] for n, u in parts)


def aws_limit_problems(config: StackConfig) -> list[str]:
    problems: list[str] = []
    problems += _arn_problems(config)
    problems += _addon_minor_problems(config)
    problems += _node_quota_problems(config)
    problems += _tag_count_problems(config)
    problems += _capacity_block_problems(config)
    problems += _duration_problems(config)
    return problems


def _arn_problems(config: StackConfig) -> list[str]:
    kms = config.storage.kms_key_id
    if kms is None or not re.fullmatch(r"arn:[a-z-]+:kms:[a-z0-9-]+:[0-9]{12}:key/.+", kms):
        return []  # no key, or not an ARN: the storage rules refuse the shape
    problem = arn_region_problem(kms, config.region, "KMS key", KMS_WHY)
    return [f"{key_name(('storage', 'kmsKeyId'))} = {kms!r}: {problem}"] if problem else []


def _addon_minor_problems(config: StackConfig) -> list[str]:
    """kube-proxy's builds follow Kubernetes minors: v1.34.x-eksbuild.N runs on 1.34 (EKS user guide,
    "Manage kube-proxy in Amazon EKS clusters", the kube-proxy versions table, one row per Kubernetes
    version). The other add-ons' versions carry no Kubernetes minor; EKS's DescribeAddonVersions
    says which minors a build supports, which only a deploy asks."""
    build = config.addon_versions.get(KUBE_PROXY)
    version = build_version(build) if build else None
    if version is None or not re.fullmatch(r"1\.[0-9]{2}", config.kubernetes_version):
        return []
    built_for = f"{version[0]}.{version[1]}"
    if built_for == config.kubernetes_version:
        return []
    return [
        f"{key_name(('addonVersions', KUBE_PROXY))} = {build!r}: a kube-proxy build for Kubernetes {built_for}, but "
        f"kubernetesVersion is {config.kubernetes_version}, and EKS offers each kube-proxy build for its own minor only; "
        f"allowed: a v{config.kubernetes_version}.<patch>-eksbuild.<n> build (`aws eks describe-addon-versions "
        f"--addon-name kube-proxy --kubernetes-version {config.kubernetes_version}`), or remove the pin to take "
        "EKS's default for the version"
    ]


def _node_quota_problems(config: StackConfig) -> list[str]:
    """Every managed node group's maxSize against "Nodes per managed node group": CreateNodegroup
    refuses a larger scalingConfig.maxSize (EKS API reference, NodegroupScalingConfig maxSize). Under
    Karpenter the Trainium groups are NodePools, whose limit is no managed group's."""
    quota = config.service_quotas.nodes_per_managed_node_group
    groups: list[tuple[tuple[Any, ...], int]] = [
        (("coreNodeGroup", "maxSize"), config.core_node_group.max_size),
        (("jobNodeGroup", "maxSize"), config.job_node_group.max_size),
    ]
    if config.node_provisioner == "cluster-autoscaler":
        groups += [
            (("acceleratorNodeGroups", i, "maxSize"), g.max_size) for i, g in enumerate(config.accelerator_node_groups)
        ]
    declared = "nodes_per_managed_node_group" in config.service_quotas.model_fields_set
    source = (
        f"the quota serviceQuotas.nodesPerManagedNodeGroup declares ({quota})"
        if declared
        else f'EKS\'s default quota "{NODES_QUOTA_NAME}" ({quota})'
    )
    return [
        f"{key_name(loc)} = {size}: more than {source}, so EKS refuses the node group; allowed: at most {quota}, "
        "or, once the account's quota is raised (it is adjustable: request it in the Service Quotas console under "
        f"Amazon EKS, or find its code with `aws service-quotas list-service-quotas --service-code eks --query "
        f"\"Quotas[?QuotaName=='{NODES_QUOTA_NAME}']\"`), set serviceQuotas.nodesPerManagedNodeGroup to the "
        "raised value"
        for loc, size in groups
        if size > quota
    ]


def _tag_count_problems(config: StackConfig) -> list[str]:
    room = MAX_TAGS_PER_RESOURCE - PROGRAM_TAGS_PER_RESOURCE
    if len(config.tags) <= room:
        return []
    return [
        f"{key_name(('tags',))}: {len(config.tags)} tags; with the program's own (up to {PROGRAM_TAGS_PER_RESOURCE} on one "
        f"resource: project, cluster, stack, Name, and a subnet's Kubernetes tags) that is more "
        f"than the {MAX_TAGS_PER_RESOURCE} tags AWS allows per resource (a fixed limit, not adjustable), and tagging "
        f"would fail part-way; allowed: at most {room} tags"
    ]


def _capacity_block_problems(config: StackConfig) -> list[str]:
    problems = []
    for i, group in enumerate(config.accelerator_node_groups):
        if not group.capacity_block:
            continue
        key = key_name(("acceleratorNodeGroups", i))
        if group.instance_type not in CAPACITY_BLOCK_TYPES + ULTRASERVER_CAPACITY_BLOCK_TYPES:
            problems.append(
                f"{key}.capacityReservation.type = 'capacity-block': Capacity Blocks for ML offer no "
                f"{group.instance_type} (of the Neuron types: {', '.join(CAPACITY_BLOCK_TYPES)}, and "
                f"{', '.join(ULTRASERVER_CAPACITY_BLOCK_TYPES)} as Trn2 UltraServers; EC2 user guide, "
                '"Capacity Blocks for ML" and "How Capacity Blocks work"); allowed: one of those instance types, '
                "or type: on-demand for an On-Demand Capacity Reservation"
            )
        problems += _block_size_problems(key, group)
    return problems


def _block_size_problems(key: str, group: AcceleratorNodeGroupConfig) -> list[str]:
    """A group launching into one block (named by id) never holds more than that block's instances;
    one selecting blocks by tag (Karpenter) never more than an account's blocks together."""
    reservation = group.capacity_reservation
    if reservation is None:
        return []
    facts = NEURON_INSTANCE_TYPES.get(group.instance_type)
    ultraserver = facts.ultraserver_nodes if facts else None
    if ultraserver is not None and group.max_size > ultraserver:
        return [
            f"{key}.maxSize = {group.max_size}: a {group.instance_type} group is one UltraServer of {ultraserver} "
            f'instances, bought as one UltraServer Capacity Block (EC2 user guide, "How Capacity Blocks work"), so '
            "a job on the group runs inside one UltraServer and nodes past it never launch; allowed: at most "
            f"{ultraserver}, or another group for a second UltraServer"
        ]
    if reservation.id is not None and group.max_size > MAX_INSTANCES_PER_CAPACITY_BLOCK:
        return [
            f"{key}.maxSize = {group.max_size}: the group launches into one Capacity Block ({reservation.id}), and a "
            f'Capacity Block holds at most {MAX_INSTANCES_PER_CAPACITY_BLOCK} instances (EC2 user guide, "Capacity '
            f'Blocks for ML"), so nodes past that never launch; allowed: at most {MAX_INSTANCES_PER_CAPACITY_BLOCK} '
            "(the block's own instance count), or another group for a second block"
        ]
    if reservation.id is None and group.max_size > MAX_INSTANCES_ACROSS_CAPACITY_BLOCKS:
        return [
            f"{key}.maxSize = {group.max_size}: the group launches into the Capacity Blocks its tags select, and an "
            f"account holds at most {MAX_INSTANCES_ACROSS_CAPACITY_BLOCKS} instances across Capacity Blocks (EC2 user "
            f'guide, "Capacity Blocks for ML"), so nodes past that never launch; allowed: at most '
            f"{MAX_INSTANCES_ACROSS_CAPACITY_BLOCKS}"
        ]
    return []


def _duration_problems(config: StackConfig) -> list[str]:
    if config.node_provisioner != "karpenter":
        return []
    expire = config.karpenter.expire_after
    seconds = duration_seconds(expire)
    if seconds is None or seconds >= MIN_EXPIRE_AFTER_SECONDS:
        return []
    return [
        f"{key_name(('karpenter', 'expireAfter'))} = {expire!r}: a Trainium node lives {seconds} s, shorter than its "
        "start-up (boot, device plugins, the 13-minute burn-in, a 10+ GB image pull) before a first training step, "
        "so it would be replaced before it trains (hours written as minutes or seconds?); allowed: at least 1h, "
        "such as the default 720h, or Never"
    ]
