"""The burn-in that health-gates a new Trainium node, as Kubernetes API dicts.

A node registers with ``BURN_IN_TAINT`` (infra/specs/node_template.py), which training pods never
tolerate. One DaemonSet per accelerator node group puts a pod on each of its nodes still waiting
for its burn-in (below); the pod takes every Neuron device and EFA interface of the node and checks:

- the Neuron devices and NeuronCores `neuron-ls` sees, and the device files the plugin handed over;
- the Neuron runtime and collectives: `nccom-test` all-reduce over every NeuronCore of the node with
  its result check (``--check``; aws-neuron/aws-neuron-sdk v2.21.0
  tools/neuron-sys-tools/nccom-test.rst, "Single Instance Examples");
- the EFA devices libfabric sees (`fi_info -p efa`, one ``domain:`` per device);
- on EFA nodes, the container's locked-memory limit (EFA registers training buffers as locked
  memory, no capability lifts the limit here: infra/specs/pod_security.py ACCELERATOR_CAPABILITIES;
  the node's user data raises it, infra/specs/user_data.py);
- the training file system mounted as Lustre.

The DaemonSet selects its group's nodes that carry ``BURN_IN_PENDING_LABEL``, which only a real node
has: the kubelet sets it at registration (infra/specs/node_template.py says why neither autoscaler
then counts the DaemonSet on the node it imagines for a scale-up). Then it patches its own node once,
removing the pending label and the startup taint and setting the result label: ``passed``; or
``failed`` with the first failed check in a second label and the NoSchedule taint
``BURN_IN_FAILED_TAINT_KEY``, so the node is ready but takes no pod and the provisioner removes it as
an empty node (cluster-autoscaler-1.35.2: unneeded after its group's scale-down-unneeded-time,
infra/specs/node_template.py TRAINIUM_SCALE_DOWN_UNNEEDED, below the 0.5 utilization threshold,
config/const.go; Karpenter v1.14.0: WhenEmpty consolidation after the NodePool's consolidateAfter). A pass
also holds the node for its gang (infra/specs/gang_hold.py). Without the pending label the node no longer matches, so the DaemonSet
controller deletes the pod, which frees the devices for training pods. Setting the label again
re-runs the burn-in on that node, with a whole budget from then; a pass removes the failed taint.

The whole burn-in, image pull included, is bounded: the checks get what is left of
``BUDGET_SECONDS`` since the node was created, and a node over it fails with reason ``timeout``.
That keeps a node well inside cluster-autoscaler's 15 minutes for a registered node to become ready
(cluster-autoscaler-1.34.2 clusterstate/clusterstate.go MaxNodeStartupTime; the same 15 minutes is
the max-node-provision-time default, config/flags/flags.go), after which it would count as unready.
A pod that never starts (image pull failing, the FSx mount stuck) runs no script and sets nothing, so a
sweeper outside it bounds that too: a CronJob on the core nodes (``sweeper_cron_job``) gives every
node still pending ``SWEEP_MARGIN_SECONDS`` past the budget the same failure patch with reason
``not-started``, and the provisioner removes it as an empty node. Without it such a node would keep
its startup taint: cluster-autoscaler counts it unready after those 15 minutes and stops acting at
all once more than ok-total-unready-count (3) and 45% of the nodes are unready
(clusterstate/clusterstate.go); Karpenter v1.14.0 never initializes it and removes it only at
expireAfter (nodeclaim/lifecycle/initialization.go).

The pod's service account may change only that taint and those labels on the node it runs on: RBAC
grants ``patch`` on nodes, and a ValidatingAdmissionPolicy refuses anything else from it. The node
comes from the token: a bound service-account token carries its pod's node, which the API server
puts in ``request.userInfo.extra['authentication.kubernetes.io/node-name']`` (KEP-4193,
feature gate ServiceAccountTokenPodNodeInfo, beta and on by default from Kubernetes 1.30:
kubernetes/website feature-gates/service-account-token-pod-node-info.md), and
``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy is GA from 1.30.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from infra.facts.neuron import BURN_IN_IMAGE
from infra.facts.versions import PYTHON_SLIM_IMAGE
from infra.specs import admission
from infra.specs.dra_objects import DraGroup, pod_claims
from infra.specs.node_template import (
    BURN_IN_FAILED_TAINT_KEY,
    BURN_IN_PENDING_LABEL,
    BURN_IN_PENDING_LABELS,
    BURN_IN_REASON_LABEL,
    BURN_IN_RESULT_LABEL,
    BURN_IN_TAINT,
    EFA_RESOURCE,
    GANG_HOLD_AUTOSCALER_KEYS,
    GANG_HOLD_KEYS,
    GANG_HOLD_MARKER,
    HOLD_TIME_FORMAT,
    HOLD_TIME_PATTERN,
    NEURON_RESOURCES,
    NEURON_TAINT,
    burn_in_window_daemon_set,
)
from infra.specs.pod_security import (
    ACCELERATOR_CAPABILITIES,
    UNPRIVILEGED_UID,
    container_security_context,
    network_policy,
    pod_defaults,
    pod_security_context,
    pod_security_level_labels,
)
from infra.specs.user_data import LOCKED_MEMORY_BYTES

NAMESPACE = "neuron-burn-in"
SERVICE_ACCOUNT = "neuron-burn-in"
USERNAME = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
# Both the node-name extra and ValidatingAdmissionPolicy v1 arrive in Kubernetes 1.30 (module docstring).
MIN_KUBERNETES = "1.30"
# The Neuron PyTorch DLC: neuron-ls and nccom-test (aws-neuronx-tools) in /opt/aws/neuron/bin, the EFA
# installer's fi_info in /opt/amazon/efa/bin, python3 for the one API call (workloads/cluster_check.py
# reads the same paths). The flags and the table read below are those of the tools in the SDK 2.30
# DLC (aws-neuron-sdk v2.30.0 tools/neuron-sys-tools/nccom-test.rst: -r, --minbytes, --maxbytes,
# --stepfactor, --datatype, --check [random|all_ones], --non-interactive; neuron-ls.rst: the device
# index and its NeuronCore count are still the first two columns, a NEURON CORE IDS column follows).
# Checked against each group's AMI driver like the training images (infra/facts/neuron.py). Pinned by
# tag: infra/facts/versions.py has no digest mechanism yet.
IMAGE = BURN_IN_IMAGE.base
NEURON_BIN = "/opt/aws/neuron/bin"
FI_INFO = "/opt/amazon/efa/bin/fi_info"
SHARED_MOUNT = "/shared"
# Wall-clock bound of each check command, so a hung device never holds the pod forever.
CHECK_TIMEOUT_SECONDS = 300
# Wall-clock bound of the whole burn-in from the node's creation: the plugins, the FSx mount, a cold pull
# of the multi-GB image, the checks and the all-reduce. Not timed on hardware yet (docs/node-health.md
# says how to tune it); under cluster-autoscaler's 15 minutes (module docstring) with room for the patch.
BUDGET_SECONDS = 780
# How long past the budget the sweeper waits before it fails a node whose burn-in never reported: a
# running burn-in times itself out at the budget and patches within seconds, so this only catches
# pods that never ran their script.
SWEEP_MARGIN_SECONDS = 120
# The sweeper's period; a node never started is failed between margin and margin + period past the budget.
SWEEP_PERIOD_SECONDS = 120
SWEEP_REASON = "not-started"
SWEEPER = "neuron-burn-in-sweeper"
SWEEPER_USERNAME = f"system:serviceaccount:{NAMESPACE}:{SWEEPER}"
# What a node spends in burn-in at most before it takes training pods, or fails; the cost estimate
# charges it per node launch (offline/report/cost.py), the Capacity Block windows per run start
# (workloads/capacity_windows.py).
BURN_IN_MINUTES = BUDGET_SECONDS // 60
# The locked-memory limit (KiB, as `ulimit -l` prints it) EFA nodes give containers
# (infra/specs/user_data.py): libfabric registers every buffer it sends from.
LOCKED_MEMORY_KIB = LOCKED_MEMORY_BYTES // 1024
NEURON_LS_AWK = "awk -F'|' '$2 ~ /^ *[0-9]+ *$/ {d++; c+=$3} END {print d+0, c+0}'"
EFA_DOMAINS_AWK = "awk '/domain:/ {print $2}' | sort -u | wc -l"
APP_LABELS = {"app.kubernetes.io/name": "neuron-burn-in"}
# Under APP_LABELS, so the namespace's NetworkPolicy (no ingress) covers the sweeper's pods too.
SWEEPER_LABELS = {**APP_LABELS, "app.kubernetes.io/component": "sweeper"}


@dataclass(frozen=True)
class BurnInTarget:
    """What one node group's nodes must show."""

    node_group: str
    instance_type: str
    neuron_devices: int
    neuron_cores: int
    efa_interfaces: int
    fsx_claim: str | None
    """The claim in ``NAMESPACE`` to mount at /shared; None when the stack has no file system."""
    provisioner: str = "cluster-autoscaler"
    dra: DraGroup | None = None
    """A `deviceAllocation: dra` group: the burn-in claims its node's devices through the group's whole-node
    claim template in ``NAMESPACE`` (no device plugin runs there to serve aws.amazon.com/neuron)."""
    image: str = IMAGE
    """``IMAGE`` as the nodes pull it: the cluster stack gives its pull-through cache reference, same tag
    (infra/specs/image_cache.py)."""
    file_system_kind: str = "fsx"
    """storage.kind: which file system the claim mounts, so which type the mount must show."""

    @property
    def group_label(self) -> str:
        """The label naming the group on its nodes: EKS's on a managed node group's nodes, Karpenter's
        on a NodePool's (kubernetes-sigs/karpenter pkg/apis/v1 NodePoolLabelKey; the NodePool is named
        after the group, infra/specs/nodepools.py)."""
        return "karpenter.sh/nodepool" if self.provisioner == "karpenter" else "eks.amazonaws.com/nodegroup"


