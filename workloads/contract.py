"""The cluster stack's outputs, as the workload stacks read them.

Everything a workload needs to know about the cluster (node groups and what each node
carries, the FSx claim, queues, the etcd endpoint, image repositories, which software is
installed) arrives through the StackReference and is parsed here into plain typed values.
Nothing here is configured twice: if the cluster changes, the workloads follow on the next
``pulumi up``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

# The outputs a workload stack reads. The cluster stack exports them (see its __main__.py).
REQUIRED_OUTPUTS = (
    "clusterName",
    "acceleratorNodeGroups",
    "features",
    "trainingNamespaces",
    "trainingServiceAccount",
    "storage",
    "volcanoQueues",
    "etcdEndpoints",
    "ecrRepositories",
    "coreNodeSelector",
    "jobSupportPlacement",
)


# The node label the cluster stack sets to its nodeProvisioner (infra/plans/node_template.py
# node_labels); a group's own `labels` may use the key with other values, which stay selected on.
PROVISIONER_LABELS = frozenset({("provisioner", "cluster-autoscaler"), ("provisioner", "karpenter")})


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def toleration(self) -> dict[str, str]:
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


@dataclass(frozen=True)
class NodeGroup:
    """One accelerator node group, with what each of its nodes offers a pod."""

    name: str
    instance_type: str
    neuron_devices: int
    neuron_cores: int
    efa_interfaces: int
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    max_size: int
    # CPU and memory a pod can request per node ({"cpu": "127080m", "memory": "481407Mi"}); None from
    # cluster stacks that do not export it (then only Neuron devices and EFA interfaces are checked).
    allocatable: Optional[Mapping[str, str]] = None
    # {"start", "end"} (RFC 3339) of the Capacity Block the group launches into; None otherwise.
    capacity_block: Optional[Mapping[str, str]] = None
    # Whether each new node is burnt in before it takes a pod (the group's exported startupTaints).
    burn_in: bool = False

    @property
    def node_selector(self) -> dict[str, str]:
        # The instance-type label is what TorchX selects on; the group's labels pin the group. All
        # but the `provisioner` label the stack sets itself: it names what starts the nodes, which
        # `nodeProvisioner` may switch under running jobs; pods that selected on it would stay Pending
        # after the switch until every workload stack is re-run (docs/provisioners.md, "Switching
        # provisioners"). Pods still read it (pods.pod_metadata) to annotate.
        return {"node.kubernetes.io/instance-type": self.instance_type,
                **{k: v for k, v in self.labels.items() if (k, v) not in PROVISIONER_LABELS}}

    @property
    def tolerations(self) -> list[dict[str, str]]:
        return [t.toleration() for t in self.taints]


@dataclass(frozen=True)
class ClusterContract:
    cluster_name: str
    node_groups: Mapping[str, NodeGroup]
    features: Mapping[str, bool]
    namespaces: tuple[str, ...]
    service_account: str
    storage_enabled: bool
    claims: Mapping[str, str]
    # Each Volcano queue by name, with its capability ({"cpu": "500", "memory": "1500Gi"}; empty: no cap).
    volcano_queues: Mapping[str, Mapping[str, str]]
    etcd_endpoints: Mapping[str, str]
    repositories: Mapping[str, str]
    core_node_selector: Mapping[str, str]
    # Where jobs' CPU pods go (the job-support group, idle at zero): nodeSelector and tolerations.
    support_placement: Mapping[str, Any]
    # How much the job-support group holds: its maxSize and what each node leaves to pods (None
    # from cluster stacks that do not export them).
    support_max_size: Optional[int] = None
    support_allocatable: Optional[Mapping[str, str]] = None

    def feature(self, name: str) -> bool:
        return bool(self.features.get(name, False))


def missing_outputs(outputs: Mapping[str, Any]) -> list[str]:
    return [key for key in REQUIRED_OUTPUTS if outputs.get(key) is None]


def never_deployed(outputs: Mapping[str, Any]) -> bool:
    """No output at all: the cluster stack exists but no `pulumi up` has finished there yet (a
    StackReference to such a stack reads an empty output map). Some outputs but not all is a
    contract mismatch instead, never this."""
    return all(outputs.get(key) is None for key in REQUIRED_OUTPUTS)


def _queues(exported: list[Any]) -> dict[str, dict[str, str]]:
    queues: dict[str, dict[str, str]] = {}
    for queue in exported:
        # Cluster stacks from before capabilities were exported list bare names: no cap known.
        if isinstance(queue, str):
            queues[queue] = {}
        else:
            queues[queue["name"]] = dict(queue.get("capability") or {})
    return queues


def parse_contract(outputs: Mapping[str, Any]) -> ClusterContract:
    """``outputs`` holds at least REQUIRED_OUTPUTS (check with ``missing_outputs`` first)."""
    groups = {
        g["name"]: NodeGroup(
            name=g["name"],
            instance_type=g["instanceType"],
            neuron_devices=int(g["neuronDevices"]),
            neuron_cores=int(g["neuronCores"]),
            efa_interfaces=int(g["efaInterfaces"]),
            labels=dict(g.get("labels") or {}),
            taints=tuple(Taint(t["key"], t["value"], t["effect"]) for t in g.get("taints") or []),
            max_size=int(g["maxSize"]),
            allocatable=dict(g["allocatable"]) if g.get("allocatable") else None,
            capacity_block=dict(g["capacityBlock"]) if g.get("capacityBlock") else None,
            burn_in=bool(g.get("startupTaints")),
        )
        for g in outputs["acceleratorNodeGroups"]
    }
    storage = outputs["storage"]
    return ClusterContract(
        cluster_name=outputs["clusterName"],
        node_groups=groups,
        features=dict(outputs["features"]),
        namespaces=tuple(outputs["trainingNamespaces"]),
        service_account=outputs["trainingServiceAccount"]["name"],
        storage_enabled=bool(storage.get("enabled")),
        claims=dict(storage.get("claims") or {}),
        volcano_queues=_queues(outputs["volcanoQueues"]),
        etcd_endpoints=dict(outputs["etcdEndpoints"]),
        repositories=dict(outputs["ecrRepositories"]),
        core_node_selector=dict(outputs["coreNodeSelector"]),
        support_placement={
            "nodeSelector": dict(outputs["jobSupportPlacement"]["nodeSelector"]),
            "tolerations": [dict(t) for t in outputs["jobSupportPlacement"]["tolerations"]],
        },
        support_max_size=outputs["jobSupportPlacement"].get("maxSize"),
        support_allocatable=dict(outputs["jobSupportPlacement"]["allocatable"])
        if outputs["jobSupportPlacement"].get("allocatable") else None,
    )
