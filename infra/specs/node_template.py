"""What an accelerator node looks like to Kubernetes, and how cluster-autoscaler learns it.

Cluster-autoscaler cannot see a node group with zero nodes, so it reads the node it would
get from tags on the Auto Scaling group: labels, taints and extended resources (Neuron
devices, NeuronCores, EFA interfaces). Without them a pending Trainium pod never triggers a
scale-up from zero. EKS managed node groups do not copy their labels/taints to those tags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.facts.instances import InstanceFacts, node_label_value

NEURON_TAINT_KEY = "aws.amazon.com/neuron"
NODE_TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
NEURON_RESOURCES = ("aws.amazon.com/neuron", "aws.amazon.com/neurondevice")
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str  # Kubernetes spelling: NoSchedule

    @property
    def eks_effect(self) -> str:
        """The EKS API spelling: NoSchedule -> NO_SCHEDULE."""
        return {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}[
            self.effect
        ]


NEURON_TAINT = Taint(NEURON_TAINT_KEY, "true", "NoSchedule")
# Every new Trainium node registers with this taint (the node group's taints, which nodeadm passes
# to the kubelet's registerWithTaints) and keeps it until its burn-in ends (infra/specs/burn_in_objects.py).
# Training pods never tolerate it. The key's prefix is cluster-autoscaler's startup-taint prefix:
# the autoscaler drops such taints from the node it imagines for a scale-up, so a pending gang still
# scales a group up from zero, and it counts a node carrying one as not ready yet rather than as a
# node the gang cannot use (kubernetes/autoscaler cluster-autoscaler-1.34.2, the release chart 9.53.0
# runs: utils/taints/taints.go StartupTaintPrefix, SanitizeTaints, FilterOutNodesWithStartupTaints;
# simulator/node_info_utils.go createSanitizedNode). EKS puts a managed node group's taints on a node
# when it registers and does not put back one removed later (EKS user guide
# ml/node-taints-managed-node-groups.adoc), so removing it once is final for that node.
AUTOSCALER_STARTUP_TAINT_PREFIX = "startup-taint.cluster-autoscaler.kubernetes.io/"
BURN_IN_TAINT = Taint(f"{AUTOSCALER_STARTUP_TAINT_PREFIX}neuron-burn-in", "pending", "NoSchedule")
# What the burn-in leaves on its node: passed or failed, and on failure the first check that failed.
BURN_IN_RESULT_LABEL = "node-health.trainium-eks/burn-in"
BURN_IN_REASON_LABEL = "node-health.trainium-eks/burn-in-failed"
# The label that selects a node for its burn-in. Only a real node carries it: the kubelet sets it at
# registration (``--node-labels`` in the nodeadm NodeConfig, infra/specs/user_data.py), and it is in
# neither the node group's labels, its Auto Scaling group's node-template tags nor a NodePool's
# template. So the node both autoscalers imagine for a scale-up lacks it and the burn-in DaemonSet,
# which takes every Neuron device, is not counted on it (cluster-autoscaler-1.34.2
# simulator/node_info_utils.go podsExpectedOnFreshNode; kubernetes-sigs/karpenter v1.14.0
# pkg/scheduling/requirements.go Compatible: a custom key the template does not define is
# incompatible). NodeRestriction lets a kubelet set labels outside kubernetes.io and k8s.io
# (kubernetes/kubernetes plugin/pkg/admission/noderestriction/admission.go getForbiddenLabels).
# The burn-in removes it with its result.
BURN_IN_PENDING_LABEL = "node-health.trainium-eks/burn-in-pending"
BURN_IN_PENDING_LABELS = {BURN_IN_PENDING_LABEL: "true"}
# What holds a passed Trainium node for the gang Volcano assembles on it (infra/specs/gang_hold.py says why):
# cluster-autoscaler leaves a node with the first key "true" out of scale-down (cluster-autoscaler-1.35.2
# core/scaledown/eligibility/eligibility.go HasNoScaleDownAnnotation), Karpenter one with the second out of
# disruption (kubernetes-sigs/karpenter v1.14.0 pkg/controllers/state/statenode.go ValidateNodeDisruptable).
# The marker says when the burn-in or the gang hold set them (HOLD_TIME_FORMAT, UTC); they remove only holds
# that carry it.
GANG_HOLD_AUTOSCALER_KEYS = ("cluster-autoscaler.kubernetes.io/scale-down-disabled", "karpenter.sh/do-not-disrupt")
GANG_HOLD_MARKER = "node-health.trainium-eks/held-for-gang-since"
GANG_HOLD_KEYS = (*GANG_HOLD_AUTOSCALER_KEYS, GANG_HOLD_MARKER)
HOLD_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
HOLD_TIME_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"


def burn_in_window_daemon_set(name: str, namespace: str, labels: dict[str, str], pod_spec: dict[str, Any]) -> dict:
    """A DaemonSet whose pods live only while their node is burnt in (``pod_spec`` selects
    BURN_IN_PENDING_LABEL): not awaited, since its pods say nothing about a `pulumi up`, and replaced all
    at once on a new spec, since only nodes still in their burn-in have one."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