# storage.kind -> the failure reason, the check's wording and the type the shared mount must show.
SHARED_MOUNT_CHECKS = {"fsx": ("fsx-mount", "FSx", "lustre"), "efs": ("efs-mount", "EFS", "nfs")}


def check_script(t: BurnInTarget) -> str:
    """Every check prints its line; the first failure names the result, running out of the budget
    names ``timeout``. Ends by patching the node, then sleeps until the DaemonSet controller deletes
    the pod (the node no longer matches). The checks run in their own shell under ``timeout`` and
    hand back only the failed check's name on descriptor 3 (``none`` when all passed)."""
    efa = (
        f'expect efa-interfaces "EFA devices (fi_info -p efa)" {t.efa_interfaces} '
        f'"$(timeout --foreground {CHECK_TIMEOUT_SECONDS} {FI_INFO} -p efa -t FI_EP_RDM 2>/dev/null | {EFA_DOMAINS_AWK})"\n'
        'l=$(ulimit -l); [ "$l" = unlimited ] || [ "$l" -lt '
        f"{LOCKED_MEMORY_KIB} ] || l=ok\n"
        f'expect locked-memory "locked-memory limit (ulimit -l, KiB, at least {LOCKED_MEMORY_KIB})" ok "${{l/unlimited/ok}}"\n'
        if t.efa_interfaces
        else ""
    )
    # What `stat -f -c %T` names the mount: coreutils src/stat.c human_fstype maps Lustre's magic to "lustre"
    # and NFS_SUPER_MAGIC (0x6969, every NFS version's, so EFS's NFSv4.1) to "nfs".
    reason, what, fs_type = SHARED_MOUNT_CHECKS[t.file_system_kind]
    fsx = (
        f'expect {reason} "{what} at {SHARED_MOUNT} (file system type)" {fs_type} '
        f'"$(timeout --foreground {CHECK_TIMEOUT_SECONDS} stat -f -c %T {SHARED_MOUNT})"\n'
        if t.fsx_claim
        else ""
    )
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


