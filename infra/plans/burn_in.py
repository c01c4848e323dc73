"""The burn-in that health-gates a new Trainium node, as Kubernetes API dicts.

A node registers with ``BURN_IN_TAINT`` (infra/plans/node_template.py), which training pods never
tolerate. One DaemonSet per accelerator node group puts a pod on each of its nodes still waiting
for its burn-in (below); the pod takes every Neuron device and EFA interface of the node and checks:

- the Neuron devices and NeuronCores `neuron-ls` sees, and the device files the plugin handed over;
- the Neuron runtime and collectives: `nccom-test` all-reduce over every NeuronCore of the node with
  its result check (``--check``; aws-neuron/aws-neuron-sdk v2.21.0
  tools/neuron-sys-tools/nccom-test.rst, "Single Instance Examples");
- the EFA devices libfabric sees (`fi_info -p efa`, one ``domain:`` per device);
- on EFA nodes, the container's locked-memory limit (EFA registers training buffers as locked
  memory, no capability lifts the limit here: infra/plans/pod_security.py ACCELERATOR_CAPABILITIES;
  the node's user data raises it, infra/plans/user_data.py);
- the training file system mounted as Lustre.

The DaemonSet selects its group's nodes that carry ``BURN_IN_PENDING_LABEL``, which only a real node
has: the kubelet sets it at registration (infra/plans/node_template.py says why neither autoscaler
then counts the DaemonSet on the node it imagines for a scale-up). Then it patches its own node once,
removing the pending label and the startup taint and setting the result label: ``passed``; or
``failed`` with the first failed check in a second label and the NoSchedule taint
``BURN_IN_FAILED_TAINT_KEY``, so the node is ready but takes no pod and the provisioner removes it as
an empty node (cluster-autoscaler-1.34.2: unneeded after scale-down-unneeded-time, 10 minutes, below
the 0.5 utilization threshold, config/const.go; Karpenter v1.14.0: WhenEmpty consolidation after the
NodePool's consolidateAfter). Without the pending label the node no longer matches, so the DaemonSet
controller deletes the pod, which frees the devices for training pods. Setting the label again
re-runs the burn-in on that node, with a whole budget from then; a pass removes the failed taint.

The whole burn-in, image pull included, is bounded: the checks get what is left of
``BUDGET_SECONDS`` since the node was created, and a node over it fails with reason ``timeout``.
That keeps a node well inside cluster-autoscaler's 15 minutes for a registered node to become ready
(cluster-autoscaler-1.34.2 clusterstate/clusterstate.go MaxNodeStartupTime; the same 15 minutes is
the max-node-provision-time default, config/flags/flags.go), after which it would count as unready.
A pod that never starts (image pull failing, the FSx mount stuck) runs no script and sets nothing:
the node keeps its startup taint and pending label. cluster-autoscaler counts it unready after
those 15 minutes and deletes it after scale-down-unready-time (20 minutes), unless more than
ok-total-unready-count (3) and 45% of the nodes are unready, when it stops acting at all; Karpenter
v1.14.0 never initializes it and removes it only at expireAfter (docs/node-health.md).

The pod's service account may change only that taint and those labels on the node it runs on: RBAC
grants ``patch`` on nodes, and a ValidatingAdmissionPolicy refuses anything else from it. The node
comes from the token: a bound service-account token carries its pod's node, which the API server
puts in ``request.userInfo.extra['authentication.kubernetes.io/node-name']`` (KEP-4193,
feature gate ServiceAccountTokenPodNodeInfo, beta and on by default from Kubernetes 1.30:
kubernetes/website feature-gates/service-account-token-pod-node-info.md), and
``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy is GA from 1.30.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from infra.facts.neuron import BURN_IN_IMAGE
from infra.plans.user_data import LOCKED_MEMORY_BYTES
from infra.plans.node_template import (
    BURN_IN_FAILED_TAINT_KEY,
    BURN_IN_PENDING_LABEL,
    BURN_IN_PENDING_LABELS,
    BURN_IN_REASON_LABEL,
    BURN_IN_RESULT_LABEL,
    BURN_IN_TAINT,
    EFA_RESOURCE,
    NEURON_RESOURCES,
    NEURON_TAINT,
)
from infra.plans.pod_security import (
    ACCELERATOR_CAPABILITIES,
    container_security_context,
    network_policy,
    pod_security_context,
    pod_security_labels,
)

NAMESPACE = "neuron-burn-in"
SERVICE_ACCOUNT = "neuron-burn-in"
USERNAME = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
# Both the node-name extra and ValidatingAdmissionPolicy v1 arrive in Kubernetes 1.30 (module docstring).
MIN_KUBERNETES = "1.30"
# The Neuron PyTorch DLC: neuron-ls and nccom-test (aws-neuronx-tools) in /opt/aws/neuron/bin, the EFA
# installer's fi_info in /opt/amazon/efa/bin, python3 for the one API call (workloads/cluster_check.py
# reads the same paths in the SDK 2.20.2 DLC).
# Checked against each group's AMI driver like the training images (infra/facts/neuron.py). Pinned by
# tag: infra/facts/versions.py has no digest mechanism yet.
IMAGE = BURN_IN_IMAGE.base
NEURON_BIN = "/opt/aws/neuron/bin"
FI_INFO = "/opt/amazon/efa/bin/fi_info"
SHARED_MOUNT = "/shared"
# Wall-clock bound of each check command, so a hung device never holds the pod forever.
CHECK_TIMEOUT_SECONDS = 300
# Wall-clock bound of the whole burn-in from the node's creation: image pull, checks, all-reduce. Well
# under cluster-autoscaler's 15 minutes (module docstring), with room for the patch and the pod's end.
BUDGET_SECONDS = 600
# What a node spends in burn-in at most before it takes training pods, or fails; the cost estimate
# charges it per node launch (offline/cost.py), the Capacity Block windows per run start
# (workloads/capacity_windows.py).
BURN_IN_MINUTES = BUDGET_SECONDS // 60
# The locked-memory limit (KiB, as `ulimit -l` prints it) EFA nodes give containers
# (infra/plans/user_data.py): libfabric registers every buffer it sends from.
LOCKED_MEMORY_KIB = LOCKED_MEMORY_BYTES // 1024
NEURON_LS_AWK = "awk -F'|' '$2 ~ /^ *[0-9]+ *$/ {d++; c+=$3} END {print d+0, c+0}'"
EFA_DOMAINS_AWK = "awk '/domain:/ {print $2}' | sort -u | wc -l"
APP_LABELS = {"app.kubernetes.io/name": "neuron-burn-in"}


@dataclass(frozen=True)
class BurnInTarget:
    """What one node group's nodes must show."""

    node_group: str
    instance_type: str
    neuron_devices: int
    neuron_cores: int
    efa_interfaces: int
    fsx_claim: Optional[str]
    """The claim in ``NAMESPACE`` to mount at /shared; None when the stack has no file system."""
    provisioner: str = "cluster-autoscaler"

    @property
    def group_label(self) -> str:
        """The label naming the group on its nodes: EKS's on a managed node group's nodes, Karpenter's
        on a NodePool's (kubernetes-sigs/karpenter pkg/apis/v1 NodePoolLabelKey; the NodePool is named
        after the group, infra/plans/karpenter.py)."""
        return "karpenter.sh/nodepool" if self.provisioner == "karpenter" else "eks.amazonaws.com/nodegroup"


