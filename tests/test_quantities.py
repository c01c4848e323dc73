"""Kubernetes quantities and the queue part of the cluster contract, without the Pulumi runtime."""

from __future__ import annotations

from decimal import Decimal

import pytest

from infra.contract import VolcanoQueue
from workloads import quantities


# k8s.io/apimachinery pkg/api/resource/quantity.go: binary suffixes Ki..Ei, decimal n u m "" k M G T P E,
# and decimal exponents; anything else (GB, Gb, g, a space) is not a quantity.
@pytest.mark.parametrize(("text", "value"), [
    ("120", Decimal(120)), ("500m", Decimal("0.5")), ("440Gi", Decimal(440 * 2**30)), ("30G", Decimal(30 * 10**9)),
    ("1.5", Decimal("1.5")), ("1e3", Decimal(1000)), ("200Mi", Decimal(200 * 2**20)),
])  # fmt: skip
def test_quantities_the_api_server_accepts(text: str, value: Decimal) -> None:
    assert quantities.parse(text) == value


@pytest.mark.parametrize("text", ["30GB", "440gi", "", " 1", "six", "1.5.0", "-1"])
def test_strings_that_are_not_quantities(text: str) -> None:
    assert quantities.parse(text) is None


def test_a_gang_over_its_queue_capability() -> None:
    requests = quantities.total([{"cpu": "6", "memory": "30Gi"}] + [{"cpu": "120", "memory": "440Gi"}] * 4)
    assert quantities.exceeded(requests, {"cpu": "500", "memory": "1500Gi"}) == ["memory 1790Gi > 1500Gi"]
    assert quantities.exceeded(requests, {}) == []


def test_the_cluster_exports_queues_with_their_capability() -> None:
    exported = [
        {"name": "test", "capability": {}},
        {"name": "llama2-training-queue", "capability": {"memory": "1500Gi"}},
    ]
    assert [VolcanoQueue.model_validate(q) for q in exported] == [
        VolcanoQueue(name="test", capability={}),
        VolcanoQueue(name="llama2-training-queue", capability={"memory": "1500Gi"}),
    ]
    # A cluster stack from before capabilities were exported: names only, no cap known.
    assert VolcanoQueue.model_validate("test") == VolcanoQueue(name="test", capability={})
