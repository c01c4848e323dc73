"""The gang watchdog's loop: ends a Volcano Job or MPIJob whose gang is not running within its
pending bound. Standard library only: this file's text is what the watchdog pod runs
(``python -c``, see ``gang_watchdog.py``), and the tests import the same functions.

Why not Volcano's own ``PodPending`` policy: in v1.15.1 the job controller's ``addPod``
(pkg/controllers/job/job_controller_handler.go l.142-200) sends ``PodPendingEvent`` for every pod
it lists, whatever its phase, so after any restart of the controller every pod of a running job
arms the delayed TerminateJob again (job_controller.go processNextReq, AddDelayActionForJob
l.461-509); only a later non-Pending event of that pod cancels it (CleanPodDelayActionsIfNeed
l.415-452), and updatePod sends PodRunningEvent only on a change of phase, which a pod already
Running never makes. A healthy run was ended ``pendingTimeoutMinutes`` after the restart.

This loop keeps no state: it reads the bound from the object's annotation and the attempt's start
from the object's status, so a restart of the watchdog (or of Volcano) changes nothing.

- Volcano Job (batch.volcano.sh/v1alpha1): acted on only while ``status.state.phase`` is Pending.
  The attempt starts at the job's creation or at its latest ``Restarting`` condition (volcano
  v1.15.1 job_controller_actions.go killJob l.231-236 stamps a condition per phase change, and
  appendJobCondition l.1072-1080 keeps the latest of each phase); an attempt that reached Running
  after it began is left alone. A restarted attempt gets ``RESTART_ANNOTATION``'s bound when the job
  carries one (volcano_bound: a restart may first wait for a silent node's repair). Ended by a bus.volcano.sh/v1alpha1 Command ``TerminateJob``
  (job_controller_handler.go processNextCommand l.419-448; job_controller_util.go applyPolicies
  l.194-197 takes a command's action as it is), the action the PodPending policy took.
- MPIJob (kubeflow.org/v2beta1): acted on while it has no Running, Succeeded or Failed condition and
  is not suspended, from its creation; the operator sets Running only once the launcher and every
  worker run (mpi_job_controller.go updateMPIJobStatus l.1163-1165). Ended by ``runPolicy.suspend: true``: kubeflow/mpi-operator
  v0.8.0 pkg/controller/mpi_job_controller.go l.711-724 suspends the launcher Job and deletes the
  workers, so the gang's pods leave the queue. The MPI operator gives Volcano no schedule timeout
  (pkg/controller/podgroup.go l.105-134), so nothing else ends a gang that never schedules.

A job on a Capacity Block group also carries ``STOP_BY`` (capacity_windows.stop_by: the block's end
less EKS's 40-minute scale-down lead and a margin). From then on the watchdog stops it, whatever
its phase, so it ends by our hand and not by the drain or EC2's reclaim, and stays resumable:

- Volcano Job: a Command ``AbortJob`` (not TerminateJob): volcano v1.15.1
  pkg/controllers/job/state/running.go and pending.go take it to Aborting with
  ``KillJob(PodRetainPhaseSoft)``, which deletes every pod not Succeeded or Failed; aborting.go then
  Aborted, where every event but ``ResumeJob`` only kills again (aborted.go), so a pod deleted by
  the stop does not fire the job's PodEvicted -> RestartJob policy; ``ResumeJob`` (``vcctl job
  resume``) takes it to Restarting (and counts one retry, ``status.retryCount++``).
- MPIJob: ``runPolicy.suspend: true`` as above; unsuspending it recreates the workers and the
  launcher Job (mpi_job_controller.go l.691-710).
- RayJob (ray.io/v1, only when ``WATCH_RAYJOBS`` is set): ``spec.suspend: true``. kuberay v1.7.0
  ray-operator/controllers/ray/rayjob_controller.go updateStatusToSuspendingIfNeeded takes only an
  Initializing or Running job to Suspending, which deletes its RayCluster and submitter Job and
  becomes Suspended; ``suspend: false`` turns it New, which creates both again. KubeRay sends no
  SIGTERM-first stop (the TODO there), and validation.go ValidateRayJobSpec requires
  ``shutdownAfterJobFinishes`` for a suspend, which ray_llama2.ray_job sets.

No training script checkpoints on SIGTERM (docs/resilience.md), so a stop keeps every checkpoint
completed before it and loses the steps since; every restart resumes from the newest complete one.
Each stop (and each pending-bound end) is recorded as a Warning Event on the job, which
``kubectl describe`` shows.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

ANNOTATION = "trainium.workloads/pending-timeout-seconds"
# A restarted Volcano attempt's bound, counted from its Restarting condition (ANNOTATION when absent).
RESTART_ANNOTATION = "trainium.workloads/restart-pending-timeout-seconds"
STOP_BY = "trainium.workloads/stop-by"
VOLCANO_JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
VOLCANO_COMMANDS = "/apis/bus.volcano.sh/v1alpha1/namespaces/{ns}/commands"
MPIJOBS = "/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs"
RAYJOBS = "/apis/ray.io/v1/namespaces/{ns}/rayjobs"
EVENTS = "/api/v1/namespaces/{ns}/events"
# Volcano phases a stop still has something to end in (v1.15.1 pkg/apis batch JobPhase).
VOLCANO_LIVE = ("Pending", "Running", "Restarting")
# KubeRay v1.7.0 suspends only these (rayjob_controller.go updateStatusToSuspendingIfNeeded).
RAY_SUSPENDABLE = ("Initializing", "Running")
POLL_SECONDS = 60


def _time(value: str | None) -> float | None:
    if not value:
        return None
    return _dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.UTC).timestamp()


def _bound(obj: dict[str, Any], key: str = ANNOTATION) -> int | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    return int(value) if value and value.isdigit() else None


def _restarted(job: dict[str, Any]) -> bool:
    return any(c.get("status") == "Restarting" for c in (job.get("status") or {}).get("conditions") or [])


def volcano_bound(job: dict[str, Any]) -> int | None:
    """The current attempt's bound: a restart's own when the job has one. A restart waits in
    Restarting until no pod of the gang is left terminating (volcano v1.15.1
    pkg/controllers/job/state/restarting.go restartingUpdateStatus: Pending once total -
    Terminating >= minAvailable, and minAvailable is every pod), and a pod on a node that went
    silent stays Terminating until its Node object is deleted (by node repair's replacement)."""
    return (_bound(job, RESTART_ANNOTATION) if _restarted(job) else None) or _bound(job)


def _annotation(obj: dict[str, Any], key: str) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(key)


def past_stop_by(obj: dict[str, Any], now: float) -> bool:
    """True once the job's ``STOP_BY`` time (its Capacity Block's) has come."""
    try:
        when = _time(_annotation(obj, STOP_BY))
    except ValueError:  # not a time we wrote: leave the job alone rather than fail the pass
        return False
    return when is not None and now >= when


def volcano_overdue(job: dict[str, Any], now: float) -> bool:
    """True when the job's current attempt has been Pending longer than its bound."""
    bound = volcano_bound(job)
    status = job.get("status") or {}
    if bound is None or (status.get("state") or {}).get("phase", "Pending") != "Pending":
        return False
    seen = {c.get("status"): _time(c.get("lastTransitionTime")) for c in status.get("conditions") or []}
    start = max(t for t in (_time(job["metadata"].get("creationTimestamp")), seen.get("Restarting")) if t is not None)
    running = seen.get("Running")
    if running is not None and running >= start:
        return False
    return now - start > bound


def mpijob_overdue(job: dict[str, Any], now: float) -> bool:
    """True when the MPIJob's gang has not run within its bound of its creation."""
    bound = _bound(job)
    if bound is None or ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
        return False
    conditions = (job.get("status") or {}).get("conditions") or []
    if any(c.get("type") in ("Running", "Succeeded", "Failed") and c.get("status") == "True" for c in conditions):
        return False
    created = _time(job["metadata"]["creationTimestamp"])
    return created is not None and now - created > bound


def command(job: dict[str, Any], action: str, reason: str, message: str) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": f"{meta['name']}-{reason.lower()}-", "namespace": meta["namespace"]},
        "action": action,
        "reason": reason,
        "message": message,
        "target": {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        },
    }


