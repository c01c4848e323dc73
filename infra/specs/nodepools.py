"""Karpenter's objects for the Trainium groups: pure functions from the same group specs the
managed node groups are built from (labels, taints, EFA layout, zone), so a change to those
reaches both provisioners.

Sources, all at aws/karpenter-provider-aws v1.14.0 unless said otherwise:
- CRDs pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml and karpenter.sh_nodepools.yaml
  (field names, enums, CEL rules; tests/crd_paths holds their field paths);
- pkg/providers/amifamily/al2023.go (an `al2023@<version>` alias resolves the Neuron variant's
  SSM parameter for Neuron instance types);
- website/content/en/v1.14 (release commit 692ccdd06): getting-started cloudformation.yaml
  (controller policy, interruption queue and its rules), concepts/disruption.md, nodeclasses.md;
- kubernetes-sigs/karpenter v1.14.0 pkg/apis/v1/nodepool.go (budgets, limits.nodes).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from infra.specs.efa import karpenter_interfaces
from infra.specs.node_template import UNHELD_SCALE_DOWN_UNNEEDED_SECONDS
from infra.specs.user_data import nodeadm_user_data

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
DISCOVERY_TAG = "karpenter.sh/discovery"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# The pod annotation that keeps Karpenter from voluntarily disrupting the pod's node
# (concepts/disruption.md, "Pod-Level Controls").
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
ROOT_DEVICE = "/dev/xvda"  # AL2023 (pkg/providers/amifamily/al2023.go EphemeralBlockDevice)


@dataclass(frozen=True)
class Lifetimes:
    expire_after: str
    termination_grace_period: str
    consolidate_after: str


# How long a NodeClaim that Karpenter deletes because its instance is going away anyway may keep
# pods that carry karpenter.sh/do-not-disrupt. The drain never evicts such pods
# (kubernetes-sigs/karpenter v1.14.0 pkg/utils/pod/scheduling.go IsEvictable); it deletes them
# only at the NodeClaim's deletion time + terminationGracePeriod, less the pod's own
# terminationGracePeriodSeconds (node/termination/terminator/terminator.go DeleteExpiringPods,
# nodeclaim/lifecycle/controller.go ensureTerminationGracePeriodTerminationTimeAnnotation). With
# 24h, a reclaimed instance is gone long before: the pods are killed with the instance, no SIGTERM.
# - Capacity Block: Karpenter deletes the NodeClaims 40 minutes before the block ends, 10 before EC2
#   starts reclaiming (karpenter-provider-aws v1.14.0 pkg/controllers/capacityreservation/
#   expiration/controller.go, polled every minute); 8m leaves that minute and one more.
# - Spot: EC2's interruption warning comes 2 minutes ahead; Karpenter deletes the NodeClaim on it
#   (pkg/controllers/interruption/utils.go actionForMessage: CordonAndDrain); 90s leaves the queue's
#   delay. A pod's default 30 s grace then starts 60 s after the warning.
CAPACITY_BLOCK_TERMINATION_GRACE = "8m"
SPOT_TERMINATION_GRACE = "90s"
# After the drain, Karpenter terminates the instance and waits for EC2 before the NodeClaim (and so
# a NodePool being deleted in the foreground) goes: time allowed on top of the grace period.
INSTANCE_TERMINATION_ALLOWANCE_SECONDS = 15 * 60
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def duration_seconds(duration: str) -> int:
    """Seconds of a Karpenter duration (the CRDs' pattern ^([0-9]+(s|m|h))+$, e.g. 1h30m)."""
    parts = re.findall(r"([0-9]+)([smh])", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Karpenter duration: {duration!r}")
    return sum(int(n) * _DURATION_UNITS[u] for n, u in parts)


def consolidate_after(configured: str, held: bool) -> str:
    """A group's NodePool consolidateAfter: the configured one where the gang hold keeps a node its gang waits for
    (``held``: a burnt-in group, infra/specs/gang_hold.py); at least UNHELD_SCALE_DOWN_UNNEEDED elsewhere."""
    if held or configured == "Never" or duration_seconds(configured) >= UNHELD_SCALE_DOWN_UNNEEDED_SECONDS:
        return configured
    return f"{UNHELD_SCALE_DOWN_UNNEEDED_SECONDS // 60}m"


def termination_grace_period(configured: str, capacity_block: bool, spot: bool) -> str:
    """A group's NodePool terminationGracePeriod: the configured one (the drain at expireAfter, AWS
    Health events; node repair ignores it: node/health/controller.go sets the termination time to now), cut for groups whose instances EC2 takes back at a known short notice
    so that their pods get SIGTERM before the instance goes (the constants above)."""
    bound = CAPACITY_BLOCK_TERMINATION_GRACE if capacity_block else SPOT_TERMINATION_GRACE if spot else None
    if bound is None or duration_seconds(configured) <= duration_seconds(bound):
        return configured
    return bound


def delete_timeout(grace: str) -> str:
    """How long `pulumi up`/`destroy` waits for a NodePool to go. pulumi-kubernetes deletes in the
    foreground and waits 10 minutes unless customTimeouts.delete says otherwise (provider/pkg/await/
    await.go Deletion, metadata/overrides.go TimeoutDuration; v4.32.0, 4.34.2 not mirrored); the
    NodeClaims carry ownerReferences with blockOwnerDeletion (kubernetes-sigs/karpenter v1.14.0
    provisioning/scheduling/nodeclaimtemplate.go), so the NodePool stays until every NodeClaim has
    drained (at most ``grace``) and its instance is terminated."""
    return f"{duration_seconds(grace) + INSTANCE_TERMINATION_ALLOWANCE_SECONDS}s"


def ami_alias(release_version: str | None) -> str:
    """The EC2NodeClass alias for a managed node group release version.

    A node group pins `1.34.2-20251112`; the same AMI build is `al2023@v20251112` (al2023.go
    resolvePath: amazon-eks-node-al2023-x86_64-neuron-<k8s>-v<date>). Unset stays `latest`,
    which Karpenter re-resolves: nodes drift to new AMIs, which the Drifted budget holds to
    empty nodes (node_pool)."""
    if release_version is None:
        return "al2023@latest"
    return f"al2023@v{release_version.rsplit('-', 1)[1]}"


def capacity_types(reserved: bool, capacity_block: bool, spot: bool) -> list[str]:
    """The allowed capacity types, in the order Karpenter prefers them whatever the list's order:
    reserved, then spot, then on-demand (website/content/en/v1.14/concepts/nodepools.md,
    "karpenter.sh/capacity-type"; tasks/odcrs.md). A Capacity Block group never falls back, which
    would bill list price for a size planned around the block; spot only where a group opts in
    (and then before on-demand: that is Karpenter's order)."""
    if capacity_block:
        return ["reserved"]
    return (["reserved"] if reserved else []) + (["spot"] if spot else []) + ["on-demand"]


def node_class(
    spec: Any, *, cluster_name: str, node_role: Any, placement_group: Any, hop_limit: int, tags: dict[str, str]
) -> dict[str, Any]:
    """The EC2NodeClass of one accelerator group (``spec``: AcceleratorGroupSpec); ``node_role``
    and ``placement_group`` (None: none) may be Outputs, which Pulumi resolves inside the spec."""
    cfg = spec.config
    body: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": ami_alias(cfg.ami_release_version)}],
        "role": node_role,
        "subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: cluster_name}}],
        "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: cluster_name}}],
        # The same IMDS settings as the node groups' launch templates (tokens required).
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": hop_limit,
        },
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "rootVolume": True,
                "ebs": {
                    "volumeSize": f"{cfg.root_volume_gib}Gi",
                    "volumeType": "gp3",
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        "tags": {**tags, "Name": spec.name},
    }
    if spec.facts.nvme_disks > 0:
        # Karpenter writes the nodeadm localStorage RAID0 setting itself and counts the array as
        # ephemeral storage (nodeclasses.md, spec.instanceStorePolicy).
        body["instanceStorePolicy"] = "RAID0"
    # The locked-memory limit EFA needs and the burn-in's registration label (infra/specs/user_data.py);
    # Karpenter merges a NodeConfig part of userData with its own on AL2023 (nodeclasses.md,
    # spec.userData). RAID0 stays Karpenter's (instanceStorePolicy above).
    user_data = nodeadm_user_data(
        0,
        efa=bool(spec.interfaces),
        node_labels=getattr(spec, "registration_labels", None),
        fast_image_pull=spec.facts.nvme_disks > 0,  # images on Karpenter's RAID0 (instanceStorePolicy)
    )
    if user_data:
        body["userData"] = user_data
    if spec.interfaces:
        body["networkInterfaces"] = [
            {"networkCardIndex": i.network_card_index, "deviceIndex": i.device_index, "interfaceType": i.interface_type}
            for i in karpenter_interfaces(spec.facts.network_cards)
        ]
    reservation = cfg.capacity_reservation
    if reservation is not None:
        body["capacityReservationSelectorTerms"] = [
            {"id": reservation.id} if reservation.id else {"tags": reservation.tags}
        ]
    if placement_group is not None:
        body["placementGroupSelector"] = {"name": placement_group}
    return {"apiVersion": NODECLASS_API, "kind": "EC2NodeClass", "metadata": {"name": spec.name}, "spec": body}


def node_pool(spec: Any, lifetimes: Lifetimes) -> dict[str, Any]:
    """The NodePool of one accelerator group: its labels and taints, its one zone and type,
    maxSize as the node limit, and disruption that leaves running training alone."""
    cfg = spec.config
    requirements = [
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [cfg.instance_type]},
        {"key": ZONE_ID_LABEL, "operator": "In", "values": [spec.zone.id]},
        {
            "key": CAPACITY_TYPE_LABEL,
            "operator": "In",
            "values": capacity_types(cfg.capacity_reservation is not None, cfg.capacity_block, cfg.spot),
        },
    ]
    return {
        "apiVersion": NODEPOOL_API,
        "kind": "NodePool",
        "metadata": {"name": spec.name},
        "spec": {
            "template": {
                "metadata": {"labels": dict(spec.labels)},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": spec.name},
                    "requirements": requirements,
                    "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in spec.taints],
                    # Taints a node starts with and loses once a DaemonSet finds it healthy (a burn-in):
                    # "ignored for provisioning purposes in that pods are not required to tolerate a
                    # StartupTaint" (kubernetes-sigs/karpenter v1.14.0 pkg/apis/v1/nodeclaim.go).
                    # A spec without the field (before the burn-in's) has none.
                    **(
                        {"startupTaints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in startup]}
                        if (startup := getattr(spec, "startup_taints", None))
                        else {}
                    ),
                    # Drain starts at expireAfter even under running pods; terminationGracePeriod
                    # bounds the drain (disruption.md, Expiration and TerminationGracePeriod).
                    "expireAfter": lifetimes.expire_after,
                    "terminationGracePeriod": termination_grace_period(
                        lifetimes.termination_grace_period, cfg.capacity_block, cfg.spot
                    ),
                },
            },
            "limits": {"nodes": str(cfg.max_size)},
            "disruption": {
                # Only nodes with nothing but DaemonSets on them are consolidated away.
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": consolidate_after(
                    lifetimes.consolidate_after, bool(getattr(spec, "startup_taints", None))
                ),
                "budgets": [
                    # With terminationGracePeriod set, drift may disrupt nodes whose pods carry
                    # karpenter.sh/do-not-disrupt (disruption.md, "TerminationGracePeriod"): no
                    # drift disruptions at all, so an AMI or NodeClass change reaches a node only
                    # once it is empty and replaced.
                    {"nodes": "0", "reasons": ["Drifted"]},
                    {"nodes": "100%", "reasons": ["Empty"]},
                ],
            },
        },
    }


