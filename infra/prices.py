"""List prices the plan's cost estimate and the cost policy read: one table per region.

Every figure carries its source and the date it was read. A region or item missing from the
table is *unknown* (``None``), never zero: a cost report must not under-state what it cannot
price. Known gaps (no sourced figure found when the table was written, 2026-11-22):
trn2.48xlarge on-demand, FSx for Lustre tiers other than PERSISTENT_2 at 125 MB/s/TiB, FSx
backups, and Capacity Block reservation fees (set per purchase, not a list price).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

HOURS_PER_MONTH = 730  # the month AWS's own calculators and price pages use


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str  # "hour", "GiB-month", ...
    source: str
    as_of: str  # ISO date the figure was read


REGIONS = ("us-east-1", "us-east-2", "us-west-2")

_EC2_ON_DEMAND = "https://aws.amazon.com/ec2/pricing/on-demand/ (Linux, on-demand)"
# Core-type rates as AWS lists them for us-east-1, read from public price tables that copy
# that page; us-east-2 and us-west-2 list the same rates for these families (confirmed for
# m6i.4xlarge in us-west-2 by a second table).
_EC2_CORE = _EC2_ON_DEMAND + " as reproduced in public us-east-1 price tables"
_READ = "2026-11-22"


def _hourly(usd: float, source: str = _EC2_ON_DEMAND, as_of: str = "2026-11-01") -> Price:
    return Price(usd, "hour", source, as_of)


_TRAINIUM = {
    # $21.50/h also in https://www.usage.ai/blogs/aws/ai-ml-cost/trainium-vs-gpu-instances/
    # (June 2026); trn1.2xlarge is one of its 16 chips ($1.34375).
    "trn1.2xlarge": _hourly(1.34375),
    "trn1.32xlarge": _hourly(21.50),
    "trn1n.32xlarge": _hourly(24.78),
}

_CORE = {
    name: _hourly(usd, _EC2_CORE, _READ)
    for name, usd in {
        "t3.medium": 0.0416,
        "t3.large": 0.0832,
        "t3a.medium": 0.0376,
        "t3a.large": 0.0752,
        "m6i.large": 0.096,
        "m6i.xlarge": 0.192,
        "m6i.2xlarge": 0.384,
        "m6i.4xlarge": 0.768,
        "m7i.large": 0.1008,
        "m7i.xlarge": 0.2016,
        "m7i.2xlarge": 0.4032,
        "m7i.4xlarge": 0.8064,
        "c6i.large": 0.085,
        "c6i.xlarge": 0.17,
        "c6i.2xlarge": 0.34,
        "c6i.4xlarge": 0.68,
        "c7i.large": 0.08925,
        "c7i.xlarge": 0.1785,
        "c7i.2xlarge": 0.357,
        "c7i.4xlarge": 0.714,
    }.items()
}

INSTANCE_HOURLY: dict[str, dict[str, Price]] = {region: {**_TRAINIUM, **_CORE} for region in REGIONS}


# Everything that is not an instance, keyed by what the estimate asks for.
EKS_STANDARD = "eks-control-plane:STANDARD"
EKS_EXTENDED = "eks-control-plane:EXTENDED"
NAT_GATEWAY = "nat-gateway"
PUBLIC_IPV4 = "public-ipv4"
INTERFACE_ENDPOINT_AZ = "vpc-interface-endpoint-az"
GATEWAY_ENDPOINT = "vpc-gateway-endpoint"
EBS_GP3 = "ebs-gp3"


def fsx_lustre_key(deployment_type: str, throughput: Optional[int]) -> str:
    return f"fsx-lustre:{deployment_type}:{throughput or '-'}"


_EKS_BLOG = "https://aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing/"
_SERVICES = {
    EKS_STANDARD: Price(0.10, "hour", _EKS_BLOG, _READ),
    # The extended rate is the whole per-cluster charge (not on top of the standard one).
    EKS_EXTENDED: Price(0.60, "hour", _EKS_BLOG, _READ),
    NAT_GATEWAY: Price(0.045, "hour", "https://cloudburn.io/blog/aws-nat-gateway-pricing (US East; US West same per "
                       "https://cloudpipelines.pages.dev/guides/aws-nat-gateway-pricing-2026/)", _READ),
    PUBLIC_IPV4: Price(0.005, "hour", "https://www.repost.aws/articles/ARapCqBMkaTfCidGWemmSjAA/public-ipv4-addresses-"
                       "cost-projection ($0.005/h per address, in use or idle, since 2024-02-01)", _READ),
    INTERFACE_ENDPOINT_AZ: Price(0.01, "hour", "https://aws.amazon.com/privatelink/pricing/ (per endpoint per AZ; "
                                 "rate from https://www.factualminds.com/blog/amazon-vpc-pricing-endpoints-peering-"
                                 "transit-gateway/)", _READ),
    GATEWAY_ENDPOINT: Price(0.0, "hour", "https://www.usage.ai/blogs/aws-network-costs/ (S3 and DynamoDB gateway "
                            "endpoints: no hourly or per-GB charge)", _READ),
    EBS_GP3: Price(0.08, "GiB-month", "https://aws.amazon.com/ebs/pricing/ (gp3 storage; baseline 3000 IOPS and "
                   "125 MB/s included) as reproduced in public us-east-1 price tables", _READ),
    fsx_lustre_key("PERSISTENT_2", 125): Price(
        0.145, "GiB-month", "https://c3x.dev/resources/aws/aws_fsx_lustre_file_system/ (SSD, 125 MB/s/TiB; "
        "1.2 TB about $174/month)", _READ
    ),
}

SERVICE_PRICES: dict[str, dict[str, Price]] = {region: dict(_SERVICES) for region in REGIONS}


def instance_hourly(region: str, instance_type: str) -> Optional[Price]:
    """The on-demand hourly price, or None when the table does not know it."""
    return INSTANCE_HOURLY.get(region, {}).get(instance_type)


def service_price(region: str, key: str) -> Optional[Price]:
    """A non-instance price (the keys above), or None when the table does not know it."""
    return SERVICE_PRICES.get(region, {}).get(key)