BURN_IN_TAINT_KEY = BURN_IN_TAINT.key


# fmt: off
# The two functions below run in the burn-in sweeper's pod as their source text (sweeper_script): a
# reformat would change the DaemonSet's spec and roll it on every cluster.
def result_patch(node: Mapping[str, Any], result: str, reason: str, now: datetime) -> dict[str, Any]:
    """The one merge patch that records a burn-in result on ``node`` (as the API returns it): the result
    labels, the pending label removed, the startup taint removed and, on failure, the failed taint added; a
    pass holds the node for its gang from ``now`` (infra/specs/gang_hold.py), a failure ends a hold set before.
    The node's resourceVersion makes it conditional (409 on a concurrent change, then read again), so a taint
    another controller adds meanwhile is never dropped. Runs in the pods too (``api_client_source``)."""
    labels = {BURN_IN_RESULT_LABEL: result, BURN_IN_REASON_LABEL: reason or None, BURN_IN_PENDING_LABEL: None}
    taints = [t for t in node["spec"].get("taints", []) if t["key"] not in (BURN_IN_TAINT_KEY, BURN_IN_FAILED_TAINT_KEY)]
    if result != "passed":
        taints.append({"key": BURN_IN_FAILED_TAINT_KEY, "value": reason, "effect": "NoSchedule"})
    held = GANG_HOLD_MARKER in (node["metadata"].get("annotations") or {})
    hold = ({**dict.fromkeys(GANG_HOLD_AUTOSCALER_KEYS, "true"), GANG_HOLD_MARKER: now.strftime(HOLD_TIME_FORMAT)}
            if result == "passed" else dict.fromkeys(GANG_HOLD_KEYS) if held else {})
    return {"metadata": {"labels": labels, **({"annotations": hold} if hold else {}),
                         "resourceVersion": node["metadata"]["resourceVersion"]},
            "spec": {"taints": taints}}