# The controller's requests (the chart sets none; the getting-started script sets 1 CPU and 1Gi,
# limits equal). The memory is the documented figure, as request and limit; one CPU per replica is
# sized for large clusters and would not fit the two m6i.large system nodes beside everything else
# (infra/specs/system_capacity.py counts these), so a quarter core, without a CPU limit.
CONTROLLER_RESOURCES = {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}


def chart_values(
    cluster_name: str,
    region: str,
    queue_name: str,
    node_repair: bool,
    node_selector: dict[str, str],
    replicas: int,
) -> dict[str, Any]:
    """charts/karpenter values.yaml (v1.14.0): settings.clusterName, settings.interruptionQueue,
    settings.featureGates.nodeRepair, serviceAccount.name, nodeSelector, controller.env, replicas. The
    endpoint is found through eks:DescribeCluster (EKSIntegrationPolicy). ``replicas``:
    infra/specs/system_capacity.py controller_replicas."""
    return {
        # The chart's two replicas (v1.14.1 values.yaml replicas: 2) must each have a core node of their own
        # (its podAntiAffinity is required on kubernetes.io/hostname): on a one-node core group the second
        # would stay Pending and cluster-autoscaler would add a core node for it that could never go. Its
        # budget (maxUnavailable: 1) lets a drain evict the one replica.
        "replicas": replicas,
        # Without a region in its AWS config the controller asks IMDS (pkg/operator/operator.go
        # NewOperator, v1.14.0) and panics when the metadata service is out of a pod's reach, as
        # it is at hop limit 1 (aws/karpenter-provider-aws#8219); the chart sets no region itself.
        "controller": {"env": [{"name": "AWS_REGION", "value": region}], "resources": CONTROLLER_RESOURCES},
        "settings": {
            "clusterName": cluster_name,
            "interruptionQueue": queue_name,
            "featureGates": {"nodeRepair": node_repair},
        },
        "serviceAccount": {"name": SERVICE_ACCOUNT},
        # Karpenter must never run on nodes it manages; the core group is a managed node group.
        "nodeSelector": node_selector,
    }


