"""The cloud look-ups the program makes before declaring anything, returned as plain data.

Under the offline plan and the tests, Pulumi's mocks answer these (offline/fixtures.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pulumi_aws as aws

from infra.facts import catalog
from infra.facts.addons import resolve_builds
from infra.facts.catalog import InstanceFacts
from infra.config.models import AcceleratorNodeGroupConfig, key_name
from infra.config.errors import ConfigError
from infra.plans.placement import ReservedCapacity, Zone

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
        for instance_type, location in zip(found.instance_types, found.locations):
            offerings[instance_type].add(location)
    caller = aws.get_caller_identity()
    return CloudFacts(
        zones=[Zone(name, zone_id) for name, zone_id in zip(azs.names, azs.zone_ids)],
        offerings=dict(offerings),
        instance_facts={t: catalog.from_ec2(t, aws.ec2.get_instance_type(instance_type=t)) for t in instance_types},
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
                [f"{key_name(('kubernetesVersion',))} = {kubernetes_version!r}: the add-on look-up "
                 f"(eks:DescribeAddonVersions) finds no {addon} build for it ({error}); use a version EKS supports "
                 f"(aws eks describe-addon-versions --addon-name {addon})"]
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
            [f"{key_name((group, 'instanceTypes', i))} = {t!r}: the offering look-up (ec2:DescribeInstanceTypeOfferings) "
             "finds no such instance type in this region"
             for i, t in missing]
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
    try:
        aws.eks.get_cluster(name=cluster_name)
    except Exception as error:
        if _not_found(error):
            return False
        raise
    return True


def capacity_blocks(groups: list[AcceleratorNodeGroupConfig]) -> dict[str, ReservedCapacity]:
    """Zone and instance type of each Capacity Block a group targets, from EC2.

    On-Demand Capacity Reservations are not looked up (pulumi-aws 7.51 has a data source for
    Capacity Blocks only); their groups must name the zone (azId), which config requires.
    """
    found: dict[str, ReservedCapacity] = {}
    for i, group in enumerate(groups):
        if not group.capacity_block or group.capacity_reservation is None:
            continue
        reservation_id = group.capacity_reservation.id
        try:
            block = aws.ec2.get_capacity_block_reservation(id=reservation_id)
        except Exception as error:
            if not _not_found(error):
                raise
            raise ConfigError(
                [f"{key_name(('acceleratorNodeGroups', i, 'capacityReservation', 'id'))} = {reservation_id!r}: "
                 "no Capacity Block with this id in this account and region"]
            ) from None
        found[group.name] = ReservedCapacity(zone_id=block.availability_zone_id, instance_type=block.instance_type)
    return found
