"""Neuron instance facts: the checked-in table used offline, and the mapping from EC2 data.

When deploying, counts come from the EC2 instance-type look-up (``from_ec2``); the offline
plan's mocks answer that look-up from this same table, so both paths share one code path.
Static validation (is this a Neuron type, does it have EFA) uses the table directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InstanceFacts:
    instance_type: str
    neuron_devices: int
    # NeuronCores per device as EC2 reports them (physical cores).
    cores_per_device: int
    # Logical NeuronCore config the Neuron runtime defaults to: trn2 pairs two physical
    # cores into one logical core (LNC=2), so the device plugin advertises half of them.
    logical_nc_config: int
    network_cards: int
    efa_supported: bool
    nvme_disks: int

    @property
    def physical_neuron_cores(self) -> int:
        return self.neuron_devices * self.cores_per_device

    @property
    def neuron_cores(self) -> int:
        """NeuronCores the device plugin advertises as ``aws.amazon.com/neuroncore``."""
        return self.physical_neuron_cores // self.logical_nc_config

    @property
    def max_efa_interfaces(self) -> int:
        """One EFA interface per network card; zero without EFA."""
        return self.network_cards if self.efa_supported else 0


def _facts(
    instance_type: str, devices: int, cores_per_device: int, cards: int, efa: bool, nvme: int, lnc: int = 1
) -> InstanceFacts:
    return InstanceFacts(instance_type, devices, cores_per_device, lnc, cards, efa, nvme)


NEURON_INSTANCE_TYPES: dict[str, InstanceFacts] = {
    f.instance_type: f
    for f in (
        _facts("trn1.2xlarge", devices=1, cores_per_device=2, cards=1, efa=False, nvme=1),
        _facts("trn1.32xlarge", devices=16, cores_per_device=2, cards=8, efa=True, nvme=4),
        _facts("trn1n.32xlarge", devices=16, cores_per_device=2, cards=16, efa=True, nvme=4),
        _facts("trn2.48xlarge", devices=16, cores_per_device=8, cards=16, efa=True, nvme=4, lnc=2),
        _facts("inf2.xlarge", devices=1, cores_per_device=2, cards=1, efa=False, nvme=0),
        _facts("inf2.8xlarge", devices=1, cores_per_device=2, cards=1, efa=False, nvme=0),
        _facts("inf2.24xlarge", devices=6, cores_per_device=2, cards=1, efa=False, nvme=0),
        _facts("inf2.48xlarge", devices=12, cores_per_device=2, cards=1, efa=False, nvme=0),
    )
}


def is_trainium(instance_type: str) -> bool:
    return instance_type.startswith("trn")


def from_ec2(instance_type: str, ec2: Any) -> InstanceFacts:
    """Facts from an ``aws.ec2.get_instance_type`` result (or anything shaped like it).

    The logical NeuronCore config is a Neuron runtime default, not EC2 data, so it comes
    from the table.
    """
    devices = sum(d.count for d in ec2.neuron_devices)
    cores_per_device = ec2.neuron_devices[0].core_count if ec2.neuron_devices else 0
    nvme = sum(d.count for d in (ec2.instance_disks or []) if d.type == "ssd")
    return InstanceFacts(
        instance_type=instance_type,
        neuron_devices=devices,
        cores_per_device=cores_per_device,
        logical_nc_config=NEURON_INSTANCE_TYPES[instance_type].logical_nc_config,
        network_cards=ec2.maximum_network_cards,
        efa_supported=bool(ec2.efa_supported),
        nvme_disks=nvme,
    )


def node_label_value(instance_type: str) -> str:
    """The seeds' ``instance-type`` label value: ``trn1.32xlarge`` -> ``trn1-32xl``."""
    family, size = instance_type.split(".", 1)
    return f"{family}-{size.replace('xlarge', 'xl')}"
