"""What the cluster costs per hour when no job runs, before FSx: a pure computation.

Idle means every group at its ``minSize``: the system nodes, and the job-support and Trainium
groups at zero unless configured otherwise. Counted: the EKS control plane, the NAT gateways
and their public IPv4 addresses, interface VPC endpoints (per zone-hour; this VPC has none, S3
is a free gateway endpoint), the nodes, their gp3 root volumes and the secrets KMS key.
Not counted: usage-based charges (NAT and cross-zone data, control-plane logs and Container
Insights metrics, S3 requests), which depend on traffic, and FSx, which is sized separately.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from infra.config import StackConfig
from infra.prices import HOURS_PER_MONTH, instance_hourly, service_price


@dataclass(frozen=True)
class CostLine:
    item: str
    quantity: float
    hourly: Optional[float]  # None: no price known for it


@dataclass
class IdleCost:
    lines: list[CostLine] = field(default_factory=list)

    @property
    def hourly(self) -> float:
        """The known part; ``unknown`` lists what is missing from it."""
        return round(sum(line.hourly for line in self.lines if line.hourly is not None), 4)

    @property
    def unknown(self) -> list[str]:
        return [line.item for line in self.lines if line.hourly is None]


def _per_hour(region: str, item: str, quantity: float) -> CostLine:
    price = service_price(region, item)
    if price is None:
        return CostLine(item, quantity, None)
    per_unit = price.usd if price.unit == "hour" else price.usd / HOURS_PER_MONTH
    return CostLine(item, quantity, quantity * per_unit)


def _nodes(region: str, label: str, instance_type: str, count: int, root_gib: int) -> list[CostLine]:
    if count == 0:
        return []
    price = instance_hourly(region, instance_type)
    return [
        CostLine(f"{label}: {count} x {instance_type}", count, count * price.usd if price else None),
        _per_hour(region, "gp3-gib-month", count * root_gib),
    ]


def idle_cost(config: StackConfig, interface_endpoints: int = 0) -> IdleCost:
    region = config.region
    nat_count = 1 if config.network.nat_gateways == "single" else config.network.az_count
    cost = IdleCost(
        [
            _per_hour(region, "eks-control-plane", 1),
            _per_hour(region, "nat-gateway", nat_count),
            # Each NAT gateway's Elastic IP; nodes sit in private subnets with no public address.
            _per_hour(region, "public-ipv4", nat_count),
            _per_hour(region, "interface-endpoint-az", interface_endpoints * config.network.az_count),
            _per_hour(region, "kms-key-month", 1),
        ]
    )
    core, jobs = config.core_node_group, config.job_node_group
    # A group with several types costs what its first (preferred) type costs.
    cost.lines += _nodes(region, "system nodes", core.instance_types[0], core.min_size, core.disk_size_gib)
    cost.lines += _nodes(region, "job-support nodes", jobs.instance_types[0], jobs.min_size, jobs.disk_size_gib)
    for group in config.accelerator_node_groups:
        cost.lines += _nodes(region, group.name, group.instance_type, group.min_size, group.root_volume_gib)
    return cost
