"""The checked-in instance table against the published facts (DESIGN.md section 2)."""

import pytest
from types import SimpleNamespace

from infra.facts import catalog
from infra.facts.catalog import NEURON_INSTANCE_TYPES, node_label_value
from offline.fixtures import instance_type_answer


@pytest.mark.parametrize(
    ("instance_type", "devices", "cores", "cards", "efa"),
    [
        ("trn1.2xlarge", 1, 2, 1, False),
        ("trn1.32xlarge", 16, 32, 8, True),
        ("trn1n.32xlarge", 16, 32, 16, True),
        # 128 physical NeuronCores, advertised as 64 at the default LNC=2
        ("trn2.48xlarge", 16, 64, 16, True),
        ("inf2.xlarge", 1, 2, 1, False),
        ("inf2.24xlarge", 6, 12, 1, False),
        ("inf2.48xlarge", 12, 24, 1, False),
    ],
)
def test_instance_facts(instance_type, devices, cores, cards, efa):
    facts = NEURON_INSTANCE_TYPES[instance_type]
    assert facts.neuron_devices == devices
    assert facts.neuron_cores == cores
    assert facts.network_cards == cards
    assert facts.efa_supported is efa
    assert facts.max_efa_interfaces == (cards if efa else 0)


def test_trn2_physical_cores():
    assert NEURON_INSTANCE_TYPES["trn2.48xlarge"].physical_neuron_cores == 128


@pytest.mark.parametrize(
    ("instance_type", "label"),
    [("trn1.32xlarge", "trn1-32xl"), ("trn1n.32xlarge", "trn1n-32xl"), ("trn2.48xlarge", "trn2-48xl"),
     ("inf2.xlarge", "inf2-xl")],
)
def test_node_label_value(instance_type, label):
    assert node_label_value(instance_type) == label


def _as_ec2_result(answer: dict) -> SimpleNamespace:
    return SimpleNamespace(
        neuron_devices=[SimpleNamespace(count=d["count"], core_count=d["coreCount"]) for d in answer["neuronDevices"]],
        instance_disks=[SimpleNamespace(count=d["count"], type=d["type"]) for d in answer["instanceDisks"]],
        maximum_network_cards=answer["maximumNetworkCards"],
        efa_supported=answer["efaSupported"],
    )


@pytest.mark.parametrize("instance_type", sorted(NEURON_INSTANCE_TYPES))
def test_facts_from_ec2_agree_with_table(instance_type):
    ec2 = _as_ec2_result(instance_type_answer(instance_type))
    assert catalog.from_ec2(instance_type, ec2) == NEURON_INSTANCE_TYPES[instance_type]


def test_from_ec2_trusts_ec2_counts():
    ec2 = SimpleNamespace(
        neuron_devices=[SimpleNamespace(count=16, core_count=2)],
        instance_disks=[],
        maximum_network_cards=4,
        efa_supported=True,
    )
    facts = catalog.from_ec2("trn1.32xlarge", ec2)
    assert facts.network_cards == 4
    assert facts.nvme_disks == 0
