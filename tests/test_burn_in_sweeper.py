"""The sweeper that fails nodes whose burn-in never started, and the burn-in pod's size."""

from __future__ import annotations

import copy
import functools
import io
import json
import urllib.error
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from infra.config.models import FeaturesConfig
from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.specs import burn_in_objects
from infra.specs.node_template import (
    BURN_IN_FAILED_TAINT_KEY,
    BURN_IN_PENDING_LABEL,
    BURN_IN_REASON_LABEL,
    BURN_IN_RESULT_LABEL,
    BURN_IN_TAINT,
    NEURON_TAINT,
)
from infra.specs.system_capacity import node_allocatable
from tests.test_node_health import NODE, _failed_because, _passed, _refused_by, _Response, run_in_pod

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
LIMIT = burn_in_objects.BUDGET_SECONDS + burn_in_objects.SWEEP_MARGIN_SECONDS
SWEEPER_POLICY = burn_in_objects.admission_policy(
    burn_in_objects.SWEEPER, burn_in_objects.SWEEPER_USERNAME, burn_in_objects.SWEEPER_VALIDATIONS
)


def _node(name: str, age_seconds: int, **labels: str) -> dict[str, Any]:
    node = copy.deepcopy(NODE)
    created = (NOW - timedelta(seconds=age_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    node["metadata"].update(name=name, creationTimestamp=created, resourceVersion="7")
    node["metadata"]["labels"].update(labels)
    return node


def test_the_sweeper_picks_only_first_burn_ins_past_the_budget_and_margin():
    nodes = [
        _node("old", LIMIT + 1),
        _node("young", LIMIT - 1),
        # An operator's re-run: the creation time says nothing about when it was started.
        _node("rerun", LIMIT + 1, **{BURN_IN_RESULT_LABEL: "failed"}),
        _node("done", LIMIT + 1),
    ]
    del nodes[3]["metadata"]["labels"][BURN_IN_PENDING_LABEL]
    assert burn_in_objects.overdue(nodes, NOW, LIMIT) == ["old"]


def test_the_sweepers_limit_lets_a_running_burn_in_time_itself_out_first():
    """A running burn-in fails itself at the budget (tests/test_node_health.py); the sweeper waits a
    margin more, and acts before cluster-autoscaler's scale-down-unready-time (kubernetes/autoscaler
    cluster-autoscaler-1.34.2 config/const.go DefaultScaleDownUnreadyTime = 20 * time.Minute, the
    flag's default in config/flags/flags.go; infra/components/autoscaling.py does not set it) would
    delete the node."""
    assert burn_in_objects.SWEEP_MARGIN_SECONDS >= 60
    assert LIMIT + burn_in_objects.SWEEP_PERIOD_SECONDS < 20 * 60
    cron = burn_in_objects.sweeper_cron_job({"role": "core"})
    assert cron["spec"]["schedule"] == "*/2 * * * *" and burn_in_objects.SWEEP_PERIOD_SECONDS == 120


def _sweep(
    monkeypatch,
    nodes: list[dict[str, Any]],
    later: dict[str, dict[str, Any]] | None = None,
    conflicts: int = 0,
    refuse: int = 0,
) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """Runs SWEEP_NODES against a fake API server; ``later`` is what a node reads as once listed.
    Returns the patches it sent (url tail, body) and its exit code."""
    sent: list[tuple[str, dict[str, Any]]] = []
    state = {"conflicts": conflicts}
    by_name = {n["metadata"]["name"]: n for n in nodes}

    def urlopen(request, context=None, timeout=None):
        tail = request.full_url.rsplit("/", 1)[1]
        if request.get_method() == "GET":
            if tail.startswith("nodes?labelSelector="):
                assert tail == "nodes?labelSelector=node-health.trainium-eks%2Fburn-in-pending%3Dtrue"
                return _Response(json.dumps({"items": nodes}).encode())
            return _Response(json.dumps((later or {}).get(tail, by_name[tail])).encode())
        sent.append((tail, json.loads(request.data)))
        if state["conflicts"]:
            state["conflicts"] -= 1
            raise urllib.error.HTTPError(request.full_url, 409, "Conflict", {}, io.BytesIO(b"conflict"))
        if refuse:
            raise urllib.error.HTTPError(request.full_url, 422, "Invalid", {}, io.BytesIO(b"denied"))
        return _Response(b"{}")

    return sent, run_in_pod(monkeypatch, burn_in_objects.SWEEP_NODES, urlopen, [], now=NOW)


def test_the_sweeper_fails_a_node_never_started_with_the_burn_ins_own_patch(monkeypatch):
    sent, code = _sweep(monkeypatch, [_node("stuck", LIMIT + 30), _node("young", 60)], conflicts=1)
    assert code == 0
    assert [t for t, _ in sent] == ["stuck", "stuck"]  # the 409 made it read and patch again
    patch = sent[-1][1]
    assert patch["spec"]["taints"] == [
        {"key": NEURON_TAINT.key, "effect": "NoSchedule"},
        {"key": BURN_IN_FAILED_TAINT_KEY, "value": "not-started", "effect": "NoSchedule"},
    ]
    assert patch["metadata"] == {
        "labels": {BURN_IN_RESULT_LABEL: "failed", BURN_IN_REASON_LABEL: "not-started", BURN_IN_PENDING_LABEL: None},
        "resourceVersion": "7",
    }
    # What the sweeper's policy sees from that patch is allowed.
    old = _node("stuck", LIMIT + 30)
    new = copy.deepcopy(old)
    new["spec"]["taints"] = patch["spec"]["taints"]
    labels = {**new["metadata"]["labels"], **patch["metadata"]["labels"]}
    new["metadata"]["labels"] = {k: v for k, v in labels.items() if v is not None}
    assert _refused_by(old, new, "", burn_in_objects.SWEEPER_USERNAME, SWEEPER_POLICY) == []


def test_the_sweeper_leaves_a_node_whose_burn_in_reported_meanwhile_and_reports_a_refusal(monkeypatch):
    finished = _node("stuck", LIMIT + 30)
    _passed(finished)
    sent, code = _sweep(monkeypatch, [_node("stuck", LIMIT + 30)], later={"stuck": finished})
    assert (sent, code) == ([], 0)
    sent, code = _sweep(monkeypatch, [_node("stuck", LIMIT + 30)], refuse=1)
    assert len(sent) == 1 and code == 1


_failed_not_started = functools.partial(_failed_because, "not-started")


@pytest.mark.parametrize(
    "change, refused_by",
    [
        (_failed_not_started, []),
        (_passed, [1, 6]),  # it may only fail a node, and hold none
        (lambda n: (_failed_not_started(n), n["metadata"]["labels"].update({BURN_IN_REASON_LABEL: "efa"})), [1]),
        (
            lambda n: (
                _failed_not_started(n),
                n["spec"]["taints"].append({"key": BURN_IN_TAINT.key, "effect": "NoExecute"}),
            ),
            [1],
        ),
        (lambda n: (_failed_not_started(n), n["spec"]["taints"].pop(0)), [2]),  # the Neuron taint too
        (lambda n: (_failed_not_started(n), n["spec"]["taints"][1].update(effect="NoExecute")), [3]),
        (lambda n: (_failed_not_started(n), n["metadata"]["labels"].update(role="other")), [4]),
        (lambda n: (_failed_not_started(n), n["spec"].update(unschedulable=True)), [5]),
        (lambda n: (_failed_not_started(n), n["metadata"].update(annotations={"a": "b"})), [6]),
    ],
)
def test_the_sweepers_policy_allows_exactly_the_failure_patch(change, refused_by):
    new = copy.deepcopy(NODE)
    change(new)
    assert _refused_by(NODE, new, "", burn_in_objects.SWEEPER_USERNAME, SWEEPER_POLICY) == refused_by


def test_the_sweepers_policy_refuses_nodes_no_longer_pending_and_binds_only_the_sweeper():
    done = copy.deepcopy(NODE)
    _passed(done)
    again = copy.deepcopy(done)
    again["metadata"]["labels"].update({BURN_IN_RESULT_LABEL: "failed", BURN_IN_REASON_LABEL: "not-started"})
    again["spec"]["taints"].append({"key": BURN_IN_FAILED_TAINT_KEY, "value": "not-started", "effect": "NoSchedule"})
    assert _refused_by(done, again, "", burn_in_objects.SWEEPER_USERNAME, SWEEPER_POLICY) == [0]
    assert _refused_by(done, again, "", burn_in_objects.USERNAME, SWEEPER_POLICY) is None
    # The burn-in's own policy does not match the sweeper, which has no node claim.
    assert _refused_by(done, again, "", burn_in_objects.SWEEPER_USERNAME) is None


def test_the_sweeper_runs_on_core_nodes_with_its_own_identity_and_least_rights():
    objects = burn_in_objects.cluster_objects({"role": "core"})
    [cron] = [o for o in objects if o["kind"] == "CronJob"]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    # No toleration: the Trainium nodes' Neuron taint keeps it off them, and no node group template counts it.
    assert pod["nodeSelector"] == {"role": "core"} and "tolerations" not in pod
    assert pod["serviceAccountName"] == burn_in_objects.SWEEPER and pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] < burn_in_objects.SWEEP_PERIOD_SECONDS
    # Under the namespace's no-ingress NetworkPolicy.
    [policy] = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= cron["metadata"]["labels"].items()
    [role] = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == burn_in_objects.SWEEPER]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]
    [binding] = [
        o for o in objects if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == burn_in_objects.SWEEPER
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": burn_in_objects.SWEEPER, "namespace": burn_in_objects.NAMESPACE}
    ]
    kinds = [o["kind"] for o in objects]
    # Its policy is in force before the CronJob can run.
    assert kinds.index("CronJob") == len(kinds) - 1
    assert [o["spec"]["policyName"] for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"] == [
        burn_in_objects.SERVICE_ACCOUNT,
        burn_in_objects.SWEEPER,
    ]


@pytest.mark.parametrize("instance_type", sorted(NEURON_INSTANCE_TYPES))
def test_the_burn_in_pod_has_a_cpu_and_2_gib_per_rank_and_fits_the_node(instance_type):
    facts = NEURON_INSTANCE_TYPES[instance_type]
    target = burn_in_objects.BurnInTarget("g", instance_type, facts.neuron_devices, facts.neuron_cores, 0, None)
    limits = burn_in_objects.daemon_set(target)["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["cpu"] == str(facts.neuron_cores)
    assert limits["memory"] == f"{max(8, 2 * facts.neuron_cores)}Gi"
    allocatable = node_allocatable(instance_type, FeaturesConfig(), accelerator=True)
    # Every Neuron row has a node size (tests/test_instances.py), so every type is checked.
    assert int(limits["cpu"]) * 1000 <= int(allocatable["cpu"][:-1])
    assert int(limits["memory"][:-2]) * 1024 <= int(allocatable["memory"][:-2])
