"""A Trainium node group as the cluster stack exports it (infra/contract.py NodeGroup), for tests that
need one without planning a stack: its counts come from the instance facts (infra/facts/instances.py)."""

from __future__ import annotations

from typing import Any


def trainium_group(instance_type: str = "trn1.32xlarge", **fields: Any) -> Any:
    """The group dev's ``trn1-32xl-ng1`` is (us-west-2d, 0..4 on demand), with ``fields`` replaced."""
    from infra.contract import NodeGroup
    from infra.facts.instances import NEURON_INSTANCE_TYPES

    facts = NEURON_INSTANCE_TYPES[instance_type]
    defaults: dict[str, Any] = {
        "name": "trn1-32xl-ng1",
        "instance_type": instance_type,
        "az_id": "usw2-az4",
        "az_name": "us-west-2d",
        "neuron_devices": facts.neuron_devices,
        "neuron_cores": facts.neuron_cores,
        "efa_interfaces": facts.max_efa_interfaces,
        "min_size": 0,
        "max_size": 4,
        "capacity_type": "ON_DEMAND",
    }
    return NodeGroup(**{**defaults, **fields})