def pending_message(job: dict[str, Any]) -> str:
    key = RESTART_ANNOTATION if _restarted(job) and _bound(job, RESTART_ANNOTATION) else ANNOTATION
    return f"the gang did not run within {_bound(job, key)} s ({key})"


def stop_message(job: dict[str, Any]) -> str:
    return (
        f"its nodes' Capacity Block is reclaimed soon: stopped at {_annotation(job, STOP_BY)} ({STOP_BY}); "
        "every checkpoint completed is kept and the next run resumes from the newest"
    )


def terminate_command(job: dict[str, Any]) -> dict[str, Any]:
    return command(job, "TerminateJob", "PendingTimeout", pending_message(job))


def abort_command(job: dict[str, Any]) -> dict[str, Any]:
    return command(job, "AbortJob", "CapacityBlockEnding", stop_message(job))


def event(job: dict[str, Any], kind: str, api_version: str, reason: str, message: str, now: float) -> dict[str, Any]:
    """A Warning Event on the job: ``kubectl describe`` lists it under the job (matched by uid)."""
    meta = job["metadata"]
    stamp = _dt.datetime.fromtimestamp(now, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": api_version,
            "kind": kind,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        },
        "type": "Warning",
        "reason": reason,
        "message": message,
        "source": {"component": "gang-watchdog"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def mpijob_live(job: dict[str, Any]) -> bool:
    if ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
        return False
    conditions = (job.get("status") or {}).get("conditions") or []
    return not any(c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions)


def rayjob_live(job: dict[str, Any]) -> bool:
    return (
        not (job.get("spec") or {}).get("suspend")
        and (job.get("status") or {}).get("jobDeploymentStatus") in RAY_SUSPENDABLE
    )


SUSPEND = {"spec": {"runPolicy": {"suspend": True}}}
RAY_SUSPEND = {"spec": {"suspend": True}}

Api = Callable[[str, str, dict[str, Any] | None], dict[str, Any]]


def sweep(api: Api, namespace: str, now: float, rayjobs: bool = False) -> list[str]:
    """One pass: end every overdue gang and stop every job past its stop-by time in ``namespace``;
    returns what it ended and why. ``rayjobs``: RayJobs too (the Role allows it only then)."""
    ended = []

    def end(job: dict[str, Any], kind: str, api_version: str, reason: str, message: str) -> None:
        api("POST", EVENTS.format(ns=namespace), event(job, kind, api_version, reason, message, now))
        ended.append(f"{kind}/{job['metadata']['name']}: {reason}")

    for job in api("GET", VOLCANO_JOBS.format(ns=namespace), None).get("items", []):
        phase = ((job.get("status") or {}).get("state") or {}).get("phase", "Pending")
        if volcano_overdue(job, now):
            api("POST", VOLCANO_COMMANDS.format(ns=namespace), terminate_command(job))
            end(job, "Job", "batch.volcano.sh/v1alpha1", "PendingTimeout", pending_message(job))
        elif past_stop_by(job, now) and phase in VOLCANO_LIVE:
            api("POST", VOLCANO_COMMANDS.format(ns=namespace), abort_command(job))
            end(job, "Job", "batch.volcano.sh/v1alpha1", "CapacityBlockEnding", stop_message(job))
    for job in api("GET", MPIJOBS.format(ns=namespace), None).get("items", []):
        overdue, stop = mpijob_overdue(job, now), past_stop_by(job, now) and mpijob_live(job)
        if overdue or stop:
            api("PATCH", f"{MPIJOBS.format(ns=namespace)}/{job['metadata']['name']}", SUSPEND)
            reason, message = (
                ("PendingTimeout", pending_message(job)) if overdue else ("CapacityBlockEnding", stop_message(job))
            )
            end(job, "MPIJob", "kubeflow.org/v2beta1", reason, message)
    if rayjobs:
        for job in api("GET", RAYJOBS.format(ns=namespace), None).get("items", []):
            if past_stop_by(job, now) and rayjob_live(job):
                api("PATCH", f"{RAYJOBS.format(ns=namespace)}/{job['metadata']['name']}", RAY_SUSPEND)
                end(job, "RayJob", "ray.io/v1", "CapacityBlockEnding", stop_message(job))
    return ended


def in_cluster_api() -> Api:  # pragma: no cover - runs in the pod
    account = "/var/run/secrets/kubernetes.io/serviceaccount"
    context = ssl.create_default_context(cafile=f"{account}/ca.crt")
    server = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"

    def call(method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        with open(f"{account}/token") as f:
            token = f.read().strip()
        kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
        request = urllib.request.Request(
            server + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": kind},
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            if error.code == 404 and method == "GET":  # that CRD is not installed: nothing to watch
                return {}
            raise

    return call


def main() -> None:  # pragma: no cover - runs in the pod
    namespace, api = os.environ["WATCH_NAMESPACE"], in_cluster_api()
    rayjobs = os.environ.get("WATCH_RAYJOBS") == "1"
    while True:
        try:
            for ended in sweep(api, namespace, time.time(), rayjobs):
                print(f"ended {ended}", flush=True)
        except Exception as error:  # a failed pass is retried on the next
            print(f"sweep failed: {error!r}", file=sys.stderr, flush=True)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":  # pragma: no cover
    main()
