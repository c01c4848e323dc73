"""The gang hold: a node Volcano keeps for a gang not yet whole is held out of scale-in, any other
passed node goes within five minutes of going idle."""

from __future__ import annotations

import copy
import io
import json
import urllib.error
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from infra.specs import burn_in_objects, gang_hold
from infra.specs.node_template import (
    BURN_IN_RESULT_LABEL,
    GANG_HOLD_ANNOTATIONS,
    GANG_HOLD_MARKER,
    TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS,
)
from tests.test_node_health import NODE, _passed, _refused_by, _Response, run_in_pod
from tests.test_node_layout import stack_config

HOLD_POLICY = burn_in_objects.admission_policy(gang_hold.NAME, gang_hold.USERNAME, gang_hold.VALIDATIONS)
RELEASED = dict.fromkeys(GANG_HOLD_ANNOTATIONS)


def _volcano_message(namespace: str, pod: str, node: str) -> str:
    """volcano v1.15.1 pkg/scheduler/api/job_info.go TaskSchedulingReason, case Allocated, word for word:
    fmt.Sprintf("Pod %s/%s can possibly be assigned to %s, once minAvailable is satisfied", ...)."""
    # Volcano's format string as it is, verbs and all.
    return "Pod %s/%s can possibly be assigned to %s, once minAvailable is satisfied" % (namespace, pod, node)  # noqa: UP031


