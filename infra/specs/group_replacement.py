"""Whether a change replaces a running Trainium node group under its nodes: a pure function of what
EKS reports for the running groups and what the stack file asks for.

A managed node group's instanceTypes, capacityType and subnetIds (its zone) are ForceNew
(terraform-provider-aws internal/service/eks/node_group.go, the schema pulumi-aws bridges: also
amiType, clusterName, diskSize, launchTemplate id/name, nodeGroupName(Prefix), nodeRoleArn,
remoteAccess, which this program derives from nothing a stack file changes). The groups carry
their stack-file names (EKS names a node group once, unique in its cluster), so the replacement
deletes the old group first and EKS terminates its instances, training and all, before the new
group exists. A new name per replacement would create first, but only by launching a second set of
Trainium instances beside the first, which a Capacity Block or a full reservation does not hold
(the reason the groups update with MINIMAL, infra/components/accelerators.py), and it drains the
old nodes all the same; so a replacement is refused while the group runs nodes, as the provisioner
switch is (infra/config/rules.py provisioner_switch_problem).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infra.config.models import AcceleratorNodeGroupConfig, key_name
from infra.specs.placement import Zone


@dataclass(frozen=True)
class RunningGroup:
    """What EKS reports for a running managed node group (DescribeNodegroup)."""

    desired_size: int
    instance_types: tuple[str, ...] = ()
    """Empty when EKS reports none (a Capacity Block group names its type in the launch template)."""
    capacity_type: str | None = None
    zone_ids: tuple[str, ...] = ()


def capacity_type(group: AcceleratorNodeGroupConfig) -> str:
    """The group's EKS capacity type, as infra/components/accelerators.py declares it."""
    return "CAPACITY_BLOCK" if group.capacity_block else "ON_DEMAND"


def group_replacement_problems(
    running: Mapping[str, RunningGroup],
    groups: Sequence[AcceleratorNodeGroupConfig],
    group_zones: Mapping[str, Zone],
) -> list[str]:
    """One problem per stack-file change that would replace a running group with nodes (desired size
    above 0), naming the key, the new value and the running one (what is allowed now)."""
    problems: list[str] = []
    for i, group in enumerate(groups):
        now = running.get(group.name)
        if now is None or now.desired_size <= 0:
            continue
        changes: list[tuple[str, str, str]] = []
        wanted_types = () if group.capacity_block else (group.instance_type,)
        if now.instance_types and wanted_types and tuple(now.instance_types) != wanted_types:
            changes.append(("instanceType", group.instance_type, ", ".join(now.instance_types)))
        if now.capacity_type is not None and now.capacity_type != capacity_type(group):
            changes.append(("capacityReservation", capacity_type(group), now.capacity_type))
        zone = group_zones[group.name].id
        if now.zone_ids and tuple(now.zone_ids) != (zone,):
            changes.append(("azId", zone, ", ".join(now.zone_ids)))
        for field_, new, old in changes:
            problems.append(
                f"{key_name(('acceleratorNodeGroups', i, field_))} = {new!r}: replaces the running node group "
                f"{group.name}, whose {now.desired_size} Trainium node(s) EKS terminates before the new group "
                "exists (the name is fixed, so the old group is deleted first); first stop its training jobs, set "
                "its minSize and desiredSize to 0 and `pulumi up`, then change it, or add a group under another "
                f"name; allowed now: {old!r}"
            )
    return problems
