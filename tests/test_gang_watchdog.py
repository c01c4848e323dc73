"""The gang watchdog (workloads/gang_watchdog.py, workloads/watchdog_loop.py): the pending bound of
every Volcano Job and MPIJob, which survives a restart of the Volcano controller."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from offline.plan.runner import PlanResult
from tests.node_groups import trainium_group
from workloads import bert, gang_watchdog
from workloads import watchdog_loop as loop

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def stamp(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def vcjob(phase: str, conditions: dict[str, float], bound: int | None = 2700) -> dict[str, Any]:
    annotations = {} if bound is None else {loop.ANNOTATION: str(bound)}
    return {
        "metadata": {
            "name": "bert-train",
            "namespace": "default",
            "uid": "u1",
            "creationTimestamp": stamp(T0),
            "annotations": annotations,
        },
        "status": {
            "state": {"phase": phase},
            "conditions": [{"status": s, "lastTransitionTime": stamp(t)} for s, t in conditions.items()],
        },
    }


def test_a_running_volcano_job_is_never_ended_however_long_after() -> None:
    # volcano v1.15.1 pkg/controllers/job/job_controller_handler.go addPod (l.142-200) sends
    # PodPendingEvent for a Running pod when the controller restarts, which would arm the
    # PodPending policy's TerminateJob 45 minutes later. The watchdog reads the job's phase instead: Running
    # stays Running whatever the controller re-lists.
    job = vcjob("Running", {"Pending": T0, "Running": T0 + 600})
    assert not loop.volcano_overdue(job, T0 + 10 * 86400)
    # ... and PodPending is not among the task's policies.
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
        "metadata": {
            "name": "llama2-compile",
            "namespace": "default",
            "creationTimestamp": stamp(T0),
            "annotations": {loop.ANNOTATION: "2700"},
        },
        "spec": {"runPolicy": {"suspend": True} if suspend else {}},
        "status": {"conditions": [{"type": t, "status": s} for t, s in conditions.items()]},
    }


def test_an_mpijob_that_never_runs_is_suspended_and_a_running_one_is_not() -> None:
    # kubeflow/mpi-operator v0.8.0 pkg/controller/podgroup.go (l.105-134) gives Volcano no schedule
    # timeout; suspend deletes the workers (mpi_job_controller.go l.711-724).
    assert loop.mpijob_overdue(mpijob({"Created": "True"}), T0 + 2701)
    assert not loop.mpijob_overdue(mpijob({"Created": "True"}), T0 + 2700)
    assert not loop.mpijob_overdue(mpijob({"Created": "True", "Running": "True"}), T0 + 10 * 86400)
    assert not loop.mpijob_overdue(mpijob({"Created": "True"}, suspend=True), T0 + 10 * 86400)


def test_a_sweep_terminates_volcano_jobs_by_command_and_suspends_mpijobs() -> None:
    calls: list[tuple[str, str, Any]] = []
    listed = {
        loop.VOLCANO_JOBS.format(ns="default"): [
            vcjob("Pending", {"Pending": T0}),
            {**vcjob("Running", {"Running": T0}), "metadata": {**vcjob("Running", {})["metadata"], "name": "ok"}},
        ],
        loop.MPIJOBS.format(ns="default"): [mpijob({"Created": "True"})],
    }

    def api(method: str, path: str, body: Any) -> dict[str, Any]:
        calls.append((method, path, body))
        return {"items": listed.get(path, [])} if method == "GET" else {}

    assert loop.sweep(api, "default", T0 + 3000) == [
        "Job/bert-train: PendingTimeout",
        "MPIJob/llama2-compile: PendingTimeout",
    ]
    (post,) = [c for c in calls if c[0] == "POST" and c[1].endswith("/commands")]
    # Each end is a Warning Event on the job, which `kubectl describe` lists.
    assert [
        (c[2]["involvedObject"]["kind"], c[2]["reason"]) for c in calls if c[1] == "/api/v1/namespaces/default/events"
    ] == [("Job", "PendingTimeout"), ("MPIJob", "PendingTimeout")]
    # bus.volcano.sh/v1alpha1 Command (volcano v1.15.1 installer/helm/chart/volcano/crd/bases/
    # bus.volcano.sh_commands.yaml: action, target); processNextCommand hands its action to the job.
    assert post[1] == "/apis/bus.volcano.sh/v1alpha1/namespaces/default/commands"
    assert (
        post[2]["action"] == "TerminateJob"
        and post[2]["target"]["name"] == "bert-train"
        and post[2]["target"]["uid"] == "u1"
    )
    (patch,) = [c for c in calls if c[0] == "PATCH"]
    assert patch[1].endswith("/mpijobs/llama2-compile") and patch[2] == {"spec": {"runPolicy": {"suspend": True}}}


def test_the_loop_runs_as_a_script_on_the_standard_library_alone() -> None:
    # What the pod runs is this file's text under `python -c`: it must compile without the project.
    source = gang_watchdog.loop_source()
    check = (
        "import sys; src = sys.stdin.read(); compile(src, 'watchdog', 'exec'); ns = {'__name__': 'x'}; exec(src, ns)"
    )
    assert subprocess.run([sys.executable, "-I", "-c", check], input=source, text=True).returncode == 0
    assert "from workloads" not in source and "import pulumi" not in source


def test_every_gang_carries_its_bound_and_the_watchdog_is_scoped(workloads_all: PlanResult) -> None:
    objects = {
        (r.inputs.get("kind"), r.inputs["metadata"]["name"]): r.inputs
        for r in workloads_all.registrations
        if "metadata" in r.inputs and isinstance(r.inputs["metadata"], dict) and "name" in r.inputs["metadata"]
    }
    gangs = {n for (k, n), o in objects.items() if k == "MPIJob" or (k == "Job" and "tasks" in o.get("spec", {}))}
    assert gangs == {"bert-precompile", "bert-train", "llama2-compile", "llama2-train", "cluster-check-allreduce"}
    assert {n: objects[(k, n)]["metadata"]["annotations"].get(loop.ANNOTATION) for (k, n) in objects if n in gangs} == {
        n: "2700" for n in gangs
    }
    rules = objects[("Role", gang_watchdog.NAME)]["rules"]
    assert {
        (g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    } == {
        ("batch.volcano.sh", "jobs", "get"),
        ("batch.volcano.sh", "jobs", "list"),
        ("bus.volcano.sh", "commands", "create"),
        ("kubeflow.org", "mpijobs", "get"),
        ("kubeflow.org", "mpijobs", "list"),
        ("kubeflow.org", "mpijobs", "patch"),
        ("", "events", "create"),
    }
    pod = objects[("Deployment", gang_watchdog.NAME)]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == gang_watchdog.NAME and pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert objects[("NetworkPolicy", gang_watchdog.NAME)]["spec"]["ingress"] == []


# --- Capacity Block stops ------------------------------------------------------------------------

END = "2026-12-15T11:30:00Z"  # offline/plan/fixtures.py: blocks end at 11:30 UTC
STOP = "2026-12-15T10:40:00Z"


def on_block(job: dict[str, Any], stop: str = STOP) -> dict[str, Any]:
    job["metadata"]["annotations"][loop.STOP_BY] = stop
    return job


def at(text: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_the_stop_by_time_is_the_block_end_less_the_scale_down_lead_and_a_margin() -> None:
    from workloads import capacity_windows

    # EKS scales a Capacity Block group to zero 40 min before the end (EKS user guide
    # ml/capacity-blocks-mng.adoc); the stop comes STOP_MARGIN (10 min) before that.
    assert capacity_windows.stop_by({"start": "2026-12-01T11:30:00Z", "end": END}) == STOP
    assert capacity_windows.stop_by(None) is None
    # The loop reads back what the workload stack writes.
    assert loop._time(STOP) == at(END) - 50 * 60
    block = {"start": "2026-12-01T11:30:00Z", "end": END}
    group = trainium_group(name="g", max_size=2, capacity_type="CAPACITY_BLOCK", capacity_block=block)
    assert gang_watchdog.stop_by(group) == {loop.STOP_BY: STOP}
    assert gang_watchdog.stop_by(trainium_group(name="g", max_size=2)) == {}


def test_a_running_volcano_job_on_a_block_is_aborted_at_its_stop_by_time_and_stays_resumable() -> None:
    # volcano v1.15.1 pkg/controllers/job/state/running.go: AbortJob -> KillJob(PodRetainPhaseSoft),
    # phase Aborting (every pod not Succeeded/Failed deleted); aborting.go -> Aborted; aborted.go: any
    # event but ResumeJob only kills again (no PodEvicted -> RestartJob from the stop's own deletions),
    # and ResumeJob -> Restarting. TerminateJob would be final.
    calls: list[tuple[str, str, Any]] = []
    jobs = [on_block(vcjob("Running", {"Running": T0})), on_block(vcjob("Aborted", {"Running": T0}))]

    def api(method: str, path: str, body: Any) -> dict[str, Any]:
        calls.append((method, path, body))
        return {"items": jobs if path.endswith("/jobs") else []} if method == "GET" else {}

    assert loop.sweep(api, "default", at(STOP) - 1) == []
    assert loop.sweep(api, "default", at(STOP)) == ["Job/bert-train: CapacityBlockEnding"]
    [command] = [c[2] for c in calls if c[1].endswith("/commands")]
    assert command["action"] == "AbortJob" and command["target"]["uid"] == "u1"
    [event] = [c[2] for c in calls if c[1].endswith("/events")]
    assert event["type"] == "Warning" and event["involvedObject"] == {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "bert-train",
        "namespace": "default",
        "uid": "u1",
    }
    assert STOP in event["message"] and loop.STOP_BY in event["message"]
    # A job without the annotation (not on a block) is never stopped.
    assert not loop.past_stop_by(vcjob("Running", {"Running": T0}), at(END) + 86400)
    assert not loop.past_stop_by(on_block(vcjob("Running", {}), "not a time"), at(END))


def test_an_mpijob_on_a_block_is_suspended_once_and_a_finished_one_is_left() -> None:
    # kubeflow/mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go l.711-724: suspend suspends
    # the launcher Job and deletes the workers; l.691-710: unsuspending recreates them.
    running = on_block(mpijob({"Created": "True", "Running": "True"}))
    assert loop.past_stop_by(running, at(STOP)) and loop.mpijob_live(running)
    assert not loop.mpijob_live(on_block(mpijob({"Running": "True"}, suspend=True)))
    assert not loop.mpijob_live(on_block(mpijob({"Succeeded": "True"})))
    patches = []

    def api(method: str, path: str, body: Any) -> dict[str, Any]:
        if method == "PATCH":
            patches.append((path, body))
        return {"items": [running] if path.endswith("/mpijobs") else []} if method == "GET" else {}

    assert loop.sweep(api, "default", at(STOP)) == ["MPIJob/llama2-compile: CapacityBlockEnding"]
    assert patches == [("/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs/llama2-compile", loop.SUSPEND)]


def rayjob(status: str, suspend: bool = False) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "llama2-pretraining-job",
            "namespace": "default",
            "uid": "r1",
            "annotations": {loop.STOP_BY: STOP},
        },
        "spec": {"suspend": suspend, "shutdownAfterJobFinishes": True},
        "status": {"jobDeploymentStatus": status},
    }


def test_a_rayjob_on_a_block_is_suspended_only_when_the_watchdog_may() -> None:
    # kuberay v1.7.0 ray-operator/controllers/ray/rayjob_controller.go updateStatusToSuspendingIfNeeded:
    # only Initializing or Running go to Suspending, which deletes the RayCluster and the submitter
    # Job, then Suspended; suspend false -> New, which creates both again. utils/validation.go
    # ValidateRayJobSpec: suspend needs shutdownAfterJobFinishes.
    assert loop.rayjob_live(rayjob("Running")) and loop.rayjob_live(rayjob("Initializing"))
    assert not loop.rayjob_live(rayjob("Complete")) and not loop.rayjob_live(rayjob("Running", suspend=True))
    calls: list[tuple[str, str, Any]] = []

    def api(method: str, path: str, body: Any) -> dict[str, Any]:
        calls.append((method, path, body))
        return {"items": [rayjob("Running")] if path.endswith("/rayjobs") else []} if method == "GET" else {}

    # Without WATCH_RAYJOBS the Role has no rayjobs rule: the loop must not even list them.
    assert loop.sweep(api, "default", at(STOP)) == [] and not any("rayjobs" in c[1] for c in calls)
    assert loop.sweep(api, "default", at(STOP), rayjobs=True) == ["RayJob/llama2-pretraining-job: CapacityBlockEnding"]
    assert (
        "PATCH",
        "/apis/ray.io/v1/namespaces/default/rayjobs/llama2-pretraining-job",
        {"spec": {"suspend": True}},
    ) in calls
    assert {
        "apiGroups": ["ray.io"],
        "resources": ["rayjobs"],
        "verbs": ["get", "list", "patch"],
    } in gang_watchdog.rules(True)
    assert not any("ray.io" in r["apiGroups"] for r in gang_watchdog.rules(False))


def test_every_job_on_a_block_group_carries_its_stop_by_time_and_none_elsewhere(dev: PlanResult) -> None:
    """The objects the workload stack declares (layouts.job_chains, what workloads/__main__.py
    submits), from the dev cluster's outputs with every accelerator group on a block."""
    import copy
    import json

    from infra import contract
    from offline.plan.runner import stack_config
    from tests.conftest import ALL_ON, WORKLOADS_DIR, all_on_cluster
    from workloads import layouts
    from workloads.settings import parse_workloads_config

    config = stack_config(WORKLOADS_DIR, "dev")
    config.update({f"trainium-workloads:{k}": json.dumps(v) for k, v in ALL_ON.items()})
    settings = parse_workloads_config({**config, "trainium-workloads:hfToken": "hf_x"})

    def stops(outputs: dict[str, Any]) -> dict[str, str | None]:
        chains = layouts.job_chains(settings, contract.parse_contract(outputs))
        return {
            o["metadata"]["name"]: o["metadata"].get("annotations", {}).get(loop.STOP_BY)
            for workload in chains.values()
            for chain in workload
            for o in chain
            if o["kind"] in ("MPIJob", "RayJob") or (o["kind"] == "Job" and "tasks" in o["spec"])
        }

    outputs = copy.deepcopy(dev.outputs)
    all_on_cluster(outputs)
    on_demand = stops(outputs)
    from workloads.ray_llama2 import JOB_NAMES

    assert {"bert-train", "llama2-train", "cluster-check-allreduce", JOB_NAMES["train"]} <= set(on_demand)
    assert set(on_demand.values()) == {None}
    for group in outputs["acceleratorNodeGroups"]:
        group["capacityBlock"] = {"start": "2026-12-01T11:30:00Z", "end": END}
    on_block_ = stops(outputs)
    assert set(on_block_) == set(on_demand) and set(on_block_.values()) == {STOP}
    # RayJobs are stopped only by a watchdog allowed to patch them: its env and its Role say so together.
    manifests = gang_watchdog.manifests(gang_watchdog.WatchdogLayout("default", {}, rayjobs=True))
    [deployment] = [m for m in manifests if m["kind"] == "Deployment"]
    assert {"name": "WATCH_RAYJOBS", "value": "1"} in deployment["spec"]["template"]["spec"]["containers"][0]["env"]


