"""Do the system pods fit the always-on system nodes? A pure computation, tested on its own.

The system node group is sized to be cheap; too small and CoreDNS or a controller stays
Pending with no error from `pulumi up`. Two limits matter: the pods' CPU and memory requests
against what the kubelet leaves allocatable, and the number of pods, which the VPC CNI caps
per node by the instance's ENIs and their IPv4 addresses (no prefix delegation, no custom
networking in this cluster: `infra/components/network.py` puts nodes and pods in the same node subnets,
and the vpc-cni add-on is installed with its defaults).

Every figure carries its source; each instance type's vCPUs, memory and max pods are in its row
of infra/facts/instances.py, and a type whose row has none is not checked. Requests not set
upstream count as zero, which is what the scheduler counts too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from infra.config.models import FeaturesConfig, MonitoringConfig, StackConfig
from infra.facts.instances import INSTANCE_TYPES, InstanceType, NodeSize
from infra.specs import monitoring as monitoring_spec
from infra.specs import node_metrics, system_pods
from infra.specs.burn_in_objects import CORE_CRON_JOB_REQUESTS


def _node_size(instance_type: str) -> NodeSize | None:
    row = INSTANCE_TYPES.get(instance_type)
    return row.node if row else None


def reserved_cpu_millis(vcpus: int) -> int:
    """kube-reserved CPU on the EKS AL2023 AMI: 6% of the first core, 1% of the second, 0.5% of
    the next two, 0.25% of the rest (awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go,
    getCPUMillicoresToReserve, at 81fec2e8)."""
    total = vcpus * 1000
    reserved = 0
    for start, end, per_10k in ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, total, 25)):
        if total > start:
            reserved += (min(total, end) - start) * per_10k // 10000
    return reserved


# The kubelet reports a node's memory capacity as the kernel's MemTotal (cAdvisor's machine info),
# which is below the EC2-listed memory by what the firmware, hypervisor and kernel keep: nodeadm's
# kube-reserved below is subtracted from that capacity, not from the listed figure. The share is
# Karpenter's default estimate of that gap for every instance type (aws/karpenter-provider-aws v1.14.1
# pkg/operator/options/options.go l.58, VM_MEMORY_OVERHEAD_PERCENT 0.075), applied until a real node
# says otherwise: the acceptance test prints each node's MemTotal beside the allocatable figure the
# cluster stack exports, and fails when the node has less (workloads/cluster_check.py node_script).
MEMORY_OVERHEAD_FRACTION = 0.075


def memory_capacity_mib(listed_mib: int) -> int:
    """What the kubelet will report as memory capacity for an EC2-listed ``listed_mib``."""
    return int(listed_mib * (1 - MEMORY_OVERHEAD_FRACTION))


def reserved_memory_mib(max_pods: int) -> int:
    """kube-reserved memory, 11 MiB per pod + 255 MiB (same file, getMemoryMebibytesToReserve),
    plus the 100 MiB hard-eviction threshold (same file, evictionHard memory.available)."""
    return 11 * max_pods + 255 + 100


@dataclass(frozen=True)
class PodRequests:
    name: str
    cpu_millis: int
    memory_mib: int
    replicas: int
    source: str


def _requests(name: str, requests: dict[str, str], source: str) -> PodRequests:
    """One pod's PodRequests from its Kubernetes requests, in millicores and Mi."""
    return PodRequests(
        name, int(requests["cpu"].removesuffix("m")), int(requests["memory"].removesuffix("Mi")), 1, source
    )


