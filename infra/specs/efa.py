"""The launch template's network interfaces for EFA: one per network card.

Card 0 carries the primary interface (device index 0) and must be `efa` so the node keeps a
normal IP address; every other card gets device index 1. Those can be `efa-only` (no IP
address, needs VPC CNI >= 1.18.4) or plain `efa`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

InterfaceType = Literal["efa", "efa-only"]


@dataclass(frozen=True)
class EfaInterface:
    network_card_index: int
    device_index: int
    interface_type: InterfaceType


def efa_interfaces(network_cards: int, secondary_type: InterfaceType = "efa-only") -> list[EfaInterface]:
    if network_cards < 1:
        raise ValueError(f"an EFA instance has at least one network card, got {network_cards}")
    return [
        EfaInterface(card, 0 if card == 0 else 1, "efa" if card == 0 else secondary_type)
        for card in range(network_cards)
    ]


@dataclass(frozen=True)
class NodeClassInterface:
    """One entry of an EC2NodeClass's ``networkInterfaces`` (Karpenter >= 1.11)."""

    network_card_index: int
    device_index: int
    interface_type: Literal["interface", "efa-only"]


def karpenter_interfaces(network_cards: int) -> list[NodeClassInterface]:
    """The same EFA devices as ``efa_interfaces`` in the form an EC2NodeClass accepts.

    Karpenter 1.14 knows only `interface` and `efa-only` (karpenter.k8s.aws_ec2nodeclasses.yaml:
    networkInterfaces[].interfaceType enum) and requires card 0 / device 0 to be `interface`
    (its CEL rule), so card 0's EFA device is an `efa-only` interface at device index 1 beside it
    (the example in website/content/en/v1.14/concepts/nodeclasses.md). Karpenter counts the
    node's vpc.amazonaws.com/efa as the number of `efa-only` entries (pkg/providers/instancetype/
    types.go efas): one per network card, as many as the node groups' nodes offer.
    """
    secondary = efa_interfaces(network_cards, "efa-only")
    return [NodeClassInterface(0, 0, "interface"), NodeClassInterface(0, 1, "efa-only")] + [
        NodeClassInterface(i.network_card_index, i.device_index, "efa-only") for i in secondary[1:]
    ]
