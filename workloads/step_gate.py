"""Step gates: how `pulumi up` waits for a job that the next one needs, and fails as soon as it fails.

A gate is a small batch/v1 Job next to the awaited step (a Volcano Job, RayJob or MPIJob) that
polls it and exits non-zero with the step's reason once it has failed or been stopped
(``gate_loop.py`` says what counts as failed, from each controller's source). `pulumi up` awaits
the gate with pulumi-kubernetes' own Job awaiter, which fails at once on a Failed Job and shows the
pod's termination message; the step itself is not awaited (`pulumi.com/skipAwait`), since a
`pulumi.com/waitFor` condition can only wait for success and, after a failure, waits out its whole
timeout on this `up` and again on every later one.

In the chain (``kube.declare_in_order``) a gate comes right after its step: it depends on the step
and carries the step's UID in its pod template, so a replaced step replaces its gate; the next step
depends on the gate but follows the step's UID, not the gate's, so replacing a gate never replaces
a job. A gate is replaced whenever it changes and after it failed (replaceOnChanges ``*``), so the
next `up` polls the step as it is by then.

The gate's pod runs the python image the gang watchdog runs (standard library only) on the system
nodes, with a token whose Role may only `get` the workload's gated steps, by name. `pulumi up` waits
for it the step's await bound (workloads/deadlines.py: the step's own bound and a margin, so the
step's deadline ends a hang first); the Job's ``activeDeadlineSeconds`` is a minute shorter, so its
failure, not `up`'s timeout, is what `up` reports, and the loop gives up a minute before that, so
that it can say what it last saw.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from infra.facts import versions
from infra.specs import system_pods
from workloads import gate_loop, pods

# The label that marks a gate and names the step it waits for.
GATE_FOR = "trainium.workloads/gate-for"
# Replace the gate on any change and after a failed await (see the module's docstring).
REPLACE_ON = ("*",)
POLL_SECONDS = 20
# The Job's deadline comes this much before `up` stops waiting, and the loop's verdict this much
# before the Job's deadline (and its SIGKILL).
VERDICT_LEAD_SECONDS = 60
TERMINATION_LOG = "/dev/termination-log"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

# The API group, version and resource of each kind a gate can wait for.
RESOURCES = {
    ("batch.volcano.sh/v1alpha1", "Job"): "jobs",
    ("ray.io/v1", "RayJob"): "rayjobs",
    ("kubeflow.org/v2beta1", "MPIJob"): "mpijobs",
}


def is_gate(manifest: Mapping[str, Any]) -> bool:
    return GATE_FOR in ((manifest.get("metadata") or {}).get("labels") or {})


def name(step: Mapping[str, Any]) -> str:
    return f"{step['metadata']['name']}-gate"


def account(workload: str) -> str:
    return f"{workload}-gate"


def loop_source() -> str:
    return Path(gate_loop.__file__).read_text()


def _resource(step: Mapping[str, Any]) -> tuple[str, str]:
    api_version, kind = step["apiVersion"], step["kind"]
    if (api_version, kind) not in RESOURCES:
        raise ValueError(f"no gate for {api_version} {kind}")
    return api_version, RESOURCES[(api_version, kind)]


def api_path(step: Mapping[str, Any]) -> str:
    api_version, resource = _resource(step)
    meta = step["metadata"]
    return f"/apis/{api_version}/namespaces/{meta['namespace']}/{resource}/{meta['name']}"


def gated(step: dict[str, Any], workload: str, await_minutes: int, core_node_selector: Mapping[str, str]) -> list:
    """``step``, not awaited, then the gate `pulumi up` awaits instead, for at most ``await_minutes``."""
    meta = step["metadata"]
    unawaited = {
        **step,
        "metadata": {
            **meta,
            "annotations": {
                **{k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith("pulumi.com/")},
                **pods.skip_await(),
            },
        },
    }
    return [unawaited, gate_job(step, workload, await_minutes, core_node_selector)]


def gate_job(
    step: Mapping[str, Any], workload: str, await_minutes: int, core_node_selector: Mapping[str, str]
) -> dict[str, Any]:
    meta = step["metadata"]
    deadline = await_minutes * 60 - VERDICT_LEAD_SECONDS
    env = {
        "GATE_KIND": step["kind"],
        "GATE_NAMESPACE": meta["namespace"],
        "GATE_NAME": meta["name"],
        "GATE_PATH": api_path(step),
        "GATE_DEADLINE_SECONDS": str(deadline - VERDICT_LEAD_SECONDS),
        "GATE_POLL_SECONDS": str(POLL_SECONDS),
        "GATE_TERMINATION_LOG": TERMINATION_LOG,
        "SERVICE_ACCOUNT_DIR": SERVICE_ACCOUNT_DIR,
        "PYTHONUNBUFFERED": "1",
    }
    container = {
        "name": "gate",
        "image": versions.PYTHON_SLIM_IMAGE,
        "command": ["python", "-c", loop_source()],
        "env": pods.env_list(env),
        "resources": copy.deepcopy(system_pods.STEP_GATE_RESOURCES),
        "securityContext": pods.container_security_context(read_only_root=True),
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name(step),
            "namespace": meta["namespace"],
            "labels": {GATE_FOR: meta["name"]},
            "annotations": pods.await_timeout(await_minutes),
        },
        "spec": {
            # One try: its verdict is the step's, and a retry would only read the same status.
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline,
            "template": {
                # The workload's label: its NetworkPolicy admits only the workload's own pods.
                "metadata": {"labels": {**pods.workload_labels(workload), GATE_FOR: meta["name"]}},
                "spec": {
                    **pods.pod_defaults(run_as_user=pods.UNPRIVILEGED_UID),
                    # The one thing it does is read the step: it needs its token.
                    "automountServiceAccountToken": True,
                    "serviceAccountName": account(workload),
                    "nodeSelector": dict(core_node_selector),
                    "restartPolicy": "Never",
                    "containers": [container],
                },
            },
        },
    }


def access(workload: str, namespace: str, manifests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ServiceAccount the workload's gates run as, and a Role that may only `get` the steps they
    wait for, by name; nothing when the workload has no gate."""
    gates = [m for m in manifests if is_gate(m)]
    if not gates:
        return []
    steps = {m["metadata"]["name"]: m for m in manifests if not is_gate(m)}
    waited = [steps[g["metadata"]["labels"][GATE_FOR]] for g in gates]
    rules = []
    for api_version, resource in sorted({_resource(s) for s in waited}):
        names = sorted(s["metadata"]["name"] for s in waited if _resource(s) == (api_version, resource))
        group = api_version.split("/")[0]
        rules.append({"apiGroups": [group], "resources": [resource], "resourceNames": names, "verbs": ["get"]})
    meta = {"name": account(workload), "namespace": namespace, "labels": pods.workload_labels(workload)}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account(workload)},
            "subjects": [{"kind": "ServiceAccount", "name": account(workload), "namespace": namespace}],
        },
    ]