# What a failed burn-in puts on its node instead of the startup taint, its value the failed check.
# A plain NoSchedule taint, so the node is initialized and ready but takes no pod, and each
# provisioner's empty-node removal replaces it: cluster-autoscaler's scale-down of unneeded nodes,
# Karpenter's WhenEmpty consolidation (which skips uninitialized nodes, and a node keeping a startup
# taint never initializes: kubernetes-sigs/karpenter v1.14.0 pkg/controllers/state/statenode.go
# ValidateNodeDisruptable, nodeclaim/lifecycle/initialization.go StartupTaintsRemoved). The prefix is
# cluster-autoscaler's status-taint prefix: dropped from a template node built from this node, yet
# not counted as unready (cluster-autoscaler-1.34.2 utils/taints/taints.go StatusTaintPrefix), so
# failed nodes neither stop scale-up of their group nor count towards ok-total-unready-count.
AUTOSCALER_STATUS_TAINT_PREFIX = "status-taint.cluster-autoscaler.kubernetes.io/"
BURN_IN_FAILED_TAINT_KEY = f"{AUTOSCALER_STATUS_TAINT_PREFIX}neuron-burn-in-failed"
# The CPU group for jobs' support pods: tainted so system pods (EKS add-ons have no node
# selector) never land there and keep it from scaling back to zero.
JOB_SUPPORT_LABELS = {"role": "job-support", "provisioner": "cluster-autoscaler"}
JOB_SUPPORT_TAINT = Taint("job-support", "true", "NoSchedule")


# On the nodes of a group whose devices are allocated by DRA (deviceAllocation: dra). The Neuron chart's
# device-plugin release keeps its DaemonSets off nodes carrying it and its DRA release runs only there
# (infra/components/devices.py): "Device plugins and the DRA plugin can coexist in the same cluster, but
# not for the same node" (aws-neuron/aws-neuron-sdk 81ce03a deploy/eks/dra.rst, FAQs). Such a node never
# carries EFA_PRESENT_LABEL, which the EFA device plugin selects on: the EFA DRA driver (aws-dranet)
# "cannot coexist" with it on one node (EKS user guide device-management-efa, 43d79bdb).
DEVICE_ALLOCATION_LABEL = "devices.trainium-eks/allocation"
# An UltraServer group's own label: two groups of one UltraServer type would otherwise carry the same
# labels, so a job's pods could land on both UltraServers, and cluster-autoscaler, which balances similar
# groups ignoring their node group name (kubernetes/autoscaler cluster-autoscaler-1.35.2
# processors/nodegroupset/aws_nodegroups.go), could grow both for one job. The value is the group's name.
ULTRASERVER_LABEL = "ultraserver.trainium-eks/group"
DRA_NODE_LABELS = {DEVICE_ALLOCATION_LABEL: "dra"}
EFA_PRESENT_LABEL = "vpc.amazonaws.com/efa.present"