def check_script(t: BurnInTarget) -> str:
    """Every check prints its line; the first failure names the result, running out of the budget
    names ``timeout``. Ends by patching the node, then sleeps until the DaemonSet controller deletes
    the pod (the node no longer matches). The checks run in their own shell under ``timeout`` and
    hand back only the failed check's name on descriptor 3 (``none`` when all passed)."""
    efa = (f'expect efa-interfaces "EFA devices (fi_info -p efa)" {t.efa_interfaces} '
           f'"$(timeout --foreground {CHECK_TIMEOUT_SECONDS} {FI_INFO} -p efa -t FI_EP_RDM 2>/dev/null | {EFA_DOMAINS_AWK})"\n'
           'l=$(ulimit -l); [ "$l" = unlimited ] || [ "$l" -lt ' f'{LOCKED_MEMORY_KIB} ] || l=ok\n'
           f'expect locked-memory "locked-memory limit (ulimit -l, KiB, at least {LOCKED_MEMORY_KIB})" ok "${{l/unlimited/ok}}"\n'
           if t.efa_interfaces else "")
    fsx = (f'expect fsx-mount "FSx at {SHARED_MOUNT} (file system type)" lustre '
           f'"$(timeout --foreground {CHECK_TIMEOUT_SECONDS} stat -f -c %T {SHARED_MOUNT})"\n' if t.fsx_claim else "")
    return f"""\
set -uo pipefail
read -r -d '' checks <<'CHECKS'
reason=""
expect() {{ # reason, what, expected, seen
  if [ "$3" = "$4" ]; then echo "ok    $2: $4"; else echo "FAIL  $2: expected $3, seen $4"; [ -n "$reason" ] || reason="$1"; fi
}}
dc=$(timeout --foreground {CHECK_TIMEOUT_SECONDS} {NEURON_BIN}/neuron-ls | {NEURON_LS_AWK})
expect neuron-devices "Neuron devices (neuron-ls)" {t.neuron_devices} "${{dc% *}}"
expect neuron-cores "NeuronCores (neuron-ls)" {t.neuron_cores} "${{dc#* }}"
expect neuron-device-files "Neuron device files (/dev/neuron*)" {t.neuron_devices} "$(ls -d /dev/neuron[0-9]* 2>/dev/null | wc -l)"
{efa}{fsx}timeout --foreground {CHECK_TIMEOUT_SECONDS} {NEURON_BIN}/nccom-test -r {t.neuron_cores} --minbytes 1kb --maxbytes 64mb --stepfactor 8 \\
  --datatype fp32 --check --non-interactive allr
expect neuron-runtime "nccom-test all-reduce over {t.neuron_cores} NeuronCores (exit code)" 0 "$?"
echo "${{reason:-none}}" >&3
CHECKS
age=$(python3 -c "$PATCH_NODE" age) || age=0
left=$(({BUDGET_SECONDS} - age))
echo "node created ${{age}} s ago; {BUDGET_SECONDS} s budget, ${{left}} s left for the checks"
reason=timeout
found=$(mktemp)
if [ "$left" -gt 0 ]; then
  # The checks' own timeouts stay in this timeout's process group (--foreground), so all of them end
  # with the budget; the result comes back in a file, which nothing left over could hold open.
  timeout "$left" bash -c "$checks" 3>"$found"; code=$?
  [ "$code" -eq 124 ] || reason=$(cat "$found"); reason=${{reason:-script-error}}
fi
[ "$reason" = none ] && reason=""
result=$([ -z "$reason" ] && echo passed || echo failed)
echo "burn-in $result on $NODE_NAME ({t.instance_type}, node group {t.node_group})${{reason:+: $reason}}"
python3 -c "$PATCH_NODE" "$result" "$reason" || exit 1
exec sleep infinity
"""


