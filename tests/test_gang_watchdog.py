"""The gang watchdog (workloads/gang_watchdog.py, workloads/watchdog_loop.py): the pending bound of
every Volcano Job and MPIJob, which survives a restart of the Volcano controller."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Optional

from offline.runner import PlanResult
from workloads import bert, gang_watchdog, watchdog_loop as loop

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def stamp(t: float) -> str:
    import datetime as dt
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def vcjob(phase: str, conditions: dict[str, float], bound: Optional[int] = 2700) -> dict[str, Any]:
    annotations = {} if bound is None else {loop.ANNOTATION: str(bound)}
    return {
        "metadata": {"name": "bert-train", "namespace": "default", "uid": "u1", "creationTimestamp": stamp(T0),
                     "annotations": annotations},
        "status": {"state": {"phase": phase},
                   "conditions": [{"status": s, "lastTransitionTime": stamp(t)} for s, t in conditions.items()]},
    }


def test_a_running_volcano_job_is_never_ended_however_long_after() -> None:
    # B1: volcano v1.15.1 pkg/controllers/job/job_controller_handler.go addPod (l.142-200) sends
    # PodPendingEvent for a Running pod when the controller restarts, which armed the PodPending
    # policy's TerminateJob 45 minutes later. The watchdog reads the job's phase instead: Running
    # stays Running whatever the controller re-lists.
    job = vcjob("Running", {"Pending": T0, "Running": T0 + 600})
    assert not loop.volcano_overdue(job, T0 + 10 * 86400)
    # ... and PodPending is no longer among the task's policies.
    assert all(p.get("event") != "PodPending" for p in bert.task_policies())


def test_a_volcano_job_pending_past_its_bound_is_terminated() -> None:
    job = vcjob("Pending", {"Pending": T0})
    assert not loop.volcano_overdue(job, T0 + 2700)
    assert loop.volcano_overdue(job, T0 + 2701)
    assert not loop.volcano_overdue(vcjob("Pending", {"Pending": T0}, bound=None), T0 + 10 * 86400)


def test_a_restarted_attempt_gets_its_own_bound() -> None:
    # volcano v1.15.1 job_controller_actions.go killJob l.231-236 stamps a Restarting condition, and
    # appendJobCondition (l.1072-1080) keeps the latest of each phase: the new attempt counts from it,
    # and its earlier Running (of the failed attempt) does not count for it.
    restarted = vcjob("Pending", {"Running": T0 + 600, "Restarting": T0 + 5000, "Pending": T0 + 5010})
    assert not loop.volcano_overdue(restarted, T0 + 5000 + 2700)
    assert loop.volcano_overdue(restarted, T0 + 5000 + 2701)


def mpijob(conditions: dict[str, str], suspend: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": "llama2-compile", "namespace": "default", "creationTimestamp": stamp(T0),
                     "annotations": {loop.ANNOTATION: "2700"}},
        "spec": {"runPolicy": {"suspend": True} if suspend else {}},
        "status": {"conditions": [{"type": t, "status": s} for t, s in conditions.items()]},
    }


def test_an_mpijob_that_never_runs_is_suspended_and_a_running_one_is_not() -> None:
    # B5: kubeflow/mpi-operator v0.8.0 pkg/controller/podgroup.go (l.105-134) gives Volcano no schedule
    # timeout; suspend deletes the workers (mpi_job_controller.go l.711-724).
    assert loop.mpijob_overdue(mpijob({"Created": "True"}), T0 + 2701)
    assert not loop.mpijob_overdue(mpijob({"Created": "True"}), T0 + 2700)
    assert not loop.mpijob_overdue(mpijob({"Created": "True", "Running": "True"}), T0 + 10 * 86400)
    assert not loop.mpijob_overdue(mpijob({"Created": "True"}, suspend=True), T0 + 10 * 86400)


def test_a_sweep_terminates_volcano_jobs_by_command_and_suspends_mpijobs() -> None:
    calls: list[tuple[str, str, Any]] = []
    listed = {loop.VOLCANO_JOBS.format(ns="default"): [vcjob("Pending", {"Pending": T0}), {**vcjob("Running", {"Running": T0}),
                                                                                           "metadata": {**vcjob("Running", {})["metadata"], "name": "ok"}}],
              loop.MPIJOBS.format(ns="default"): [mpijob({"Created": "True"})]}

    def api(method: str, path: str, body: Any) -> dict[str, Any]:
        calls.append((method, path, body))
        return {"items": listed.get(path, [])} if method == "GET" else {}

    assert loop.sweep(api, "default", T0 + 3000) == ["Job/bert-train", "MPIJob/llama2-compile"]
    (post,) = [c for c in calls if c[0] == "POST"]
    # bus.volcano.sh/v1alpha1 Command (volcano v1.15.1 installer/helm/chart/volcano/crd/bases/
    # bus.volcano.sh_commands.yaml: action, target); processNextCommand hands its action to the job.
    assert post[1] == "/apis/bus.volcano.sh/v1alpha1/namespaces/default/commands"
    assert post[2]["action"] == "TerminateJob" and post[2]["target"]["name"] == "bert-train" and post[2]["target"]["uid"] == "u1"
    (patch,) = [c for c in calls if c[0] == "PATCH"]
    assert patch[1].endswith("/mpijobs/llama2-compile") and patch[2] == {"spec": {"runPolicy": {"suspend": True}}}


def test_the_loop_runs_as_a_script_on_the_standard_library_alone() -> None:
    # What the pod runs is this file's text under `python -c`: it must compile without the project.
    source = gang_watchdog.loop_source()
    check = "import sys; src = sys.stdin.read(); compile(src, 'watchdog', 'exec'); ns = {'__name__': 'x'}; exec(src, ns)"
    assert subprocess.run([sys.executable, "-I", "-c", check], input=source, text=True).returncode == 0
    assert "from workloads" not in source and "import pulumi" not in source


def test_every_gang_carries_its_bound_and_the_watchdog_is_scoped(workloads_all: PlanResult) -> None:
    objects = {(r.inputs.get("kind"), r.inputs["metadata"]["name"]): r.inputs for r in workloads_all.registrations
               if "metadata" in r.inputs and isinstance(r.inputs["metadata"], dict) and "name" in r.inputs["metadata"]}
    gangs = {n for (k, n), o in objects.items() if k == "MPIJob" or (k == "Job" and "tasks" in o.get("spec", {}))}
    assert gangs == {"bert-precompile", "bert-train", "llama2-compile", "llama2-train", "cluster-check-allreduce"}
    assert {n: objects[(k, n)]["metadata"]["annotations"].get(loop.ANNOTATION) for (k, n) in objects if n in gangs} == {
        n: "2700" for n in gangs}
    rules = objects[("Role", gang_watchdog.NAME)]["rules"]
    assert {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]} == {
        ("batch.volcano.sh", "jobs", "get"), ("batch.volcano.sh", "jobs", "list"), ("bus.volcano.sh", "commands", "create"),
        ("kubeflow.org", "mpijobs", "get"), ("kubeflow.org", "mpijobs", "list"), ("kubeflow.org", "mpijobs", "patch")}
    pod = objects[("Deployment", gang_watchdog.NAME)]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == gang_watchdog.NAME and pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert objects[("NetworkPolicy", gang_watchdog.NAME)]["spec"]["ingress"] == []
