"""The Kubernetes objects of Dynamic Resource Allocation for `deviceAllocation: dra` groups: the Helm
values that split the Neuron chart into a device-plugin release and a DRA release by node label, the
EFA DRA driver's values, and the ResourceClaimTemplate that gives a pod one whole node.

The node label (infra/specs/node_template.py DEVICE_ALLOCATION_LABEL) decides which driver owns a
node's devices: the Neuron device plugin's DaemonSet requires its absence, the Neuron DRA driver's and
aws-dranet's DaemonSets require it, and the EFA device plugin selects a label (EFA_PRESENT_LABEL) that
DRA nodes never carry. tests/test_dra.py checks that no node label set is matched by both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.facts.dra import DEFAULT_LOGICAL_NEURON_CORE, EFA_DEVICE_CLASS, NEURON_DEVICE_CLASS, NEURON_DRIVER
from infra.specs.node_template import BURN_IN_TAINT, DEVICE_ALLOCATION_LABEL, DRA_NODE_LABELS, NEURON_TAINT

# The Neuron chart's own defaults for the device plugin's node affinity (aws-neuron/neuron-helm-charts
# charts/neuron-helm-chart values.yaml at 1.9.0, b77a6f90: devicePlugin.affinity). The chart renders
# `.Values.devicePlugin.affinity` through its `neuron-device-plugin.affinity` helper, which replaces the two
# placeholders with the instance-type label key and the `neuronInstances` list (templates/_helpers.tpl at
# 1.8.0, cea92c38; templates/device-plugin/device-plugin-daemonset.yaml at 1.5.0, 7324cd0e: `{{- with
# .Values.devicePlugin.affinity }} affinity: {{- include "neuron-device-plugin.affinity" $ }}`). Helm
# replaces a list in user values whole, so the terms are restated with one more expression.
INSTANCE_TYPE_PLACEHOLDER = "__INSTANCE_TYPE_KEY__"
NEURON_INSTANCES_PLACEHOLDER = "__NEURON_INSTANCES__"
NOT_ON_FARGATE_HYBRID_OR_AUTO = {
    "key": "eks.amazonaws.com/compute-type",
    "operator": "NotIn",
    "values": ["fargate", "hybrid", "auto"],
}
NOT_ON_DRA_NODES = {
    "key": DEVICE_ALLOCATION_LABEL,
    "operator": "NotIn",
    "values": [DRA_NODE_LABELS[DEVICE_ALLOCATION_LABEL]],
}

# The tolerations of the node agents a new Trainium node needs before its burn-in can pass
# (infra/components/kube.py BURN_IN_TOLERATION says why), spelled out here for the DRA drivers: the
# Neuron chart's draDriver.tolerations default has no burn-in taint, aws-dranet's `tolerations` none at
# all (eks-charts stable/aws-dranet 1.0.0 values.yaml `tolerations: []`; its DaemonSet adds only
# CriticalAddonsOnly, templates/daemonset.yaml).
CRITICAL_ADDONS_TOLERATION = {"key": "CriticalAddonsOnly", "operator": "Exists"}
NODE_AGENT_TOLERATIONS = [
    {"key": NEURON_TAINT.key, "operator": "Exists", "effect": NEURON_TAINT.effect},
    {"key": BURN_IN_TAINT.key, "operator": "Exists", "effect": BURN_IN_TAINT.effect},
]

# The Neuron chart puts its DRA driver in this namespace and creates it itself
# (templates/dra-driver/dra-driver-namespace.yaml; values.yaml draDriver.namespaceOverride).
DRA_DRIVER_NAMESPACE = "neuron-dra-driver"


def device_plugin_affinity() -> dict[str, Any]:
    """The device plugin's node affinity: the chart's, and never a node whose devices DRA allocates."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": INSTANCE_TYPE_PLACEHOLDER,
                                "operator": "In",
                                "values": NEURON_INSTANCES_PLACEHOLDER,
                            },
                            NOT_ON_FARGATE_HYBRID_OR_AUTO,
                            NOT_ON_DRA_NODES,
                        ]
                    }
                ]
            }
        }
    }


