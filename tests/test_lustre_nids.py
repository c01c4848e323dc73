"""The root squash exemption's NID patterns (infra/specs/lustre_nids.py) match exactly the exempt
subnets' addresses, and every one passes FSx's own limits on NoSquashNids (LustreRootSquashConfiguration,
Amazon FSx API Reference: at most 64, each 11-43 characters, the pattern below)."""

from __future__ import annotations

import ipaddress
import itertools
import re

import pytest

from infra.specs.cidrs import plan_subnets
from infra.specs.lustre_nids import MAX_NO_SQUASH_NIDS, nid_pattern, no_squash_nids

# Copied from the API reference, not imported: the module's own constant could be wrong.
FSX_NID_PATTERN = re.compile(r"^([0-9\[\]\-]*\.){3}([0-9\[\]\-]*)@tcp$")


def expand(pattern: str) -> set[ipaddress.IPv4Address]:
    """Every address a Lustre NID pattern of FSx's form names: each octet a number or ``[low-high]``."""
    assert pattern.endswith("@tcp"), pattern
    octets = []
    for part in pattern.removesuffix("@tcp").split("."):
        if match := re.fullmatch(r"\[(\d+)-(\d+)\]", part):
            low, high = int(match[1]), int(match[2])
            assert 0 <= low < high <= 255, pattern
            octets.append(range(low, high + 1))
        else:
            assert re.fullmatch(r"\d+", part) and int(part) <= 255, pattern
            octets.append(range(int(part), int(part) + 1))
    assert len(octets) == 4, pattern
    return {ipaddress.IPv4Address(".".join(map(str, o))) for o in itertools.product(*octets)}


def assert_fsx_accepts(patterns: list[str]) -> None:
    assert 1 <= len(patterns) <= 64
    for p in patterns:
        assert FSX_NID_PATTERN.fullmatch(p), p
        assert 11 <= len(p) <= 43, p


@pytest.mark.parametrize(
    "cidr",
    ["10.0.0.0/16", "10.0.128.0/18", "10.20.160.0/19", "172.16.7.0/24", "192.168.3.64/26", "10.1.2.3/32"],
)
def test_a_block_becomes_one_pattern_naming_exactly_its_addresses(cidr):
    (pattern,) = no_squash_nids([cidr])
    assert pattern == nid_pattern(cidr)
    assert expand(pattern) == set(ipaddress.IPv4Network(cidr))
    assert_fsx_accepts([pattern])


def test_the_documented_examples_and_the_design_s_range():
    assert nid_pattern("10.0.1.6/32") == "10.0.1.6@tcp"
    assert nid_pattern("10.0.128.0/18") == "10.0.[128-191].[0-255]@tcp"
    assert nid_pattern("192.168.3.64/26") == "192.168.3.[64-127]@tcp"


def test_adjacent_zones_merge_and_separate_ones_stay_apart():
    # Two zones' halves of the upper half of a /16 (a 2-zone dev VPC): one pattern.
    assert no_squash_nids(["10.0.192.0/18", "10.0.128.0/18"]) == ["10.0.[128-255].[0-255]@tcp"]
    # Three zones of a /16 are three /19s that do not form one block.
    cidrs = ["10.20.128.0/19", "10.20.160.0/19", "10.20.192.0/19"]
    patterns = no_squash_nids(cidrs)
    assert set().union(*map(expand, patterns)) == set().union(*(set(ipaddress.IPv4Network(c)) for c in cidrs))
    assert len(patterns) == 2


@pytest.mark.parametrize(("vpc_prefix", "zones"), itertools.product(range(16, 25), range(2, 5)))
def test_every_allowed_network_layout_gives_patterns_fsx_takes(vpc_prefix, zones):
    """network.vpcCidr is /16 to /24 and azCount 2 to 4 (infra/config): the private subnets of any of
    them give valid patterns covering exactly those subnets."""
    private = plan_subnets(f"10.0.0.0/{vpc_prefix}", "100.64.0.0/16", zones).private
    patterns = no_squash_nids(private)
    assert_fsx_accepts(patterns)
    named = set().union(*map(expand, patterns))
    assert named == set().union(*(set(ipaddress.IPv4Network(c)) for c in private))


def test_more_blocks_than_fsx_takes_or_none_are_refused():
    separate = [f"10.0.{2 * i}.0/24" for i in range(MAX_NO_SQUASH_NIDS + 1)]
    with pytest.raises(ValueError, match="at most 64"):
        no_squash_nids(separate)
    assert len(no_squash_nids(separate[:MAX_NO_SQUASH_NIDS])) == MAX_NO_SQUASH_NIDS
    with pytest.raises(ValueError, match="no CIDR block"):
        no_squash_nids([])
    with pytest.raises(ValueError):
        no_squash_nids(["fd00::/64"])
