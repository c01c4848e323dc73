"""Idle cost: small always-on system nodes, a job-support CPU group that scales from
zero, and the idle bill under $0.50/h in dev before FSx.

The figures the checks use carry their sources in infra/specs/system_capacity.py and infra/facts/prices.py;
the ones restated here are checked against those sources, not copied from program output.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from infra.config.errors import ConfigError
from infra.config.load import raw_from_pulumi_config
from infra.config.models import FeaturesConfig
from infra.facts.instances import INSTANCE_TYPES
from infra.specs.system_capacity import reserved_cpu_millis, reserved_memory_mib, system_fit
from infra.validate import parse_stack_config
from offline.plan.runner import PlanResult
from offline.report import cost
from tests.fixture_project import FIXTURE_ROOT

ROOT = FIXTURE_ROOT


def stack_config(stack: str):
    raw = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    flat = {k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
    return parse_stack_config(raw_from_pulumi_config(flat))


# --- what the kubelet leaves and the CNI allows -------------------------------------------------


def test_kube_reserved_follows_nodeadm():
    # awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go: 6% of core 1 (60m), 1% of core 2
    # (10m), 0.5% of cores 3-4 (10m), 0.25% of the rest (30m for 12 cores): 2 vCPU -> 70m, 16 vCPU -> 110m.
    assert reserved_cpu_millis(2) == 70
    assert reserved_cpu_millis(16) == 60 + 10 + 10 + 30
    # 11 MiB per pod + 255 MiB, plus the 100 MiB eviction threshold: m6i.large (29 pods) -> 674 MiB.
    assert reserved_memory_mib(29) == 674


def test_max_pods_are_the_eni_formula():
    # ENIs x (IPv4 addresses per ENI - 1) + 2, no prefix delegation (EC2 ENI limits: m6i.large 3 x 10,
    # t3.large 3 x 12, t3.medium 3 x 6, m6i.xlarge 4 x 15), as misc/eni-max-pods.txt lists them.
    for instance_type, enis, ips in (
        ("m6i.large", 3, 10),
        ("t3.large", 3, 12),
        ("t3.medium", 3, 6),
        ("m6i.xlarge", 4, 15),
    ):
        assert INSTANCE_TYPES[instance_type].node.max_pods == enis * (ips - 1) + 2


def test_dev_system_pods_fit_two_small_nodes():
    config = stack_config("dev")
    assert config.core_node_group.instance_types == ["m6i.large"] and config.core_node_group.min_size == 2
    fit = system_fit("m6i.large", 2, config.features, config.training_namespaces, monitoring=config.monitoring)
    assert fit is not None and fit.fits
    # Per node, 7 DaemonSets (no Prometheus, so no node-exporter; no EBS CSI): aws-node 25m, kube-proxy 100m,
    # pod identity 25m, fsx-csi-node 30m/104Mi, cloudwatch-agent 250m/128Mi, fluent-bit 50m/25Mi, node
    # monitoring agent 10m/30Mi = 490m/287Mi. In the cluster, two of each leader-elected controller: CoreDNS
    # 2 x 100m/70Mi, FSx controller 2 x 40m/136Mi, Volcano 6 x 0, KubeRay 2 x 100m/512Mi, MPI operator 2 x 0,
    # cluster-autoscaler 2 x 0; metrics-server 100m/200Mi, cloudwatch controller 100m/64Mi, the burn-in sweeper
    # and the gang hold 2 x 10m/64Mi; the one workload stack's TensorBoard with its proxy 550m/2112Mi, cmd-shell
    # 250m/512Mi, gang watchdog 10m/64Mi and 3 step gates 3 x 10m/32Mi: 26 pods, 1540m, 4612Mi.
    assert fit.pods_per_node == 7 + 13 and fit.max_pods == 29  # 26 pods over 2 nodes
    assert fit.cpu_millis == 2 * 490 + 1540 and fit.allocatable_cpu_millis == 2 * (2000 - 70)
    # 8192 MiB x 0.925 = 7577, less 11 x 29 + 355 = 674 per node.
    assert fit.memory_mib == 2 * 287 + 4612 and fit.allocatable_memory_mib == 2 * (7577 - 674)


def test_one_small_node_is_refused_naming_the_key():
    # A single t3a.medium (17 pods, 4 GiB) cannot hold DaemonSets + every cluster pod: refused before any
    # resource, naming the key, the value and what would hold them.
    with pytest.raises(ConfigError) as err:
        parse_stack_config(
            {"region": "us-west-2", "coreNodeGroup": {"instanceTypes": ["t3a.medium"], "minSize": 1, "desiredSize": 1}}
        )
    message = " ".join(str(err.value).split())
    assert "coreNodeGroup.instanceTypes[0] = 't3a.medium': 1 such node (minSize) cannot hold the system pods" in (
        message
    )
    # 25 pods of 17; 4181 MiB of 4096 x 0.925 - (11 x 17 + 355) = 3246.
    assert "25 pods per node (limit 17)" in message and "4181 of 3246 MiB" in message
    # Three t3a.medium hold them with two replicas of each controller; one node of 8 GiB, cheapest first.
    assert "these fit: t3a.medium x 3 or t3a.large x 1 or t3.large x 1 or m6i.large x 1" in message


def test_tiny_nodes_run_out_of_pod_addresses():
    # t3.medium allows 17 pods: with the Neuron scheduler extension and Karpenter's controllers, 2
    # nodes cannot hold them.
    features = FeaturesConfig(neuron_scheduler_extension=True)
    fit = system_fit("t3.medium", 2, features, ["default", "research"], karpenter=True)
    assert fit is not None and not fit.fits and fit.pods_per_node > 17


# --- the job-support group ---------------------------------------------------------------------


def test_job_support_group_scales_from_zero_with_its_taint(dev):
    group = dev.named("cluster-job-support").inputs
    assert group["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 4}
    assert group["instanceTypes"] == ["m6i.4xlarge"]
    assert group["labels"] == {"role": "job-support", "provisioner": "cluster-autoscaler"}
    assert group["taints"] == [{"key": "job-support", "value": "true", "effect": "NO_SCHEDULE"}]
    # From zero nodes cluster-autoscaler learns labels and taints from the ASG's node-template tags
    # (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md, "Scaling a node group to 0").
    tags = {
        r.inputs["tag"]["key"]: r.inputs["tag"]["value"]
        for r in dev.of_type("aws:autoscaling/tag:Tag")
        if r.name.startswith("cluster-job-support-")
    }
    assert tags == {
        "k8s.io/cluster-autoscaler/node-template/label/role": "job-support",
        "k8s.io/cluster-autoscaler/node-template/label/provisioner": "cluster-autoscaler",
        "k8s.io/cluster-autoscaler/node-template/taint/job-support": "true:NoSchedule",
    }


def test_groups_are_named_by_prefix_so_a_type_change_replaces_without_collision(dev):
    for name in ("cluster-core", "cluster-job-support"):
        inputs = dev.named(name).inputs
        assert "nodeGroupName" not in inputs and inputs["nodeGroupNamePrefix"].endswith("-")


def test_workloads_get_the_placement_from_the_outputs(dev):
    placement = dev.outputs["jobSupportPlacement"]
    assert placement["nodeSelector"] == {"role": "job-support"}
    assert placement["tolerations"] == [
        {"key": "job-support", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]


# --- the idle bill -----------------------------------------------------------------------------
# The plan's own estimate (offline/report/cost.py over infra/facts/instances.py and prices.py), idle = every group at minSize.


def idle_before_fsx(plan: PlanResult) -> float:
    result = cost.estimate_cluster(plan.as_json()["resources"], plan.outputs["region"])
    assert result["unknown"] == []
    return sum(line["hourly"]["idle"] for line in result["lines"] if line["item"] != "FSx for Lustre")


def test_dev_idles_under_half_a_dollar_an_hour(dev: PlanResult) -> None:
    # us-west-2 list prices: control plane 0.10 (STANDARD), one NAT 0.045 + its IPv4 0.005,
    # 2 x m6i.large 0.192, 2 x 50 GiB gp3 at 0.08/GiB-month (0.011); the job-support and Trainium
    # groups at zero; the S3 endpoint is a free gateway endpoint, there are no interface endpoints.
    expected = 0.10 + 0.045 + 0.005 + 2 * 0.096 + 2 * 50 * 0.08 / 730
    assert idle_before_fsx(dev) == pytest.approx(expected, abs=1e-4)
    assert idle_before_fsx(dev) <= 0.50


def test_the_old_layout_was_over_the_target(plan_with) -> None:
    # Two m6i.4xlarge core nodes with 100 GiB roots carried the job pods before: the issue's $1.69/h.
    old = plan_with(
        coreNodeGroup={
            "instanceTypes": ["m6i.4xlarge"],
            "minSize": 2,
            "desiredSize": 2,
            "maxSize": 4,
            "diskSizeGib": 100,
        }
    )
    assert idle_before_fsx(old) == pytest.approx(0.15 + 2 * 0.768 + 200 * 0.08 / 730, abs=1e-4)


def test_prod_sizing_is_its_own():
    config = stack_config("prod")
    # Three zones, a system node in each; the system pods still fit when one of
    # the three is lost, so a zone outage or a node replacement leaves nothing Pending.
    core = config.core_node_group
    assert core.min_size == 3 and core.instance_types == ["m6i.large"]
    fit = system_fit(
        core.instance_types[0], core.min_size, config.features, config.training_namespaces, monitoring=config.monitoring
    )
    # Per node 8 DaemonSets: dev's 7 (490m/287Mi) and node-exporter (0, a Prometheus is on). In the cluster: the
    # controllers at two replicas as in dev (20 pods, 700m/1828Mi with the sweeper and the gang hold),
    # kube-state-metrics (its
    # chart sets no requests), Grafana and its sidecar (100m/512Mi + 10m/64Mi, infra/specs/monitoring.py), and per
    # workload stack (two namespaces) TensorBoard with its proxy, cmd-shell, the gang watchdog, 3 step gates and
    # the progress exporter 20m/64Mi: 2 x 7 pods, 2 x (860m/2848Mi).
    assert fit is not None and fit.fits
    assert fit.cpu_millis == 3 * 490 + 700 + 110 + 2 * 860 and fit.memory_mib == 3 * 287 + 1828 + 576 + 2 * 2848
    assert fit.pods_per_node == 8 + 12  # 20 + 2 + 14 = 36 cluster pods over 3 nodes
    survivors = system_fit(
        core.instance_types[0],
        core.min_size - 1,
        config.features,
        config.training_namespaces,
        monitoring=config.monitoring,
        core_min_size=core.min_size,
    )
    # Two nodes left: 3510m of 3860m, 26 of 29 pods.
    assert survivors is not None and survivors.fits
    assert survivors.cpu_millis == 2 * 490 + 700 + 110 + 2 * 860 and survivors.pods_per_node == 8 + 18


@pytest.mark.parametrize(
    "group, expected",
    [
        (
            {"instanceTypes": ["trn1.32xlarge"]},
            "jobNodeGroup.instanceTypes[0] = 'trn1.32xlarge': this group runs CPU pods",
        ),
        ({"minSize": 3, "maxSize": 2}, "jobNodeGroup: sizes must satisfy minSize <= desiredSize <= maxSize"),
        ({"instanceTypes": [""]}, "jobNodeGroup.instanceTypes[0]"),
        ({"maxSize": "four"}, "jobNodeGroup.maxSize"),
        ({"maxSize": True}, "jobNodeGroup.maxSize"),
    ],
)
def test_bad_job_support_groups_are_refused_by_key(group: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"region": "us-west-2", "jobNodeGroup": group})
    assert expected in str(err.value)


def test_a_trainium_node_leaves_pods_what_the_kubelet_and_its_daemonsets_do_not_take():
    # What the workload stacks check every pod against (workloads/schedule.py): trn1.32xlarge, 128
    # vCPU and 512 GiB (EC2), 247 max pods (aws/amazon-vpc-cni-k8s misc/eni-max-pods.txt at
    # v1.22.0-234-gb52188387). The kubelet reports MemTotal as capacity, below EC2's 512 GiB: 7.5% less
    # (Karpenter's estimate, aws/karpenter-provider-aws v1.14.1 pkg/operator/options/options.go l.58
    # VM_MEMORY_OVERHEAD_PERCENT 0.075), 484966 MiB. From that it keeps 11 x 247 + 255 + 100 = 3072 MiB
    # (awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go getMemoryMebibytesToReserve, evictionHard)
    # and 60 + 10 + 10 + 310 = 390m; the DaemonSets on it ask for the rest of the difference.
    from infra.specs.system_capacity import (
        MEMORY_OVERHEAD_FRACTION,
        accelerator_daemonsets,
        daemonsets,
        memory_capacity_mib,
        node_allocatable,
    )

    features = FeaturesConfig()
    assert INSTANCE_TYPES["trn1.32xlarge"].node.max_pods == 247 and reserved_cpu_millis(128) == 390
    assert reserved_memory_mib(247) == 3072
    on_node = daemonsets(features) + accelerator_daemonsets(features)
    cpu = 128_000 - 390 - sum(p.cpu_millis for p in on_node)
    assert MEMORY_OVERHEAD_FRACTION == 0.075 and memory_capacity_mib(512 * 1024) == 484966
    memory = 484966 - 3072 - sum(p.memory_mib for p in on_node)
    # 481399: the DaemonSets take 128 MiB more than the 481527 a cluster without the CloudWatch add-on leaves (its
    # own neuron-monitor, 256m/128Mi); the EC2 figure alone would have promised 520729 MiB.
    assert memory == 481399
    assert node_allocatable("trn1.32xlarge", features, accelerator=True) == {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}
    # The Neuron node problem detector (10m/80Mi, neuron-helm-chart values.yaml) is counted only on
    # accelerator nodes, and a type the tables lack has no figure (the workloads then check devices only).
    without = node_allocatable(
        "trn1.32xlarge", features.model_copy(update={"neuron_device_plugin": False}), accelerator=True
    )
    assert int(without["cpu"][:-1]) == cpu + 10 and node_allocatable("p5.48xlarge", features, accelerator=True) is None
    assert node_allocatable("m6i.4xlarge", features, accelerator=False) == {"cpu": "15400m", "memory": "57404Mi"}
    # The EBS CSI node plugin (3 x 10m/40Mi) runs on every node only with the add-on (in-cluster Prometheus).
    assert node_allocatable("m6i.4xlarge", features, accelerator=False, ebs_csi=True) == {
        "cpu": "15370m",
        "memory": "57284Mi",
    }
