import pytest

from infra.config.errors import ConfigError
from infra.config.models import AcceleratorNodeGroupConfig
from infra.specs.placement import Zone, choose_placement
from offline.plan import fixtures

US_WEST_2 = [Zone(n, i) for n, i in fixtures.ZONES["us-west-2"]]
OFFERS = fixtures.OFFERINGS["us-west-2"]


def group(name: str, instance_type: str, az_id: str | None = None) -> AcceleratorNodeGroupConfig:
    return AcceleratorNodeGroupConfig(name=name, instance_type=instance_type, max_size=2, az_id=az_id)


def test_picks_the_zone_offering_every_type_first():
    placement = choose_placement(
        US_WEST_2, OFFERS, [group("a", "trn1.32xlarge"), group("b", "trn1n.32xlarge")], 2, "us-west-2"
    )
    assert placement.accelerator_zone == Zone("us-west-2d", "usw2-az4")
    assert placement.group_zones == {"a": placement.accelerator_zone, "b": placement.accelerator_zone}
    # fills up with the remaining zones in id order
    assert [z.id for z in placement.zones] == ["usw2-az4", "usw2-az1"]


def test_three_zones():
    placement = choose_placement(US_WEST_2, OFFERS, [group("a", "trn1.32xlarge")], 3, "us-west-2")
    assert [z.id for z in placement.zones] == ["usw2-az4", "usw2-az1", "usw2-az2"]


def test_pinned_zone_is_honoured():
    placement = choose_placement(US_WEST_2, OFFERS, [group("small", "trn1.2xlarge", "usw2-az3")], 2, "us-west-2")
    assert placement.group_zones["small"].id == "usw2-az3"
    assert placement.zones[0].id == "usw2-az3"


def test_pinned_zone_that_does_not_offer_the_type_is_refused():
    with pytest.raises(ConfigError) as err:
        choose_placement(US_WEST_2, OFFERS, [group("a", "trn1.32xlarge", "usw2-az1")], 2, "us-west-2")
    message = str(err.value)
    assert "trainium-eks:acceleratorNodeGroups[0].azId = 'usw2-az1'" in message
    assert "does not offer trn1.32xlarge" in message
    assert "zones that do: usw2-az4" in message


def test_pinned_zone_outside_the_region_is_refused():
    with pytest.raises(ConfigError, match=r"azId = 'use1-az6': not a zone of us-west-2"):
        choose_placement(US_WEST_2, OFFERS, [group("a", "trn1.32xlarge", "use1-az6")], 2, "us-west-2")


def test_no_common_zone_is_refused():
    offers = {"trn1.32xlarge": {"usw2-az4"}, "trn1n.32xlarge": {"usw2-az3"}}
    with pytest.raises(ConfigError) as err:
        choose_placement(US_WEST_2, offers, [group("a", "trn1.32xlarge"), group("b", "trn1n.32xlarge")], 2, "us-west-2")
    assert "no zone of us-west-2 offers all of trn1.32xlarge, trn1n.32xlarge" in str(err.value)


def test_type_not_offered_in_region_is_refused():
    with pytest.raises(ConfigError, match="trn2.48xlarge: none"):
        choose_placement(US_WEST_2, OFFERS, [group("a", "trn2.48xlarge")], 2, "us-west-2")


def test_more_accelerator_zones_than_az_count_is_refused():
    groups = [
        group("a", "trn1.32xlarge"),
        group("b", "trn1.2xlarge", "usw2-az3"),
        group("c", "inf2.xlarge", "usw2-az1"),
    ]
    with pytest.raises(
        ConfigError, match=r"network.azCount = 2: accelerator groups need zones usw2-az1, usw2-az3, usw2-az4"
    ):
        choose_placement(US_WEST_2, OFFERS, groups, 2, "us-west-2")


def test_trainium2_is_placed_where_the_offering_read_saw_it_and_refused_by_zone_elsewhere():
    from infra.facts.neuron import COMPATIBLE_AMI_RELEASES
    from infra.facts.versions import KUBERNETES_VERSION
    from infra.validate import parse_stack_config

    # The Trainium2 types have no on-demand price, so the region check before the look-up leaves them to
    # the zone choice (their only region list is one account's read): the stack config is accepted...
    release = COMPATIBLE_AMI_RELEASES[KUBERNETES_VERSION][0]
    config = parse_stack_config(
        {
            "region": "us-east-2",
            "acceleratorNodeGroups": [
                {
                    "name": "trn2u-ng",
                    "instanceType": "trn2u.48xlarge",
                    "maxSize": 4,
                    "amiReleaseVersion": release,
                    "capacityReservation": {"type": "capacity-block", "id": "cr-0123456789abcdef0"},
                }
            ],
        }
    )
    # ...and the zone choice refuses a region none of whose zones offers the type.
    us_east_2 = [Zone(n, i) for n, i in fixtures.ZONES["us-east-2"]]
    with pytest.raises(
        ConfigError, match=r"no zone of us-east-2 offers all of trn2u\.48xlarge \(trn2u\.48xlarge: none\)"
    ):
        choose_placement(us_east_2, fixtures.OFFERINGS["us-east-2"], config.accelerator_node_groups, 2, "us-east-2")
    ap_south_2 = [Zone(n, i) for n, i in fixtures.ZONES["ap-south-2"]]
    groups = [group("u", "trn2u.48xlarge"), group("t", "trn2.48xlarge"), group("s", "trn2.3xlarge")]
    placement = choose_placement(ap_south_2, fixtures.OFFERINGS["ap-south-2"], groups, 2, "ap-south-2")
    assert placement.accelerator_zone.id == "aps2-az1"
    # trn2.3xlarge in ap-southeast-4: apse4-az3 only.
    ap_southeast_4 = [Zone(n, i) for n, i in fixtures.ZONES["ap-southeast-4"]]
    placement = choose_placement(
        ap_southeast_4, fixtures.OFFERINGS["ap-southeast-4"], [group("s", "trn2.3xlarge")], 2, "ap-southeast-4"
    )
    assert placement.accelerator_zone.id == "apse4-az3"
