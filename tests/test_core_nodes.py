"""The core node group sized to what runs there: one node where the fit check says it holds every system pod,
the leader-elected controllers and CoreDNS at one replica on it (two otherwise), the EBS CSI driver only with
the in-cluster Prometheus whose volumes need it, and the workload stacks' pods counted from the requests they
declare (infra/specs/system_pods.py)."""

from __future__ import annotations

import json

import pytest

from infra.config.models import FeaturesConfig, MonitoringConfig
from infra.specs import system_pods
from infra.specs.system_capacity import cluster_pods, daemonsets, system_fit
from offline.plan.runner import PlanResult
from offline.report import cost

RELEASE = "kubernetes:helm.sh/v3:Release"
MONITORING = {"kube-state-metrics", "prometheus-server", "alertmanager", "grafana"}
ONE_NODE = {"instanceTypes": ["t3a.large"], "minSize": 1, "desiredSize": 1, "maxSize": 3}


@pytest.fixture(scope="module")
def one_node() -> PlanResult:
    from offline.plan.runner import stack_config
    from tests.conftest import _remembered_run
    from tests.fixture_project import FIXTURE_ROOT

    config = stack_config(FIXTURE_ROOT, "dev")
    config["trainium-eks:coreNodeGroup"] = json.dumps(ONE_NODE)
    return _remembered_run(FIXTURE_ROOT, "dev", config)


@pytest.fixture(scope="module")
def one_node_fsx() -> PlanResult:
    """The one-node dev stack on FSx (dev's shipped file system is EFS, whose driver runs no controller)."""
    from offline.plan.runner import stack_config
    from tests.conftest import _remembered_run, fsx_config
    from tests.fixture_project import FIXTURE_ROOT

    config = fsx_config(stack_config(FIXTURE_ROOT, "dev"))
    config["trainium-eks:coreNodeGroup"] = json.dumps(ONE_NODE)
    return _remembered_run(FIXTURE_ROOT, "dev", config)


def release_values(plan: PlanResult, release: str) -> dict:
    return plan.named(release, RELEASE).inputs["values"]


# --- the fit --------------------------------------------------------------------------------------------------


def test_one_t3a_large_holds_dev_with_the_controllers_at_one_replica():
    # dev's features, one namespace, no Prometheus. Per node the 7 DaemonSets of 490m/287Mi
    # (tests/test_node_layout.py). In the cluster, one of each controller: CoreDNS 100m/70Mi, FSx controller
    # 40m/136Mi, Volcano 3 x 0, KubeRay 100m/512Mi, MPI operator 0, cluster-autoscaler 0; metrics-server
    # 100m/200Mi, cloudwatch controller 100m/64Mi, the sweeper 10m/64Mi, the gang hold 10m/64Mi; TensorBoard and
    # its proxy 550m/2112Mi, cmd-shell 250m/512Mi, gang watchdog 10m/64Mi, 3 step gates 30m/96Mi: 18 pods, 1300m,
    # 3894Mi.
    fit = system_fit("t3a.large", 1, FeaturesConfig(), ["default"])
    assert fit is not None and fit.fits
    assert fit.cpu_millis == 490 + 1300 and fit.allocatable_cpu_millis == 2000 - 70  # 93%
    # 8192 MiB x 0.925 = 7577, less 11 x 35 + 355 = 740.
    assert fit.memory_mib == 287 + 3894 and fit.allocatable_memory_mib == 7577 - 740  # 61%
    # awslabs/amazon-eks-ami v20260724 instance-info.jsonl t3a.large: 3 ENIs x (12 - 1) + 2 = 35.
    assert fit.pods_per_node == 7 + 18 and fit.max_pods == 35
    assert fit.summary() == "1,790m of 1,930m CPU (93%), 4,181 of 6,837 MiB (61%), 25 of 35 pods per node"
    # On EFS the FSx node plugin (30m/104Mi) and controller (40m/136Mi) give way to the EFS node plugin, which
    # asks for nothing (aws-efs-csi-driver 4.4.1 values.yaml), and no controller: one pod fewer.
    efs = system_fit("t3a.large", 1, FeaturesConfig(), ["default"], efs=True)
    assert efs is not None and (efs.cpu_millis, efs.memory_mib, efs.pods_per_node) == (1720, 3941, 24)


