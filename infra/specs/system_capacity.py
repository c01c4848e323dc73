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

from collections.abc import Iterable
from dataclasses import dataclass

from infra.config.models import FeaturesConfig
from infra.facts.instances import INSTANCE_TYPES, NodeSize
from infra.specs import node_metrics


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
# select accelerator nodes only, so they are not here.
def daemonsets(features: FeaturesConfig) -> list[PodRequests]:
    pods = [
        # aws/amazon-vpc-cni-k8s charts/aws-vpc-cni/values.yaml: aws-node 25m, node agent none.
        PodRequests("aws-node", 25, 0, 1, "amazon-vpc-cni-k8s charts/aws-vpc-cni/values.yaml"),
        PodRequests(
            "kube-proxy", 100, 0, 1, "EKS kube-proxy add-on DaemonSet, cpu 100m (EKS-managed, no public manifest)"
        ),
        PodRequests("eks-pod-identity-agent", 25, 0, 1, "estimate: EKS add-on, no public manifest"),
        # kubernetes-sigs/aws-ebs-csi-driver chart 2.64.0: node plugin + registrar + liveness, 10m/40Mi each.
        PodRequests(
            "ebs-csi-node", 30, 120, 1, "aws-ebs-csi-driver charts/aws-ebs-csi-driver/values.yaml node.resources"
        ),
    ]
    if features.fsx_csi:
        # aws-fsx-csi-driver chart 1.17.0: fsx-plugin 10m/40Mi, registrar and liveness 10m/32Mi.
        pods.append(PodRequests("fsx-csi-node", 30, 104, 1, "aws-fsx-csi-driver 1.17.0 values.yaml node + sidecars"))
    if features.observability:
        # aws-observability/helm-charts amazon-cloudwatch-observability 6.4.0 values.yaml.
        pods.append(
            PodRequests("cloudwatch-agent", 250, 128, 1, "amazon-cloudwatch-observability values agent.resources")
        )
        pods.append(
            PodRequests("fluent-bit", 50, 25, 1, "amazon-cloudwatch-observability values containerLogs.fluentBit")
        )
    if features.node_monitoring_agent:
        pods.append(PodRequests("eks-node-monitoring-agent", 10, 30, 1, "estimate: EKS add-on, no public manifest"))
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
) -> dict[str, str] | None:
    """CPU and memory a pod can request on one node of ``instance_type`` once the kubelet's
    reservations and the DaemonSets on that node have theirs, as Kubernetes quantities; None for
    a type the table does not size. ``dra``, ``efa``: an accelerator group's deviceAllocation and EFA;
    ``metrics_agents``: whether a Prometheus's node agents run."""
    node = _node_size(instance_type)
    if node is None:
        return None
    extra = accelerator_daemonsets(features, dra, efa, metrics_agents) if accelerator else []
    on_node = daemonsets(features) + extra
    cpu = node.vcpus * 1000 - reserved_cpu_millis(node.vcpus) - sum(p.cpu_millis for p in on_node)
    memory = (
        memory_capacity_mib(node.memory_mib) - reserved_memory_mib(node.max_pods) - sum(p.memory_mib for p in on_node)
    )
    return {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}


# Once in the cluster, on the system nodes (Deployments pinned there or free to go there).
def cluster_pods(features: FeaturesConfig, namespaces: Iterable[str], karpenter: bool = False) -> list[PodRequests]:
    pods = [
        PodRequests(
            "coredns", 100, 70, 2, "CoreDNS add-on Deployment (kubernetes cluster/addons/dns/coredns: 100m/70Mi)"
        ),
        # ebs-plugin + provisioner, attacher, snapshotter, resizer, liveness: 10m/40Mi each
        # (sidecars default to controller.resources in templates/controller.yaml).
        PodRequests("ebs-csi-controller", 60, 240, 2, "aws-ebs-csi-driver values.yaml controller.resources"),
    ]
    if features.fsx_csi:
        pods.append(
            PodRequests("fsx-csi-controller", 40, 136, 2, "aws-fsx-csi-driver 1.17.0 values.yaml controller + sidecars")
        )
    if features.volcano:
        # volcano v1.15.1 values.yaml: admission/controller/scheduler resources ~ (none).
        pods.append(
            PodRequests("volcano", 0, 0, 6, "volcano-sh/volcano v1.15.1 values.yaml; two replicas each (schedulers.py)")
        )
    if features.kuberay:
        # kuberay-operator 1.7.0: limits only (100m/512Mi), which become the requests.
        pods.append(
            PodRequests(
                "kuberay-operator", 100, 512, 2, "ray-project/kuberay v1.7.0 helm-chart/kuberay-operator/values.yaml"
            )
        )
    if features.mpi_operator:
        pods.append(
            PodRequests("mpi-operator", 0, 0, 2, "kubeflow/mpi-operator v0.8.2 deploy/v2beta1/mpi-operator.yaml")
        )
    if features.cluster_autoscaler:
        pods.append(
            PodRequests(
                "cluster-autoscaler", 0, 0, 2, "kubernetes/autoscaler cluster-autoscaler chart 9.53.0 resources {}"
            )
        )
    if karpenter:
        # nodeProvisioner: karpenter. Chart v1.14.0 values.yaml replicas 2; requests from
        # infra/specs/nodepools.py CONTROLLER_RESOURCES (the chart sets none).
        pods.append(
            PodRequests("karpenter", 250, 1024, 2, "infra/specs/nodepools.py CONTROLLER_RESOURCES, chart replicas 2")
        )
    if features.metrics_server:
        pods.append(
            PodRequests("metrics-server", 100, 200, 1, "kubernetes-sigs/metrics-server chart 3.13.1 values.yaml")
        )
    if features.observability:
        pods.append(
            PodRequests("cloudwatch-controller", 100, 64, 1, "amazon-cloudwatch-observability values manager.resources")
        )
    if features.neuron_scheduler_extension:
        pods.append(PodRequests("neuron-scheduler", 0, 0, 2, "estimate: scheduler + extension, no requests"))
    # The workload stacks' always-on pods (workloads/tensorboard_viewer.py, data_staging.py).
    pods.append(PodRequests("tensorboard", 550, 2112, 1, "workloads/tensorboard_viewer.py (viewer + proxy)"))
    pods.append(PodRequests("cmd-shell", 250, 512, 1, "workloads/data_staging.py cmd_shell_pod"))
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


def system_fit(
    instance_type: str, nodes: int, features: FeaturesConfig, namespaces: Iterable[str], karpenter: bool = False
) -> Fit | None:
    """Totals over ``nodes`` system nodes, or None for a type the table does not know.

    Pods per node assumes the scheduler spreads the cluster's pods evenly (it spreads replicas
    of one Deployment across nodes by default); CPU and memory are compared in total.
    """
    node = _node_size(instance_type)
    if node is None:
        return None
    per_node, cluster = daemonsets(features), cluster_pods(features, namespaces, karpenter)
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


def system_fit_problem(
    instance_type: str, nodes: int, features: FeaturesConfig, namespaces: Iterable[str], karpenter: bool = False
) -> str | None:
    fit = system_fit(instance_type, nodes, features, namespaces, karpenter)
    if fit is None or fit.fits:
        return None
    return (
        f"{nodes} such nodes (minSize) cannot hold the system pods: {fit.pods_per_node} pods per node "
        f"(limit {fit.max_pods}), {fit.cpu_millis}m of {fit.allocatable_cpu_millis}m CPU, "
        f"{fit.memory_mib} of {fit.allocatable_memory_mib} MiB; use a bigger type or more nodes (m6i.large x 2 fits)"
    )
