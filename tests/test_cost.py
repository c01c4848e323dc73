"""The plan's cost estimate, checked against figures worked out by hand from the price table.

Prices used (infra/prices.py, each with its source): trn1.32xlarge $21.50/h, trn1n.32xlarge
$24.78/h, m6i.4xlarge $0.768/h, EKS standard $0.10/h and extended $0.60/h, NAT gateway
$0.045/h, public IPv4 $0.005/h, gp3 $0.08/GiB-month, FSx PERSISTENT_2 at 125 MB/s/TiB
$0.145/GiB-month; a month is 730 hours.
"""

from __future__ import annotations

import json

import pytest

from offline import cost
from offline.report import render_cost
from workloads.settings import parse_workloads_config
from offline.runner import stack_config
from tests.conftest import WORKLOADS_DIR


def estimate(plan):
    return cost.estimate_cluster(plan.as_json()["resources"], plan.outputs["region"])


def line(result, item):
    (found,) = [entry for entry in result["lines"] if entry["item"] == item]
    return found


def test_dev_by_hand(dev):
    result = estimate(dev)
    # idle (core 2 nodes, Trainium 0):
    #   control plane 0.10 + core 2 x 0.768 = 1.536 + core roots 2 x 100 GiB x 0.08 / 730 = 0.021918
    #   + NAT 0.045 + its Elastic IP 0.005 + FSx 1200 GiB x 0.145 / 730 = 0.238356   => 1.946274 /h
    assert result["hourly"]["idle"] == pytest.approx(1.946274, abs=1e-4)
    assert result["hourly"]["configured"] == pytest.approx(1.946274, abs=1e-4)  # desired = min everywhere
    # full scale: 0.10 + 4 x 21.50 = 86 + 4 x 200 x 0.08 / 730 = 0.087671 + 2 x 24.78 = 49.56
    #   + 2 x 200 x 0.08 / 730 = 0.043836 + core 4 x 0.768 = 3.072 + 4 x 100 x 0.08 / 730 = 0.043836
    #   + 0.045 + 0.005 + 0.238356   => 139.195699 /h
    assert result["hourly"]["fullScale"] == pytest.approx(139.195699, abs=1e-4)
    assert result["monthly"]["idle"] == pytest.approx(1.946274 * 730, abs=0.1)  # about $1,421 a month
    assert result["unknown"] == []
    assert line(result, "node group trn1-32xl-ng1")["counts"] == {"idle": 0, "configured": 0, "fullScale": 4}
    assert line(result, "FSx for Lustre")["hourly"]["idle"] == pytest.approx(174 / 730, abs=1e-4)
    # The S3 endpoint is a Gateway endpoint (infra/network.py): free, not $0.01/h per AZ.
    assert line(result, "VPC endpoint")["hourly"]["idle"] == 0


def test_prod_by_hand_and_unknowns_never_zero(prod):
    result = estimate(prod)
    # The table has no sourced figure for trn2.48xlarge nor for FSx PERSISTENT_2 at 250 MB/s/TiB:
    # totals they take part in are unknown, not under-stated.
    assert result["hourly"] == {"idle": None, "configured": None, "fullScale": None}
    assert any("trn2.48xlarge" in u for u in result["unknown"])
    assert any("250 MB/s/TiB" in u for u in result["unknown"])
    # The unknown group at zero nodes costs nothing at idle, whatever its price.
    assert line(result, "node group trn2-48xl-ng")["hourly"]["idle"] == 0
    assert line(result, "node group trn2-48xl-ng")["hourly"]["fullScale"] is None
    # priced lines at idle: 0.10 + 3 x 0.768 = 2.304 + 3 x 100 x 0.08 / 730 = 0.032877
    #   + 3 NAT x 0.045 = 0.135 + 3 IPs x 0.005 = 0.015   => 2.586877 /h
    assert result["knownHourly"]["idle"] == pytest.approx(2.586877, abs=1e-4)
    # priced lines at full scale add 8 x 21.50 + 4 x 24.78 = 271.12, core 6 x 0.768 = 4.608,
    # roots (8 + 4 + 4) x 200 x 0.08 / 730 = 0.350685 and 6 x 100 x 0.08 / 730 = 0.065753
    assert result["knownHourly"]["fullScale"] == pytest.approx(0.10 + 271.12 + 4.608 + 0.350685 + 0.065753 + 0.15,
                                                              abs=1e-4)


def test_extended_upgrade_policy_is_priced_at_the_extended_rate(plan_with):
    result = estimate(plan_with(upgradePolicy="EXTENDED"))
    assert line(result, "EKS control plane")["hourly"]["idle"] == pytest.approx(0.60)


def test_capacity_block_group_is_not_priced_at_the_on_demand_rate(plan_with):
    # A Capacity Block group carries its type only in the launch template (EKS requires it);
    # the estimate must still find it, and say the reservation fee differs.
    reservation = {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}
    group = {"name": "trn1-32xl-ng1", "instanceType": "trn1.32xlarge", "maxSize": 4,
             "capacityReservation": reservation}
    result = estimate(plan_with(acceleratorNodeGroups=[group]))
    entry = line(result, "node group trn1-32xl-ng1")
    assert "trn1.32xlarge" in entry["detail"]
    assert entry["unitHourly"] is None and "Capacity Block" in entry["note"]
    assert result["hourly"]["idle"] is not None and result["hourly"]["fullScale"] is None
    assert any("Capacity Block" in u for u in result["unknown"])