def overdue(nodes: list[Mapping[str, Any]], now: datetime, limit_seconds: int) -> list[str]:
    """The nodes the sweeper fails: still carrying the pending label from their registration (no result
    label: a re-run an operator started has no creation time to count from) and created more than
    ``limit_seconds`` before ``now``. Runs in the sweeper's pod (``api_client_source``)."""
    names = []
    for node in nodes:
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        if labels.get(BURN_IN_PENDING_LABEL) != "true" or BURN_IN_RESULT_LABEL in labels:
            continue
        created = datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        if (now - created).total_seconds() > limit_seconds:
            names.append(meta["name"])
    return names
# fmt: on


def api_client_source() -> str:
    """What the in-pod programs share (the burn-in's, the sweeper's, the gang hold's): the constants and pure
    functions above, and one API call with the pod's own token."""
    constants = {
        k: globals()[k]
        for k in (
            "BURN_IN_RESULT_LABEL",
            "BURN_IN_REASON_LABEL",
            "BURN_IN_PENDING_LABEL",
            "BURN_IN_TAINT_KEY",
            "BURN_IN_FAILED_TAINT_KEY",
            "GANG_HOLD_AUTOSCALER_KEYS",
            "GANG_HOLD_MARKER",
            "GANG_HOLD_KEYS",
            "HOLD_TIME_FORMAT",
        )
    }
    # The future import keeps the annotations unevaluated: the pod's Python has no typing names here.
    return (
        "from __future__ import annotations\n"
        "import json, os, ssl, sys, time, urllib.parse, urllib.request, urllib.error\n"
        "from datetime import datetime, timezone\n"
        + "".join(f"{k} = {v!r}\n" for k, v in constants.items())
        + inspect.getsource(result_patch)
        + inspect.getsource(overdue)
        + """\
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
# The address the kubelet gives every container: no cluster DNS lookup on a node still being checked.
api = "https://%s:%s/api/v1/nodes" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
context = ssl.create_default_context(cafile=sa + "/ca.crt")
def call(method, url, body=None):
    token = open(sa + "/token").read()
    request = urllib.request.Request(url, method=method, data=body, headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.load(response)
def patch(url, node, result, reason):
    \"\"\"True once patched, False when refused for good; None on a conflict (read again).\"\"\"
    try:
        call("PATCH", url, json.dumps(result_patch(node, result, reason, datetime.now(timezone.utc))).encode())
        return True
    except urllib.error.HTTPError as error:
        print("patch refused:", error.code, error.read().decode()[:500], flush=True)
        return None if error.code == 409 else False
"""
    )


