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
