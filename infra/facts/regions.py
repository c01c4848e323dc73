"""Where the catalog's Neuron types run: the regions, their zones, and which zones offer each type.

One table, read by the stack validation (a region without any Neuron type is refused as such), the
policy pack (``accelerator-single-zone`` checks a group's zone against it) and the offline plan
(``offline/plan/fixtures.py`` answers EC2's zone and offering look-ups from it). A deploy still
looks the offerings up in the account; this table is what is known without one.

Sources, each region's entry naming its own:

- Which regions offer each type: the instance data of instances.vantage.sh (built from the AWS
  price list API), as vendored in tsaol/aws-gpu data/{trn1,trn1n,trn2,inf2}_instances.js at
  7412fd256c5e (its files say "Last updated: 2026-01-21"; read 2026-11-28). A region is listed
  where that data holds an on-demand price for the type. trn2.48xlarge has no price and no region
  there (marked "preview"): its only entry is the seed stacks' us-east-2 one below.
- Zones: an AZ id is the same physical zone in every account, a zone *name* is mapped per account
  (AWS Regions and Availability Zones guide, "AZ IDs" and "AWS Availability Zones", which also
  says every Region has at least three zones; read 2026-11-28). The names here are realistic
  examples, never the truth for an account.
- Which zones offer a type: known only for us-west-2, us-east-1 and us-east-2, from the seed
  stacks this repository was built with (usw2-az4, use1-az6, use2-az3 for Trainium); for every
  other region only the region is known (searched 2026-11-28: EC2 docs, the Trainium and Neuron
  pages, the EKS user guide; no per-zone list found), so its zones and their offerings are
  examples (``zones_sourced`` False) and the policy pack does not check a zone there.

Searched and not found (2026-11-28): any region offering trn1, trn1n or trn2 outside us-east-1,
us-east-2 and us-west-2; the zone ids that offer inf2 outside those three.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

VANTAGE = (
    "instances.vantage.sh data (from the AWS price list API) as vendored in tsaol/aws-gpu "
    "data/{trn1,trn1n,trn2,inf2}_instances.js at 7412fd256c5e, 'Last updated: 2026-01-21'"
)
VANTAGE_READ = "2026-11-28"
_SEEDS = "the seed stacks' zones (Trainium in usw2-az4, use1-az6, use2-az3), not re-read from a page here"
_EXAMPLE_ZONES = (
    "only the region is known to offer these types: zone names and ids are examples in the real format "
    "(AWS Regions and Availability Zones guide: at least three zones per Region), every one offering them"
)

_INF2 = ("inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge")


@dataclass(frozen=True)
class Region:
    name: str
    # (zone name, zone id); names are mapped per account, so these are realistic examples.
    zones: tuple[tuple[str, str], ...]
    # instance type -> zone ids offering it
    offerings: Mapping[str, frozenset[str]]
    # False: which zones offer a type is an example, only the region is known.
    zones_sourced: bool
    source: str
    as_of: str

    @property
    def zone_ids(self) -> tuple[str, ...]:
        return tuple(zone_id for _, zone_id in self.zones)


def _seed(name: str, zones: list[tuple[str, str]], offerings: dict[str, set[str]]) -> Region:
    return Region(
        name,
        tuple(zones),
        {t: frozenset(z) for t, z in offerings.items()},
        True,
        f"regions: {VANTAGE}; zones: {_SEEDS}",
        VANTAGE_READ,
    )


def _example(name: str, zone_prefix: str, types: tuple[str, ...]) -> Region:
    zones = tuple((f"{name}{letter}", f"{zone_prefix}-az{n}") for n, letter in enumerate("abc", start=1))
    every = frozenset(zone_id for _, zone_id in zones)
    return Region(
        name, zones, {t: every for t in types}, False, f"regions: {VANTAGE}; zones: {_EXAMPLE_ZONES}", VANTAGE_READ
    )


NEURON_REGIONS: dict[str, Region] = {
    region.name: region
    for region in (
        _seed(
            "us-west-2",
            [
                ("us-west-2a", "usw2-az2"),
                ("us-west-2b", "usw2-az1"),
                ("us-west-2c", "usw2-az3"),
                ("us-west-2d", "usw2-az4"),
            ],
            {
                "trn1.2xlarge": {"usw2-az3", "usw2-az4"},
                "trn1.32xlarge": {"usw2-az4"},
                "trn1n.32xlarge": {"usw2-az4"},
                **{t: {"usw2-az1", "usw2-az2", "usw2-az4"} for t in _INF2},
            },
        ),
        _seed(
            "us-east-1",
            [
                ("us-east-1a", "use1-az1"),
                ("us-east-1b", "use1-az2"),
                ("us-east-1c", "use1-az4"),
                ("us-east-1d", "use1-az6"),
                ("us-east-1e", "use1-az3"),
                ("us-east-1f", "use1-az5"),
            ],
            {
                "trn1.2xlarge": {"use1-az6", "use1-az5"},
                "trn1.32xlarge": {"use1-az6"},
                "trn1n.32xlarge": {"use1-az6"},
                **{t: {"use1-az1", "use1-az2", "use1-az6"} for t in _INF2},
            },
        ),
        _seed(
            "us-east-2",
            [("us-east-2a", "use2-az1"), ("us-east-2b", "use2-az2"), ("us-east-2c", "use2-az3")],
            {
                "trn1.2xlarge": {"use2-az3"},
                "trn1.32xlarge": {"use2-az3"},
                "trn1n.32xlarge": {"use2-az3"},
                # Not in the price data (no on-demand price): the seed stacks' Capacity Block zone.
                "trn2.48xlarge": {"use2-az3"},
                **{t: {"use2-az1", "use2-az2", "use2-az3"} for t in _INF2},
            },
        ),
        # Inferentia2 only. Zone id prefixes follow the guide's examples (euw1-az1 for eu-west-1).
        _example("ap-northeast-1", "apne1", _INF2),
        _example("ap-northeast-2", "apne2", ("inf2.xlarge",)),
        _example("ap-south-1", "aps1", _INF2),
        _example("ap-southeast-1", "apse1", _INF2),
        _example("ap-southeast-2", "apse2", _INF2),
        _example("eu-central-1", "euc1", _INF2),
        _example("eu-north-1", "eun1", _INF2),
        _example("eu-west-1", "euw1", _INF2),
        _example("eu-west-2", "euw2", _INF2),
        _example("eu-west-3", "euw3", _INF2),
        _example("sa-east-1", "sae1", _INF2),
    )
}


def regions_offering(instance_types: list[str] | tuple[str, ...]) -> list[str]:
    """The regions where any of ``instance_types`` is offered, in the table's order."""
    return [name for name, region in NEURON_REGIONS.items() if any(t in region.offerings for t in instance_types)]


def checked_zone_offerings() -> dict[str, dict[str, frozenset[str]]]:
    """zone id -> (instance type -> zone ids of its region offering it), for the regions whose zone
    offerings come from a source: what the policy pack checks a group's zone against."""
    found: dict[str, dict[str, frozenset[str]]] = {}
    for region in NEURON_REGIONS.values():
        if region.zones_sourced:
            for zone_id in region.zone_ids:
                found[zone_id] = dict(region.offerings)
    return found
