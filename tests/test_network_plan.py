import ipaddress
from itertools import combinations

import pytest

from infra.specs.cidrs import plan_subnets


def test_two_zones_split():
    layout = plan_subnets("10.0.0.0/16", "100.64.0.0/16", 2)
    assert layout.public == ["10.0.0.0/18", "10.0.64.0/18"]
    assert layout.private == ["10.0.128.0/18", "10.0.192.0/18"]
    assert layout.node == ["100.64.0.0/17", "100.64.128.0/17"]


@pytest.mark.parametrize("zones", [2, 3, 4])
def test_subnets_are_disjoint_and_inside_their_blocks(zones):
    layout = plan_subnets("10.20.0.0/16", "100.64.0.0/16", zones)
    assert len(layout.public) == len(layout.private) == len(layout.node) == zones
    all_subnets = [ipaddress.ip_network(c) for c in layout.public + layout.private + layout.node]
    assert not any(a.overlaps(b) for a, b in combinations(all_subnets, 2))
    assert all(
        ipaddress.ip_network(c).subnet_of(ipaddress.ip_network("10.20.0.0/16")) for c in layout.public + layout.private
    )
    assert all(ipaddress.ip_network(c).subnet_of(ipaddress.ip_network("100.64.0.0/16")) for c in layout.node)


def test_three_zones_use_quarters_of_the_secondary_block():
    assert plan_subnets("10.0.0.0/16", "100.64.0.0/16", 3).node == [
        "100.64.0.0/18",
        "100.64.64.0/18",
        "100.64.128.0/18",
    ]