# EventBridge rules feeding the interruption queue (cloudformation.yaml, v1.14): name -> pattern.
INTERRUPTION_RULES: dict[str, dict[str, list[str]]] = {
    "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "instance-state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "capacity-reservation-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}
# cloudformation.yaml KarpenterInterruptionQueue: MessageRetentionPeriod 300, SSE on.
QUEUE_RETENTION_SECONDS = 300


def queue_policy(queue_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Id": "EC2InterruptionPolicy",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                },
                {
                    "Sid": "DenyHTTP",
                    "Effect": "Deny",
                    "Action": "sqs:*",
                    "Resource": queue_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                    "Principal": "*",
                },
            ],
        }
    )


def controller_policy(
    partition: str, region: str, account_id: str, cluster_name: str, node_role_arn: str, queue_arn: str
) -> str:
    """The controller's permissions: the statements of cloudformation.yaml (v1.14) in one document,
    scoped as there to this cluster's tags and region."""
    arn = f"arn:{partition}:ec2:{region}"
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": "owned"}
    request_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster_name}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
    }
    launched = [
        f"{arn}:*:{kind}/*"
        for kind in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")
    ]
    profile = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    region_tag = {"aws:ResourceTag/topology.kubernetes.io/region": region}
    request_region = {"aws:RequestTag/topology.kubernetes.io/region": region}
    statements = [
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": [f"{arn}::image/*", f"{arn}::snapshot/*"]
            + [f"{arn}:*:{k}/*" for k in ("security-group", "subnet", "capacity-reservation", "placement-group")],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": f"{arn}:*:launch-template/*",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": launched,
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Condition": {"StringEquals": request_owned, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": launched,
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {
                    **request_owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": f"{arn}:*:instance/*",
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": owned,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": [f"{arn}:*:instance/*", f"{arn}:*:launch-template/*"],
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": node_role_arn,
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": ["iam:CreateInstanceProfile"],
            "Condition": {
                "StringEquals": {**request_owned, **request_region},
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": ["iam:TagInstanceProfile"],
            "Condition": {
                "StringEquals": {**owned, **region_tag, **request_owned, **request_region},
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Condition": {
                "StringEquals": {**owned, **region_tag},
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}",
            "Action": "eks:DescribeCluster",
        },
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": queue_arn,
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
        },
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
            "Action": "ssm:GetParameter",
        },
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts"},
        {
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "iam:ListInstanceProfiles",
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": "iam:GetInstanceProfile",
        },
    ]
    # Compact: IAM caps a role's inline policies at 10,240 characters (whitespace excluded).
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, separators=(",", ":"))


def queue_name(cluster_name: str) -> str:
    """SQS names allow letters, digits, - and _ (cloudformation.yaml names the queue after the cluster)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"{cluster_name}-karpenter")[:80]