def test_a_restart_may_wait_for_a_silent_node_to_be_repaired() -> None:
    """volcano v1.15.1 pkg/controllers/job/state/restarting.go: a restarting job turns Pending only
    once total - Terminating >= minAvailable (every pod, for BERT), and a pod on a node whose kubelet
    went silent stays Terminating until the Node object goes, which EKS node repair does after
    30 minutes of Ready False/Unknown (EKS user guide, node-repair). The restarted attempt's bound
    leaves that room on top of pendingTimeoutMinutes; the first attempt keeps the shorter one."""
    from workloads import deadlines

    annotations = gang_watchdog.pending_bound(45, deadlines.bert_restart_pending_minutes(45))
    restart_bound = int(annotations[loop.RESTART_ANNOTATION])
    assert restart_bound == (45 + 30 + 5) * 60 and int(annotations[loop.ANNOTATION]) == 45 * 60
    restarted = vcjob("Pending", {"Running": T0 + 600, "Restarting": T0 + 5000, "Pending": T0 + 5000 + 31 * 60})
    restarted["metadata"]["annotations"].update(annotations)
    # Node repair (30 min) and a new node's launch (~15 min) fit; the plain 45-minute bound did not.
    assert not loop.volcano_overdue(restarted, T0 + 5000 + 46 * 60)
    assert loop.volcano_overdue(restarted, T0 + 5000 + restart_bound + 1)
    assert loop.RESTART_ANNOTATION in loop.pending_message(restarted)
    first = vcjob("Pending", {"Pending": T0})
    first["metadata"]["annotations"].update(annotations)
    assert loop.volcano_overdue(first, T0 + 45 * 60 + 1) and loop.ANNOTATION + ")" in loop.pending_message(first)
