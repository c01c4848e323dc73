"""The cloud look-ups the program makes before declaring anything, returned as plain data.

Under the offline plan and the tests, Pulumi's mocks answer these (offline/plan/fixtures.py).
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.config.errors import EGRESS_IP_ENV, ConfigError, EgressLookupFailed
from infra.config.models import AcceleratorNodeGroupConfig, key_name
from infra.facts.addons import resolve_builds
from infra.facts.instances import InstanceFacts, from_ec2
from infra.specs.group_replacement import RunningGroup
from infra.specs.placement import ReservedCapacity, Zone

# --- the deployer's side of the API endpoint ----------------------------------------------------

# Answers with the caller's public IPv4 address as AWS sees it (through any HTTPS proxy in
# use, as the program's own Kubernetes client would go).
EGRESS_CHECK_URL = "https://checkip.amazonaws.com"
EGRESS_CHECK_TIMEOUT_SECONDS = 5.0


def _ipv4(text: str, source: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text.strip()))
    except ValueError:
        raise EgressLookupFailed(f"{source} gave {text.strip()[:60]!r}, not an IPv4 address") from None


def deployer_egress_ipv4(url: str = EGRESS_CHECK_URL, timeout: float = EGRESS_CHECK_TIMEOUT_SECONDS) -> str:
    """This machine's public IPv4 address: ``$TRAINIUM_EKS_EGRESS_IP`` when set (a network that
    blocks ``url``, or a host that knows its NAT address), else what ``url`` answers within
    ``timeout`` seconds. Raises ``EgressLookupFailed``; only `pulumi up` asks."""
    given = os.environ.get(EGRESS_IP_ENV)
    if given:
        return _ipv4(given, f"${EGRESS_IP_ENV}")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (a fixed https URL)
            text = response.read(64).decode("ascii", "replace")
    except (OSError, ValueError, http.client.HTTPException) as error:  # URLError, timeouts, DNS: OSErrors
        raise EgressLookupFailed(f"{url} gave no answer within {timeout:g} s: {error}") from None
    return _ipv4(text, url)


@dataclass(frozen=True)
class DeployContext:
    """Whether this run deploys, and how it finds the deployer's address; the offline runner and
    the tests put their own in ``DEPLOY_CONTEXT`` so they never touch the network."""

    deploying: Callable[[], bool]
    """True for `pulumi up`'s update (the program runs again after the preview), False for any
    preview, whose checks warn instead of refusing."""
    egress_ipv4: Callable[[], str]


def _not_dry_run() -> bool:
    return not pulumi.runtime.is_dry_run()


PULUMI_CLI = DeployContext(deploying=_not_dry_run, egress_ipv4=deployer_egress_ipv4)
DEPLOY_CONTEXT = PULUMI_CLI


def deploy_context() -> DeployContext:
    return DEPLOY_CONTEXT


# The tag this program puts on the access entries it manages; EKS's own cluster-creator
# entry carries none, which is how the two are told apart on later runs.
MANAGED_ENTRY_TAG = "trainium-eks/managed-access-entry"


@dataclass(frozen=True)
class CloudFacts:
    zones: list[Zone]
    offerings: dict[str, set[str]]
    """instance type -> availability zone ids offering it"""
    instance_facts: dict[str, InstanceFacts]
    account_id: str
    partition: str
    deployer_arn: str
    """The IAM role/user behind the deploying session (not its STS session ARN)."""


def look_up(region: str, instance_types: list[str]) -> CloudFacts:
    azs = aws.get_availability_zones(
        state="available",
        filters=[aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])],
    )
    offerings: dict[str, set[str]] = defaultdict(set)
    if instance_types:
        found = aws.ec2.get_instance_type_offerings(
            location_type="availability-zone-id",
            filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=instance_types)],
        )
        for instance_type, location in zip(found.instance_types, found.locations, strict=True):
            offerings[instance_type].add(location)
    caller = aws.get_caller_identity()
    return CloudFacts(
        zones=[Zone(name, zone_id) for name, zone_id in zip(azs.names, azs.zone_ids, strict=True)],
        offerings=dict(offerings),
        instance_facts={t: from_ec2(t, aws.ec2.get_instance_type(instance_type=t)) for t in instance_types},
        account_id=caller.account_id,
        partition=aws.get_partition().partition,
        deployer_arn=aws.iam.get_session_context(arn=caller.arn).issuer_arn,
    )


def addon_builds(kubernetes_version: str, wanted: list[str], pins: dict[str, str]) -> dict[str, str]:
    """Each add-on's build for ``kubernetes_version``: the pin, else AWS's default build."""

    def default_build(addon: str) -> str:
        try:
            return aws.eks.get_addon_version(
                addon_name=addon, kubernetes_version=kubernetes_version, most_recent=False
            ).version
        except Exception as error:
            if not _no_build(error):
                raise  # credentials, permissions, throttling: not the version's fault
            raise ConfigError(
                [
                    f"{key_name(('kubernetesVersion',))} = {kubernetes_version!r}: the add-on look-up "
                    f"(eks:DescribeAddonVersions) finds no {addon} build for it ({error}); use a version EKS supports "
                    f"(`aws eks describe-addon-versions --addon-name {addon}`)"
                ]
            ) from None

    return resolve_builds(wanted, pins, default_build)


def core_instance_types(types: list[str], group: str = "coreNodeGroup") -> None:
    """Refuse core instance types the region does not offer, before the control plane exists
    (a node group with one fails only after the 10-minute cluster creation)."""
    found = aws.ec2.get_instance_type_offerings(
        location_type="region",
        filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=types)],
    )
    missing = [(i, t) for i, t in enumerate(types) if t not in set(found.instance_types)]
    if missing:
        raise ConfigError(
            [
                f"{key_name((group, 'instanceTypes', i))} = {t!r}: the offering look-up (ec2:DescribeInstanceTypeOfferings) "
                "finds no such instance type in this region"
                for i, t in missing
            ]
        )


def _no_build(error: Exception) -> bool:
    """The add-on version finder's answer when nothing matches (an empty result), or a
    not-found error."""
    text = str(error).lower()
    return _not_found(error) or "empty result" in text or "no eks add-on versions" in text or "no addon" in text


def _not_found(error: Exception) -> bool:
    text = str(error).lower()
    return any(s in text for s in ("not found", "notfound", "couldn't find", "could not find", "no cluster found"))


def bootstrap_admins(cluster_name: str, candidates: list[str], deployer_arn: str) -> set[str]:
    """Which of ``candidates`` already hold EKS's cluster-creator access entry.

    EKS gives the identity that creates the cluster an access entry of its own
    (``bootstrapClusterCreatorAdminPermissions``, which pulumi-eks always turns on:
    pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts, v4.x). Declaring a second entry for that
    principal fails with ResourceInUse. Before the cluster exists the creator is whoever runs
    this `up`; afterwards it is the principal with an entry this program did not tag, so the
    answer stays the same whoever deploys next.
    """
    if not _cluster_exists(cluster_name):
        return {deployer_arn} & set(candidates)
    found: set[str] = set()
    for arn in candidates:
        try:
            entry = aws.eks.get_access_entry(cluster_name=cluster_name, principal_arn=arn)
        except Exception as error:  # the invoke reports only AWS's error text
            if not _not_found(error):
                raise
            continue
        if MANAGED_ENTRY_TAG not in (entry.tags or {}):
            found.add(arn)
    return found


def _cluster_exists(cluster_name: str) -> bool:
    return running_kubernetes_version(cluster_name) is not None


def _running_cluster(cluster_name: str) -> aws.eks.GetClusterResult | None:
    """The EKS cluster as it runs now, or None before its first `up`."""
    try:
        return aws.eks.get_cluster(name=cluster_name)
    except Exception as error:
        if _not_found(error):
            return None
        raise


def running_kubernetes_version(cluster_name: str) -> str | None:
    """The Kubernetes version the cluster's control plane runs now, or None before its first `up`."""
    cluster = _running_cluster(cluster_name)
    return cluster.version if cluster else None


