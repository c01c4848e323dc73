"""The burn-in DaemonSet against both autoscalers' scale-up arithmetic: the node each imagines for a
new Trainium node (its template labels, taints and resources) minus the DaemonSet pods it counts
there must still hold a training pod, or no Trainium node is ever launched."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from infra.components.accelerators import group_spec
from infra.config.models import AcceleratorNodeGroupConfig
from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.specs import burn_in_objects, nodepools
from infra.specs.node_template import (
    AUTOSCALER_STARTUP_TAINT_PREFIX,
    AUTOSCALER_STATUS_TAINT_PREFIX,
    BURN_IN_FAILED_TAINT_KEY,
    BURN_IN_PENDING_LABEL,
    BURN_IN_PENDING_LABELS,
    NODE_TEMPLATE_PREFIX,
)
from infra.specs.placement import Zone

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ASG_TAG = "aws:autoscaling/tag:Tag"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
# cluster-autoscaler-1.34.2 utils/taints/taints.go: IgnoreTaintPrefix and StartupTaintPrefix are startup
# taints, StatusTaintPrefix a status taint; SanitizeTaints drops both kinds from a template node.
SANITIZED_PREFIXES = (
    "ignore-taint.cluster-autoscaler.kubernetes.io/",
    AUTOSCALER_STARTUP_TAINT_PREFIX,
    AUTOSCALER_STATUS_TAINT_PREFIX,
)
# kubernetes-sigs/karpenter v1.14.0 pkg/apis/v1/labels.go WellKnownLabels (the ones a NodePool may leave
# undefined and still be compatible): the keys our pods and DaemonSets use.
KARPENTER_WELL_KNOWN = {
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.k8s.aws/zone-id",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "karpenter.sh/nodepool",
}


def _matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expression["key"], expression["operator"], expression.get("values", [])
    return {
        "In": key in labels and labels[key] in values,
        "NotIn": labels.get(key) not in values,
        "Exists": key in labels,
        "DoesNotExist": key not in labels,
    }[op]


def _required_terms(pod: dict[str, Any]) -> list[list[dict[str, Any]]]:
    required = pod.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    selector = [{"key": k, "operator": "In", "values": [v]} for k, v in (pod.get("nodeSelector") or {}).items()]
    if not required:
        return [selector]
    return [selector + term.get("matchExpressions", []) for term in required["nodeSelectorTerms"]]


def _tolerates(pod: dict[str, Any], taints: list[dict[str, str]]) -> bool:
    def tolerated(taint: dict[str, str]) -> bool:
        return any(
            (
                tol.get("operator") == "Exists"
                and tol.get("key") in (None, taint["key"])
                or tol.get("key") == taint["key"]
                and tol.get("value") == taint.get("value")
            )
            and tol.get("effect") in (None, taint["effect"])
            for tol in pod.get("tolerations", [])
        )

    return all(tolerated(t) for t in taints if t["effect"] in ("NoSchedule", "NoExecute"))


def ca_should_run(pod: dict[str, Any], labels: dict[str, str], taints: list[dict[str, str]]) -> bool:
    """kubernetes/kubernetes pkg/controller/daemon/daemon_controller.go NodeShouldRunDaemonPod as
    cluster-autoscaler-1.34.2 utils/daemonset/daemonset.go GetDaemonSetPodsForNode calls it: the
    node affinity (any required term matching) and the NoSchedule/NoExecute taints; no resources."""
    return _tolerates(pod, taints) and any(all(_matches(e, labels) for e in term) for term in _required_terms(pod))


def karpenter_overhead_counts(
    pod: dict[str, Any], template_labels: dict[str, str], taints: list[dict[str, str]]
) -> bool:
    """kubernetes-sigs/karpenter v1.14.0 scheduling/scheduler.go isDaemonPodCompatible: the template's
    taints (not its startupTaints) tolerated, and its requirements Compatible with the pod's with
    AllowUndefinedWellKnownLabels (pkg/scheduling/requirements.go Compatible: a key the template
    does not define is allowed only under NotIn or DoesNotExist, or when well known)."""
    if not _tolerates(pod, taints):
        return False
    for term in _required_terms(pod):
        ok = True
        for e in term:
            if e["key"] in template_labels:
                ok &= _matches(e, template_labels)
            elif not (e["key"] in KARPENTER_WELL_KNOWN or e["operator"] in ("NotIn", "DoesNotExist")):
                ok = False
        if ok:
            return True
    return False


def _requests(pod: dict[str, Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in pod["containers"]:
        for k, v in c.get("resources", {}).get("requests", {}).items():
            if k.startswith(("aws.amazon.com/", "vpc.amazonaws.com/")):
                total[k] = total.get(k, 0) + int(v)
    return total


def _minus(offered: dict[str, int], pods: list[dict[str, Any]]) -> dict[str, int]:
    left = dict(offered)
    for p in pods:
        for k, v in _requests(p).items():
            left[k] = left.get(k, 0) - v
    return left


def _training_pod_fits(left: dict[str, int], neuron: int, efa: int) -> bool:
    return left.get("aws.amazon.com/neuron", 0) >= neuron and left.get("vpc.amazonaws.com/efa", 0) >= efa


def _training_pods(result: Any) -> list[dict[str, Any]]:
    """The workload stack's pod templates that ask for Neuron devices."""
    from workloads.kube import pod_templates

    pods = [
        t["spec"]
        for r in result.registrations
        if isinstance(r.inputs.get("spec"), dict)
        for t in pod_templates(r.inputs["spec"])
    ]
    return [p for p in pods if _requests(p).get("aws.amazon.com/neuron")]


