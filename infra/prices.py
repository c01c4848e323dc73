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
    }
    for region in ("us-east-1", "us-east-2", "us-west-2")
}


def instance_hourly(region: str, instance_type: str) -> Optional[Price]:
    """The on-demand hourly price, or None when the table does not know it."""
    return INSTANCE_HOURLY.get(region, {}).get(instance_type)