# On every node (DaemonSets). The Neuron and EFA device plugins and the Neuron problem detector
# select accelerator nodes only, so they are not here. ``ebs_csi``: whether the EBS CSI add-on runs
# (MonitoringConfig.ebs_volumes); ``metrics_agents``: whether a Prometheus's node agents run.
def daemonsets(
    features: FeaturesConfig, ebs_csi: bool = False, metrics_agents: bool = False, efs: bool = False
) -> list[PodRequests]:
    """``efs``: the shared file system is EFS (storage.kind), whose driver runs in place of FSx's."""
    pods = [
        # aws/amazon-vpc-cni-k8s charts/aws-vpc-cni/values.yaml: aws-node 25m, node agent none.
        PodRequests("aws-node", 25, 0, 1, "amazon-vpc-cni-k8s charts/aws-vpc-cni/values.yaml"),
        PodRequests(
            "kube-proxy", 100, 0, 1, "EKS kube-proxy add-on DaemonSet, cpu 100m (EKS-managed, no public manifest)"
        ),
        # Its public chart sets no requests (aws/eks-pod-identity-agent d4dc0f3 charts/eks-pod-identity-agent/
        # values.yaml l.165: resources {}), which the add-on build may or may not keep: 25m over-counts at worst.
        PodRequests("eks-pod-identity-agent", 25, 0, 1, "estimate over the public chart's resources {}"),
    ]
    if ebs_csi:
        # kubernetes-sigs/aws-ebs-csi-driver chart 2.64.0: node plugin + registrar + liveness, 10m/40Mi each.
        pods.append(
            PodRequests(
                "ebs-csi-node", 30, 120, 1, "aws-ebs-csi-driver charts/aws-ebs-csi-driver/values.yaml node.resources"
            )
        )
    if features.fsx_csi and efs:
        # aws-efs-csi-driver chart 4.4.1: the node plugin and its sidecars set no requests (values.yaml
        # resources {}); one pod a node all the same.
        pods.append(PodRequests("efs-csi-node", 0, 0, 1, "aws-efs-csi-driver 4.4.1 values.yaml node (none)"))
    elif features.fsx_csi:
        # aws-fsx-csi-driver chart 1.17.0: fsx-plugin 10m/40Mi, registrar and liveness 10m/32Mi.
        pods.append(PodRequests("fsx-csi-node", 30, 104, 1, "aws-fsx-csi-driver 1.17.0 values.yaml node + sidecars"))
    if features.observability:
        # The chart of the add-on build that runs (v4.7.0-eksbuild.1 on 1.35): aws-observability/helm-charts
        # amazon-cloudwatch-observability-4.7.0 values.yaml, agent 250m/128Mi (l.1306-1308), containerLogs
        # fluentBit 50m/25Mi (l.35-37).
        pods.append(
            PodRequests("cloudwatch-agent", 250, 128, 1, "amazon-cloudwatch-observability values agent.resources")
        )
        pods.append(
            PodRequests("fluent-bit", 50, 25, 1, "amazon-cloudwatch-observability values containerLogs.fluentBit")
        )
    if features.node_monitoring_agent:
        pods.append(PodRequests("eks-node-monitoring-agent", 10, 30, 1, "estimate: EKS add-on, no public manifest"))
    if metrics_agents:
        # infra/specs/node_metrics.py: node-exporter on every node, requesting nothing (prometheus-community
        # helm-charts cf408a2 charts/prometheus-node-exporter/values.yaml l.334, chart 4.56.1: resources {}); it
        # still takes one of the node's pods.
        pods.append(
            PodRequests(node_metrics.NODE_EXPORTER, 0, 0, 1, "prometheus-node-exporter 4.56.1 values.yaml resources {}")
        )
    return pods