# One merge patch of the pod's own node: the result labels, the pending label removed, the startup
# taint removed and, on failure, the failed taint added. The node's resourceVersion makes it
# conditional (409 on a concurrent change, then read again), so a taint another controller adds
# meanwhile is never dropped. With ``age`` it prints the node's age in seconds instead.
PATCH_NODE = f"""\
import json, os, ssl, sys, time, urllib.request, urllib.error
from datetime import datetime, timezone
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
url = "https://kubernetes.default.svc/api/v1/nodes/" + os.environ["NODE_NAME"]
context = ssl.create_default_context(cafile=sa + "/ca.crt")
def call(method, body=None):
    token = open(sa + "/token").read()
    request = urllib.request.Request(url, method=method, data=body, headers={{
        "Authorization": "Bearer " + token, "Content-Type": "application/merge-patch+json"}})
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.load(response)
if sys.argv[1] == "age":
    meta = call("GET")["metadata"]
    # A re-run (the node has a result already) gets its whole budget from now.
    created = datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    rerun = {BURN_IN_RESULT_LABEL!r} in meta.get("labels", {{}})
    print(0 if rerun else int((datetime.now(timezone.utc) - created).total_seconds()))
    sys.exit(0)
result, reason = sys.argv[1], sys.argv[2]
for attempt in range(10):
    node = call("GET")
    labels = {{{BURN_IN_RESULT_LABEL!r}: result, {BURN_IN_REASON_LABEL!r}: reason or None, {BURN_IN_PENDING_LABEL!r}: None}}
    patch = {{"metadata": {{"labels": labels, "resourceVersion": node["metadata"]["resourceVersion"]}}}}
    taints = [t for t in node["spec"].get("taints", []) if t["key"] not in ({BURN_IN_TAINT.key!r}, {BURN_IN_FAILED_TAINT_KEY!r})]
    if result != "passed":
        taints.append({{"key": {BURN_IN_FAILED_TAINT_KEY!r}, "value": reason, "effect": "NoSchedule"}})
    patch["spec"] = {{"taints": taints}}
    try:
        call("PATCH", json.dumps(patch).encode())
        sys.exit(0)
    except urllib.error.HTTPError as error:
        print("patch refused:", error.code, error.read().decode()[:500], flush=True)
        if error.code != 409:
            sys.exit(1)
    time.sleep(2)
sys.exit(1)
"""