def deployed_zone_ids(cluster_name: str) -> list[str] | None:
    """The running cluster's zones in address-slot order, or None before its first `up`. The control
    plane sits in the private subnets, one per zone, whose CIDRs ascend with the slot
    (infra/specs/cidrs.py), so their order by address is the zones' slot order."""
    cluster = _running_cluster(cluster_name)
    if cluster is None:
        return None
    subnets = [aws.ec2.get_subnet(id=subnet_id) for subnet_id in cluster.vpc_config.subnet_ids or []]
    ordered = sorted(subnets, key=lambda s: ipaddress.ip_network(s.cidr_block))
    return [s.availability_zone_id for s in ordered] or None


def node_group_versions(cluster_name: str) -> dict[str, str]:
    """The Kubernetes version each managed node group of the cluster runs now."""
    names = aws.eks.get_node_groups(cluster_name=cluster_name).names or []
    return {name: aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=name).version for name in names}


def accelerator_group_sizes(cluster_name: str, group_names: list[str]) -> dict[str, int]:
    """The desired size of each managed node group of the cluster named like an accelerator group
    (cluster-autoscaler's; under karpenter there are none)."""
    names = set(aws.eks.get_node_groups(cluster_name=cluster_name).names or []) & set(group_names)
    return {
        name: aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=name).scaling_configs[0].desired_size
        for name in sorted(names)
    }