def neuron_dra_values() -> dict[str, Any]:
    """The Neuron chart's second release: its DRA driver alone, on DRA nodes alone. The device plugin,
    the problem detector and the scheduler extension stay in the first release (the problem detector
    watches every Neuron node's kernel log, DRA or not). The chart's DRA DaemonSet takes
    draDriver.nodeSelector and tolerations as given (templates/dra-driver/dra-driver-daemonset.yaml, 97e1b7d3)
    and keeps its own affinity (instance types but inf*)."""
    return {
        "draDriver": {
            "enabled": True,
            "nodeSelector": dict(DRA_NODE_LABELS),
            "tolerations": [CRITICAL_ADDONS_TOLERATION, *NODE_AGENT_TOLERATIONS],
        },
        "devicePlugin": {"enabled": False},
        "npd": {"enabled": False},
        "scheduler": {"enabled": False},
    }


def dranet_values() -> dict[str, Any]:
    """aws-dranet on DRA nodes only: it "cannot coexist" with the EFA device plugin on one node (EKS user
    guide device-management-efa, 43d79bdb), which selects EFA_PRESENT_LABEL, a label DRA nodes never carry.
    Its image stays the chart's (us-west-2 EKS registry): whether EKS replicates eks/dranet to every region
    is written nowhere read here."""
    return {"nodeSelector": dict(DRA_NODE_LABELS), "tolerations": list(NODE_AGENT_TOLERATIONS)}


@dataclass(frozen=True)
class DraGroup:
    """A `deviceAllocation: dra` node group, as its claim template needs it."""

    name: str
    instance_type: str
    efa: bool
    logical_neuron_core: int = DEFAULT_LOGICAL_NEURON_CORE

    @property
    def claim_template(self) -> str:
        """The ResourceClaimTemplate that claims one whole node of the group, in every training namespace."""
        return f"{self.name}-whole-node"


def neuron_device_selector(instance_type: str) -> str:
    """The CEL selector of one node's Neuron devices of ``instance_type``: devices, not the UltraServer
    `neuron_node` device the driver also publishes on trn2u (deploy/eks/dra.rst, attributes reference:
    resourceType `neuron_device` or `neuron_node`)."""
    attributes = f"device.attributes['{NEURON_DRIVER}']"
    return f"{attributes}.instanceType == '{instance_type}' && {attributes}.resourceType == 'neuron_device'"


def whole_node_claim_template(group: DraGroup, namespace: str) -> dict[str, Any]:
    """Every Neuron device of one node at the group's LNC and, with EFA, every EFA interface of it
    (deploy/eks/dra.rst Example 2, `allocationMode: All` with an opaque NeuronConfig; EKS user guide
    device-management-efa, `allocationMode: All` on efa.networking.k8s.aws). Taking all of both on one
    node aligns them without a matchAttribute constraint."""
    requests: list[dict[str, Any]] = [
        {
            "name": "neurons",
            "exactly": {
                "deviceClassName": NEURON_DEVICE_CLASS,
                "allocationMode": "All",
                "selectors": [{"cel": {"expression": neuron_device_selector(group.instance_type)}}],
            },
        }
    ]
    if group.efa:
        requests.append({"name": "efa", "exactly": {"deviceClassName": EFA_DEVICE_CLASS, "allocationMode": "All"}})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": group.claim_template, "namespace": namespace, "labels": {"node-group": group.name}},
        "spec": {
            "spec": {
                "devices": {
                    "requests": requests,
                    "config": [
                        {
                            "requests": ["neurons"],
                            "opaque": {
                                "driver": NEURON_DRIVER,
                                "parameters": {
                                    "apiVersion": "neuron.aws.com/v1",
                                    "kind": "NeuronConfig",
                                    "logicalNeuronCore": group.logical_neuron_core,
                                },
                            },
                        }
                    ],
                }
            }
        },
    }


def pod_claims(group: DraGroup) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """What a pod spec (``resourceClaims``) and its one container (``resources.claims``) carry to take a
    whole node of ``group`` through its claim template."""
    return (
        [{"name": "node", "resourceClaimTemplateName": group.claim_template}],
        [{"name": "node"}],
    )