# The burn-in's own node: with ``age``, its age in seconds; else patches the result into it.
PATCH_NODE = (
    api_client_source()
    + f"""\
url = api + "/" + os.environ["NODE_NAME"]
if sys.argv[1] == "age":
    meta = call("GET", url)["metadata"]
    # A re-run (the node has a result already) gets its whole budget from now.
    created = datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    rerun = {BURN_IN_RESULT_LABEL!r} in meta.get("labels", {{}})
    print(0 if rerun else int((datetime.now(timezone.utc) - created).total_seconds()))
    sys.exit(0)
for attempt in range(10):
    done = patch(url, call("GET", url), sys.argv[1], sys.argv[2])
    if done is not None:
        sys.exit(0 if done else 1)
    time.sleep(2)
sys.exit(1)
"""
)

# The sweeper: fails every node whose burn-in never reported (``overdue``), each read again just before
# its conditional patch, so one that finished meanwhile is left alone. Exits 1 if any patch was refused.
SWEEP_NODES = (
    api_client_source()
    + f"""\
limit = {BUDGET_SECONDS + SWEEP_MARGIN_SECONDS}
selector = urllib.parse.quote({BURN_IN_PENDING_LABEL!r} + "=true", safe="")
refused = 0
for name in overdue(call("GET", api + "?labelSelector=" + selector)["items"], datetime.now(timezone.utc), limit):
    url = api + "/" + name
    for attempt in range(5):
        node = call("GET", url)
        if not overdue([node], datetime.now(timezone.utc), limit):
            break
        done = patch(url, node, "failed", {SWEEP_REASON!r})
        if done is not None:
            print("burn-in never reported on", name, "- failed it:", {SWEEP_REASON!r} if done else "refused", flush=True)
            refused += not done
            break
        time.sleep(2)
sys.exit(1 if refused else 0)
"""
)


# nccom-test starts one Neuron runtime process per rank (NeuronCore): a CPU and 2 GiB each, 8 GiB at
# least. Not measured on hardware; the node is otherwise idle and neither autoscaler counts this pod
# (module docstring), so a generous size costs nothing but must fit the smallest type's allocatable.
CPU_PER_RANK = 1
MEMORY_GIB_PER_RANK = 2
MIN_MEMORY_GIB = 8


def burn_in_resources(t: BurnInTarget) -> dict[str, str]:
    return {
        "cpu": str(CPU_PER_RANK * t.neuron_cores),
        "memory": f"{max(MIN_MEMORY_GIB, MEMORY_GIB_PER_RANK * t.neuron_cores)}Gi",
    }


def toleration(taint: Any) -> dict[str, str]:
    return {"key": taint.key, "operator": "Exists", "effect": taint.effect}


def daemon_set(t: BurnInTarget) -> dict[str, Any]:
    labels = {**APP_LABELS, "node-group": t.node_group}
    limits = dict(burn_in_resources(t))
    if t.dra is None:
        limits[NEURON_RESOURCES[0]] = str(t.neuron_devices)
        if t.efa_interfaces:
            limits[EFA_RESOURCE] = str(t.efa_interfaces)
    container: dict[str, Any] = {
        "name": "burn-in",
        "image": t.image,
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
    claims: dict[str, Any] = {}
    if t.dra is not None:
        pod_side, container_side = pod_claims(t.dra)
        container["resources"]["claims"] = container_side
        claims["resourceClaims"] = pod_side
    # Not awaited: its pods exist only on nodes being burnt in (one whose patch is refused restarts until it
    # gets through), which says nothing about this `pulumi up`.
    return burn_in_window_daemon_set(
        f"burn-in-{t.node_group}",
        NAMESPACE,
        labels,
        {
            "serviceAccountName": SERVICE_ACCOUNT,
            # The one pod of this project that calls the API with its own token: to patch its
            # node, which the admission policy checks against the token's node claim.
            "automountServiceAccountToken": True,
            "securityContext": pod_security_context(),
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": t.group_label, "operator": "In", "values": [t.node_group]},
                                    *(
                                        {"key": k, "operator": "In", "values": [v]}
                                        for k, v in BURN_IN_PENDING_LABELS.items()
                                    ),
                                ]
                            }
                        ],
                    }
                }
            },
            # The failed taint too, so setting the pending label again re-runs a failed node.
            "tolerations": [
                toleration(NEURON_TAINT),
                toleration(BURN_IN_TAINT),
                {"key": BURN_IN_FAILED_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
            ],
            "terminationGracePeriodSeconds": 10,
            "containers": [container],
            "volumes": volumes,
            **claims,
        },
    )