def running_accelerator_groups(cluster_name: str, group_names: list[str]) -> dict[str, RunningGroup]:
    """What EKS reports for each managed node group of the running cluster named like an accelerator
    group: its desired size and the inputs that replace it (infra/specs/group_replacement.py)."""
    names = set(aws.eks.get_node_groups(cluster_name=cluster_name).names or []) & set(group_names)
    found: dict[str, RunningGroup] = {}
    for name in sorted(names):
        group = aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=name)
        subnets = [aws.ec2.get_subnet(id=subnet_id) for subnet_id in group.subnet_ids or []]
        found[name] = RunningGroup(
            desired_size=group.scaling_configs[0].desired_size,
            instance_types=tuple(group.instance_types or ()),
            capacity_type=group.capacity_type or None,
            zone_ids=tuple(sorted(s.availability_zone_id for s in subnets)),
        )
    return found


def karpenter_instance_count(cluster_name: str) -> int:
    """How many instances Karpenter launched for the cluster are up: it tags every one with
    karpenter.sh/nodepool and eks:eks-cluster-name (the controller policy's request-tag conditions,
    infra/specs/nodepools.py)."""
    found = aws.ec2.get_instances(
        filters=[
            aws.ec2.GetInstancesFilterArgs(name="tag-key", values=["karpenter.sh/nodepool"]),
            aws.ec2.GetInstancesFilterArgs(name="tag:eks:eks-cluster-name", values=[cluster_name]),
        ],
        instance_state_names=["pending", "running", "stopping", "stopped"],
    )
    return len(found.ids or [])


def capacity_blocks(groups: list[AcceleratorNodeGroupConfig]) -> dict[str, ReservedCapacity]:
    """Zone, instance type and end of each Capacity Block a group targets, from EC2.

    On-Demand Capacity Reservations are not looked up (pulumi-aws 7.51 has a data source for
    Capacity Blocks only); their groups must name the zone (azId), which config requires.
    """
    found: dict[str, ReservedCapacity] = {}
    for i, group in enumerate(groups):
        if not group.capacity_block or group.capacity_reservation is None or group.capacity_reservation.id is None:
            continue  # blocks selected by tags (Karpenter) are found by Karpenter; config requires their azId
        reservation_id = group.capacity_reservation.id
        try:
            block = aws.ec2.get_capacity_block_reservation(id=reservation_id)
        except Exception as error:
            if not _not_found(error):
                raise
            raise ConfigError(
                [
                    f"{key_name(('acceleratorNodeGroups', i, 'capacityReservation', 'id'))} = {reservation_id!r}: "
                    "no Capacity Block with this id in this account and region"
                ]
            ) from None
        found[group.name] = ReservedCapacity(
            zone_id=block.availability_zone_id,
            instance_type=block.instance_type,
            start_date=block.start_date,
            end_date=block.end_date,
            # The block's instance count (the upstream Terraform provider's aws_ec2_capacity_block_reservation
            # instance_count; pulumi-aws 7.51.1's docstring for it was copied from a nested field).
            instance_count=block.instance_count,
        )
    return found