def node_labels(
    instance_type: str,
    efa: bool,
    extra: dict[str, str],
    provisioner: str = "cluster-autoscaler",
    dra: bool = False,
    ultraserver: str | None = None,
) -> dict[str, str]:
    """The labels the seeds' workloads select on, plus any from config. ``provisioner`` names what
    starts the node (the stack's nodeProvisioner); workloads read it to annotate their pods.
    ``ultraserver``: the group's name, for a group that is one UltraServer."""
    labels = {
        "instance-type": node_label_value(instance_type),
        "provisioner": provisioner,
    }
    if ultraserver is not None:
        labels[ULTRASERVER_LABEL] = ultraserver
    if dra:
        labels.update(DRA_NODE_LABELS)
    elif efa:
        labels[EFA_PRESENT_LABEL] = "true"
    return {**labels, **extra}


# How long a Trainium node stays unneeded before cluster-autoscaler removes it, per group through its Auto Scaling
# group's tag (cluster-autoscaler-1.35.2 cloudprovider/aws/README.md, "autoscaling-options/scaledownunneededtime").
# Three minutes, so an idle node is gone within five: the unneeded set is recomputed every scan-interval (10 s,
# config/const.go), an empty node needs no drain, and each loop deletes up to 10 nodes (max-scale-down-parallelism,
# config/flags/flags.go), so a 64-node gang's last node goes about 70 s after its first. A node under burn-in is
# no candidate: its startup taint makes it unready (utils/taints/taints.go FilterOutNodesWithStartupTaints), and an
# unready node younger than 15 minutes is an upcoming one that scale-down skips (core/static_autoscaler.go,
# clusterstate/clusterstate.go updateReadinessStats NotStarted), longer than the burn-in's budget
# (infra/specs/burn_in_objects.py BUDGET_SECONDS). A node waiting for its gang is not idle but looks it (Volcano
# holds the gang's pods unbound), so it is held out of scale-down instead (infra/specs/gang_hold.py).
TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS = 180
TRAINIUM_SCALE_DOWN_UNNEEDED = f"{TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS // 60}m0s"
# A Trainium group without a burn-in has no gang hold (the hold keeps passed nodes only): its nodes get ten
# minutes, the core groups' time, for a gang's nodes that join minutes apart.
UNHELD_SCALE_DOWN_UNNEEDED_SECONDS = 600
UNHELD_SCALE_DOWN_UNNEEDED = f"{UNHELD_SCALE_DOWN_UNNEEDED_SECONDS // 60}m0s"


def autoscaler_tags(
    labels: dict[str, str],
    taints: list[Taint],
    facts: InstanceFacts,
    efa_interfaces: int,
    dra: bool = False,
    held: bool = True,
) -> dict[str, str]:
    """Labels, taints and the extended resources a node of the group offers. A DRA group's devices are
    no extended resources (ResourceSlices, which cluster-autoscaler cannot read from tags): advertising
    aws.amazon.com/neuron there would let it scale the group up for pods no node of it can take. Every
    Trainium group also takes its own scale-down-unneeded-time: TRAINIUM_SCALE_DOWN_UNNEEDED where the gang
    hold keeps its nodes (``held``: a burnt-in group), UNHELD_SCALE_DOWN_UNNEEDED elsewhere."""
    tags = label_taint_tags(labels, taints)
    tags[f"{NODE_TEMPLATE_PREFIX}/autoscaling-options/scaledownunneededtime"] = (
        TRAINIUM_SCALE_DOWN_UNNEEDED if held else UNHELD_SCALE_DOWN_UNNEEDED
    )
    if dra:
        return tags
    resources = {r: facts.neuron_devices for r in NEURON_RESOURCES}
    resources[NEURONCORE_RESOURCE] = facts.neuron_cores
    if efa_interfaces:
        resources[EFA_RESOURCE] = efa_interfaces
    tags.update({f"{NODE_TEMPLATE_PREFIX}/resources/{r}": str(n) for r, n in resources.items()})
    return tags


def label_taint_tags(labels: dict[str, str], taints: list[Taint]) -> dict[str, str]:
    """The node-template tags for labels and taints (cluster-autoscaler's AWS provider reads
    them for a group with no node to look at)."""
    tags = {f"{NODE_TEMPLATE_PREFIX}/label/{k}": v for k, v in labels.items()}
    tags.update({f"{NODE_TEMPLATE_PREFIX}/taint/{t.key}": f"{t.value}:{t.effect}" for t in taints})
    return tags