# On accelerator nodes only: the Neuron chart's DaemonSets (aws-neuron/neuron-helm-charts
# charts/neuron-helm-chart/values.yaml at 1.0.0, the newest copy readable here; the pin is 1.9.0:
# the device plugin sets no requests, the node problem detector 10m/80Mi, node recovery 10m/150Mi)
# and the EFA device plugin (eks-charts aws-efa-k8s-device-plugin v0.5.30 values.yaml: resources {}).
# A `deviceAllocation: dra` node runs the DRA drivers instead of the device plugins (docs/dra.md): the
# Neuron DRA driver (neuron-helm-chart values.yaml at 1.9.0, b77a6f90: draDriver.resources.requests 10m/128Mi)
# and, with EFA, aws-dranet (eks-charts stable/aws-dranet 1.0.0 values.yaml resources.requests 100m/50Mi).
# With a Prometheus (monitoring.prometheus not off), the node agents of infra/specs/node_metrics.py: neuron-monitor
# on every Trainium node but a DRA one (its requests are the upstream manifest's), the EFA exporter where the EFA
# device plugin runs. node-exporter, on every node, requests nothing (its chart's resources {}).
def accelerator_daemonsets(
    features: FeaturesConfig, dra: bool = False, efa: bool = True, metrics_agents: bool = False
) -> list[PodRequests]:
    pods = []
    if features.observability:
        # The CloudWatch add-on runs its own neuron-monitor on every Neuron node, whatever its taints or device
        # allocation (aws-observability/helm-charts amazon-cloudwatch-observability-4.7.0 values.yaml, the add-on
        # build's chart: neuronMonitor image 1.6.0, requests 256m/128Mi, l.1555-1557), beside the Prometheus
        # path's own.
        pods.append(
            PodRequests(
                "neuron-monitor (CloudWatch add-on)",
                256,
                128,
                1,
                "amazon-cloudwatch-observability values neuronMonitor.resources",
            )
        )
    if metrics_agents and not dra:
        pods.append(_requests("neuron-monitor", node_metrics.NEURON_MONITOR_REQUESTS, "infra/specs/node_metrics.py"))
        if efa:
            pods.append(_requests("efa-exporter", node_metrics.EFA_EXPORTER_REQUESTS, "infra/specs/node_metrics.py"))
    if features.neuron_device_plugin:
        if not dra:
            pods.append(
                PodRequests("neuron-device-plugin", 0, 0, 1, "neuron-helm-chart values.yaml devicePlugin (none)")
            )
        pods.append(PodRequests("neuron-problem-detector", 10, 80, 1, "neuron-helm-chart values.yaml npd resources"))
    if features.neuron_node_recovery:
        pods.append(
            PodRequests("neuron-node-recovery", 10, 150, 1, "neuron-helm-chart values.yaml node recovery resources")
        )
    if dra:
        pods.append(PodRequests("neuron-dra-driver", 10, 128, 1, "neuron-helm-chart 1.9.0 values.yaml draDriver"))
        if efa:
            pods.append(PodRequests("aws-dranet", 100, 50, 1, "aws-dranet 1.0.0 values.yaml resources.requests"))
    elif features.efa_device_plugin:
        pods.append(
            PodRequests("efa-device-plugin", 0, 0, 1, "aws-efa-k8s-device-plugin v0.5.30 values.yaml resources {}")
        )
    return pods


def node_allocatable(
    instance_type: str,
    features: FeaturesConfig,
    accelerator: bool,
    dra: bool = False,
    efa: bool = True,
    metrics_agents: bool = False,
    ebs_csi: bool = False,
    efs: bool = False,
) -> dict[str, str] | None:
    """CPU and memory a pod can request on one node of ``instance_type`` once the kubelet's
    reservations and the DaemonSets on that node have theirs, as Kubernetes quantities; None for
    a type the table does not size. ``dra``, ``efa``: an accelerator group's deviceAllocation and EFA;
    ``metrics_agents``: whether a Prometheus's node agents run; ``ebs_csi``: whether the EBS CSI add-on runs;
    ``efs``: whether the shared file system is EFS."""
    node = _node_size(instance_type)
    if node is None:
        return None
    extra = accelerator_daemonsets(features, dra, efa, metrics_agents) if accelerator else []
    on_node = daemonsets(features, ebs_csi, metrics_agents, efs) + extra
    cpu = node.vcpus * 1000 - reserved_cpu_millis(node.vcpus) - sum(p.cpu_millis for p in on_node)
    memory = (
        memory_capacity_mib(node.memory_mib) - reserved_memory_mib(node.max_pods) - sum(p.memory_mib for p in on_node)
    )
    return {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}


# Leader-elected controllers (Volcano's three, KubeRay, the MPI operator, cluster-autoscaler, the FSx CSI
# controller) and CoreDNS run this many replicas on a core group of two nodes or more: a standby takes over
# when its node goes, instead of the Deployment waiting out the node's NotReady eviction (about 5 minutes).
HA_CONTROLLER_REPLICAS = 2


def controller_replicas(core_min_size: int) -> int:
    """One replica on a one-node core group, where a second would only share the node and its fate (and
    take pods and requests the node does not have to spare); HA_CONTROLLER_REPLICAS otherwise. Every budget
    on them lets one pod go at a time (maxUnavailable 1), so a drain is not blocked at one replica either."""
    return 1 if core_min_size == 1 else HA_CONTROLLER_REPLICAS


