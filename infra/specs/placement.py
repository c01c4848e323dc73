"""Which availability zones the cluster uses and where each accelerator group lives.

Trainium is offered only in some zones of a region, and zone *names* map to different
physical zones in every account, so all decisions use zone *ids* (usw2-az4) from the EC2
instance-type offerings look-up. Pure: the look-up results come in as plain data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infra.config.errors import ConfigError
from infra.config.models import AcceleratorNodeGroupConfig, key_name
from infra.facts.instances import NEURON_INSTANCE_TYPES


@dataclass(frozen=True)
class Zone:
    name: str
    id: str


@dataclass(frozen=True)
class ReservedCapacity:
    """What EC2 says about a Capacity Block (DescribeCapacityReservations)."""

    zone_id: str
    instance_type: str
    start_date: str | None = None
    end_date: str | None = None
    """When the block starts and ends (RFC 3339, UTC); EC2 starts terminating its instances 30 minutes
    before the end."""
    instance_count: int | None = None
    """How many instances the block holds (None: EC2 did not say)."""

    def window(self) -> dict[str, str] | None:
        if self.start_date is None or self.end_date is None:
            return None
        return {"start": self.start_date, "end": self.end_date}


def with_reservation_zones(
    groups: Sequence[AcceleratorNodeGroupConfig], reserved: Mapping[str, ReservedCapacity]
) -> list[AcceleratorNodeGroupConfig]:
    """Groups targeting a Capacity Block take its zone; a pinned zone or an instance type that
    differs from the reservation's is refused (launches would fail: reservations are zonal)."""
    problems: list[str] = []
    placed: list[AcceleratorNodeGroupConfig] = []
    for i, group in enumerate(groups):
        facts = reserved.get(group.name)
        if facts is None:
            placed.append(group)
            continue
        key = key_name(("acceleratorNodeGroups", i))
        reservation = group.capacity_reservation.id if group.capacity_reservation else "?"
        if group.az_id is not None and group.az_id != facts.zone_id:
            problems.append(
                f"{key}.azId = {group.az_id!r}: capacity reservation {reservation} is in {facts.zone_id}; "
                "set azId to that zone or remove it"
            )
        if group.instance_type != facts.instance_type:
            problems.append(
                f"{key}.instanceType = {group.instance_type!r}: capacity reservation {reservation} holds "
                f"{facts.instance_type}"
            )
        ultraserver = NEURON_INSTANCE_TYPES[group.instance_type].ultraserver_nodes
        if ultraserver is not None and facts.instance_count not in (None, ultraserver):
            # A block of another size is not one UltraServer: a job on the group could span two.
            problems.append(
                f"{key}.capacityReservation.id = {reservation!r}: holds {facts.instance_count} {group.instance_type} "
                f"instances, not the {ultraserver} of one UltraServer; allowed: the reservation of one UltraServer's "
                "block (one group per UltraServer)"
            )
        if facts.instance_count is not None and group.max_size > facts.instance_count:
            # The group's launches past the block's size fail, and a gang waiting for them never starts.
            problems.append(
                f"{key}.maxSize = {group.max_size}: capacity reservation {reservation} holds {facts.instance_count} "
                f"instances, so nodes past that never launch; allowed: at most {facts.instance_count}"
            )
        placed.append(group.model_copy(update={"az_id": facts.zone_id}))
    if problems:
        raise ConfigError(problems)
    return placed


@dataclass(frozen=True)
class Placement:
    zones: list[Zone]
    """The VPC's zones in address-slot order, the accelerator zone first (``zone_order``)."""
    group_zones: dict[str, Zone]
    """Accelerator node group name -> the one zone its nodes (and FSx) live in."""

    @property
    def accelerator_zone(self) -> Zone:
        return self.zones[0]


def zone_order(accelerator_zone_id: str | None, zone_ids: set[str]) -> list[str]:
    """The VPC's zones in address-slot order (infra/specs/cidrs.py gives the i-th zone the i-th slot):
    the accelerator zone, then the others by id. Neither depends on where a group sits in the list,
    so listing a new group first or last moves no zone to another zone's addresses."""
    rest = sorted(zone_ids - {accelerator_zone_id})
    return [accelerator_zone_id, *rest] if accelerator_zone_id else rest


def accelerator_zone_id(groups: Sequence[AcceleratorNodeGroupConfig], group_zone_ids: Mapping[str, str]) -> str | None:
    """Where the file system lives: the zone the groups without a pinned zone share, so a group
    pinned elsewhere, wherever it is listed, never moves it (its subnet is ForceNew: a move replaces
    the file system); with every group pinned, the lowest of their zone ids."""
    unpinned = [g for g in groups if g.az_id is None]
    if unpinned:
        return group_zone_ids[unpinned[0].name]
    return min(group_zone_ids.values(), default=None)


