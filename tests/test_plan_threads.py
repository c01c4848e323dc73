"""Every resource keeps its own inputs while Pulumi's runtime runs as shipped: it hands each call to
the resource monitor to the event loop's default executor, a thread pool (pulumi 3.272.0
sdk/python/lib/pulumi/runtime/resource.py, ``run_in_executor(None, ...)``), so registrations are
answered on several threads at once. Checked on the dev stacks and on a cluster several times
their size, built from the shipped dev stack file."""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
import yaml

from offline.plan import runner
from offline.plan.command import plan_workloads
from offline.plan.mocks import RecordingMonitor, engine_view
from offline.plan.runner import PlanResult, stack_config
from tests.fixture_project import FIXTURE_ROOT

WORKLOADS_DIR = FIXTURE_ROOT / "workloads"


class _WatchedMonitor(RecordingMonitor):
    """The offline plan's monitor, noting which threads the runtime called it on."""

    last: _WatchedMonitor

    def __init__(self, mocks: Any) -> None:
        super().__init__(mocks)
        self.threads: set[int] = set()
        _WatchedMonitor.last = self

    def RegisterResource(self, request: Any) -> Any:
        self.threads.add(threading.get_ident())
        return super().RegisterResource(request)


def watched(run: Any) -> tuple[PlanResult, _WatchedMonitor]:
    """``run()`` (a call of runner.run_program), and the monitor that answered it."""
    with mock.patch.object(runner, "RecordingMonitor", _WatchedMonitor):
        result = run()
    return result, _WatchedMonitor.last