# Step gates a workload stack runs at once: one per gated workload, each gating one step at a time
# (workloads/bert.py the precompile; workloads/ray_llama2.py job_sequence, each step but the last in turn;
# workloads/nxd_llama.py job_sequence, the compile).
STEP_GATES_PER_STACK = 3


def _declared(name: str, resources: Mapping[str, Mapping[str, str]], replicas: int, source: str) -> PodRequests:
    """One pod's PodRequests from its container resources (cpu in m or cores, memory in Mi or Gi)."""
    cpu, memory = resources["requests"]["cpu"], resources["requests"]["memory"]
    cpu_millis = int(cpu.removesuffix("m")) if cpu.endswith("m") else int(float(cpu) * 1000)
    memory_mib = int(memory.removesuffix("Gi")) * 1024 if memory.endswith("Gi") else int(memory.removesuffix("Mi"))
    return PodRequests(name, cpu_millis, memory_mib, replicas, source)


def workload_stack_pods(stacks: int, prometheus: bool, tensorboard_proxy: bool = True) -> list[PodRequests]:
    """What each of ``stacks`` workload stacks (one per training namespace) may run on the system nodes at
    once, from the requests the workload stacks declare (infra/specs/system_pods.py). ``prometheus``: a
    Prometheus scrapes the progress exporter; ``tensorboard_proxy``: count TensorBoard's password proxy, which
    runs only with a load balancer, a workload stack's choice the cluster stack cannot see (so on by default)."""
    source = "infra/specs/system_pods.py "
    tensorboard = _declared("tensorboard", system_pods.TENSORBOARD_RESOURCES, stacks, source + "TENSORBOARD_RESOURCES")
    if tensorboard_proxy:
        proxy = _declared("proxy", system_pods.TENSORBOARD_PROXY_RESOURCES, stacks, "")
        tensorboard = dataclasses.replace(
            tensorboard,
            cpu_millis=tensorboard.cpu_millis + proxy.cpu_millis,
            memory_mib=tensorboard.memory_mib + proxy.memory_mib,
            source=tensorboard.source + " + TENSORBOARD_PROXY_RESOURCES",
        )
    pods = [
        tensorboard,
        _declared("cmd-shell", system_pods.CMD_SHELL_RESOURCES, stacks, source + "CMD_SHELL_RESOURCES"),
        _declared("gang-watchdog", system_pods.GANG_WATCHDOG_RESOURCES, stacks, source + "GANG_WATCHDOG_RESOURCES"),
        _declared(
            "step-gate",
            system_pods.STEP_GATE_RESOURCES,
            STEP_GATES_PER_STACK * stacks,
            source + "STEP_GATE_RESOURCES, STEP_GATES_PER_STACK per stack",
        ),
    ]
    if prometheus:
        pods.append(
            _declared(
                "progress-exporter",
                system_pods.PROGRESS_EXPORTER_RESOURCES,
                stacks,
                source + "PROGRESS_EXPORTER_RESOURCES",
            )
        )
    return pods


def _pod(name: str, containers: Iterable[str], source: str) -> PodRequests:
    """One pod of the in-cluster monitoring releases: its containers' requests (infra/specs/monitoring.py
    IN_CLUSTER_RESOURCES, which the releases' values set), summed."""
    parts = [_declared(c, monitoring_spec.IN_CLUSTER_RESOURCES[c], 1, "") for c in containers]
    return PodRequests(name, sum(p.cpu_millis for p in parts), sum(p.memory_mib for p in parts), 1, source)