def in_deployed_order(placement: Placement, deployed: Sequence[str]) -> Placement:
    """``placement`` with its zones in a running cluster's address-slot order (``deployed``), when they
    are the same zones: a cluster made when zones took slots in another order (the group list's) keeps
    its subnets, and its file system stays in its first zone."""
    by_id = {z.id: z for z in placement.zones}
    if set(by_id) != set(deployed):
        return placement
    return Placement([by_id[z] for z in deployed], placement.group_zones)


def deployed_zones_problem(deployed: Sequence[str], placement: Placement) -> str | None:
    """Why this configuration cannot run on a cluster whose zones are ``deployed`` (in address-slot
    order), or None. Another zone set gives a zone another zone's subnet addresses (EC2 refuses a
    CIDR a live subnet holds, so `pulumi up` stops half-way), changes the core node groups'
    subnetIds, which replaces them, and with a new first zone replaces the file system. The same set
    in another order is kept in the running order (``in_deployed_order``)."""
    wanted = [z.id for z in placement.zones]
    if set(wanted) == set(deployed):
        return None
    pinned = sorted({z.id for z in placement.group_zones.values()} - set(deployed))
    because = f"accelerator groups pinned to {', '.join(pinned)} (azId)" if pinned else "the configuration"
    return (
        f"{key_name(('network', 'azCount'))} = {len(deployed)} / {key_name(('acceleratorNodeGroups',))}: "
        f"the running cluster's zones are {', '.join(deployed)} (in address-slot order; the file system in "
        f"{deployed[0]}); {because} would make them {', '.join(wanted)}, which moves subnets onto other zones' "
        "addresses, replaces the core node groups and, with another first zone, the file system; allowed: "
        f"groups in {', '.join(deployed)}, azCount {len(deployed)} (another zone needs a new stack)"
    )


def choose_placement(
    available: Sequence[Zone],
    offerings: Mapping[str, set[str]],
    groups: Sequence[AcceleratorNodeGroupConfig],
    az_count: int,
    region: str,
) -> Placement:
    """Pick the zones; raise ``ConfigError`` if the configured types cannot be placed.

    ``offerings`` maps instance type -> zone ids offering it. Groups without a pinned zone go
    to the first zone (in id order) that offers every unpinned type, so they share one
    zone with the file system; a pinned zone must offer its group's type.
    """
    by_id = {z.id: z for z in available}
    problems: list[str] = []
    group_zone_ids: dict[str, str] = {}

    for i, group in enumerate(groups):
        if group.az_id is None:
            continue
        key = key_name(("acceleratorNodeGroups", i, "azId"))
        offered = sorted(offerings.get(group.instance_type, set()))
        if group.az_id not in by_id:
            problems.append(f"{key} = {group.az_id!r}: not a zone of {region}; zones: {', '.join(sorted(by_id))}")
        elif group.az_id not in offered:
            problems.append(
                f"{key} = {group.az_id!r}: does not offer {group.instance_type}; "
                f"zones that do: {', '.join(offered) or 'none in ' + region}"
            )
        else:
            group_zone_ids[group.name] = group.az_id

    unpinned = [g for g in groups if g.az_id is None]
    if unpinned:
        wanted = sorted({g.instance_type for g in unpinned})
        common = sorted(set(by_id).intersection(*(offerings.get(t, set()) for t in wanted)))
        if not common:
            detail = "; ".join(f"{t}: {', '.join(sorted(offerings.get(t, set()))) or 'none'}" for t in wanted)
            problems.append(
                f"{key_name(('acceleratorNodeGroups',))}: no zone of {region} offers all of {', '.join(wanted)} "
                f"({detail}); pin groups to zones with azId or use another region"
            )
        else:
            for group in unpinned:
                group_zone_ids[group.name] = common[0]

    if problems:
        raise ConfigError(problems)

    needed = sorted(set(group_zone_ids.values()))
    if len(needed) > az_count:
        raise ConfigError(
            [f"{key_name(('network', 'azCount'))} = {az_count}: accelerator groups need zones {', '.join(needed)}"]
        )
    fillers = [z.id for z in sorted(available, key=lambda z: z.id) if z.id not in needed]
    chosen = needed + fillers[: az_count - len(needed)]
    if len(chosen) < az_count:
        raise ConfigError([f"{key_name(('network', 'azCount'))} = {az_count}: {region} has only {len(by_id)} zones"])
    return Placement(
        zones=[by_id[z] for z in zone_order(accelerator_zone_id(groups, group_zone_ids), set(chosen))],
        group_zones={name: by_id[z] for name, z in group_zone_ids.items()},
    )
