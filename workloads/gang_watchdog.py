"""The gang watchdog: a small Deployment on the system nodes that ends a Volcano Job or MPIJob
whose gang has not run within its pending bound, and stops a job on a Capacity Block group at its
stop-by time, before EKS drains the nodes (``watchdog_loop.py`` says how and why, from the
Volcano v1.15.1, MPI operator v0.8.0 and KubeRay v1.7.0 sources).

Each job carries its bound in the annotation ``watchdog_loop.ANNOTATION`` and, on a block, its
stop-by time in ``watchdog_loop.STOP_BY`` (metadata, not spec: changing either never replaces a
running job). The watchdog may only read Volcano Jobs and MPIJobs, create Volcano Commands, patch
MPIJobs, create Events and, when a RayJob runs on a block, read and patch RayJobs, in its own
namespace; nothing may connect to
it (an ingress NetworkPolicy admitting nothing); it runs as a non-root user with a read-only root
and every capability dropped. Beside the step gates (step_gate.py, which may only read the steps they
wait for), it is the workload stack's one pod with a service account token.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from infra.contract import NodeGroup
from infra.facts import versions
from infra.specs import system_pods
from workloads import capacity_windows, pods, watchdog_loop
from workloads.kube import declare

NAME = "gang-watchdog"
LABELS = {"app.kubernetes.io/name": NAME, **pods.workload_labels(NAME)}
ANNOTATION = watchdog_loop.ANNOTATION


def pending_bound(minutes: int, restart_minutes: int | None = None) -> dict[str, str]:
    """The annotation that gives a job's gang ``minutes`` to run before the watchdog ends it, and
    a restarted Volcano attempt ``restart_minutes`` from its Restarting condition."""
    restart = {} if restart_minutes is None else {watchdog_loop.RESTART_ANNOTATION: str(restart_minutes * 60)}
    return {ANNOTATION: str(minutes * 60), **restart}


def stop_by(group: NodeGroup) -> dict[str, str]:
    """The annotation that has the watchdog stop a job on ``group`` before its Capacity Block is
    reclaimed; none for a group not on a block."""
    when = capacity_windows.stop_by(group.capacity_block)
    return {} if when is None else {watchdog_loop.STOP_BY: when}


def loop_source() -> str:
    return Path(watchdog_loop.__file__).read_text()


@dataclass(frozen=True)
class WatchdogLayout:
    namespace: str
    core_node_selector: Mapping[str, str]
    # A RayJob runs on a Capacity Block group: the watchdog may suspend RayJobs.
    rayjobs: bool = False


def rules(rayjobs: bool = False) -> list[dict[str, Any]]:
    """Exactly what ``watchdog_loop.sweep`` calls, nothing more."""
    return [
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["get", "list"]},
        {"apiGroups": ["bus.volcano.sh"], "resources": ["commands"], "verbs": ["create"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ] + ([{"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["get", "list", "patch"]}] if rayjobs else [])


def manifests(layout: WatchdogLayout) -> list[dict[str, Any]]:
    meta = {"name": NAME, "namespace": layout.namespace, "labels": LABELS}
    container = {
        "name": "watchdog",
        "image": versions.PYTHON_SLIM_IMAGE,
        "command": ["python", "-c", loop_source()],
        "env": [
            {"name": "WATCH_NAMESPACE", "value": layout.namespace},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            *([{"name": "WATCH_RAYJOBS", "value": "1"}] if layout.rayjobs else []),
        ],
        "resources": copy.deepcopy(system_pods.GANG_WATCHDOG_RESOURCES),
        "securityContext": pods.container_security_context(read_only_root=True),
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": rules(layout.rayjobs),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": layout.namespace}],
        },
        pods.network_policy(NAME, layout.namespace, LABELS, []),
        pods.system_deployment(
            meta,
            LABELS,
            layout.core_node_selector,
            # The one pod that calls the API: it needs its token.
            automountServiceAccountToken=True,
            serviceAccountName=NAME,
            containers=[container],
        ),
    ]


class GangWatchdog(pulumi.ComponentResource):
    def __init__(self, name: str, layout: WatchdogLayout, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:workloads:GangWatchdog", name, None, opts)
        declared: list[pulumi.Resource] = []
        for manifest in manifests(layout):
            declared.append(declare(manifest, self, declared[-1:]))
        self.ready = declared[-1]
        self.register_outputs({})
