"""How the VPC's address space is cut into subnets: a pure function, tested on its own.

Layout, per availability zone:
- public subnet (primary CIDR): NAT gateways and internet-facing load balancers;
- private subnet (primary CIDR): EKS control-plane network interfaces, internal load balancers, and
  the core (system) nodes with their pods: the clients FSx's root squash exempts (infra/specs/lustre_nids.py);
- node subnet (secondary CIDR): every other node (Trainium, job-support) and, through the VPC CNI,
  its pods. Trainium pods are many and IP-hungry, so they get the large 100.64.0.0/16-style block.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SubnetLayout:
    public: list[str]
    private: list[str]
    node: list[str]


def _split(block: ipaddress.IPv4Network, parts: int) -> list[str]:
    """The first ``parts`` equal slices of ``block`` after rounding ``parts`` up to a power of two."""
    extra_bits = math.ceil(math.log2(parts)) if parts > 1 else 0
    return [str(s) for s in list(block.subnets(prefixlen_diff=extra_bits))[:parts]]


def plan_subnets(vpc_cidr: str, secondary_cidr: str, az_count: int) -> SubnetLayout:
    primary = ipaddress.IPv4Network(vpc_cidr)
    secondary = ipaddress.IPv4Network(secondary_cidr)
    primary_slices = _split(primary, 2 * az_count)
    return SubnetLayout(
        public=primary_slices[:az_count],
        private=primary_slices[az_count:],
        node=_split(secondary, az_count),
    )