def test_cluster_autoscalers_template_from_zero_leaves_the_training_pods_room(dev, workloads_dev):
    """cluster-autoscaler-1.34.2, group without a usable node: processors/nodeinfosprovider/
    mixed_nodeinfos_processor.go Process -> simulator/node_info_utils.go SanitizedTemplateNodeInfoFromNodeGroup
    (forceDaemonSets=true) -> podsExpectedOnFreshNode adds every DaemonSet NodeShouldRunDaemonPod
    accepts. The template's labels: the generic ones, the ASG's node-template label tags, the managed
    node group's labels from DescribeNodegroup and eks.amazonaws.com/nodegroup
    (cloudprovider/aws/aws_manager.go buildNodeFromTemplate); its taints sanitized
    (utils/taints/taints.go SanitizeTaints); its resources the node-template resource tags. The
    training pods are the dev workload stack's."""
    daemon_pods = [r.inputs["spec"]["template"]["spec"] for r in dev.of_type(DAEMON_SET)]
    burn_in_pods = [p for p in daemon_pods if p.get("serviceAccountName") == burn_in_objects.SERVICE_ACCOUNT]
    assert burn_in_pods, "the dev stack health-gates its Trainium nodes"
    tags = [(r.name, r.inputs["tag"]) for r in dev.of_type(ASG_TAG)]
    checked = fitted = 0
    for group in dev.of_type(NODE_GROUP):
        if not any(t["key"].startswith(AUTOSCALER_STARTUP_TAINT_PREFIX) for t in group.inputs.get("taints") or []):
            continue
        name = group.inputs["nodeGroupName"]
        own = {
            t["key"].removeprefix(f"{NODE_TEMPLATE_PREFIX}/"): t["value"] for n, t in tags if n.startswith(f"{name}-")
        }
        labels = {
            **{k.removeprefix("label/"): v for k, v in own.items() if k.startswith("label/")},
            **(group.inputs.get("labels") or {}),
            "eks.amazonaws.com/nodegroup": name,
            # buildGenericLabels (aws_manager.go): the ASG's instance type among others.
            "node.kubernetes.io/instance-type": group.inputs["instanceTypes"][0],
        }
        assert BURN_IN_PENDING_LABEL not in labels
        taints = [
            {
                "key": t["key"],
                "value": t.get("value"),
                "effect": {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute"}.get(t["effect"], t["effect"]),
            }
            for t in group.inputs["taints"]
        ]
        taints = [t for t in taints if not t["key"].startswith(SANITIZED_PREFIXES)]
        offered = {k.removeprefix("resources/"): int(v) for k, v in own.items() if k.startswith("resources/")}
        neuron, efa = offered["aws.amazon.com/neuron"], offered.get("vpc.amazonaws.com/efa", 0)
        assert neuron == 16 and efa in (8, 16), name
        counted = [p for p in daemon_pods if ca_should_run(p, labels, taints)]
        assert not any(p in burn_in_pods for p in counted), name
        assert _training_pod_fits(_minus(offered, counted), neuron, efa), name
        # The workload stack's own Trainium pods for this group, by their node selector and tolerations.
        mine = [p for p in _training_pods(workloads_dev) if ca_should_run(p, labels, taints)]
        left = _minus(offered, counted)
        assert all(all(left.get(k, 0) >= v for k, v in _requests(p).items()) for p in mine), name
        fitted += len(mine)
        # The real node carries the label, so the burn-in does run there.
        assert any(ca_should_run(p, {**labels, **BURN_IN_PENDING_LABELS}, taints) for p in burn_in_pods), name
        checked += 1
    assert checked and fitted >= 4


def test_the_simulation_catches_a_burn_in_selected_by_template_labels(dev):
    """The check above fails for a DaemonSet that selects on the group label and the absent
    result label only, so it is not vacuous."""
    target = burn_in_objects.BurnInTarget("trn1-32xl-ng1", "trn1.32xlarge", 16, 32, 8, None)
    old = burn_in_objects.daemon_set(target)["spec"]["template"]["spec"]
    term = old["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    term["matchExpressions"] = [e for e in term["matchExpressions"] if e["key"] != BURN_IN_PENDING_LABEL] + [
        {"key": "node-health.trainium-eks/burn-in", "operator": "DoesNotExist"}
    ]
    labels = {"eks.amazonaws.com/nodegroup": "trn1-32xl-ng1", "instance-type": "trn1-32xl"}
    taints = [{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}]
    assert ca_should_run(old, labels, taints)
    assert not _training_pod_fits(_minus({"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 8}, [old]), 16, 8)
    karpenter_old = dataclasses.replace(target, provisioner="karpenter")
    pod = burn_in_objects.daemon_set(karpenter_old)["spec"]["template"]["spec"]
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    term["matchExpressions"] = [e for e in term["matchExpressions"] if e["key"] != BURN_IN_PENDING_LABEL]
    assert karpenter_overhead_counts(pod, {"karpenter.sh/nodepool": "trn1-32xl-ng1"}, taints)


@pytest.mark.parametrize("instance_type", ["trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"])
def test_karpenters_daemonset_overhead_leaves_a_training_pod_room(instance_type):
    """kubernetes-sigs/karpenter v1.14.0 scheduling/scheduler.go buildDaemonOverheadGroups subtracts
    every DaemonSet pod isDaemonPodCompatible accepts from each instance type of a NodeClaimTemplate;
    the template's labels are the NodePool's template labels, its requirements and
    karpenter.sh/nodepool (scheduling/nodeclaimtemplate.go). The pending label is in none of them:
    it reaches the node only through the EC2NodeClass's userData."""
    group = AcceleratorNodeGroupConfig.model_validate({"name": "g", "instanceType": instance_type, "maxSize": 2})
    facts = NEURON_INSTANCE_TYPES[instance_type]
    spec = group_spec(group, facts, Zone("us-west-2d", "usw2-az4"), provisioner="karpenter")
    pool = nodepools.node_pool(spec, nodepools.Lifetimes("720h", "24h", "10m"))
    node_class = nodepools.node_class(spec, cluster_name="c", node_role="r", placement_group=None, hop_limit=1, tags={})
    template = pool["spec"]["template"]
    labels = {
        **template["metadata"]["labels"],
        "karpenter.sh/nodepool": pool["metadata"]["name"],
        **{r["key"]: r["values"][0] for r in template["spec"]["requirements"] if r["operator"] == "In"},
    }
    assert BURN_IN_PENDING_LABEL not in labels
    assert f"--node-labels={BURN_IN_PENDING_LABEL}=true" in node_class["spec"]["userData"]
    target = burn_in_objects.BurnInTarget(
        "g",
        instance_type,
        facts.neuron_devices,
        facts.neuron_cores,
        len(spec.interfaces),
        None,
        provisioner="karpenter",
    )
    pod = burn_in_objects.daemon_set(target)["spec"]["template"]["spec"]
    overhead = [p for p in (pod,) if karpenter_overhead_counts(p, labels, template["spec"]["taints"])]
    efa = len(spec.interfaces)
    offered = {"aws.amazon.com/neuron": facts.neuron_devices, "vpc.amazonaws.com/efa": efa}
    assert _training_pod_fits(_minus(offered, overhead), facts.neuron_devices, efa)
    # Were the label on the template, the burn-in would eat the node.
    assert karpenter_overhead_counts(pod, {**labels, **BURN_IN_PENDING_LABELS}, template["spec"]["taints"])


def test_the_pending_label_is_set_at_registration_and_in_no_template():
    """The managed node group's user data carries it as a kubelet flag (nodeadm appends kubelet.flags
    across NodeConfigs: awslabs/amazon-eks-ami nodeadm/internal/api/merge.go mergeKubeletFlags), and
    neither its labels nor its node-template tags do."""
    group = AcceleratorNodeGroupConfig.model_validate({"name": "g", "instanceType": "trn1.32xlarge", "maxSize": 2})
    spec = group_spec(group, NEURON_INSTANCE_TYPES["trn1.32xlarge"], Zone("us-west-2d", "usw2-az4"))
    assert spec.registration_labels == BURN_IN_PENDING_LABELS
    assert f"      - --node-labels={BURN_IN_PENDING_LABEL}=true\n" in spec.user_data
    assert BURN_IN_PENDING_LABEL not in spec.labels
    assert not any(BURN_IN_PENDING_LABEL in k for k in spec.autoscaler_tags)
    off = group_spec(
        AcceleratorNodeGroupConfig.model_validate({**group.model_dump(by_alias=True), "burnIn": False}),
        NEURON_INSTANCE_TYPES["trn1.32xlarge"],
        Zone("us-west-2d", "usw2-az4"),
    )
    assert off.registration_labels == {} and "--node-labels" not in (off.user_data or "")


def test_the_pending_label_is_one_a_kubelet_may_set():
    """kubernetes/kubernetes plugin/pkg/admission/noderestriction/admission.go getForbiddenLabels:
    a kubelet may not set node-restriction.kubernetes.io labels nor unknown kubernetes.io / k8s.io
    ones; others are its own to set (the kubelet also refuses such --node-labels at start)."""
    namespace = BURN_IN_PENDING_LABEL.split("/", 1)[0]
    assert not any(namespace == ns or namespace.endswith("." + ns) for ns in ("kubernetes.io", "k8s.io"))


def test_a_failed_node_is_neither_unready_nor_a_blocking_template_for_the_autoscaler():
    """cluster-autoscaler-1.34.2 utils/taints/taints.go: StatusTaintPrefix taints are dropped from
    template nodes "but unlike IgnoreTaintPrefix & StartupTaintPrefix" not treated as unready; a
    failed node is thus ready (no IsClusterHealthy stop at ok-total-unready-count) and, as a
    template (mixed_nodeinfos_processor.go isNodeGoodTemplateCandidate: ready, schedulable), still
    lets training pods fit. It takes none itself: the taint is a real NoSchedule one."""
    assert BURN_IN_FAILED_TAINT_KEY.startswith(AUTOSCALER_STATUS_TAINT_PREFIX)
    assert AUTOSCALER_STATUS_TAINT_PREFIX == "status-taint.cluster-autoscaler.kubernetes.io/"
    assert not BURN_IN_FAILED_TAINT_KEY.startswith(SANITIZED_PREFIXES[:2])
    assert len(BURN_IN_FAILED_TAINT_KEY.split("/", 1)[1]) <= 63
