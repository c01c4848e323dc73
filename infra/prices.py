"""List prices the plan's cost estimate and the cost policy read: one table per region.

Every figure carries its source and the date it was read. A region or item missing from the
table is *unknown* (``None``), never zero: a cost report must not under-state what it cannot
price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str  # "hour", "GiB-month", ...
    source: str
    as_of: str  # ISO date the figure was read


_EC2_ON_DEMAND = "https://aws.amazon.com/ec2/pricing/on-demand/ (Linux, on-demand)"


def _hourly(usd: float, source: str = _EC2_ON_DEMAND, as_of: str = "2026-11-01") -> Price:
    return Price(usd, "hour", source, as_of)


# Instance prices per region; issue 12's estimate extends this table (core types, FSx, NAT, ...).
INSTANCE_HOURLY: dict[str, dict[str, Price]] = {
    region: {
        "trn1.2xlarge": _hourly(1.34375),
        "trn1.32xlarge": _hourly(21.50),
        "trn1n.32xlarge": _hourly(24.78),
        # The general-purpose node groups (issue 13: system nodes and the job-support group).
        "m6i.large": _hourly(0.096),
        "m6i.xlarge": _hourly(0.192),
        "m6i.4xlarge": _hourly(0.768),
        "t3.large": _hourly(0.0832),
    }
    for region in ("us-east-1", "us-east-2", "us-west-2")
}


def instance_hourly(region: str, instance_type: str) -> Optional[Price]:
    """The on-demand hourly price, or None when the table does not know it."""
    return INSTANCE_HOURLY.get(region, {}).get(instance_type)


# What a cluster pays by the hour whether or not anything runs (issue 13's idle figure).
HOURS_PER_MONTH = 730
SERVICE_PRICES: dict[str, dict[str, Price]] = {
    region: {
        "eks-control-plane": _hourly(0.10, "https://aws.amazon.com/eks/pricing/ (standard support)"),
        "nat-gateway": _hourly(0.045, "https://aws.amazon.com/vpc/pricing/ (NAT gateway per hour)"),
        "public-ipv4": _hourly(0.005, "https://aws.amazon.com/vpc/pricing/ (public IPv4 address per hour)"),
        "interface-endpoint-az": _hourly(0.01, "https://aws.amazon.com/privatelink/pricing/ (per endpoint per AZ)"),
        "gp3-gib-month": Price(0.08, "GiB-month", "https://aws.amazon.com/ebs/pricing/ (gp3 storage)", "2026-11-01"),
        "kms-key-month": Price(1.00, "month", "https://aws.amazon.com/kms/pricing/ (customer managed key)", "2026-11-01"),
    }
    for region in ("us-east-1", "us-east-2", "us-west-2")
}


def service_price(region: str, item: str) -> Optional[Price]:
    """A non-instance list price (see SERVICE_PRICES), or None when the table does not know it."""
    return SERVICE_PRICES.get(region, {}).get(item)