def toleration(taint: Any) -> dict[str, str]:
    return {"key": taint.key, "operator": "Exists", "effect": taint.effect}


def daemon_set(t: BurnInTarget) -> dict[str, Any]:
    labels = {**APP_LABELS, "node-group": t.node_group}
    limits = {NEURON_RESOURCES[0]: str(t.neuron_devices), "cpu": "2", "memory": "8Gi"}
    if t.efa_interfaces:
        limits[EFA_RESOURCE] = str(t.efa_interfaces)
    container: dict[str, Any] = {
        "name": "burn-in",
        "image": IMAGE,
        "command": ["bash", "-c", check_script(t)],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "PATCH_NODE", "value": PATCH_NODE},
        ],
        "resources": {"requests": dict(limits), "limits": dict(limits)},
        "securityContext": container_security_context(ACCELERATOR_CAPABILITIES),
    }
    volumes = []
    if t.fsx_claim:
        container["volumeMounts"] = [{"name": "fsx", "mountPath": SHARED_MOUNT, "readOnly": True}]
        volumes.append({"name": "fsx", "persistentVolumeClaim": {"claimName": t.fsx_claim, "readOnly": True}})
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": f"burn-in-{t.node_group}", "namespace": NAMESPACE, "labels": labels,
            # Not awaited: its pods exist only on nodes being burnt in (one whose patch is refused
            # restarts until it gets through), which says nothing about this `pulumi up`.
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "selector": {"matchLabels": labels},
            # Only nodes still waiting for burn-in have a pod, so a new spec may replace all at once.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    # The one pod of this project that calls the API with its own token: to patch its
                    # node, which the admission policy checks against the token's node claim.
                    "automountServiceAccountToken": True,
                    "securityContext": pod_security_context(),
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": t.group_label, "operator": "In", "values": [t.node_group]},
                            *({"key": k, "operator": "In", "values": [v]} for k, v in BURN_IN_PENDING_LABELS.items()),
                        ]}],
                    }}},
                    # The failed taint too, so setting the pending label again re-runs a failed node.
                    "tolerations": [toleration(NEURON_TAINT), toleration(BURN_IN_TAINT),
                                    {"key": BURN_IN_FAILED_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 10,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": pod_security_labels()}}


def service_account() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}}