def monitoring_pods(monitoring: MonitoringConfig) -> list[PodRequests]:
    """The monitoring releases' pods on the system nodes (infra/components/observability.py), one each."""
    pods = []
    if monitoring.prometheus != "off":
        # prometheus-community/helm-charts cf408a2 charts/kube-state-metrics/values.yaml (chart 8.4.0): l.43
        # replicas 1, l.515 resources {}, which the project's values leave alone: no requests.
        pods.append(PodRequests("kube-state-metrics", 0, 0, 1, "kube-state-metrics 8.4.0 values.yaml resources {}"))
    if monitoring.prometheus == "in-cluster":
        # Same snapshot, charts/prometheus/values.yaml (chart 29.27.0): server.replicaCount 1 (l.620), the server
        # and its config reloader; its alertmanager subchart 1.42.0: replicaCount 1 (l.6), configmapReload off
        # (l.400), so one container.
        source = "infra/specs/monitoring.py IN_CLUSTER_RESOURCES"
        pods.append(_pod("prometheus-server", ("prometheus-server", "prometheus-config-reloader"), source))
        pods.append(_pod("alertmanager", ("alertmanager",), source))
    if monitoring.grafana == "in-cluster":
        # grafana-community/helm-charts grafana-12.11.1 charts/grafana/values.yaml: replicas 1 (l.51); Grafana and
        # its dashboard sidecar (its chown init container runs only with persistence, which stays off, and sets
        # no requests: l.550).
        pods.append(
            _pod("grafana", ("grafana", "grafana-dashboard-sidecar"), "infra/specs/monitoring.py IN_CLUSTER_RESOURCES")
        )
    return pods


# Once in the cluster, on the system nodes (Deployments pinned there or free to go there).
def cluster_pods(
    features: FeaturesConfig,
    namespaces: Iterable[str],
    karpenter: bool = False,
    *,
    monitoring: MonitoringConfig | None = None,
    replicas: int = HA_CONTROLLER_REPLICAS,
    tensorboard_proxy: bool = True,
    efs: bool = False,
) -> list[PodRequests]:
    """``replicas``: the leader-elected controllers' and CoreDNS's (controller_replicas); ``efs``: the shared
    file system is EFS, whose static volumes need no controller (infra/components/efs_storage.py)."""
    monitoring = monitoring or MonitoringConfig()
    pods = [
        PodRequests(
            "coredns",
            100,
            70,
            replicas,
            "CoreDNS add-on Deployment (kubernetes cluster/addons/dns/coredns: 100m/70Mi), add-on replicaCount",
        ),
    ]
    if monitoring.ebs_volumes:
        # ebs-plugin + provisioner, attacher, snapshotter, resizer, liveness: 10m/40Mi each
        # (sidecars default to controller.resources in templates/controller.yaml). The add-on's own two
        # replicas: it is left at its defaults.
        pods.append(
            PodRequests("ebs-csi-controller", 60, 240, 2, "aws-ebs-csi-driver values.yaml controller.resources")
        )
    if features.fsx_csi and not efs:
        pods.append(
            PodRequests(
                "fsx-csi-controller", 40, 136, replicas, "aws-fsx-csi-driver 1.17.0 values.yaml controller + sidecars"
            )
        )
    if features.volcano:
        # volcano v1.15.1 values.yaml: admission/controller/scheduler resources ~ (none).
        pods.append(
            PodRequests(
                "volcano",
                0,
                0,
                3 * replicas,
                "volcano-sh/volcano v1.15.1 values.yaml; three components (schedulers.py)",
            )
        )
    if features.kuberay:
        # kuberay-operator 1.7.0: limits only (100m/512Mi), which become the requests.
        pods.append(
            PodRequests(
                "kuberay-operator",
                100,
                512,
                replicas,
                "ray-project/kuberay v1.7.0 helm-chart/kuberay-operator/values.yaml",
            )
        )
    if features.mpi_operator:
        pods.append(
            PodRequests("mpi-operator", 0, 0, replicas, "kubeflow/mpi-operator v0.8.2 deploy/v2beta1/mpi-operator.yaml")
        )
    if features.cluster_autoscaler:
        # kubernetes/autoscaler cluster-autoscaler-chart-9.59.0 (what Kubernetes 1.35 and 1.36 run:
        # infra/facts/versions.py CLUSTER_AUTOSCALER) cluster-autoscaler/charts/cluster-autoscaler/values.yaml
        # l.409: resources {}.
        pods.append(
            PodRequests(
                "cluster-autoscaler",
                0,
                0,
                replicas,
                "kubernetes/autoscaler cluster-autoscaler chart 9.59.0 resources {}",
            )
        )
    if karpenter:
        # nodeProvisioner: karpenter, at the controllers' replicas (infra/specs/nodepools.py chart_values sets the
        # chart's replicas); requests from infra/specs/nodepools.py CONTROLLER_RESOURCES (the chart sets none).
        pods.append(
            PodRequests(
                "karpenter", 250, 1024, replicas, "infra/specs/nodepools.py CONTROLLER_RESOURCES, chart_values replicas"
            )
        )
    if features.metrics_server:
        pods.append(
            PodRequests("metrics-server", 100, 200, 1, "kubernetes-sigs/metrics-server chart 3.13.1 values.yaml")
        )
    if features.observability:
        pods.append(
            PodRequests(
                "cloudwatch-controller",
                100,
                64,
                1,
                "amazon-cloudwatch-observability-4.7.0 values.yaml manager.resources (l.1192-1194)",
            )
        )
    if features.neuron_scheduler_extension:
        pods.append(PodRequests("neuron-scheduler", 0, 0, 2, "estimate: scheduler + extension, no requests"))
    # The burn-in sweeper's CronJob, one run at a time (concurrencyPolicy Forbid), when any burn-in runs.
    # The gang hold's, likewise, every minute.
    for name in ("burn-in-sweeper", "gang-hold"):
        pods.append(_declared(name, {"requests": CORE_CRON_JOB_REQUESTS}, 1, "infra/specs/burn_in_objects.py"))
    pods += monitoring_pods(monitoring)
    pods += workload_stack_pods(len(list(namespaces)), monitoring.prometheus != "off", tensorboard_proxy)
    return pods