# The burn-in runs nccom-test as root, the only user of the Neuron container it comes from, so its
# namespace enforces "baseline" (no privilege, host namespaces or host paths) and warns "restricted".
BURN_IN_POD_SECURITY = ("baseline", "restricted")


def namespace() -> dict[str, Any]:
    labels = pod_security_level_labels(*BURN_IN_POD_SECURITY)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": labels}}


def service_account(name: str = SERVICE_ACCOUNT) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NAMESPACE}}


def cluster_role(name: str = SERVICE_ACCOUNT, verbs: tuple[str, ...] = ("get", "patch")) -> dict[str, Any]:
    """Read and patch nodes (the sweeper lists them too); the admission policies narrow patch to the
    failure or result patch. Not nodes/status: the result is a label, not a condition."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": list(verbs)}],
    }


def cluster_role_binding(name: str = SERVICE_ACCOUNT) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}],
    }


# What one run of the sweeper or the gang hold asks of a system node (infra/specs/system_capacity.py counts
# them).
CORE_CRON_JOB_REQUESTS = {"cpu": "10m", "memory": "64Mi"}


def core_cron_job(
    name: str, labels: Mapping[str, str], script: str, period_seconds: int, core_node_selector: Mapping[str, str]
) -> dict[str, Any]:
    """A CronJob every ``period_seconds`` that runs ``script`` as its own service account ``name``, on the
    always-on core nodes: it tolerates no taint, so it never lands on a Trainium node, and as a plain pod there
    it is in no node group's template, so it cannot hold back a scale-up. One run at a time, each bounded
    inside its period, none piling up behind a slow API server."""
    container = {
        "name": name,
        "image": PYTHON_SLIM_IMAGE,
        "command": ["python", "-c", script],
        "resources": {"requests": dict(CORE_CRON_JOB_REQUESTS), "limits": {"cpu": "200m", "memory": "128Mi"}},
        "securityContext": container_security_context(read_only_root=True),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(labels)},
        "spec": {
            "schedule": f"*/{period_seconds // 60} * * * *" if period_seconds > 60 else "* * * * *",
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": period_seconds // 2,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": period_seconds - 10,
                    # A failed run's log stays an hour.
                    "ttlSecondsAfterFinished": 3600,
                    "template": {
                        "metadata": {"labels": dict(labels)},
                        "spec": {
                            **pod_defaults(run_as_user=UNPRIVILEGED_UID),
                            # It calls the API: it needs its token.
                            "automountServiceAccountToken": True,
                            "serviceAccountName": name,
                            "nodeSelector": dict(core_node_selector),
                            "restartPolicy": "Never",
                            "containers": [container],
                        },
                    },
                }
            },
        },
    }


def sweeper_cron_job(core_node_selector: Mapping[str, str]) -> dict[str, Any]:
    return core_cron_job(SWEEPER, SWEEPER_LABELS, SWEEP_NODES, SWEEP_PERIOD_SECONDS, core_node_selector)


RESULT_LABELS = (BURN_IN_RESULT_LABEL, BURN_IN_REASON_LABEL, BURN_IN_PENDING_LABEL)
_KEY = f"'{BURN_IN_TAINT.key}'"
_FAILED = f"'{BURN_IN_FAILED_TAINT_KEY}'"
_PENDING = f"'{BURN_IN_PENDING_LABEL}'"
_RESULT_KEYS = "[" + ", ".join(f"'{k}'" for k in RESULT_LABELS) + "]"
_HOLD_KEYS = "[" + ", ".join(f"'{k}'" for k in GANG_HOLD_KEYS) + "]"
_AUTOSCALER_KEYS = "[" + ", ".join(f"'{k}'" for k in GANG_HOLD_AUTOSCALER_KEYS) + "]"
_MARKER = f"'{GANG_HOLD_MARKER}'"


def hold_annotations_only(who: str) -> tuple[str, str]:
    """The validation that leaves every annotation as it was but the gang hold's (infra/specs/gang_hold.py): its
    autoscaler keys may be set to 'true', its marker to a time, and all of them removed where the marker shows
    the hold was one the burn-in or the gang hold set; an operator's own annotations stay."""
    return (
        "variables.newAnnotations.all(k, "
        "(k in variables.oldAnnotations && variables.oldAnnotations[k] == variables.newAnnotations[k]) || "
        f"(k in {_AUTOSCALER_KEYS} && variables.newAnnotations[k] == 'true') || "
        f"(k == {_MARKER} && variables.newAnnotations[k].matches('{HOLD_TIME_PATTERN}'))) && "
        "variables.oldAnnotations.all(k, k in variables.newAnnotations || "
        f"(k in {_HOLD_KEYS} && {_MARKER} in variables.oldAnnotations))",
        f"{who} may change no annotation but the gang hold's: its keys set to 'true', its marker to a time, all "
        "removed only from a hold with the marker",
    )


