import pytest

from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.specs.efa import efa_interfaces


@pytest.mark.parametrize(
    ("instance_type", "count"), [("trn1.32xlarge", 8), ("trn1n.32xlarge", 16), ("trn2.48xlarge", 16)]
)
def test_one_interface_per_network_card(instance_type, count):
    interfaces = efa_interfaces(NEURON_INSTANCE_TYPES[instance_type].network_cards)
    assert len(interfaces) == count
    assert [i.network_card_index for i in interfaces] == list(range(count))


def test_card_zero_is_primary_efa_and_the_rest_efa_only_at_device_index_one():
    first, *rest = efa_interfaces(8)
    assert (first.device_index, first.interface_type) == (0, "efa")
    assert {(i.device_index, i.interface_type) for i in rest} == {(1, "efa-only")}


def test_secondary_type_can_be_plain_efa():
    first, *rest = efa_interfaces(16, "efa")
    assert first.interface_type == "efa"
    assert {i.interface_type for i in rest} == {"efa"}


def test_zero_cards_is_an_error():
    with pytest.raises(ValueError, match="at least one network card"):
        efa_interfaces(0)
