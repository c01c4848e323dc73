"""Kubernetes resource quantities (``500m``, ``440Gi``, ``1.5``) as numbers, to add up what a
job asks of its Volcano queue and to refuse values the API server would reject.

The suffixes are those of k8s.io/apimachinery/pkg/api/resource/quantity.go: binary
``Ki Mi Gi Ti Pi Ei``, decimal ``n u m k M G T P E`` and exponents ``e3``/``E3``. ``30GB``
matches none of them and is refused when the object is applied, long after ``pulumi up``
started; checking here refuses it before anything is declared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}  # fmt: skip
_QUANTITY = re.compile(r"^\+?(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)(?P<suffix>[eE][+-]?[0-9]+|[A-Za-z]*)$")
ALLOWED = "a Kubernetes quantity such as 120, 500m, 440Gi or 30G"


def parse(value: str) -> Decimal | None:
    """``value`` in base units (cores, bytes), or None when it is not a quantity."""
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    number, suffix = Decimal(match["number"]), match["suffix"]
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    if suffix[:1] in ("e", "E"):
        return number * (Decimal(10) ** int(suffix[1:]))
    return None


def total(requests: Sequence[Mapping[str, str]]) -> dict[str, Decimal]:
    """The sum per resource of several pods' requests (all values already valid)."""
    summed: dict[str, Decimal] = {}
    for request in requests:
        for name, value in request.items():
            amount = parse(value)
            if amount is not None:
                summed[name] = summed.get(name, Decimal(0)) + amount
    return summed


def exceeded(requests: Mapping[str, Decimal], capability: Mapping[str, str]) -> list[str]:
    """The resources of ``capability`` that ``requests`` asks more of, as readable lines."""
    over = []
    for name, cap in capability.items():
        limit = parse(cap)
        if limit is not None and requests.get(name, Decimal(0)) > limit:
            over.append(f"{name} {show(name, requests[name])} > {cap}")
    return over


def show(name: str, amount: Decimal) -> str:
    if name == "memory" and amount >= 2**30:
        return f"{(amount / 2**30).normalize():f}Gi"
    return f"{amount.normalize():f}"
