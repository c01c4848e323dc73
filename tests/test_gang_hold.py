"""The gang hold: a node Volcano keeps for a gang not yet whole is held out of scale-in, any other
passed node goes within five minutes of going idle."""

from __future__ import annotations

import copy
import io
import json
import urllib.error
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from infra.specs import burn_in_objects, gang_hold
from infra.specs.node_template import (
    BURN_IN_RESULT_LABEL,
    GANG_HOLD_KEYS,
    GANG_HOLD_MARKER,
    TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS,
)
from tests.test_node_health import NODE, _passed, _refused_by, _Response, run_in_pod
from tests.test_node_layout import stack_config

HOLD_POLICY = burn_in_objects.admission_policy(gang_hold.NAME, gang_hold.USERNAME, gang_hold.VALIDATIONS)
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
RELEASED = dict.fromkeys(GANG_HOLD_KEYS)
CA_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"


def _hold(seconds_ago: int = 0) -> dict[str, str]:
    since = (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {CA_KEY: "true", "karpenter.sh/do-not-disrupt": "true", GANG_HOLD_MARKER: since}


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
    node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
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
    old = _node("old", _hold(gang_hold.HOLD_MINIMUM_SECONDS))
    fresh = _node("fresh", _hold(gang_hold.HOLD_MINIMUM_SECONDS - 1))
    waiting = _node("waiting")
    operator = _node("operator", {CA_KEY: "true"})
    nodes = [old, fresh, waiting, operator]
    changes = gang_hold.hold_changes(nodes, {"waiting", "operator"}, NOW, gang_hold.HOLD_MINIMUM_SECONDS)
    # An old hold no gang wants ends; a fresh one stays (the burn-in's, before a run has seen the gang's pods);
    # a node an operator holds is never touched, even where a gang waits for it.
    assert changes == [
        ("old", {"metadata": {"annotations": RELEASED}}),
        ("waiting", {"metadata": {"annotations": _hold()}}),
    ]
    # Volcano's wording unknown, or a gang restarting: every passed node held, nothing released.
    assert [name for name, _ in gang_hold.hold_changes(nodes, None, NOW, 120)] == ["waiting"]


def test_a_restarted_volcano_job_counts_until_it_runs_again_for_an_hour_at_most():
    def job(name: str, phase: str, **conditions: int) -> dict[str, Any]:
        """``conditions``: phase -> minutes before NOW of its latest transition."""
        times = [
            {"status": p, "lastTransitionTime": (NOW - timedelta(minutes=m)).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for p, m in conditions.items()
        ]
        task = {"template": {"spec": {"nodeSelector": {"instance-type": "trn1-32xl"}}}}
        return {
            "metadata": {"namespace": "team-a", "name": name},
            "spec": {"tasks": [task]},
            "status": {"state": {"phase": phase}, "conditions": times},
        }

    jobs = [
        job("terminating", "Restarting", Running=90, Restarting=5),
        job("recreated", "Pending", Running=90, Restarting=5, Pending=4),
        # A status change in the same second as the restart: not yet run again.
        job("same-second", "Pending", Running=5, Restarting=5),
        job("running-again", "Running", Running=1, Restarting=5, Pending=4),
        job("never-restarted", "Pending", Pending=10),
        # A restart an hour and more ago that still waits (a queue's room, a node that never comes) no longer
        # holds its nodes; its gang's pods, once placed, hold theirs.
        job("long-ago", "Pending", Restarting=61, Pending=60),
    ]
    found = gang_hold.restarting(jobs, NOW, gang_hold.RESTART_HOLD_SECONDS)
    assert found == dict.fromkeys(
        ["team-a/terminating", "team-a/recreated", "team-a/same-second"], [{"instance-type": "trn1-32xl"}]
    )
    # A silent node's repair (30 + 5 min) and its replacement's burn-in fit in the hour.
    assert gang_hold.RESTART_HOLD_SECONDS >= (30 + 5) * 60 + burn_in_objects.BUDGET_SECONDS


def test_a_restart_holds_only_the_ready_nodes_its_tasks_select():
    trn1, trn2, lost = _node("trn1"), _node("trn2"), _node("lost", _hold(10))
    trn1["metadata"]["labels"]["instance-type"] = lost["metadata"]["labels"]["instance-type"] = "trn1-32xl"
    trn2["metadata"]["labels"]["instance-type"] = "trn2-48xl"
    # The node the restart waits for is gone silent: never held, its hold ends at once, so its autoscaler (or
    # EKS's repair) can replace it.
    lost["status"] = {"conditions": [{"type": "Ready", "status": "Unknown"}]}
    nodes = [trn1, trn2, lost]
    held = gang_hold.selected(nodes, [{"instance-type": "trn1-32xl"}])
    assert held == {"trn1", "lost"}
    assert gang_hold.hold_changes(nodes, held, NOW, gang_hold.HOLD_MINIMUM_SECONDS) == [
        ("trn1", {"metadata": {"annotations": _hold()}}),
        ("lost", {"metadata": {"annotations": RELEASED}}),
    ]
    # A task with no nodeSelector selects every node.
    assert gang_hold.selected(nodes, [{}]) == {"trn1", "trn2", "lost"}


def _run(monkeypatch, pods, nodes, jobs: list[dict[str, Any]] | int = (), refuse: bool = False):
    """Runs HOLD_NODES against a fake API server at NOW: the requests it made and its exit code. ``jobs`` as an
    int is the status the Volcano Jobs' list answers with (404: no Volcano)."""
    requests: list[tuple[str, str, Any]] = []

    def urlopen(request, context=None, timeout=None):
        url = urlsplit(request.full_url)
        body = json.loads(request.data) if request.data else None
        requests.append((request.get_method(), url.path + ("?" + unquote(url.query) if url.query else ""), body))
        if request.get_method() == "PATCH":
            if refuse:
                raise urllib.error.HTTPError(request.full_url, 422, "Invalid", {}, io.BytesIO(b"denied"))
            return _Response(b"{}")
        if url.path == gang_hold.VOLCANO_JOBS:
            if isinstance(jobs, int):
                raise urllib.error.HTTPError(request.full_url, jobs, "Not Found", {}, io.BytesIO(b"{}"))
            return _Response(json.dumps({"items": list(jobs)}).encode())
        return _Response(json.dumps({"items": pods if url.path.endswith("/pods") else nodes}).encode())

    return requests, run_in_pod(monkeypatch, gang_hold.HOLD_NODES, urlopen, [], now=NOW)


def test_a_run_reads_the_nodes_then_volcanos_jobs_and_unbound_pods_then_holds_and_releases(monkeypatch, capsys):
    pods = [_pod("Schedulable", _volcano_message("team-a", "w-0", "waiting"))]
    nodes = [_node("waiting"), _node("idle", _hold(600))]
    requests, code = _run(monkeypatch, pods, nodes)
    assert code == 0
    assert requests == [
        ("GET", f"/api/v1/nodes?labelSelector={BURN_IN_RESULT_LABEL}=passed", None),
        ("GET", "/apis/batch.volcano.sh/v1alpha1/jobs", None),
        ("GET", "/api/v1/pods?fieldSelector=spec.schedulerName=volcano,spec.nodeName=,status.phase=Pending", None),
        ("PATCH", "/api/v1/nodes/waiting", {"metadata": {"annotations": _hold()}}),
        ("PATCH", "/api/v1/nodes/idle", {"metadata": {"annotations": RELEASED}}),
    ]
    assert capsys.readouterr().out.split("\n")[:2] == ["held waiting", "released idle"]
    # A cluster without Volcano answers the Jobs' list with 404: no restarts, the same changes.
    requests, code = _run(monkeypatch, pods, nodes, jobs=404)
    assert code == 0 and [r[1] for r in requests if r[0] == "PATCH"] == ["/api/v1/nodes/waiting", "/api/v1/nodes/idle"]
    # A restarted job not yet running again: the passed nodes it selects stay held, the idle one too.
    restarted = {
        "metadata": {"namespace": "team-a", "name": "bert-train"},
        "status": {
            "state": {"phase": "Restarting"},
            "conditions": [{"status": "Restarting", "lastTransitionTime": "2026-11-28T11:58:00Z"}],
        },
    }
    requests, code = _run(monkeypatch, [], nodes, jobs=[restarted])
    assert code == 0 and [r[1] for r in requests if r[0] == "PATCH"] == ["/api/v1/nodes/waiting"]
    assert "restarted, not yet running again: team-a/bert-train" in capsys.readouterr().out
    # An operator's "false" is no hold: the gang hold may hold that node.
    operator = _node("waiting", {CA_KEY: "false"})
    assert gang_hold.hold_changes([operator], {"waiting"}, NOW, 120) == [
        ("waiting", {"metadata": {"annotations": _hold()}})
    ]
    _, code = _run(monkeypatch, pods, [_node("waiting")], refuse=True)
    assert code == 1


@pytest.mark.parametrize("held", [True, False])
def test_the_policy_allows_holding_and_releasing_a_passed_node(held):
    old = _node("n", {"note": "x"} if held else {**_hold(600), "note": "x"})
    new = copy.deepcopy(old)
    merged = {**old["metadata"]["annotations"], **(_hold() if held else RELEASED)}
    new["metadata"]["annotations"] = {k: v for k, v in merged.items() if v is not None}
    assert _refused_by(old, new, "", gang_hold.USERNAME, HOLD_POLICY) == []


def _release(n: dict[str, Any]) -> None:
    for key in GANG_HOLD_KEYS:
        n["metadata"]["annotations"].pop(key, None)


@pytest.mark.parametrize(
    "annotations, change, refused_by",
    [
        ({}, lambda n: n["metadata"]["labels"].update({BURN_IN_RESULT_LABEL: "failed"}), [2]),
        ({}, lambda n: n["metadata"]["annotations"].update({"note": "y"}), [1]),
        ({}, lambda n: n["metadata"]["annotations"].update(_hold(), **{GANG_HOLD_MARKER: "soon"}), [1]),
        ({}, lambda n: n["metadata"]["annotations"].update({CA_KEY: "false"}), [1]),
        # An operator's hold (no marker) is not the gang hold's to remove.
        ({CA_KEY: "true"}, _release, [1]),
        ({}, lambda n: n["spec"]["taints"].clear(), [2]),
        ({}, lambda n: n["spec"].update(unschedulable=True), [2]),
    ],
)
def test_the_policy_refuses_everything_else(annotations, change, refused_by):
    old = _node("n", {"note": "x", **annotations})
    new = copy.deepcopy(old)
    change(new)
    assert _refused_by(old, new, "", gang_hold.USERNAME, HOLD_POLICY) == refused_by


def test_the_policy_refuses_a_node_whose_burn_in_has_not_passed_and_binds_only_the_hold():
    pending = copy.deepcopy(NODE)
    held = copy.deepcopy(pending)
    held["metadata"]["annotations"] = _hold()
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
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["list"]},
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


def test_a_group_without_burn_in_keeps_ten_minutes_since_nothing_holds_its_nodes():
    """The gang hold keeps passed nodes only: a group with burnIn: false has none, so its nodes get the core
    groups' ten minutes for a gang whose nodes join minutes apart, under either provisioner."""
    from infra.components.accelerators import group_spec
    from infra.config.models import AcceleratorNodeGroupConfig
    from infra.facts.instances import NEURON_INSTANCE_TYPES
    from infra.specs import nodepools
    from infra.specs.placement import Zone

    key = "k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtime"
    facts = NEURON_INSTANCE_TYPES["trn1.32xlarge"]
    zone = Zone("us-west-2d", "usw2-az4")
    for burn_in, tag, consolidate in ((True, "3m0s", "3m"), (False, "10m0s", "10m")):
        config = AcceleratorNodeGroupConfig.model_validate(
            {"name": "g", "instanceType": "trn1.32xlarge", "maxSize": 2, "burnIn": burn_in}
        )
        spec = group_spec(config, facts, zone)
        assert spec.autoscaler_tags[key] == tag
        lifetimes = nodepools.Lifetimes("720h", "24h", "3m")
        assert nodepools.node_pool(spec, lifetimes)["spec"]["disruption"]["consolidateAfter"] == consolidate
    # A longer configured time, or Never, is kept.
    assert nodepools.consolidate_after("30m", held=False) == "30m"
    assert nodepools.consolidate_after("Never", held=False) == "Never"


def test_no_scale_up_holds_back_an_idle_nodes_scale_in(dev):
    """cluster-autoscaler-1.35.2 core/static_autoscaler.go isScaleDownInCooldown: after any scale-up nothing is
    removed for scale-down-delay-after-add, which would push an idle node past its five minutes."""
    release = next(r for r in dev.of_type("kubernetes:helm.sh/v3:Release") if "autoscaler" in r.name)
    args = release.inputs["values"]["extraArgs"]
    assert args["scale-down-delay-after-add"] == "0s" and "scale-down-delay-type-local" not in args