# Node fields besides taints, labels and annotations, each compared as it was: metadata a pod could use to have
# its node deleted (a dangling ownerReference) or kept (a finalizer), and the whole of the node's spec.
UNCHANGED_NODE_FIELDS = (
    "metadata.?ownerReferences.orValue([])",
    "metadata.?finalizers.orValue([])",
    "spec.?unschedulable.orValue(false)",
    "spec.?providerID.orValue('')",
    "spec.?podCIDR.orValue('')",
    "spec.?podCIDRs.orValue([])",
    "spec.?externalID.orValue('')",
)

# (expression, message) pairs; every one must hold for an update by the burn-in's service account.
VALIDATIONS: tuple[tuple[str, str], ...] = (
    (
        f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && "
        f"request.userInfo.extra['{NODE_NAME_EXTRA}'] == [object.metadata.name]",
        "the burn-in may change only the node its pod runs on",
    ),
    (
        f"variables.newTaints.filter(t, t.key != {_KEY} && t.key != {_FAILED}) == "
        f"variables.oldTaints.filter(t, t.key != {_KEY} && t.key != {_FAILED})",
        f"the burn-in may change no taint but {BURN_IN_TAINT.key} and {BURN_IN_FAILED_TAINT_KEY}",
    ),
    # Every startup taint left must be one that was there as it was: not added, nor its effect turned into
    # NoExecute, which would evict every pod on the node that does not tolerate it.
    (
        f"variables.newTaints.filter(t, t.key == {_KEY}).all(t, variables.oldTaints.exists(o, o == t))",
        f"the burn-in may remove {BURN_IN_TAINT.key}, not add or change it",
    ),
    (
        f"variables.newTaints.filter(t, t.key == {_FAILED}).all(t, t.effect == 'NoSchedule')",
        f"the burn-in may add {BURN_IN_FAILED_TAINT_KEY} only as NoSchedule",
    ),
    (
        f"variables.newLabels.all(k, k in {_RESULT_KEYS} || "
        "(k in variables.oldLabels && variables.oldLabels[k] == variables.newLabels[k])) && "
        f"variables.oldLabels.all(k, k in {_RESULT_KEYS} || k in variables.newLabels)",
        "the burn-in may set no label but its result labels",
    ),
    (
        f"!({_PENDING} in variables.newLabels) || "
        f"({_PENDING} in variables.oldLabels && variables.oldLabels[{_PENDING}] == variables.newLabels[{_PENDING}])",
        f"the burn-in may remove {BURN_IN_PENDING_LABEL}, not set it",
    ),
    (
        " && ".join(f"object.{f} == oldObject.{f}" for f in UNCHANGED_NODE_FIELDS),
        "the burn-in may not change owner references, finalizers or the node's spec besides its taints",
    ),
    hold_annotations_only("the burn-in"),
    (
        f"!variables.newAnnotations.exists(k, k in {_HOLD_KEYS} && !(k in variables.oldAnnotations && "
        "variables.oldAnnotations[k] == variables.newAnnotations[k])) || "
        f"('{BURN_IN_RESULT_LABEL}' in variables.newLabels && variables.newLabels['{BURN_IN_RESULT_LABEL}'] == 'passed')",
        "the burn-in may hold only a node it passes",
    ),
)
# Which of VALIDATIONS bind the sweeper as well: no other taint, the failed taint NoSchedule only, no
# label but the result labels, the rest of the node unchanged but its annotations (next).
_SHARED = (1, 3, 4, 6)
ANNOTATIONS_UNCHANGED = "variables.newAnnotations == variables.oldAnnotations"
_REASON = f"'{BURN_IN_REASON_LABEL}'"
_RESULT = f"'{BURN_IN_RESULT_LABEL}'"
# The sweeper may make exactly one change, the failure patch, and only to a node still pending.
SWEEPER_VALIDATIONS: tuple[tuple[str, str], ...] = (
    (
        f"{_PENDING} in variables.oldLabels && variables.oldLabels[{_PENDING}] == 'true'",
        f"the sweeper may change only nodes that still carry {BURN_IN_PENDING_LABEL}",
    ),
    (
        f"!({_PENDING} in variables.newLabels) && !variables.newTaints.exists(t, t.key == {_KEY}) && "
        f"{_RESULT} in variables.newLabels && variables.newLabels[{_RESULT}] == 'failed' && "
        f"{_REASON} in variables.newLabels && variables.newLabels[{_REASON}] == '{SWEEP_REASON}' && "
        f"variables.newTaints.exists(t, t.key == {_FAILED} && t.?value.orValue('') == '{SWEEP_REASON}')",
        f"the sweeper may only fail a node as {SWEEP_REASON}: the pending label and startup taint removed, "
        "the failed labels and taint set",
    ),
    *(VALIDATIONS[i] for i in _SHARED),
    (ANNOTATIONS_UNCHANGED, "the sweeper may not change annotations"),
)