@dataclass(frozen=True)
class Fit:
    nodes: int
    pods_per_node: int
    max_pods: int
    cpu_millis: int
    allocatable_cpu_millis: int
    memory_mib: int
    allocatable_memory_mib: int

    @property
    def fits(self) -> bool:
        return (
            self.pods_per_node <= self.max_pods
            and self.cpu_millis <= self.allocatable_cpu_millis
            and self.memory_mib <= self.allocatable_memory_mib
        )

    def summary(self) -> str:
        """``1,780m of 1,930m CPU (92%), 3,830 of 6,837 MiB (56%), 24 of 35 pods per node``."""
        return (
            f"{self.cpu_millis:,}m of {self.allocatable_cpu_millis:,}m CPU "
            f"({round(100 * self.cpu_millis / self.allocatable_cpu_millis)}%), "
            f"{self.memory_mib:,} of {self.allocatable_memory_mib:,} MiB "
            f"({round(100 * self.memory_mib / self.allocatable_memory_mib)}%), "
            f"{self.pods_per_node} of {self.max_pods} pods per node"
        )


@dataclass(frozen=True)
class SystemLoad:
    """What decides the system pods besides the core group's type and size."""

    features: FeaturesConfig
    namespaces: tuple[str, ...]
    karpenter: bool = False
    monitoring: MonitoringConfig = dataclasses.field(default_factory=MonitoringConfig)
    tensorboard_proxy: bool = True
    efs: bool = False

    def pods(self, core_min_size: int) -> list[PodRequests]:
        """The cluster's pods with a core group of ``core_min_size`` (which sets the controllers' replicas)."""
        return cluster_pods(
            self.features,
            self.namespaces,
            self.karpenter,
            monitoring=self.monitoring,
            replicas=controller_replicas(core_min_size),
            tensorboard_proxy=self.tensorboard_proxy,
            efs=self.efs,
        )

    def daemonsets(self) -> list[PodRequests]:
        return daemonsets(self.features, self.monitoring.ebs_volumes, self.monitoring.prometheus != "off", self.efs)

    @classmethod
    def of(cls, config: StackConfig, tensorboard_proxy: bool = True) -> SystemLoad:
        """A stack's: what its config puts on the core nodes (the plan's check and its printed fit alike)."""
        return cls(
            config.features,
            tuple(config.training_namespaces),
            config.node_provisioner == "karpenter",
            config.monitoring,
            tensorboard_proxy,
            config.storage.kind == "efs",
        )

    def fit(self, instance_type: str, nodes: int) -> Fit | None:
        """system_fit for ``nodes`` nodes of a group whose minSize is ``nodes``."""
        return _fit(instance_type, nodes, self, nodes)


