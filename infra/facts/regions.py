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
  there (marked "preview"): its entries come from the Trainium2 read below and the seed stacks.
- Zones: an AZ id is the same physical zone in every account, a zone *name* is mapped per account
  (AWS Regions and Availability Zones guide, "AZ IDs" and "AWS Availability Zones", which also
  says every Region has at least three zones; read 2026-11-28). The names here are realistic
  examples, never the truth for an account.
- Which zones offer a type: known for us-west-2, us-east-1 and us-east-2, from the seed stacks
  this repository was built with (usw2-az4, use1-az6, use2-az3 for Trainium), and for the
  Trainium2-only regions ap-south-2 and ap-southeast-4 from the Trainium2 read below; for every
  other region only the region is known (searched 2026-11-28: EC2 docs, the Trainium and Neuron
  pages, the EKS user guide; no per-zone list found), so its zones and their offerings are
  examples (``zones_sourced`` False) and the policy pack does not check a zone there.

- Trainium2 (trn2.48xlarge beyond the seeds' zone, trn2u.48xlarge, trn2.3xlarge): not in the price
  data (no on-demand price). Their regions and zone ids come from a third-party account's
  ``ec2:DescribeInstanceTypeOfferings`` over its 34 enabled regions on 2026-10-03 (a trn2/trn3
  availability report, "Reading date: 2026-10-03 UTC"; partly verified: one account's view, and
  offerings can differ per account), each such entry naming it (``offering_sources``).

A type offered in none of a region's zones is refused by the zone choice (infra/specs/placement.py:
"no zone of <region> offers ...") in the offline plan, and by the account's own look-up in a deploy.
The earlier refusal by region (infra/config/rules.py ``_group_region_problems``) stays limited to
types the price list prices on demand: for the Trainium2 types the only region list is one
account's, and refusing a deploy before the account's own look-up on it could refuse a region that
account is offered.

Searched and not found (2026-11-28): any region offering trn1 or trn1n outside us-east-1, us-east-2
and us-west-2; the zone ids that offer inf2 outside those three.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
TRN2_OFFERINGS = (
    "a third-party account's ec2:DescribeInstanceTypeOfferings by zone id over its 34 enabled regions, "
    "2026-10-03 (partly verified: one account's view; offerings can differ per account)"
)
_TRN2 = ("trn2.48xlarge", "trn2u.48xlarge", "trn2.3xlarge")


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
    # instance type -> where its zones come from, for a type whose source is not the region's.
    offering_sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def zone_ids(self) -> tuple[str, ...]:
        return tuple(zone_id for _, zone_id in self.zones)


def _seed(
    name: str,
    zones: list[tuple[str, str]],
    offerings: dict[str, set[str]],
    offering_sources: dict[str, str] | None = None,
) -> Region:
    return Region(
        name,
        tuple(zones),
        {t: frozenset(z) for t, z in offerings.items()},
        True,
        f"regions: {VANTAGE}; zones: {_SEEDS}",
        VANTAGE_READ,
        offering_sources or {},
    )


def _example(name: str, zone_prefix: str, types: tuple[str, ...], trn2: tuple[str, ...] = ()) -> Region:
    """A region whose zone offerings are examples; ``trn2`` types are offered there per TRN2_OFFERINGS."""
    zones = tuple((f"{name}{letter}", f"{zone_prefix}-az{n}") for n, letter in enumerate("abc", start=1))
    every = frozenset(zone_id for _, zone_id in zones)
    return Region(
        name,
        zones,
        {t: every for t in (*types, *trn2)},
        False,
        f"regions: {VANTAGE}; zones: {_EXAMPLE_ZONES}",
        VANTAGE_READ,
        {t: TRN2_OFFERINGS for t in trn2},
    )


def _trn2_only(name: str, zone_prefix: str, offerings: dict[str, set[int]]) -> Region:
    """A region where only Trainium2 is known to be offered, with the zone ids TRN2_OFFERINGS saw."""
    zones = tuple((f"{name}{letter}", f"{zone_prefix}-az{n}") for n, letter in enumerate("abc", start=1))
    return Region(
        name,
        zones,
        {t: frozenset(f"{zone_prefix}-az{n}" for n in numbers) for t, numbers in offerings.items()},
        True,
        f"regions and zones: {TRN2_OFFERINGS}; zone names: examples (names are mapped per account)",
        VANTAGE_READ,
        {t: TRN2_OFFERINGS for t in offerings},
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
                # Not in the price data (no on-demand price): the seed stacks' Capacity Block zone, and every
                # zone by TRN2_OFFERINGS.
                "trn2.48xlarge": {"use2-az1", "use2-az2", "use2-az3"},
                **{t: {"use2-az1", "use2-az2", "use2-az3"} for t in _INF2},
            },
            {"trn2.48xlarge": f"use2-az3: {_SEEDS}; use2-az1 to az3: {TRN2_OFFERINGS}"},
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
        # trn2.3xlarge in sa-east-1a, 1b and 1c by TRN2_OFFERINGS: every zone, whatever the account's ids.
        _example("sa-east-1", "sae1", _INF2, trn2=("trn2.3xlarge",)),
        # Trainium2 only. TRN2_OFFERINGS: aps2-az1 to az3 for every size; apse4-az3 for trn2.3xlarge.
        _trn2_only("ap-south-2", "aps2", {t: {1, 2, 3} for t in _TRN2}),
        _trn2_only("ap-southeast-4", "apse4", {"trn2.3xlarge": {3}}),
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