def admission_policy(
    name: str = SERVICE_ACCOUNT, username: str = USERNAME, validations: tuple[tuple[str, str], ...] = VALIDATIONS
) -> dict[str, Any]:
    return admission.validating_policy(
        name,
        {
            # PATCH reaches admission as UPDATE; the node's status is another resource (nodes/status).
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
                ]
            },
            "matchConditions": [
                {"name": "service-account", "expression": f"request.userInfo.username == '{username}'"}
            ],
            "variables": [
                {"name": "oldTaints", "expression": "oldObject.spec.?taints.orValue([])"},
                {"name": "newTaints", "expression": "object.spec.?taints.orValue([])"},
                {"name": "oldLabels", "expression": "oldObject.metadata.?labels.orValue({})"},
                {"name": "newLabels", "expression": "object.metadata.?labels.orValue({})"},
                {"name": "oldAnnotations", "expression": "oldObject.metadata.?annotations.orValue({})"},
                {"name": "newAnnotations", "expression": "object.metadata.?annotations.orValue({})"},
            ],
            "validations": [{"expression": e, "message": m} for e, m in validations],
        },
    )


def admission_policy_binding(name: str = SERVICE_ACCOUNT) -> dict[str, Any]:
    return admission.deny_binding(name)


def cluster_objects(core_node_selector: Mapping[str, str]) -> list[dict[str, Any]]:
    """Everything but the DaemonSets, in the order they must exist: each identity's policy before the
    pods that use it. The burn-in pods and the sweeper serve nothing: their NetworkPolicy admits no
    traffic in."""
    return [
        namespace(),
        network_policy(SERVICE_ACCOUNT, NAMESPACE, APP_LABELS, []),
        service_account(),
        cluster_role(),
        cluster_role_binding(),
        admission_policy(),
        admission_policy_binding(),
        service_account(SWEEPER),
        cluster_role(SWEEPER, ("get", "list", "patch")),
        cluster_role_binding(SWEEPER),
        admission_policy(SWEEPER, SWEEPER_USERNAME, SWEEPER_VALIDATIONS),
        admission_policy_binding(SWEEPER),
        sweeper_cron_job(core_node_selector),
    ]