def mentions(name: str, text: str) -> bool:
    """``name`` as a whole name in ``text``: not part of a longer one (trn-g01 in trn-g01-lt, not in trn-g010)."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", text) is not None


def misplaced_inputs(
    result: PlanResult, monitor: RecordingMonitor | None, families: Iterable[Iterable[str]] = ()
) -> list[str]:
    """What in ``result`` says a resource holds inputs that are not its own, each as a line:

    - its record differs from the inputs the mock monitor itself handed the mocks for that URN (the
      state it keeps per URN: the inputs with the placeholders the mocks add, offline/plan/mocks.py;
      pulumi 3.272.0 runtime/mocks.py MockMonitor.RegisterResource), when ``monitor`` is given;
    - a Kubernetes object whose kind or apiVersion is not its resource type's, or whose name is not
      part of the name it was registered under (nor that name part of it);
    - a resource registered under a name from one of ``families`` (node groups, namespaces) whose
      inputs mention another name of the same family (a group's placement group mentions none).
    """
    problems = []
    kept = monitor.get_registered_resources() if monitor is not None else {}
    families = [sorted(family) for family in families]
    for r in result.registrations:
        state = kept[r.urn].state if kept else r.inputs
        for key, value in r.inputs.items():
            held = engine_view(state.get(key))
            if key == "metadata" and isinstance(held, dict):
                held = {k: v for k, v in held.items() if k != "uid"}  # the API server's, added by the mocks
            if held != value:
                problems.append(f"{r.name}: input {key} is not what the monitor received for {r.urn}")
        if r.type.startswith("kubernetes:") and r.custom and "kind" in r.inputs:
            _, group_version, kind = r.type.split(":")
            group, version = group_version.split("/")
            api_version = version if group == "core" else f"{group}/{version}"
            if r.inputs["kind"] != kind.removesuffix("Patch") or r.inputs["apiVersion"] != api_version:
                problems.append(f"{r.name} ({r.type}) holds a {r.inputs['apiVersion']} {r.inputs['kind']}")
            name = r.inputs.get("metadata", {}).get("name", "")
            if name not in r.name and r.name not in name:
                problems.append(f"{r.name} ({r.type}) holds the object named {name!r}")
        text = json.dumps(r.inputs)
        for family in families:
            own = [n for n in family if mentions(n, r.name)]
            if len(own) != 1:
                continue
            others = [n for n in family if n != own[0] and mentions(n, text)]
            if others:
                problems.append(f"{r.name} ({r.type}): its inputs mention {', '.join(others)}")
    return problems


def large_dev_config(groups: int, extra_namespaces: int) -> dict[str, str]:
    """The dev stack's config with its first Trainium group copied under new names (trn-g00, ...) up to
    ``groups`` groups, ``extra_namespaces`` training namespaces (team-00, ...) besides its own, and
    what validation asks of a cluster that size: a label that tells the groups apart (the workloads
    pick their group by it) and system nodes that hold every namespace's workload-stack pods (two m6i.2xlarge
    for 9 namespaces: 9,230m of 15,820m CPU; docs/offline-plan.md measured with m6i.xlarge, and the core type
    does not change the plan's time)."""
    shipped = yaml.safe_load((FIXTURE_ROOT / "Pulumi.dev.yaml").read_text())["config"][
        "trainium-eks:acceleratorNodeGroups"
    ]
    copies = [{**copy.deepcopy(shipped[0]), "name": f"trn-g{i:02d}"} for i in range(groups - len(shipped))]
    node_groups = [{**group, "labels": {"pool": group["name"]}} for group in shipped + copies]
    config = stack_config(FIXTURE_ROOT, "dev")
    namespaces = json.loads(config.get("trainium-eks:trainingNamespaces", '["default"]'))
    config.update(
        {
            "trainium-eks:acceleratorNodeGroups": json.dumps(node_groups),
            "trainium-eks:trainingNamespaces": json.dumps(
                namespaces + [f"team-{i:02d}" for i in range(extra_namespaces)]
            ),
            "trainium-eks:namespaceIds": json.dumps(
                {
                    **{n: 20001 + i for i, n in enumerate(namespaces)},
                    **{f"team-{i:02d}": 30001 + i for i in range(extra_namespaces)},
                }
            ),
            "trainium-eks:coreNodeGroup": json.dumps({"instanceTypes": ["m6i.2xlarge"]}),
        }
    )
    return config


def group_and_namespace_names(config: dict[str, str]) -> list[list[str]]:
    return [
        [g["name"] for g in json.loads(config["trainium-eks:acceleratorNodeGroups"])],
        json.loads(config["trainium-eks:trainingNamespaces"]),
    ]


ZONES = ["usw2-az1", "usw2-az4"]


@dataclass(frozen=True)
class Watched:
    cluster: PlanResult
    cluster_monitor: _WatchedMonitor
    workloads: PlanResult
    workloads_monitor: _WatchedMonitor


@pytest.fixture(scope="module")
def dev_watched() -> Watched:
    cluster, cluster_monitor = watched(lambda: runner.run_program(FIXTURE_ROOT, "dev"))
    workloads, workloads_monitor = watched(lambda: plan_workloads(WORKLOADS_DIR, "dev", cluster))
    return Watched(cluster, cluster_monitor, workloads, workloads_monitor)


def test_the_dev_stacks_keep_every_resource_s_inputs_on_pulumi_s_thread_pool(dev_watched, dev, workloads_dev):
    cluster, workloads = dev_watched.cluster, dev_watched.workloads
    # The runtime answered registrations off the calling thread: nothing routes them back to it.
    assert dev_watched.cluster_monitor.threads - {threading.get_ident()}
    assert dev_watched.workloads_monitor.threads - {threading.get_ident()}
    groups = [g["name"] for g in json.loads(stack_config(FIXTURE_ROOT, "dev")["trainium-eks:acceleratorNodeGroups"])]
    assert misplaced_inputs(cluster, dev_watched.cluster_monitor, [groups]) == []
    assert misplaced_inputs(workloads, dev_watched.workloads_monitor) == []
    # Each subnet and route table is named (its Name tag) for its own zone; the zones are not a
    # family above because a private route table's routes also name the one NAT gateway's zone.
    for r in cluster.of_type("aws:ec2/subnet:Subnet") + cluster.of_type("aws:ec2/routeTable:RouteTable"):
        assert [z for z in ZONES if mentions(z, r.inputs["tags"]["Name"])] == [z for z in ZONES if mentions(z, r.name)]
    # The session's dev plans are runs of their own: the same record, resource for resource.
    assert cluster.as_json() == dev.as_json()
    assert workloads.as_json() == workloads_dev.as_json()


def swapped(result: PlanResult, first: str, second: str) -> PlanResult:
    """``result`` with the inputs of two resources exchanged, as a thread-dependent record did."""
    registrations = copy.deepcopy(result.registrations)
    a, b = (next(r for r in registrations if r.name == name) for name in (first, second))
    a.inputs, b.inputs = b.inputs, a.inputs
    return PlanResult(result.project, result.stack, registrations, result.outputs, result.secret_outputs)


def test_the_check_finds_inputs_held_by_the_wrong_resource(dev_watched):
    cluster, workloads = dev_watched.cluster, dev_watched.workloads
    # Against what the monitor received: any two resources.
    problems = misplaced_inputs(
        swapped(cluster, "network-private-rt-usw2-az4", "network-node-usw2-az1"), dev_watched.cluster_monitor
    )
    assert {p.split(":")[0] for p in problems} == {"network-private-rt-usw2-az4", "network-node-usw2-az1"}
    # From the record alone: Kubernetes objects of another kind, or of the same kind and another
    # name; a node group's resources holding another group's inputs.
    assert (
        "job-bert-train (kubernetes:batch.volcano.sh/v1alpha1:Job) holds a networking.k8s.io/v1 NetworkPolicy"
        in misplaced_inputs(swapped(workloads, "job-bert-train", "networkpolicy-gang-watchdog"), None)
    )
    assert (
        "job-bert-train (kubernetes:batch.volcano.sh/v1alpha1:Job) holds the object named 'bert-precompile'"
        in misplaced_inputs(swapped(workloads, "job-bert-train", "job-bert-precompile"), None)
    )
    assert (
        "trn1-32xl-ng1-lt (aws:ec2/launchTemplate:LaunchTemplate): its inputs mention trn1n-32xl-ng"
        in misplaced_inputs(
            swapped(cluster, "trn1-32xl-ng1-lt", "trn1n-32xl-ng-lt"), None, [["trn1-32xl-ng1", "trn1n-32xl-ng"]]
        )
    )


def test_a_cluster_of_24_trainium_groups_and_9_training_namespaces_keeps_every_resource_s_inputs():
    # Twelve times the dev stack's Trainium groups (the size at which monitor calls answered inline
    # ran out of stack); docs/offline-plan.md measures 64 groups and 17 namespaces.
    config = large_dev_config(groups=24, extra_namespaces=8)
    groups, namespaces = group_and_namespace_names(config)
    cluster, monitor = watched(lambda: runner.run_program(FIXTURE_ROOT, "dev", config))
    assert len(cluster.of_type("aws:eks/nodeGroup:NodeGroup")) == 24 + 2  # and the core and job-support groups
    accounts = [r.inputs["metadata"] for r in cluster.of_type("kubernetes:core/v1:ServiceAccount")]
    assert sorted(a["namespace"] for a in accounts if a["name"] == "training") == sorted(namespaces)
    assert monitor.threads - {threading.get_ident()}
    assert misplaced_inputs(cluster, monitor, [groups, namespaces]) == []
    workloads, workloads_monitor = watched(lambda: plan_workloads(WORKLOADS_DIR, "dev", cluster))
    assert misplaced_inputs(workloads, workloads_monitor) == []


def test_a_registration_that_meets_a_half_made_callback_server_is_asked_again(monkeypatch) -> None:
    """The runtime's first transform creates a callback server that is listed before its transform table
    exists (pulumi 3.272.0 runtime/_callbacks.py l.79-83); a registration reading the list in between
    fails before it changed anything, and the offline monitor asks again. Any other error still fails."""
    from pulumi.runtime.mocks import MockMonitor

    answers: list[object] = [
        AttributeError("'_CallbackServicer' object has no attribute '_transforms'"),
        "registered",
    ]

    def register(self: object, request: object) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(MockMonitor, "RegisterResource", register)
    monitor = RecordingMonitor(mock.Mock())
    assert monitor._register(object()) == "registered" and answers == []
    answers[:] = [AttributeError("'X' object has no attribute 'urn'")]
    with pytest.raises(AttributeError, match="urn"):
        monitor._register(object())