def test_the_in_cluster_monitoring_does_not_fit_one_t3a_large():
    # Its server, Alertmanager and Grafana (380m/1664Mi), kube-state-metrics, node-exporter, the EBS CSI driver
    # (2 x 60m/240Mi and 30m/120Mi on the node) and the progress exporter (20m/64Mi): 2,330m of 1,930m.
    full = MonitoringConfig(prometheus="in-cluster", grafana="in-cluster")
    fit = system_fit("t3a.large", 1, FeaturesConfig(), ["default"], monitoring=full)
    assert fit is not None and not fit.fits and fit.cpu_millis == 1790 + 380 + 120 + 30 + 20


def test_at_two_replicas_one_t3a_large_would_not_do():
    # The standbys of the six controllers and CoreDNS (+100m/70Mi, +40m/136Mi, +100m/512Mi, 9 more pods):
    # 2,020m of 1,930m. Counted with a minSize of 2 on one surviving node.
    fit = system_fit("t3a.large", 1, FeaturesConfig(), ["default"], core_min_size=2)
    assert fit is not None and not fit.fits and fit.cpu_millis == 1790 + 240


def test_the_workload_stacks_pods_are_counted_from_what_they_declare():
    from workloads import gang_watchdog, step_gate

    pods = {p.name: p for p in cluster_pods(FeaturesConfig(), ["default", "research"])}
    # One per workload stack (a namespace each), three step gates each.
    assert pods["tensorboard"].replicas == pods["cmd-shell"].replicas == pods["gang-watchdog"].replicas == 2
    assert pods["step-gate"].replicas == 6
    assert (pods["tensorboard"].cpu_millis, pods["tensorboard"].memory_mib) == (500 + 50, 2048 + 64)
    without_proxy = {p.name: p for p in cluster_pods(FeaturesConfig(), ["default"], tensorboard_proxy=False)}
    assert (without_proxy["tensorboard"].cpu_millis, without_proxy["tensorboard"].memory_mib) == (500, 2048)
    # The manifests carry the very figures counted.
    layout = gang_watchdog.WatchdogLayout("default", {"role": "core"})
    deployment = next(m for m in gang_watchdog.manifests(layout) if m["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == system_pods.GANG_WATCHDOG_RESOURCES
    step = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "s", "namespace": "n"}}
    gate = step_gate.gate_job(step, "bert", 60, {"role": "core"})
    (container,) = gate["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == system_pods.STEP_GATE_RESOURCES
    # The progress exporter only where a Prometheus scrapes it.
    assert "progress-exporter" not in pods
    managed = cluster_pods(FeaturesConfig(), ["default"], monitoring=MonitoringConfig(prometheus="managed"))
    assert {p.name: p.cpu_millis for p in managed}["progress-exporter"] == 20


def test_monitoring_adds_its_pods_and_node_agents():
    features = FeaturesConfig()
    names = {p.name: p.replicas for p in cluster_pods(features, ["default"], monitoring=MonitoringConfig())}
    assert not MONITORING & set(names)
    full = MonitoringConfig(prometheus="in-cluster", grafana="in-cluster")
    pods = {p.name: p for p in cluster_pods(features, ["default"], monitoring=full)}
    # kube-state-metrics' chart sets no requests (prometheus-community cf408a2, 8.4.0) and the values leave it so;
    # the others carry what their releases' values set (infra/specs/monitoring.py IN_CLUSTER_RESOURCES): the
    # server 250m/1Gi with its config reloader 10m/32Mi, Alertmanager 10m/32Mi, Grafana 100m/512Mi with its
    # dashboard sidecar 10m/64Mi. One pod each.
    assert {n: (pods[n].replicas, pods[n].cpu_millis, pods[n].memory_mib) for n in pods if n in MONITORING} == {
        "kube-state-metrics": (1, 0, 0),
        "prometheus-server": (1, 260, 1056),
        "alertmanager": (1, 10, 32),
        "grafana": (1, 110, 576),
    }
    # With the in-cluster Prometheus the EBS CSI driver runs: its controller (two, 60m/240Mi each) and its
    # node plugin; node-exporter on every node with any Prometheus.
    assert pods["ebs-csi-controller"].replicas == 2
    on_node = {p.name for p in daemonsets(features, ebs_csi=True, metrics_agents=True)}
    assert {"ebs-csi-node", "prometheus-node-exporter"} <= on_node
    assert not {"ebs-csi-node", "prometheus-node-exporter"} & {p.name for p in daemonsets(features)}


# --- replicas in what the plan renders --------------------------------------------------------------------------


def test_one_node_runs_one_replica_of_each_controller(
    one_node: PlanResult, dev: PlanResult, one_node_fsx: PlanResult, dev_fsx: PlanResult
):
    from infra.components.schedulers import VOLCANO_PODS

    for plan, count in ((one_node, 1), (dev, 2)):
        volcano = release_values(plan, "volcano")["custom"]
        assert {volcano[f"{c}_replicas"] for c in VOLCANO_PODS} == {count}
        assert release_values(plan, "kuberay-operator")["replicas"] == count
        assert release_values(plan, "cluster-autoscaler")["replicaCount"] == count
        coredns = plan.named("cluster-coredns", "aws:eks/addon:Addon").inputs
        assert json.loads(coredns["configurationValues"]) == {"replicaCount": count}
    # The FSx chart's own default is two (chart 1.17.0 values.yaml l.78): set only at one. The EFS driver runs
    # no controller at all (infra/components/efs_storage.py).
    assert release_values(one_node_fsx, "aws-fsx-csi-driver")["controller"]["replicaCount"] == 1
    assert "replicaCount" not in release_values(dev_fsx, "aws-fsx-csi-driver")["controller"]
    assert release_values(one_node, "aws-efs-csi-driver")["controller"]["create"] is False


def test_the_mpi_operator_transform_sets_the_replicas():
    import pulumi

    from infra.components.schedulers import mpi_operator_release_image

    deployment = {
        "metadata": {"name": "mpi-operator"},
        "spec": {"template": {"spec": {"containers": [{"name": "mpi-operator", "image": "x"}]}}},
    }
    for count in (1, 2):
        args = pulumi.ResourceTransformArgs(
            True, "kubernetes:apps/v1:Deployment", "mpi-operator", deployment, pulumi.ResourceOptions()
        )
        result = mpi_operator_release_image(args, replicas=count)
        assert result is not None and result.props["spec"]["replicas"] == count


def test_no_budget_blocks_a_drain_at_one_replica(one_node: PlanResult):
    # Every budget the program declares lets one pod go; the charts' (cluster-autoscaler, FSx) are said to.
    budgets = one_node.of_type("kubernetes:policy/v1:PodDisruptionBudget")
    assert budgets and all(b.inputs["spec"]["maxUnavailable"] == 1 for b in budgets)
    assert all("minAvailable" not in b.inputs["spec"] for b in budgets)
    assert release_values(one_node, "cluster-autoscaler")["podDisruptionBudget"] == {"maxUnavailable": 1}


# --- a second core node does not stay ------------------------------------------------------------------------


SAFE_TO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def test_cluster_autoscaler_leaves_the_daemonsets_out_of_a_nodes_utilisation(one_node: PlanResult):
    # cluster-autoscaler-1.35.2: the flag's default is false (config/flags/flags.go); the chart passes each
    # extraArgs entry as --key=value.
    args = release_values(one_node, "cluster-autoscaler")["extraArgs"]
    assert args["ignore-daemonsets-utilization"] == "true"
    # With it, a second t3a.large holding TensorBoard after a roll is at 500m of what its DaemonSets leave
    # (1,930m - 490m): 35%, below the 0.5 threshold; counting the DaemonSets it was 990m of 1,930m, 51%.
    fit = system_fit("t3a.large", 1, FeaturesConfig(), ["default"])
    assert fit is not None
    daemonset_cpu = sum(p.cpu_millis for p in daemonsets(FeaturesConfig()))
    assert 500 / (fit.allocatable_cpu_millis - daemonset_cpu) < 0.5 < (500 + daemonset_cpu) / fit.allocatable_cpu_millis


def test_the_core_pods_with_an_empty_dir_may_be_evicted_by_cluster_autoscaler(
    one_node: PlanResult, one_node_fsx: PlanResult
):
    from infra.specs import system_pods

    assert system_pods.SAFE_TO_EVICT == SAFE_TO_EVICT
    # metrics-server chart 3.13.1 and the FSx chart 1.17.0 put podAnnotations on the pod template.
    assert release_values(one_node, "metrics-server")["podAnnotations"] == SAFE_TO_EVICT
    assert release_values(one_node_fsx, "aws-fsx-csi-driver")["controller"]["podAnnotations"] == SAFE_TO_EVICT
    # The node DaemonSet is not drained by cluster-autoscaler: it keeps no annotation.
    assert "podAnnotations" not in release_values(one_node_fsx, "aws-fsx-csi-driver")["node"]


def test_tensorboard_restarts_in_place_and_may_be_evicted(workloads_dev: PlanResult):
    from tests.test_workloads import manifest

    deployment = manifest(workloads_dev, "Deployment", "tensorboard")
    # No surge pod: one core node has less CPU free than TensorBoard asks. A rolling update, not Recreate: the
    # deployed Deployments hold the defaulted rollingUpdate, which a server-side apply of Recreate leaves behind
    # and validation then refuses (pulumi/pulumi-kubernetes#2843).
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"] == SAFE_TO_EVICT
    # The emptyDir the annotation is there for.
    assert any("emptyDir" in v for v in template["spec"]["volumes"])
    fit = system_fit("t3a.large", 1, FeaturesConfig(), ["default"], tensorboard_proxy=False)
    cpu = int(deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"].rstrip("m"))
    assert fit is not None and fit.allocatable_cpu_millis - fit.cpu_millis < cpu


def test_the_core_group_repairs_a_node_that_stops_reporting_ready(one_node: PlanResult, prod: PlanResult):
    # Its Auto Scaling group replaces only an instance that fails EC2's checks; EKS node auto repair reacts to
    # the kubelet's Ready condition too (eks-user-guide 4d52b4d0 latest/ug/nodes/node-health.adoc).
    for plan in (one_node, prod):
        assert plan.named("cluster-core").inputs["nodeRepairConfig"] == {"enabled": True}
    # The job-support group scales from zero and back: cluster-autoscaler removes an unready node there.
    assert "nodeRepairConfig" not in one_node.named("cluster-job-support").inputs


def test_karpenter_runs_and_is_counted_at_the_controllers_replicas():
    from infra.specs import nodepools

    # Its chart's anti-affinity is required per hostname (v1.14.1 values.yaml): a second replica on a one-node
    # core group would never schedule.
    for replicas in (1, 2):
        values = nodepools.chart_values("c", "us-west-2", "q", True, {"role": "core"}, replicas)
        assert values["replicas"] == replicas
        pods = {p.name: p for p in cluster_pods(FeaturesConfig(), ["default"], karpenter=True, replicas=replicas)}
        assert (pods["karpenter"].replicas, pods["karpenter"].cpu_millis) == (replicas, 250)
    # On one node the fit counts one Karpenter: 250m more than the 1,790m, which one t3a.large cannot hold and
    # one c6i.xlarge (4 vCPU) can.
    small = system_fit("t3a.large", 1, FeaturesConfig(), ["default"], karpenter=True)
    assert small is not None and not small.fits and small.cpu_millis == 1790 + 250
    large = system_fit("c6i.xlarge", 1, FeaturesConfig(), ["default"], karpenter=True)
    assert large is not None and large.fits


def test_the_karpenter_release_sets_the_replicas(karp_one_node: PlanResult):
    assert release_values(karp_one_node, "karpenter")["replicas"] == 1


@pytest.fixture(scope="module")
def karp_one_node() -> PlanResult:
    from offline.plan.runner import run_program, stack_config
    from tests.fixture_project import FIXTURE_ROOT

    config = stack_config(FIXTURE_ROOT, "dev")
    config["trainium-eks:coreNodeGroup"] = json.dumps({**ONE_NODE, "instanceTypes": ["c6i.xlarge"]})
    config["trainium-eks:nodeProvisioner"] = "karpenter"
    return run_program(FIXTURE_ROOT, "dev", config)


def test_the_one_node_group_plans_at_its_size_and_price(one_node: PlanResult):
    group = one_node.named("cluster-core").inputs
    assert group["instanceTypes"] == ["t3a.large"]
    assert group["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 3}
    estimate = cost.estimate_cluster(one_node.as_json()["resources"], one_node.outputs["region"])
    (line,) = [line for line in estimate["lines"] if line["detail"].startswith("t3a.large")]
    # aws/karpenter-provider-aws v1.14.1 pricing table: t3a.large $0.0752/h.
    assert line["hourly"]["idle"] == pytest.approx(0.0752)
    # Unlimited mode's surplus credits are named, not priced; a group of m6i has none to name.
    assert any("burstable nodes (t3a.large)" in entry for entry in estimate["notEstimated"])


def test_no_burstable_line_without_a_burstable_group(dev: PlanResult):
    estimate = cost.estimate_cluster(dev.as_json()["resources"], dev.outputs["region"])
    assert not any("burstable" in entry for entry in estimate["notEstimated"])


def test_the_plan_summary_prints_the_fit_beside_the_cost():
    from offline.report.core_fit import core_fit_texts
    from tests.test_node_layout import stack_config

    config = stack_config("dev").model_copy(
        update={"core_node_group": stack_config("dev").core_node_group.model_copy(update={"min_size": 1})}
    )
    (text,) = core_fit_texts(config)
    # dev's stack is on EFS: no FSx node plugin (30m/104Mi) or controller (40m/136Mi), one EFS node pod with no
    # requests; 1,790m less those 70m.
    assert text.startswith("core nodes m6i.large × 1, controllers at 1: system pods ask 1,720m of 1,930m CPU")


def test_the_plan_counts_the_tensorboard_proxy_only_where_a_load_balancer_runs_it(tmp_path):
    from offline.report.core_fit import tensorboard_proxy

    def stack_file(tensorboard: str) -> None:
        (tmp_path / "Pulumi.dev.yaml").write_text(f"config:\n  trainium-workloads:tensorboard: {tensorboard}\n")

    stack_file("{}")
    assert not tensorboard_proxy(tmp_path, "dev", 1)
    # Other namespaces' workload stacks are not in the repository: counted.
    assert tensorboard_proxy(tmp_path, "dev", 2)
    stack_file("{loadBalancer: {allowedCidrs: [203.0.113.0/24]}}")
    assert tensorboard_proxy(tmp_path, "dev", 1)
    # No workload stack file: counted.
    assert tensorboard_proxy(tmp_path, "prod", 1)


def test_dev_plan_leaves_out_the_proxy_its_workload_stack_does_not_run():
    from offline.report.core_fit import deployed
    from tests.fixture_project import FIXTURE_ROOT

    (text,) = deployed(FIXTURE_ROOT, "dev")
    without = system_fit("m6i.large", 2, FeaturesConfig(), ["default"], tensorboard_proxy=False, efs=True)
    assert without is not None and text.endswith(without.summary())


# --- the EBS CSI add-on ----------------------------------------------------------------------------------------


def addon_names(plan: PlanResult) -> set[str]:
    return {r.inputs["addonName"] for r in plan.of_type("aws:eks/addon:Addon")}


def test_the_ebs_csi_addon_runs_only_with_the_in_cluster_prometheus(dev: PlanResult, prod: PlanResult, plan_with):
    # Nothing else makes EBS volumes: without the in-cluster Prometheus no volume of its class exists, so the
    # add-on can go from a running cluster.
    assert "aws-ebs-csi-driver" not in addon_names(dev) | addon_names(prod)
    assert not [c for c in dev.of_type("kubernetes:storage.k8s.io/v1:StorageClass") if "ebs" in str(c.inputs)]
    assert not [r for r in dev.registrations if r.name == "cluster-ebs-csi"]
    in_cluster = plan_with(monitoring={"prometheus": "in-cluster"})
    addons = {r.inputs["addonName"]: r for r in in_cluster.of_type("aws:eks/addon:Addon")}
    ebs = addons["aws-ebs-csi-driver"]
    assert in_cluster.named("cluster-core").urn in ebs.dependencies
    assert addons["eks-pod-identity-agent"].urn in ebs.dependencies
    assert ebs.inputs["podIdentityAssociations"] == [
        {
            "roleArn": "arn:aws:iam::123456789012:role/cluster-ebs-csi-placeholder",
            "serviceAccount": "ebs-csi-controller-sa",
        }
    ]
    trust = in_cluster.named("cluster-ebs-csi").inputs["assumeRolePolicy"]
    assert "pods.eks.amazonaws.com" in trust and "sts:TagSession" in trust
    # The Prometheus release waits for the driver that makes its volumes.
    assert ebs.urn in in_cluster.named("prometheus", RELEASE).dependencies
    assert "aws-ebs-csi-driver" in in_cluster.outputs["addonBuilds"]
    assert "aws-ebs-csi-driver" not in dev.outputs["addonBuilds"]


def test_the_refusal_counts_its_nodes_in_words_that_agree():
    from infra.specs.system_capacity import system_fit_problem

    one = system_fit_problem(
        "t3a.large", 1, FeaturesConfig(), ["default"], monitoring=MonitoringConfig(prometheus="in-cluster")
    )
    two = system_fit_problem("t3a.medium", 2, FeaturesConfig(), ["default"])
    assert one is not None and one.startswith("1 such node (minSize) cannot hold")
    assert two is not None and two.startswith("2 such nodes (minSize) cannot hold")
