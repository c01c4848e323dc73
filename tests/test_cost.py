"""The plan's cost estimate, checked against figures worked out by hand from the price table.

Prices used (infra/facts/prices.py, each with its source): trn1.32xlarge $21.50/h, trn1n.32xlarge
$24.78/h, m6i.4xlarge $0.768/h, EKS standard $0.10/h and extended $0.60/h, NAT gateway
$0.045/h, public IPv4 $0.005/h, gp3 $0.08/GiB-month, FSx PERSISTENT_2 at 125 MB/s/TiB
$0.145/GiB-month; a month is 730 hours.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.facts.neuron import compatible_ami_release
from infra.specs import node_template
from offline.plan.runner import stack_config
from offline.report import cost
from offline.report.report import render_cost
from tests.conftest import WORKLOADS_DIR
from workloads.settings import parse_workloads_config


def estimate(plan):
    return cost.estimate_cluster(plan.as_json()["resources"], plan.outputs["region"])


def line(result, item):
    (found,) = [entry for entry in result["lines"] if entry["item"] == item]
    return found


def test_dev_by_hand(dev, dev_fsx):
    result = estimate(dev)
    # idle (system 2 x m6i.large, job-support 0, Trainium 0):
    #   control plane 0.10 + core 2 x 0.096 = 0.192 + core roots 2 x 50 GiB x 0.08 / 730 = 0.010959
    #   + NAT 0.045 + its Elastic IP 0.005   => 0.352959 /h; its EFS file system bills only by use (below)
    assert result["hourly"]["idle"] == pytest.approx(0.352959, abs=1e-4)
    assert result["hourly"]["configured"] == pytest.approx(0.352959, abs=1e-4)  # desired = min everywhere
    # full scale: 0.10 + 4 x 21.50 = 86 + 4 x 200 x 0.08 / 730 = 0.087671 + 2 x 24.78 = 49.56
    #   + 2 x 200 x 0.08 / 730 = 0.043836 + core 3 x 0.096 = 0.288 + 3 x 50 x 0.08 / 730 = 0.016438
    #   + job-support 4 x 0.768 = 3.072 + 4 x 100 x 0.08 / 730 = 0.043836
    #   + 0.045 + 0.005   => 139.261781 /h
    assert result["hourly"]["fullScale"] == pytest.approx(139.261781, abs=1e-4)
    assert result["monthly"]["idle"] == pytest.approx(0.352959 * 730, abs=0.1)  # about $258 a month
    assert result["unknown"] == []
    assert line(result, "node group trn1-32xl-ng1")["counts"] == {"idle": 0, "configured": 0, "fullScale": 4}
    # The S3 endpoint is a Gateway endpoint (infra/components/network.py): free, not $0.01/h per AZ.
    assert line(result, "VPC endpoint")["hourly"]["idle"] == 0
    # EFS has no hourly line: what it stores, reads and writes is named with its prices among what is not
    # estimated (infra/facts/prices.py), only where the stack has one.
    assert not [entry for entry in result["lines"] if "EFS" in entry["item"]]
    storage, throughput = result["notEstimated"][-2:]
    assert storage.startswith("Amazon EFS storage of efs-training, per GB stored: Standard $0.3/GB-month, ")
    assert "Infrequent Access $0.025/GB-month plus $0.01/GB read from it" in storage
    assert throughput == (
        "Amazon EFS Elastic throughput of efs-training: reads $0.03/GB, writes $0.06/GB (a 98 GB checkpoint: $5.88)"
    )
    assert not [entry for entry in estimate(dev_fsx)["notEstimated"] if "EFS" in entry]
    # Dev on FSx, as it was: the 1,200 GiB file system is billed whether used or not.
    on_fsx = estimate(dev_fsx)
    assert on_fsx["hourly"]["idle"] == pytest.approx(0.352959 + 0.238356, abs=1e-4)
    assert line(on_fsx, "FSx for Lustre")["hourly"]["idle"] == pytest.approx(174 / 730, abs=1e-4)


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
    # priced lines at idle: 0.10 + system 3 x m6i.large 0.096 = 0.288 + 3 x 50 x 0.08 / 730 = 0.016438
    #   + 3 NAT x 0.045 = 0.135 + 3 IPs x 0.005 = 0.015   => 0.554438 /h
    assert result["knownHourly"]["idle"] == pytest.approx(0.554438, abs=1e-4)
    # priced lines at full scale add 8 x 21.50 + 4 x 24.78 = 271.12, system 6 x 0.096 = 0.576 with
    # roots 6 x 50 x 0.08 / 730 = 0.032877, job-support 8 x 0.768 = 6.144 with 8 x 100 x 0.08 / 730
    # = 0.087671, Trainium roots (8 + 4 + 4) x 200 x 0.08 / 730 = 0.350685
    assert result["knownHourly"]["fullScale"] == pytest.approx(
        0.10 + 271.12 + 0.576 + 0.032877 + 6.144 + 0.087671 + 0.350685 + 0.15, abs=1e-4
    )


def test_extended_upgrade_policy_is_priced_at_the_extended_rate(plan_with):
    result = estimate(plan_with(upgradePolicy="EXTENDED"))
    assert line(result, "EKS control plane")["hourly"]["idle"] == pytest.approx(0.60)


def test_capacity_block_group_is_not_priced_at_the_on_demand_rate(plan_with):
    # A Capacity Block group carries its type only in the launch template (EKS requires it);
    # the estimate must still find it, and say the reservation fee differs.
    reservation = {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}
    group = {
        "name": "trn1-32xl-ng1",
        "instanceType": "trn1.32xlarge",
        "maxSize": 4,
        "capacityReservation": reservation,
        "amiReleaseVersion": compatible_ami_release(),
    }
    result = estimate(plan_with(acceleratorNodeGroups=[group]))
    entry = line(result, "node group trn1-32xl-ng1")
    assert "trn1.32xlarge" in entry["detail"]
    assert entry["unitHourly"] is None and "Capacity Block" in entry["note"]
    assert result["hourly"]["idle"] is not None and result["hourly"]["fullScale"] is None
    assert any("Capacity Block" in u for u in result["unknown"])


def test_more_nodes_more_cost(plan_with, dev):
    # The estimate follows the plan: raising maxSize raises only the full-scale figure, by
    # 2 x (21.50 + 200 x 0.08 / 730).
    groups = [
        {"name": "trn1-32xl-ng1", "instanceType": "trn1.32xlarge", "maxSize": 6},
        {"name": "trn1n-32xl-ng", "instanceType": "trn1n.32xlarge", "maxSize": 2},
    ]
    groups = [{**g, "amiReleaseVersion": compatible_ami_release()} for g in groups]
    before, after = estimate(dev), estimate(plan_with(acceleratorNodeGroups=groups))
    assert after["hourly"]["idle"] == pytest.approx(before["hourly"]["idle"])
    assert after["hourly"]["fullScale"] - before["hourly"]["fullScale"] == pytest.approx(
        2 * (21.50 + 16 / 730), abs=1e-3
    )


def test_unknown_region_is_unknown_not_free(dev):
    result = cost.estimate_cluster(dev.as_json()["resources"], "eu-west-1")
    assert result["hourly"]["idle"] is None and result["knownHourly"]["idle"] == 0


def test_interface_endpoints_are_charged_per_zone():
    resources = [
        {
            "urn": "u",
            "type": cost.T_ENDPOINT,
            "name": "ecr",
            "dependencies": [],
            "inputs": {
                "vpcEndpointType": "Interface",
                "serviceName": "com.amazonaws.us-west-2.ecr.api",
                "subnetIds": ["a", "b", "c"],
            },
        }
    ]
    result = cost.estimate_cluster(resources, "us-west-2")
    assert result["hourly"]["idle"] == pytest.approx(3 * 0.01)


def test_workloads_by_hand(dev):
    settings = parse_workloads_config(stack_config(WORKLOADS_DIR, "dev"))
    result = cost.estimate_workloads(settings, dev.outputs["acceleratorNodeGroups"], "us-west-2")
    # BERT 2 x 21.50 = 43, Ray 2 workers x 24.78 = 49.56, the acceptance test 2 x 21.50 = 43 while
    # it runs (NxD Training is off in dev); nothing at idle.
    assert {entry["item"]: entry["hourly"]["configured"] for entry in result["lines"]} == {
        "bertPretraining": 43.0,
        "rayLlama2": 49.56,
        "clusterCheck": 43.0,
    }
    assert result["hourly"]["idle"] == 0
    # bert 2 + check 2 fill trn1-32xl-ng1 (maxSize 4), ray's 2 fit trn1n-32xl-ng's 2:
    # 4 x 21.50 + 2 x 24.78 = 135.56.
    assert result["concurrentNodes"] == {"trn1-32xl-ng1": 4, "trn1n-32xl-ng": 2}
    assert result["hourly"]["configured"] == pytest.approx(135.56)
    assert result["hourly"]["fullScale"] == pytest.approx(135.56)
    assert result["monthly"]["configured"] == pytest.approx(135.56 * 730)
    # Every Trainium step has a deadline (workloads/deadlines.py), and a run's steps follow each other:
    # BERT (dev: maxRetry 2, which is 2 attempts in all; pending 45, precompile 120, train 60 min, each
    #   attempt + timeout's 5-minute --kill-after, each restart + 35 min waiting for a silent node's
    #   repair): 2 x (45 + 120 + 5) + 2 x (45 + 60 + 5) + 2 x 35 = 630 min,
    #   + 180 s scale-down + a 780 s burn-in for each of the 4 attempts, each of which may start on new
    #   nodes (infra/specs/burn_in_objects.py): 41100 s; 43 x 41100 / 3600 = $490.92.
    # Ray: precompile 10800 s + ttl 60, train 3 attempts (maxRetries 2) x 3600 (dev) + 60 (the data
    #   step uses no Trainium node), + 180 + 4 x 780 (1 + 3 attempts): 25020 s; 49.56 x 25020 / 3600 = $344.44.
    # The acceptance test: the per-node Job and the all-reduce, each 3600 s, + 180 + 2 x 780: 43 x 8940 / 3600
    # = $106.78.
    assert result["boundUsd"] == {"bertPretraining": 490.92, "rayLlama2": 344.44, "clusterCheck": 106.78}


def test_scale_down_delay_matches_the_autoscaler(dev):
    release = next(r for r in dev.of_type("kubernetes:helm.sh/v3:Release") if "autoscaler" in r.name)
    # The cluster-wide 10 minutes is the core and job-support groups'; the Trainium groups carry 3 through their
    # Auto Scaling groups' tag, which is what a finished job's nodes wait out.
    assert "'scale-down-unneeded-time': '10m'" in str(release.inputs)
    assert node_template.TRAINIUM_SCALE_DOWN_UNNEEDED == "3m0s" and cost.SCALE_DOWN_UNNEEDED_SECONDS == 3 * 60
    tags = [t for t in dev.of_type("aws:autoscaling/tag:Tag") if "scaledownunneededtime" in t.inputs["tag"]["key"]]
    assert tags and all(t.inputs["tag"]["value"] == "3m0s" for t in tags)


def test_report_prints_unknown_as_unknown(prod):
    text = render_cost(estimate(prod), "us-east-2")
    assert (
        "unknown" in text
        and "Unknown (no price in infra/facts/instances.py and prices.py)" in text
        and "Not estimated" in text
    )
    json.dumps(estimate(prod))  # the resources.json section is plain JSON


def test_every_price_names_its_source_and_date():
    import re

    from infra.facts import prices
    from infra.facts.instances import INSTANCE_TYPES, NEURON_INSTANCE_TYPES, instance_hourly
    from infra.facts.regions import NEURON_REGIONS

    for region in [*prices.REGIONS, *(r for r in NEURON_REGIONS if r not in prices.REGIONS)]:
        instance_prices = {
            name: row.on_demand[region] for name, row in INSTANCE_TYPES.items() if region in row.on_demand
        }
        for table in (instance_prices, prices.SERVICE_PRICES.get(region, {})):
            for key, price in table.items():
                assert "https://" in price.source, key
                assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", price.as_of), key
                assert price.usd >= 0 and price.unit in ("hour", "GiB-month", "GB-month", "GB"), key
                if key in NEURON_INSTANCE_TYPES:
                    # Read for each region it is offered in, none copied.
                    assert price.copied_from is None, (region, key)
                else:
                    # Each figure was read for us-east-1; the other regions say they reuse it ...
                    assert price.copied_from == (None if region == "us-east-1" else "us-east-1"), (region, key)
                    # ... which is what the report's region-wide note says.
                    assert price.copied_from == prices.copied_from(region), (region, key)
    # Every region and Neuron type the offering table lists has its price, but the Trainium2 types, for
    # which the price list holds only Capacity Block products (unknown, never zero).
    trainium2 = {"trn2.48xlarge", "trn2u.48xlarge", "trn2.3xlarge"}
    for region, facts in NEURON_REGIONS.items():
        for instance_type in facts.offerings:
            price = instance_hourly(region, instance_type)
            assert (price is None) == (instance_type in trainium2), (region, instance_type)
    # Outside the regions the general-purpose and service figures were read for, they are unknown.
    assert instance_hourly("eu-north-1", "m6i.4xlarge") is None
    assert prices.service_price("eu-north-1", prices.NAT_GATEWAY) is None
    assert instance_hourly("eu-north-1", "inf2.48xlarge").usd == 14.27939
    # Searched again 2026-11-28 (pages, docs, code and the package registries): no sourced figure for these, so
    # they stay out (unknown), never zero.
    assert instance_hourly("us-east-2", "trn2.48xlarge") is None
    assert prices.service_price("us-east-2", prices.fsx_lustre_key("PERSISTENT_2", 250)) is None


def test_report_says_which_region_the_prices_were_read_for(dev):
    result = estimate(dev)  # us-west-2
    assert result["pricesCopiedFrom"] == "us-east-1"
    assert "the figures read for us-east-1, reused for us-west-2" in render_cost(result, "us-west-2")


def test_on_demand_capacity_reservation_is_unknown_while_idle(plan_with):
    # AWS EC2 User Guide, capacity-reservations-pricing-billing.html: Capacity Reservations "are
    # charged at the equivalent On-Demand rate whether you run instances in reserved capacity or
    # not". The plan does not carry the reservation's size, so idle is not $0 but unknown.
    reservation = {"id": "cr-0c0ffee0c0ffee001", "type": "on-demand"}
    group = {
        "name": "trn1-32xl-ng1",
        "instanceType": "trn1.32xlarge",
        "maxSize": 4,
        "azId": "usw2-az4",
        "capacityReservation": reservation,
        "amiReleaseVersion": compatible_ami_release(),
    }
    result = estimate(plan_with(acceleratorNodeGroups=[group]))
    entry = line(result, "node group trn1-32xl-ng1")
    assert entry["hourly"]["idle"] is None and entry["hourly"]["configured"] is None
    assert entry["hourly"]["fullScale"] == pytest.approx(4 * 21.50)
    assert result["hourly"]["idle"] is None and result["hourly"]["configured"] is None
    assert result["knownHourly"]["idle"] > 0  # the priced lines are still shown
    assert any("On-Demand Capacity Reservation of node group trn1-32xl-ng1" in u for u in result["unknown"])
    assert "idle and configured are unknown" in entry["note"]


def test_workloads_on_a_capacity_block_are_not_priced_on_demand(dev):
    settings = parse_workloads_config(stack_config(WORKLOADS_DIR, "dev"))
    groups = [
        dict(g, capacityType="CAPACITY_BLOCK") if g["name"] == "trn1n-32xl-ng" else g
        for g in dev.outputs["acceleratorNodeGroups"]
    ]
    result = cost.estimate_workloads(settings, groups, "us-west-2")
    ray = line(result, "rayLlama2")
    assert ray["unitHourly"] is None and "Capacity Block" in ray["note"]
    assert result["hourly"]["configured"] is None and result["knownHourly"]["configured"] == pytest.approx(86.0)
    assert any("Capacity Block" in u for u in result["unknown"]) and result["boundUsd"]["rayLlama2"] is None
    # The cluster exports the flag the estimate reads.
    assert {g["capacityType"] for g in dev.outputs["acceleratorNodeGroups"]} == {"ON_DEMAND"}


def test_printed_amounts_round_one_way():
    from offline.report.report import ROUNDING_NOTE, money

    # Half up to a tenth of a cent under $1 (one NAT $0.045, three $0.135, three IPv4 $0.015), cents above.
    assert [money(v) for v in (0.045, 0.135, 0.015, 0.005, 0.0125, 0.9996, 139.500137, 1234.5)] == [
        "$0.045",
        "$0.135",
        "$0.015",
        "$0.005",
        "$0.013",
        "$1.00",
        "$139.50",
        "$1,234.50",
    ]
    assert money(None) == "unknown"
    assert ROUNDING_NOTE in render_cost(cost.estimate_cluster([], "us-west-2"), "us-west-2")


def test_a_cluster_without_upgrade_policy_is_priced_as_extended():
    # pulumi-eks v4.3.0 (nodejs/eks/cluster/cluster.ts) passes upgradePolicy through unset, and
    # EKS then applies EXTENDED (amazon-eks-user-guide latest/ug/clusters/kubernetes-versions.adoc).
    resources = [{"urn": "c", "type": "eks:index:Cluster", "name": "c", "dependencies": [], "inputs": {}}]
    assert cost.estimate_cluster(resources, "us-west-2")["hourly"]["idle"] == pytest.approx(0.60)


def test_each_unknown_is_listed_once():
    def fs(name: str) -> dict[str, Any]:
        return {
            "urn": name,
            "type": cost.T_FSX,
            "name": name,
            "dependencies": [],
            "inputs": {
                "deploymentType": "PERSISTENT_2",
                "perUnitStorageThroughput": 125,
                "storageCapacity": 1200,
                "metadataConfiguration": {"mode": "USER_PROVISIONED"},
            },
        }

    result = cost.estimate_cluster([fs("a"), fs("b")], "us-west-2")
    assert len(result["unknown"]) == len(set(result["unknown"])) == 1


def test_ray_bound_counts_only_the_steps_it_runs(dev):
    config = stack_config(WORKLOADS_DIR, "dev")
    ray = json.loads(config["trainium-workloads:rayLlama2"])
    config["trainium-workloads:rayLlama2"] = json.dumps(
        {**ray, "steps": ["generate-data", "precompile"], "stepDeadlineMinutes": 90}
    )
    (run,) = [r for r in cost.workload_runs(parse_workloads_config(config)) if r.name == "rayLlama2"]
    # precompile's activeDeadlineSeconds (5400, from the RayJob's start) + ttl 60 + scale-down 180.
    assert (
        run.bound_seconds == 5640 and "llama2-precompilation-job at most stepDeadlineMinutes (5400 s" in run.bound_text
    )
    assert "llama2-pretraining-job" not in run.bound_text


def check_run(**changes):
    config = stack_config(WORKLOADS_DIR, "dev")
    check = json.loads(config["trainium-workloads:clusterCheck"])
    config["trainium-workloads:clusterCheck"] = json.dumps({**check, **changes})
    (run,) = [r for r in cost.workload_runs(parse_workloads_config(config)) if r.name == "clusterCheck"]
    return run


def test_cluster_check_is_bounded_by_its_stage_deadlines():
    # Each stage holding Trainium nodes is cut at timeoutMinutes from its Job's start, scale-up
    # included: the per-node Job's activeDeadlineSeconds, and the all-reduce launcher's, which
    # under AtStartup exists from the MPIJob's creation (kubeflow/mpi-operator v0.8.0
    # mpi_job_controller.go syncHandler, newLauncherJob); then the Trainium group's 180 s scale-down.
    # 3 nodes, 45 min: 2 x 2700 + 180 = 5580 s.
    run = check_run(nodes=3, timeoutMinutes=45, busBandwidthFloorGBps=20)
    assert (
        run.bound_seconds == 5580
        and "cluster-check-allreduce at most the all-reduce launcher's timeoutMinutes (45 min)" in run.bound_text
    )
    # One node runs no all-reduce: the per-node Job only, 1800 + 180 s; on a group without a burn-in (no
    # startupTaints below) the idle node stays 600 s, not 180: 21.50 x 2400 / 3600 = $14.33.
    run = check_run(nodes=1, timeoutMinutes=30)
    assert run.bound_seconds == 1980 and "cluster-check-allreduce" not in run.bound_text
    groups = [{"name": "trn1-32xl-ng1", "instanceType": "trn1.32xlarge", "maxSize": 4}]
    config = stack_config(WORKLOADS_DIR, "dev")
    config["trainium-workloads:clusterCheck"] = json.dumps(
        {"nodeGroup": "trn1-32xl-ng1", "nodes": 1, "timeoutMinutes": 30}
    )
    result = cost.estimate_workloads(parse_workloads_config(config), groups, "us-west-2")
    assert result["boundUsd"]["clusterCheck"] == 14.33


def test_prods_file_system_is_compared_with_each_tier_at_the_same_throughput():
    """FSx for Lustre gives capacity in TiB x MB/s/TiB (prod: 4,800 / 1,024 x 250 = 1,171.9 MB/s) and takes SSD
    capacity in 1,200, 2,400, then multiples of 2,400 GiB (FSx Lustre user guide, managing-storage-capacity.md)."""
    assert cost.lustre_capacity_for(1171.875, 1000) == 1200  # 1,200 GiB x 1000 = 1,171.9 MB/s
    assert cost.lustre_capacity_for(1171.875, 500) == 2400
    assert cost.lustre_capacity_for(1171.875, 125) == 9600
    assert cost.lustre_capacity_for(1171.9, 1000) == 2400  # a hair more needs the next size
    # Per GiB-month: 1000 at $0.60, 500 at $0.34, 125 at $0.145 (infra/facts/prices.py); 250 unknown, so every
    # priced tier is shown: 1,200 x 0.60 / 730 = $0.99/h, 2,400 x 0.34 / 730 = $1.12/h, 9,600 x 0.145 / 730 = $1.91/h.
    found = cost.lustre_same_throughput(4800, 250, "us-east-2")
    assert [(c, t, round(h, 2)) for c, t, h in found] == [(1200, 1000, 0.99), (2400, 500, 1.12), (9600, 125, 1.91)]
    # Priced layouts show only what is cheaper: 4,800 at 500 ($2.24/h) against 2,400 at 1000 ($1.97/h).
    assert [(c, t) for c, t, _ in cost.lustre_same_throughput(4800, 500, "us-east-2")] == [(2400, 1000)]
    assert cost.lustre_same_throughput(1200, 125, "us-east-2") == []


def test_the_plan_names_the_cheaper_layouts_beside_prods_file_system(prod):
    result = cost.estimate_cluster(prod.as_json()["resources"], "us-east-2")
    (line,) = [entry for entry in result["lines"] if entry["item"] == "FSx for Lustre"]
    assert "the same 1,172 MB/s from 1,200 GiB at 1000 ($0.99/h), 2,400 GiB at 500 ($1.12/h)" in line["note"]
    assert "a smaller file system is a new one" in line["note"]