def test_more_nodes_more_cost(plan_with, dev):
    # The estimate follows the plan: raising maxSize raises only the full-scale figure, by
    # 2 x (21.50 + 200 x 0.08 / 730).
    groups = [{"name": "trn1-32xl-ng1", "instanceType": "trn1.32xlarge", "maxSize": 6},
              {"name": "trn1n-32xl-ng", "instanceType": "trn1n.32xlarge", "maxSize": 2}]
    before, after = estimate(dev), estimate(plan_with(acceleratorNodeGroups=groups))
    assert after["hourly"]["idle"] == pytest.approx(before["hourly"]["idle"])
    assert after["hourly"]["fullScale"] - before["hourly"]["fullScale"] == pytest.approx(2 * (21.50 + 16 / 730), abs=1e-3)


def test_unknown_region_is_unknown_not_free(dev):
    result = cost.estimate_cluster(dev.as_json()["resources"], "eu-west-1")
    assert result["hourly"]["idle"] is None and result["knownHourly"]["idle"] == 0


def test_interface_endpoints_are_charged_per_zone():
    resources = [{"urn": "u", "type": cost.T_ENDPOINT, "name": "ecr", "dependencies": [],
                  "inputs": {"vpcEndpointType": "Interface", "serviceName": "com.amazonaws.us-west-2.ecr.api",
                             "subnetIds": ["a", "b", "c"]}}]
    result = cost.estimate_cluster(resources, "us-west-2")
    assert result["hourly"]["idle"] == pytest.approx(3 * 0.01)


def test_workloads_by_hand(dev):
    settings = parse_workloads_config(stack_config(WORKLOADS_DIR, "dev"))
    result = cost.estimate_workloads(settings, dev.outputs["acceleratorNodeGroups"], "us-west-2")
    # BERT 2 x 21.50 = 43, Ray 2 workers x 24.78 = 49.56, NeMo 4 x 21.50 = 86; nothing at idle.
    assert {entry["item"]: entry["hourly"]["configured"] for entry in result["lines"]} == {
        "bertPretraining": 43.0, "rayLlama2": 49.56, "nemoLlama2": 86.0}
    assert result["hourly"]["idle"] == 0
    assert result["hourly"]["configured"] == pytest.approx(178.56)
    # Only the Ray train step has a hard limit: KubeRay fails it after activeDeadlineSeconds
    # (2400) and deletes its cluster ttlSecondsAfterFinished (60) later; the autoscaler removes
    # the idle nodes 600 s after that: 2 x 24.78 x 3060 / 3600 = $42.13.
    assert result["boundUsd"] == {"bertPretraining": None, "rayLlama2": 42.13, "nemoLlama2": None}


def test_scale_down_delay_matches_the_autoscaler(dev):
    release = next(r for r in dev.of_type("kubernetes:helm.sh/v3:Release") if "autoscaler" in r.name)
    assert "'scale-down-unneeded-time': '10m'" in str(release.inputs) and cost.SCALE_DOWN_UNNEEDED_SECONDS == 600


def test_report_prints_unknown_as_unknown(prod):
    text = render_cost(estimate(prod), "us-east-2")
    assert "unknown" in text and "Unknown (no price in infra/prices.py)" in text and "Not estimated" in text
    json.dumps(estimate(prod))  # the resources.json section is plain JSON


def test_every_price_names_its_source_and_date():
    import re

    from infra import prices

    tables = [*prices.INSTANCE_HOURLY.values(), *prices.SERVICE_PRICES.values()]
    for table in tables:
        for key, price in table.items():
            assert price.source.startswith("https://"), key
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", price.as_of), key
            assert price.usd >= 0 and price.unit in ("hour", "GiB-month"), key
    assert set(prices.INSTANCE_HOURLY) >= {"us-east-1", "us-east-2", "us-west-2"}
    # No sourced figure was found for these: they stay out (unknown), never zero.
    assert prices.instance_hourly("us-east-2", "trn2.48xlarge") is None
    assert prices.service_price("us-east-2", prices.fsx_lustre_key("PERSISTENT_2", 250)) is None


def test_a_cluster_without_upgrade_policy_is_priced_as_extended():
    # pulumi-eks v4.3.0 (nodejs/eks/cluster/cluster.ts) passes upgradePolicy through unset, and
    # EKS then applies EXTENDED (amazon-eks-user-guide latest/ug/clusters/kubernetes-versions.adoc).
    resources = [{"urn": "c", "type": "eks:index:Cluster", "name": "c", "dependencies": [], "inputs": {}}]
    assert cost.estimate_cluster(resources, "us-west-2")["hourly"]["idle"] == pytest.approx(0.60)
