"""The gang hold: keeps a Trainium node that waits for the rest of its gang out of scale-in.

Volcano binds none of a gang's pods until all of them fit. A pod it has placed but holds back shows
PodScheduled False with reason ``Schedulable`` and a message naming the node (volcano v1.15.1
pkg/scheduler/api/job_info.go TaskSchedulingReason, written by pkg/scheduler/cache/cache.go for every
Allocated task, again whenever the message changes). Neither autoscaler counts such a pod: cluster-autoscaler
takes only reason ``Unschedulable`` (cluster-autoscaler-1.35.2 utils/kubernetes/listers.go
ArrangePodsBySchedulability), Karpenter likewise (kubernetes-sigs/karpenter v1.14.0 pkg/utils/pod/scheduling.go
FailedToSchedule). So a node waiting for its gang looks empty: the nodes of a gang whose burn-ins end minutes
apart, or the healthy nodes of a restarted gang while a replacement node is launched and burnt in. A restarted
Volcano Job has no pods at all until its pods on a lost node are gone: it stays Restarting while fewer than
minAvailable would be left besides the terminating ones (pkg/controllers/job/state/restarting.go), then Pending
until its new gang runs. With a Trainium group's 3-minute scale-down (infra/specs/node_template.py
TRAINIUM_SCALE_DOWN_UNNEEDED) these nodes would go.

The hold is three node annotations (node_template.GANG_HOLD_KEYS): cluster-autoscaler leaves the node out of
scale-down (core/scaledown/eligibility/eligibility.go) and drops it from its unneeded set, so once the hold
ends it counts the node unneeded from then on (unneeded/nodes.go Update keeps a time only for a node still in
the set); Karpenter does not disrupt it (pkg/controllers/state/statenode.go ValidateNodeDisruptable). The
burn-in holds a node when it passes it (infra/specs/burn_in_objects.py result_patch): before any pod can name
it, and long enough for the autoscaler's 10-second loops to see the hold. This CronJob, every minute on the
core nodes, then holds each ready passed node a held gang pod names, or that a Volcano Job restarted within
RESTART_HOLD_SECONDS and not run again selects, and ends each other hold it or the burn-in set once it is
HOLD_MINIMUM_SECONDS old: a node whose gang has bound has pods and is not empty, and a node no gang wants goes
3 minutes after its hold ends; a node not ready is never held, so its autoscaler can replace it. A gang that never assembles keeps its
nodes held until the gang watchdog ends the job at its pending bound (workloads/gang_watchdog.py). A node an
operator holds (an autoscaler key "true" without the marker) is left alone.

Its service account may list pods (for their scheduling conditions: every pod spec of the cluster, a read
the security docs name), Volcano Jobs and nodes, and patch nodes; a ValidatingAdmissionPolicy narrows the
patch to the three annotations on nodes whose burn-in passed.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from infra.specs import burn_in_objects
from infra.specs.burn_in_objects import (
    APP_LABELS,
    NAMESPACE,
    UNCHANGED_NODE_FIELDS,
    admission_policy,
    api_client_source,
    hold_annotations_only,
)
from infra.specs.node_template import (
    BURN_IN_RESULT_LABEL,
    GANG_HOLD_AUTOSCALER_KEYS,
    GANG_HOLD_KEYS,
    GANG_HOLD_MARKER,
    HOLD_TIME_FORMAT,
)

NAME = "gang-hold"
USERNAME = f"system:serviceaccount:{NAMESPACE}:{NAME}"
# Every minute, the shortest a CronJob can: a hold ends at most a minute after the gang binds, and a node a
# restarted gang waits for is held within a minute, well inside the 3 minutes before it would go.
PERIOD_SECONDS = 60
# A hold lasts at least this long, so a loop of each autoscaler (10 s) sees it and restarts the node's clock,
# and the gang's pods have a run or two to name the node (the burn-in pod leaves within its 10-second grace
# period before Volcano can place a pod there).
HOLD_MINIMUM_SECONDS = 120
# How long after a restart every passed node is held while the job has not run again: a node gone silent is
# replaced after EKS's 30-minute NotReady repair and 5 minutes for its deletion (workloads/deadlines.py
# SILENT_NODE_REPAIR_MINUTES), and only then do the job's new pods exist; its replacement then launches and burns
# in (burn_in_objects.BUDGET_SECONDS). Past this, a restart that waits (for a queue's room, a node that never
# comes) no longer holds every idle node; its gang's pods, once placed, hold theirs.
RESTART_HOLD_SECONDS = 3600
# Under APP_LABELS, so the namespace's NetworkPolicy (no ingress) covers its pods too.
LABELS = {**APP_LABELS, "app.kubernetes.io/component": NAME}
# The unbound pods Volcano has seen, from every namespace (pod fields a selector may name: kubernetes/kubernetes
# pkg/registry/core/pod/strategy.go ToSelectableFields).
PENDING_GANG_PODS = "spec.schedulerName=volcano,spec.nodeName=,status.phase=Pending"
PASSED_NODES = f"{BURN_IN_RESULT_LABEL}=passed"
VOLCANO_JOBS = "/apis/batch.volcano.sh/v1alpha1/jobs"

# fmt: off
# The functions below run in the hold's pod as their source text (HOLD_NODES): a reformat would change
# the CronJob's spec.
# Volcano's message for an Allocated task of a gang not yet whole (volcano v1.15.1 pkg/scheduler/api/job_info.go):
# "Pod <namespace>/<name> can possibly be assigned to <node>, once minAvailable is satisfied".
ASSIGNED = re.compile(r"can possibly be assigned to (\S+), once minAvailable is satisfied")


def held_for_gangs(pods: list[Mapping[str, Any]]) -> set[str] | None:
    """The nodes Volcano holds gang pods for: those the ``Schedulable`` pods' messages name. None when such a
    message names no node in the form above (another Volcano's wording): every passed node is held then,
    since a gang losing its nodes costs more than idle nodes kept until its pending bound."""
    nodes = set()
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if (condition.get("type"), condition.get("status"), condition.get("reason")) != (
                    "PodScheduled", "False", "Schedulable"):
                continue
            found = ASSIGNED.search(condition.get("message") or "")
            if found is None:
                return None
            nodes.add(found.group(1))
    return nodes


def restarting(jobs: list[Mapping[str, Any]], now: datetime, hold_seconds: int) -> dict[str, list[dict[str, str]]]:
    """The Volcano Jobs restarted less than ``hold_seconds`` before ``now`` that have not run since, each with its
    tasks' nodeSelectors: in phase Restarting, or Pending with no Running condition after its latest Restarting
    one (volcano v1.15.1 pkg/controllers/job/state: restarting.go ends in Pending, pending.go in Running; one
    condition per phase, its time refreshed on each status change, job_controller_actions.go)."""
    found = {}
    for job in jobs:
        status = job.get("status") or {}
        seen: dict[str, datetime] = {}
        for condition in status.get("conditions") or []:
            try:
                when = datetime.strptime(condition.get("lastTransitionTime") or "", HOLD_TIME_FORMAT).replace(tzinfo=UTC)
            except ValueError:
                continue
            phase = condition.get("status") or ""
            seen[phase] = max(seen.get(phase, when), when)
        restarted = seen.get("Restarting")
        if restarted is None or (now - restarted).total_seconds() > hold_seconds:
            continue
        phase = (status.get("state") or {}).get("phase")
        ran = seen.get("Running")
        if phase == "Restarting" or (phase == "Pending" and (ran is None or ran <= restarted)):
            tasks = (job.get("spec") or {}).get("tasks") or []
            selectors = [((t.get("template") or {}).get("spec") or {}).get("nodeSelector") or {} for t in tasks]
            found[job["metadata"]["namespace"] + "/" + job["metadata"]["name"]] = selectors or [{}]
    return found


def selected(nodes: list[Mapping[str, Any]], selectors: list[dict[str, str]]) -> set[str]:
    """The nodes whose labels any of ``selectors`` (nodeSelectors) matches."""
    names = set()
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        if any(all(labels.get(k) == v for k, v in selector.items()) for selector in selectors):
            names.add(node["metadata"]["name"])
    return names


def ready(node: Mapping[str, Any]) -> bool:
    """The node's Ready condition is True: a node not ready or unreachable is never held, so its autoscaler
    can replace it (a gang restarted for it waits for exactly that)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def hold_changes(nodes: list[Mapping[str, Any]], held: set[str] | None, now: datetime,
                 minimum_seconds: int) -> list[tuple[str, dict[str, Any]]]:
    """(node, merge patch) for each passed node whose hold is not as ``held`` (None: every node) wants: holds a
    ready node held for a gang from ``now``; ends a hold the marker says this program or the burn-in set once it
    is ``minimum_seconds`` old, or at once on a node not ready; leaves alone a node an operator holds (an
    autoscaler key "true" without the marker)."""
    changes: list[tuple[str, dict[str, Any]]] = []
    for node in nodes:
        name = node["metadata"]["name"]
        annotations = node["metadata"].get("annotations") or {}
        since = annotations.get(GANG_HOLD_MARKER)
        if since is None and any(annotations.get(k) == "true" for k in GANG_HOLD_AUTOSCALER_KEYS):
            continue
        holding = since is not None and all(annotations.get(k) == "true" for k in GANG_HOLD_AUTOSCALER_KEYS)
        if ready(node) and (held is None or name in held):
            if not holding:
                hold = {**dict.fromkeys(GANG_HOLD_AUTOSCALER_KEYS, "true"), GANG_HOLD_MARKER: now.strftime(HOLD_TIME_FORMAT)}
                changes.append((name, {"metadata": {"annotations": hold}}))
            continue
        if since is None:
            continue
        try:
            age = (now - datetime.strptime(since, HOLD_TIME_FORMAT).replace(tzinfo=UTC)).total_seconds()
        except ValueError:
            age = minimum_seconds
        if age >= minimum_seconds or not ready(node):
            changes.append((name, {"metadata": {"annotations": dict.fromkeys(GANG_HOLD_KEYS)}}))
    return changes
# fmt: on


HOLD_NODES = (
    api_client_source()
    + f"import re\nfrom datetime import UTC\nASSIGNED = re.compile({ASSIGNED.pattern!r})\n"
    + inspect.getsource(held_for_gangs)
    + inspect.getsource(restarting)
    + inspect.getsource(selected)
    + inspect.getsource(ready)
    + inspect.getsource(hold_changes)
    + f"""\
root = api.rsplit("/api/v1/nodes", 1)[0]
# The nodes first: a pod or job listed after them is no older than they are.
nodes = call("GET", api + "?labelSelector=" + urllib.parse.quote({PASSED_NODES!r}, safe=""))["items"]
try:
    jobs = call("GET", root + {VOLCANO_JOBS!r})["items"]
except urllib.error.HTTPError as error:
    if error.code != 404:  # 404: no Volcano in this cluster
        raise
    jobs = []
pods = call("GET", root + "/api/v1/pods?fieldSelector=" + urllib.parse.quote({PENDING_GANG_PODS!r}, safe=""))["items"]
held = held_for_gangs(pods)
if held is None:
    print("a Schedulable pod names no node as Volcano v1.15.1 words it: holding every passed node", flush=True)
for job, selectors in restarting(jobs, datetime.now(UTC), {RESTART_HOLD_SECONDS}).items():
    print("restarted, not yet running again:", job, "- holding the passed nodes it selects", flush=True)
    if held is not None:
        held |= selected(nodes, selectors)
refused = 0
for name, body in hold_changes(nodes, held, datetime.now(UTC), {HOLD_MINIMUM_SECONDS}):
    try:
        call("PATCH", api + "/" + name, json.dumps(body).encode())
        print("held" if body["metadata"]["annotations"][{GANG_HOLD_MARKER!r}] else "released", name, flush=True)
    except urllib.error.HTTPError as error:
        print("patch refused:", name, error.code, error.read().decode()[:500], flush=True)
        refused += 1
sys.exit(1 if refused else 0)
"""
)

_RESULT = f"'{BURN_IN_RESULT_LABEL}'"
# (expression, message) pairs; every one must hold for an update by the hold's service account.
VALIDATIONS: tuple[tuple[str, str], ...] = (
    (
        f"{_RESULT} in variables.oldLabels && variables.oldLabels[{_RESULT}] == 'passed'",
        "the gang hold may change only nodes whose burn-in passed",
    ),
    hold_annotations_only("the gang hold"),
    (
        "variables.newLabels == variables.oldLabels && variables.newTaints == variables.oldTaints && "
        + " && ".join(f"object.{f} == oldObject.{f}" for f in UNCHANGED_NODE_FIELDS),
        "the gang hold may not change labels, taints, owner references, finalizers or the node's spec",
    ),
)


def cluster_role() -> dict[str, Any]:
    """Unbound pods and Volcano Jobs to read the gangs from, nodes to read and patch (the policy narrows the
    patch)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NAME},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
        ],
    }


def cluster_objects(core_node_selector: Mapping[str, str]) -> list[dict[str, Any]]:
    """In the burn-in's namespace (burn_in_objects.cluster_objects creates it), each identity's policy
    before the pods that use it."""
    return [
        burn_in_objects.service_account(NAME),
        cluster_role(),
        burn_in_objects.cluster_role_binding(NAME),
        admission_policy(NAME, USERNAME, VALIDATIONS),
        burn_in_objects.admission_policy_binding(NAME),
        burn_in_objects.core_cron_job(NAME, LABELS, HOLD_NODES, PERIOD_SECONDS, core_node_selector),
    ]