def cluster_role() -> dict[str, Any]:
    """Read and patch nodes; the admission policy narrows patch to the pod's own node, two taints and
    three labels. Not nodes/status: the result is a label, not a condition."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": SERVICE_ACCOUNT},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]}


def cluster_role_binding() -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": SERVICE_ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SERVICE_ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]}


RESULT_LABELS = (BURN_IN_RESULT_LABEL, BURN_IN_REASON_LABEL, BURN_IN_PENDING_LABEL)
_KEY = f"'{BURN_IN_TAINT.key}'"
_FAILED = f"'{BURN_IN_FAILED_TAINT_KEY}'"
_PENDING = f"'{BURN_IN_PENDING_LABEL}'"
_RESULT_KEYS = "[" + ", ".join(f"'{k}'" for k in RESULT_LABELS) + "]"
# Node fields besides taints and labels, each compared as it was: metadata a pod could use to have its
# node deleted (a dangling ownerReference) or kept (a finalizer), and the whole of the node's spec.
_UNCHANGED = ("metadata.?annotations.orValue({})", "metadata.?ownerReferences.orValue([])",
              "metadata.?finalizers.orValue([])", "spec.?unschedulable.orValue(false)", "spec.?providerID.orValue('')",
              "spec.?podCIDR.orValue('')", "spec.?podCIDRs.orValue([])", "spec.?externalID.orValue('')")

# (expression, message) pairs; every one must hold for an update by the burn-in's service account.
VALIDATIONS: tuple[tuple[str, str], ...] = (
    (f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && "
     f"request.userInfo.extra['{NODE_NAME_EXTRA}'] == [object.metadata.name]",
     "the burn-in may change only the node its pod runs on"),
    (f"variables.newTaints.filter(t, t.key != {_KEY} && t.key != {_FAILED}) == "
     f"variables.oldTaints.filter(t, t.key != {_KEY} && t.key != {_FAILED})",
     f"the burn-in may change no taint but {BURN_IN_TAINT.key} and {BURN_IN_FAILED_TAINT_KEY}"),
    (f"!variables.newTaints.exists(t, t.key == {_KEY}) || variables.oldTaints.exists(t, t.key == {_KEY})",
     f"the burn-in may remove {BURN_IN_TAINT.key}, not add it"),
    (f"variables.newTaints.filter(t, t.key == {_FAILED}).all(t, t.effect == 'NoSchedule')",
     f"the burn-in may add {BURN_IN_FAILED_TAINT_KEY} only as NoSchedule"),
    (f"variables.newLabels.all(k, k in {_RESULT_KEYS} || "
     "(k in variables.oldLabels && variables.oldLabels[k] == variables.newLabels[k])) && "
     f"variables.oldLabels.all(k, k in {_RESULT_KEYS} || k in variables.newLabels)",
     "the burn-in may set no label but its result labels"),
    (f"!({_PENDING} in variables.newLabels) || "
     f"({_PENDING} in variables.oldLabels && variables.oldLabels[{_PENDING}] == variables.newLabels[{_PENDING}])",
     f"the burn-in may remove {BURN_IN_PENDING_LABEL}, not set it"),
    (" && ".join(f"object.{f} == oldObject.{f}" for f in _UNCHANGED),
     "the burn-in may not change annotations, owner references, finalizers or the node's spec besides its taints"),
)


def admission_policy() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": SERVICE_ACCOUNT},
        "spec": {
            "failurePolicy": "Fail",
            # PATCH reaches admission as UPDATE; the node's status is another resource (nodes/status).
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
            ]},
            "matchConditions": [{"name": "burn-in-service-account", "expression": f"request.userInfo.username == '{USERNAME}'"}],
            "variables": [
                {"name": "oldTaints", "expression": "oldObject.spec.?taints.orValue([])"},
                {"name": "newTaints", "expression": "object.spec.?taints.orValue([])"},
                {"name": "oldLabels", "expression": "oldObject.metadata.?labels.orValue({})"},
                {"name": "newLabels", "expression": "object.metadata.?labels.orValue({})"},
            ],
            "validations": [{"expression": e, "message": m} for e, m in VALIDATIONS],
        },
    }


def admission_policy_binding() -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": SERVICE_ACCOUNT},
            "spec": {"policyName": SERVICE_ACCOUNT, "validationActions": ["Deny"]}}


def cluster_objects() -> list[dict[str, Any]]:
    """Everything but the DaemonSets, in the order they must exist. The burn-in pods serve nothing:
    their NetworkPolicy admits no traffic in."""
    return [namespace(), network_policy(SERVICE_ACCOUNT, NAMESPACE, APP_LABELS, []), service_account(), cluster_role(),
            cluster_role_binding(), admission_policy(), admission_policy_binding()]
