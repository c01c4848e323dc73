"""Lustre NID ranges for FSx's root squash exemption: a pure function of the exempt subnets' CIDRs.

FSx for Lustre takes the clients that root squash leaves alone as ``NoSquashNids``
(LustreRootSquashConfiguration, Amazon FSx API Reference): at most 64 strings, each 11-43 characters,
matching ``^([0-9\\[\\]\\-]*\\.){3}([0-9\\[\\]\\-]*)@tcp$``, either one address (``10.0.1.6@tcp``) or
ranges in brackets (``10.0.[2-10].[1-255]@tcp``). A client's NID is its LNet address, which with
the VPC CNI is always an address of its node's subnet (docs/security.md, root squash), so a subnet's
CIDR block is what gets exempted.

Any IPv4 CIDR block is one such pattern: the octets its prefix covers whole are written as they
are, the one it cuts is a range, and the ones after it are ``[0-255]``: at most 35 characters
(``[0-127].[0-255].[0-255].[0-255]@tcp``) and at least 11 (``1.2.3.4@tcp``), within FSx's limits.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

# LNet's TCP ports on FSx for Lustre: the servers' acceptor (988) and the ports clients and servers
# connect from (1018-1023); FSx user guide, "File system access control with Amazon VPC".
LUSTRE_PORTS = ((988, 988), (1018, 1023))
MAX_NO_SQUASH_NIDS = 64
NID_LENGTHS = (11, 43)
NID_PATTERN = re.compile(r"^([0-9\[\]\-]*\.){3}([0-9\[\]\-]*)@tcp$")


def _octet(low: int, high: int) -> str:
    return str(low) if low == high else f"[{low}-{high}]"


def nid_pattern(cidr: str) -> str:
    """The one Lustre NID pattern that matches exactly the addresses of the IPv4 block ``cidr``."""
    block = ipaddress.IPv4Network(cidr)
    first = block.network_address.packed
    last = block.broadcast_address.packed
    return ".".join(_octet(low, high) for low, high in zip(first, last, strict=True)) + "@tcp"


def no_squash_nids(cidrs: Iterable[str]) -> list[str]:
    """The ``NoSquashNids`` of the blocks ``cidrs``: adjacent blocks merged first (two zones' halves of
    a range become one pattern), one pattern per remaining block, in address order.

    Raises ValueError for anything that is not an IPv4 block, or for more patterns than FSx takes.
    """
    blocks = list(ipaddress.collapse_addresses(ipaddress.IPv4Network(c) for c in cidrs))
    if not blocks:
        raise ValueError("no CIDR block to exempt from root squash")
    if len(blocks) > MAX_NO_SQUASH_NIDS:
        raise ValueError(
            f"{len(blocks)} separate blocks to exempt from root squash; FSx takes at most {MAX_NO_SQUASH_NIDS}"
        )
    return [nid_pattern(str(b)) for b in blocks]