def _pod(reason: str, message: str) -> dict[str, Any]:
    condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
    return {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending", "conditions": [condition]}}


def _node(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    node = copy.deepcopy(NODE)
    _passed(node)
    node["metadata"]["name"] = name
    node["metadata"]["annotations"] = dict(annotations or {})
    return node


def test_the_nodes_volcano_holds_gang_pods_for_come_from_its_schedulable_message():
    pods = [
        _pod("Schedulable", _volcano_message("team-a", "bert-train-worker-0", "ip-10-0-1-1.ec2.internal")),
        _pod("Schedulable", _volcano_message("team-a", "bert-train-worker-1", "ip-10-0-1-2.ec2.internal")),
        # What the autoscalers act on themselves: a pod no node can take yet.
        _pod("Unschedulable", "0/3 nodes are unavailable: 3 Insufficient aws.amazon.com/neuron."),
    ]
    assert gang_hold.held_for_gangs(pods) == {"ip-10-0-1-1.ec2.internal", "ip-10-0-1-2.ec2.internal"}
    assert gang_hold.held_for_gangs([pods[2]]) == set()
    # Another wording: which node is unknown, so every passed node is held.
    assert gang_hold.held_for_gangs([_pod("Schedulable", "Pod a/b fits ip-10-0-1-1, waiting for the gang")]) is None


def test_the_hold_follows_the_gangs_and_leaves_an_operators_annotations_alone():
    held = _node("held", GANG_HOLD_ANNOTATIONS)
    idle = _node("idle", GANG_HOLD_ANNOTATIONS)
    waiting = _node("waiting")
    kept = _node("kept", {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"})
    nodes = [held, idle, waiting, kept]
    assert gang_hold.hold_changes(nodes, {"held", "waiting"}) == [
        ("idle", {"metadata": {"annotations": RELEASED}}),
        ("waiting", {"metadata": {"annotations": GANG_HOLD_ANNOTATIONS}}),
    ]
    # Volcano's wording unknown: nothing released, every passed node held.
    assert [name for name, _ in gang_hold.hold_changes(nodes, None)] == ["waiting", "kept"]


def _run(monkeypatch, pods: list[dict[str, Any]], nodes: list[dict[str, Any]], refuse: bool = False):
    """Runs HOLD_NODES against a fake API server: the requests it made and its exit code."""
    requests: list[tuple[str, str, Any]] = []

    def urlopen(request, context=None, timeout=None):
        url = urlsplit(request.full_url)
        body = json.loads(request.data) if request.data else None
        requests.append((request.get_method(), url.path + ("?" + unquote(url.query) if url.query else ""), body))
        if request.get_method() == "PATCH":
            if refuse:
                raise urllib.error.HTTPError(request.full_url, 422, "Invalid", {}, io.BytesIO(b"denied"))
            return _Response(b"{}")
        return _Response(json.dumps({"items": pods if url.path.endswith("/pods") else nodes}).encode())

    return requests, run_in_pod(monkeypatch, gang_hold.HOLD_NODES, urlopen, [])


def test_a_run_reads_volcanos_unbound_pods_and_the_passed_nodes_then_holds_and_releases(monkeypatch, capsys):
    pods = [_pod("Schedulable", _volcano_message("team-a", "w-0", "waiting"))]
    requests, code = _run(monkeypatch, pods, [_node("waiting"), _node("idle", GANG_HOLD_ANNOTATIONS)])
    assert code == 0
    assert requests == [
        ("GET", "/api/v1/pods?fieldSelector=spec.schedulerName=volcano,spec.nodeName=,status.phase=Pending", None),
        ("GET", f"/api/v1/nodes?labelSelector={BURN_IN_RESULT_LABEL}=passed", None),
        ("PATCH", "/api/v1/nodes/waiting", {"metadata": {"annotations": GANG_HOLD_ANNOTATIONS}}),
        ("PATCH", "/api/v1/nodes/idle", {"metadata": {"annotations": RELEASED}}),
    ]
    assert capsys.readouterr().out.split("\n")[:2] == ["held waiting", "released idle"]
    _, code = _run(monkeypatch, pods, [_node("waiting")], refuse=True)
    assert code == 1


@pytest.mark.parametrize("annotations", [GANG_HOLD_ANNOTATIONS, RELEASED])
def test_the_policy_allows_holding_and_releasing_a_passed_node(annotations):
    old = _node("n", {"note": "x"} if annotations is GANG_HOLD_ANNOTATIONS else {**GANG_HOLD_ANNOTATIONS, "note": "x"})
    new = copy.deepcopy(old)
    merged = {**old["metadata"]["annotations"], **annotations}
    new["metadata"]["annotations"] = {k: v for k, v in merged.items() if v is not None}
    assert _refused_by(old, new, "", gang_hold.USERNAME, HOLD_POLICY) == []


@pytest.mark.parametrize(
    "change, refused_by",
    [
        (lambda n: n["metadata"]["labels"].update({BURN_IN_RESULT_LABEL: "failed"}), [2]),
        (lambda n: n["metadata"]["annotations"].update({"note": "y"}), [1]),
        (lambda n: n["metadata"]["annotations"].update({GANG_HOLD_MARKER: "false"}), [1]),
        (lambda n: n["spec"]["taints"].clear(), [2]),
        (lambda n: n["spec"].update(unschedulable=True), [2]),
    ],
)
def test_the_policy_refuses_everything_else(change, refused_by):
    old = _node("n", {"note": "x"})
    new = copy.deepcopy(old)
    change(new)
    assert _refused_by(old, new, "", gang_hold.USERNAME, HOLD_POLICY) == refused_by


def test_the_policy_refuses_a_node_whose_burn_in_has_not_passed_and_binds_only_the_hold():
    pending = copy.deepcopy(NODE)
    held = copy.deepcopy(pending)
    held["metadata"]["annotations"] = dict(GANG_HOLD_ANNOTATIONS)
    assert _refused_by(pending, held, "", gang_hold.USERNAME, HOLD_POLICY) == [0]
    assert _refused_by(pending, held, "", burn_in_objects.SWEEPER_USERNAME, HOLD_POLICY) is None


def test_the_hold_runs_on_core_nodes_with_least_rights_and_every_minute():
    objects = gang_hold.cluster_objects({"role": "core"})
    [cron] = [o for o in objects if o["kind"] == "CronJob"]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"role": "core"} and "tolerations" not in pod
    assert pod["serviceAccountName"] == gang_hold.NAME and pod["restartPolicy"] == "Never"
    assert cron["metadata"]["namespace"] == burn_in_objects.NAMESPACE
    assert cron["spec"]["concurrencyPolicy"] == "Forbid" and cron["spec"]["schedule"] == "* * * * *"
    assert cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] < gang_hold.PERIOD_SECONDS
    [role] = [o for o in objects if o["kind"] == "ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
    ]
    [binding] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    # The policy exists before the pods that patch.
    kinds = [o["kind"] for o in objects]
    assert kinds.index("ValidatingAdmissionPolicyBinding") < kinds.index("CronJob")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_an_idle_trainium_node_goes_within_five_minutes_and_a_waiting_one_is_held_first(stack):
    """cluster-autoscaler-1.35.2: the unneeded set is recomputed every scan-interval, 10 s (config/const.go
    DefaultScanInterval), and each loop deletes at most 10 nodes (config/flags/flags.go
    max-scale-down-parallelism), so the last node of the largest shipped group goes that many loops later. The
    hold reaches a node a restarted gang waits for within one period plus a run, before its 3 minutes end."""
    largest_group = max(g.max_size for g in stack_config(stack).accelerator_node_groups)
    scan = 10
    assert TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS + scan + -(-largest_group // 10) * scan <= 5 * 60
    assert 2 * gang_hold.PERIOD_SECONDS <= TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS
    [cron] = [o for o in gang_hold.cluster_objects({}) if o["kind"] == "CronJob"]
    assert cron["spec"]["schedule"] == "* * * * *" and gang_hold.PERIOD_SECONDS == 60


def test_karpenter_removes_an_empty_trainium_node_after_the_same_three_minutes():
    """Karpenter's WhenEmpty consolidation waits consolidateAfter from the node's last pod event, or from its
    initialization, which its startup taint (the burn-in's) delays (kubernetes-sigs/karpenter v1.14.0
    pkg/controllers/nodeclaim/disruption/consolidation.go); the hold's do-not-disrupt keeps a waiting node."""
    from infra.config.models import KarpenterConfig

    assert KarpenterConfig().consolidate_after == f"{TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS // 60}m"