def system_fit(
    instance_type: str,
    nodes: int,
    features: FeaturesConfig,
    namespaces: Iterable[str],
    karpenter: bool = False,
    *,
    monitoring: MonitoringConfig | None = None,
    core_min_size: int | None = None,
    tensorboard_proxy: bool = True,
    efs: bool = False,
) -> Fit | None:
    """Totals over ``nodes`` system nodes, or None for a type the table does not know. ``core_min_size``: the
    group's minSize, which sets the controllers' replicas (controller_replicas); ``nodes`` unless told.

    Pods per node assumes the scheduler spreads the cluster's pods evenly (it spreads replicas
    of one Deployment across nodes by default); CPU and memory are compared in total.
    """
    load = SystemLoad(features, tuple(namespaces), karpenter, monitoring or MonitoringConfig(), tensorboard_proxy, efs)
    return _fit(instance_type, nodes, load, nodes if core_min_size is None else core_min_size)


def _fit(instance_type: str, nodes: int, load: SystemLoad, core_min_size: int) -> Fit | None:
    node = _node_size(instance_type)
    if node is None:
        return None
    per_node, cluster = load.daemonsets(), load.pods(core_min_size)
    cluster_pod_count = sum(p.replicas for p in cluster)
    return Fit(
        nodes=nodes,
        pods_per_node=sum(p.replicas for p in per_node) + -(-cluster_pod_count // nodes),
        max_pods=node.max_pods,
        cpu_millis=nodes * sum(p.cpu_millis for p in per_node) + sum(p.cpu_millis * p.replicas for p in cluster),
        allocatable_cpu_millis=nodes * (node.vcpus * 1000 - reserved_cpu_millis(node.vcpus)),
        memory_mib=nodes * sum(p.memory_mib for p in per_node) + sum(p.memory_mib * p.replicas for p in cluster),
        allocatable_memory_mib=nodes * (memory_capacity_mib(node.memory_mib) - reserved_memory_mib(node.max_pods)),
    )


# Core types the refusal offers in place of one that does not fit: the general-purpose rows of
# infra/facts/instances.py that carry a NodeSize, smallest first and, among equals, cheapest (us-east-1).
def _sized_core_types() -> list[str]:
    def key(row: InstanceType) -> tuple[int, int, float, str]:
        node, price = row.node, row.on_demand.get("us-east-1")
        assert node is not None
        return node.vcpus, node.memory_mib, price.usd if price else float("inf"), row.name

    return [r.name for r in sorted((r for r in INSTANCE_TYPES.values() if r.node and not r.neuron), key=key)]


def what_fits(instance_type: str, nodes: int, load: SystemLoad) -> str:
    """What would hold the system pods instead: the same type with the fewest nodes that do (up to 6),
    and the smallest known types that do at ``nodes``."""
    offers = []
    more = next((n for n in range(nodes + 1, 7) if (f := _fit(instance_type, n, load, n)) and f.fits), None)
    if more is not None:
        offers.append(f"{instance_type} x {more}")
    others = [t for t in _sized_core_types() if t != instance_type and (f := _fit(t, nodes, load, nodes)) and f.fits]
    offers += [f"{t} x {nodes}" for t in others[:3]]
    return " or ".join(offers) if offers else "no type the table sizes, at up to 6 nodes"


def system_fit_problem(
    instance_type: str,
    nodes: int,
    features: FeaturesConfig,
    namespaces: Iterable[str],
    karpenter: bool = False,
    *,
    monitoring: MonitoringConfig | None = None,
    efs: bool = False,
) -> str | None:
    return load_problem(
        instance_type,
        nodes,
        SystemLoad(features, tuple(namespaces), karpenter, monitoring or MonitoringConfig(), efs=efs),
    )


def load_problem(instance_type: str, nodes: int, load: SystemLoad) -> str | None:
    """system_fit_problem for a load already built (SystemLoad.of a stack)."""
    fit = load.fit(instance_type, nodes)
    if fit is None or fit.fits:
        return None
    return (
        f"{nodes} such {'node' if nodes == 1 else 'nodes'} (minSize) cannot hold the system pods: "
        f"{fit.pods_per_node} pods per node "
        f"(limit {fit.max_pods}), {fit.cpu_millis}m of {fit.allocatable_cpu_millis}m CPU, "
        f"{fit.memory_mib} of {fit.allocatable_memory_mib} MiB; these fit: {what_fits(instance_type, nodes, load)}"
    )
