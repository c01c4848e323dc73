"""List prices the plan's cost estimate and the cost policy read, beside the instance prices in
infra/facts/instances.py: one table per region.

Every figure carries the page it was actually read from (a third-party page where that is
where it was read: aws.amazon.com's price pages cannot be read from where this table is
kept) and the date, and ``copied_from`` names the region whose figure a region reuses. A
region or item missing from the table is *unknown* (``None``), never zero: a cost report must
not under-state what it cannot price. Known gaps (searched again 2026-11-22, no sourced
figure found): FSx for Lustre PERSISTENT_2 at 250 MB/s/TiB (searched again 2026-11-28, the package
registries included: the $0.21 some pages give is Google Cloud Managed Lustre's 250-Perf price in Iowa, not
AWS's), PERSISTENT_1 and SCRATCH_2 in these regions (the AWS FSx pricing page's tables were not
readable, only its prose); FSx backups; Capacity Block reservation fees (set per purchase,
not a list price). Outside REGIONS every figure here is unknown: none was found for another region
(searched 2026-11-28, the price-list mirrors in infra/facts/regions.py included, which carry
instances only); the Neuron instance prices are read per region in infra/facts/instances.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

HOURS_PER_MONTH = 730  # the month AWS's own calculators and price pages use


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str  # "hour", "GiB-month", ...
    source: str
    as_of: str  # ISO date the figure was read
    copied_from: str | None = None  # the region whose figure this is, when not read for this region


REGIONS = ("us-east-1", "us-east-2", "us-west-2")
# Every figure here and in infra/facts/instances.py was read for us-east-1 (or a page that gives one
# "US" rate); the other two regions reuse it. m6i.4xlarge in us-west-2 was checked against a second
# table and matched.
READ_FOR = "us-east-1"
_READ = "2026-11-22"


def read_for_us_east_1(price: Price) -> dict[str, Price]:
    """``price`` in every region of the table, marked as a copy outside the region it was read for."""
    return {region: price if region == READ_FOR else replace(price, copied_from=READ_FOR) for region in REGIONS}


# Everything that is not an instance, keyed by what the estimate asks for.
EKS_STANDARD = "eks-control-plane:STANDARD"
EKS_EXTENDED = "eks-control-plane:EXTENDED"
NAT_GATEWAY = "nat-gateway"
PUBLIC_IPV4 = "public-ipv4"
INTERFACE_ENDPOINT_AZ = "vpc-interface-endpoint-az"
GATEWAY_ENDPOINT = "vpc-gateway-endpoint"
EBS_GP3 = "ebs-gp3"
# Amazon EFS (storage.kind: efs), Regional, Elastic throughput: billed by use alone, so the estimate names
# these with their prices among what it does not estimate (offline/report/cost.py).
EFS_STANDARD = "efs-standard"
EFS_INFREQUENT_ACCESS = "efs-infrequent-access"
EFS_INFREQUENT_ACCESS_READ = "efs-infrequent-access-read"
EFS_ELASTIC_READ = "efs-elastic-read"
EFS_ELASTIC_WRITE = "efs-elastic-write"


def fsx_lustre_key(deployment_type: str, throughput: int | None) -> str:
    return f"fsx-lustre:{deployment_type}:{throughput or '-'}"


_EKS_BLOG = "https://aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing/"
_SERVICES = {
    EKS_STANDARD: Price(0.10, "hour", _EKS_BLOG, _READ),
    # The extended rate is the whole per-cluster charge (not on top of the standard one).
    EKS_EXTENDED: Price(0.60, "hour", _EKS_BLOG, _READ),
    NAT_GATEWAY: Price(
        0.045,
        "hour",
        "https://cloudburn.io/blog/aws-nat-gateway-pricing (US East; US West same per "
        "https://cloudpipelines.pages.dev/guides/aws-nat-gateway-pricing-2026/)",
        _READ,
    ),
    PUBLIC_IPV4: Price(
        0.005,
        "hour",
        "https://www.repost.aws/articles/ARapCqBMkaTfCidGWemmSjAA/public-ipv4-addresses-"
        "cost-projection ($0.005/h per address, in use or idle, since 2024-02-01)",
        _READ,
    ),
    INTERFACE_ENDPOINT_AZ: Price(
        0.01,
        "hour",
        "https://www.factualminds.com/blog/amazon-vpc-pricing-endpoints-peering-"
        "transit-gateway/ (per endpoint per AZ, as on https://aws.amazon.com/privatelink/pricing/)",
        _READ,
    ),
    GATEWAY_ENDPOINT: Price(
        0.0,
        "hour",
        "https://www.usage.ai/blogs/aws-network-costs/ (S3 and DynamoDB gateway endpoints: no hourly or per-GB charge)",
        _READ,
    ),
    EBS_GP3: Price(
        0.08,
        "GiB-month",
        "public us-east-1 price tables that reproduce https://aws.amazon.com/ebs/pricing/ "
        "(gp3 storage; baseline 3000 IOPS and 125 MB/s included); the page copied from was not recorded",
        _READ,
    ),
    **{
        key: Price(
            usd,
            unit,
            "https://www.factualminds.com/blog/amazon-efs-pricing-throughput-modes-storage-classes/ (its "
            '"EFS pricing breakdown — us-east-1, June 2026" table; read as a search excerpt, the AWS page '
            "https://aws.amazon.com/efs/pricing/ not readable beyond its old $0.30/GB-month Standard figure, "
            "which matches)",
            "2026-11-28",
        )
        for key, usd, unit in (
            (EFS_STANDARD, 0.30, "GB-month"),
            (EFS_INFREQUENT_ACCESS, 0.025, "GB-month"),
            (EFS_INFREQUENT_ACCESS_READ, 0.01, "GB"),
            (EFS_ELASTIC_READ, 0.03, "GB"),
            (EFS_ELASTIC_WRITE, 0.06, "GB"),
        )
    },
    fsx_lustre_key("PERSISTENT_2", 125): Price(
        0.145,
        "GiB-month",
        "https://c3x.dev/resources/aws/aws_fsx_lustre_file_system/ (SSD, 125 MB/s/TiB; 1.2 TB about $174/month)",
        _READ,
    ),
    fsx_lustre_key("PERSISTENT_2", 500): Price(
        0.34,
        "GiB-month",
        'https://github.com/hmkim/aws-blast-performance DEPLOYMENT_GUIDE.md (PERSISTENT_2 "500 or 1,000 MB/s '
        'per TiB ... price $0.34 / $0.60 per GB-month"; written 2026-09 or later, its examples in us-east-1, '
        "no source named)",
        "2026-11-28",
    ),
    fsx_lustre_key("PERSISTENT_2", 1000): Price(
        0.60,
        "GiB-month",
        "https://github.com/nextflow-io/website src/content/blog/2023/selecting-the-right-storage-architecture-for-"
        'your-nextflow-pipelines.md (2023-05-04: persistent 125 to 1,000 MB/s/TiB "at prices ranging from $0.145 '
        'to $0.600 per GB month", US East); $0.60 again in hmkim/aws-blast-performance DEPLOYMENT_GUIDE.md',
        "2026-11-28",
    ),
}

# region -> key -> price
SERVICE_PRICES: dict[str, dict[str, Price]] = {
    region: {key: read_for_us_east_1(price)[region] for key, price in _SERVICES.items()} for region in REGIONS
}


def copied_from(region: str) -> str | None:
    """The region whose figures ``region`` reuses, if any (the instance prices are copied the same way:
    tests/test_cost.py holds the two together)."""
    found = {p.copied_from for p in SERVICE_PRICES.get(region, {}).values()}
    return next((r for r in found if r), None)


def service_price(region: str, key: str) -> Price | None:
    """A non-instance price (the keys above), or None when the table does not know it."""
    return SERVICE_PRICES.get(region, {}).get(key)
