"""How long each Trainium step may hold its nodes, and how long `pulumi up` waits for it.

One table for the jobs (their deadlines and pending timeouts are rendered from it), `pulumi
up`'s awaits (each a little longer than what it waits for, so the object's own deadline is what
ends a hang) and the cost report's bound per run (offline/report/cost.py). Pure: settings in, numbers out.

Where each deadline lives on the object, and what it counts:
- BERT (Volcano Job): an attempt still Pending after ``pendingTimeoutMinutes`` is ended by the gang
  watchdog (gang_watchdog.py; not Volcano's ``PodPending`` policy, which a controller restart
  re-arms on running pods: watchdog_loop.py); once running, the command runs under
  ``timeout``, whose exit code 124 ends the job (an ``exitCode`` policy, TerminateJob). Both
  count per attempt: Volcano's RestartJob after another failure starts a new attempt. ``maxRetry``
  is the number of attempts, not of retries: the first failure sets RetryCount to 1 (volcano
  v1.15.1 pkg/controllers/job/state/running.go l.35-39) and Restarting fails the job once
  RetryCount >= maxRetry (state/restarting.go l.35), so maxRetry 1 never retries. Each attempt
  can run ``timeout``'s ``--kill-after`` past its deadline (bert_launch.KILL_AFTER_SECONDS).
- Ray (RayJob): ``activeDeadlineSeconds`` from the RayJob's start, cluster start-up included, and
  ``preRunningDeadlineSeconds`` for reaching Running (kuberay v1.7.0
  ray-operator/controllers/ray/rayjob_controller.go checkActiveDeadlineAndUpdateStatusIfNeeded,
  checkPreRunningDeadlineAndUpdateStatusIfNeeded); the cluster goes ``ttlSecondsAfterFinished`` later.
  The train step's ``backoffLimit`` (``maxRetries``) retries a failed run on a new cluster, and each
  retry resets the start both deadlines count from (initRayJobStatusIfNeed l.916), so the step can
  hold its nodes ``maxRetries + 1`` deadlines; a run ended by its deadline is not retried.
- NxD Training and the all-reduce (MPIJob): ``runPolicy.activeDeadlineSeconds`` on the launcher Job
  (kubeflow/mpi-operator v0.8.2 pkg/controller/mpi_job_controller.go newLauncherJob), created with
  the workers (``launcherCreationPolicy: AtStartup``), so it counts from the MPIJob's creation and
  also ends a gang that is never scheduled; the gang watchdog suspends one not Running after
  ``pendingTimeoutMinutes``, sooner. A batch/v1 Job's deadline counts from its start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workloads.settings import RAY_JOB_NAMES

# `pulumi up` waits this much longer than the step can run, so the step's own deadline ends it.
AWAIT_MARGIN_MINUTES = 5


@dataclass(frozen=True)
class TrainiumStep:
    """One job that holds Trainium nodes, in the order the workload runs them."""

    workload: str  # the stack file's key, e.g. "bertPretraining"
    name: str  # the object's name
    node_group: str
    nodes: int
    hold_seconds: int  # the most it can hold its nodes, every attempt and start-up included
    why: str
    # How many times it may start on new nodes: each attempt may land on nodes launched for it, and
    # on a health-gated group each new node is burnt in first (infra/specs/burn_in_objects.py).
    attempts: int = 1
    # The workload setting that bounds each attempt, its value and its unit (``hold_seconds`` grows
    # by ``attempts`` x the unit per unit of it), and the other jobs whose spec it also sets: a
    # change of it replaces them all.
    deadline_key: str = ""
    deadline_value: int = 0
    deadline_unit_seconds: int = 60
    shared_with: tuple[str, ...] = ()


# coreutils `timeout --kill-after`: a command that ignores SIGTERM runs this much past its deadline
# (bert_launch.KILL_AFTER_SECONDS, kept here so this module stays free of the Pulumi program).
BERT_KILL_AFTER_MINUTES = 5


# A restarted BERT attempt may first wait for a node that went silent: its pod stays Terminating
# until the Node object is deleted, and Volcano creates the new gang only once no pod is left
# terminating (volcano v1.15.1 pkg/controllers/job/state/restarting.go). EKS node repair replaces
# a node whose Ready condition is False or Unknown after 30 minutes (EKS user guide, node-repair,
# "Ready ... 30m ... Replace"; infra/specs/node_health.py overrides only AcceleratedHardwareReady),
# and the replacement's instance termination deletes the Node; 5 minutes for that. The restart's
# pending bound is this on top of pendingTimeoutMinutes, which covers launching the new node.
SILENT_NODE_REPAIR_MINUTES = 30 + 5


def bert_restart_pending_minutes(pending: int) -> int:
    return pending + SILENT_NODE_REPAIR_MINUTES


def bert_attempt_minutes(pending: int, deadline: int) -> int:
    """One attempt: scheduling, the run's deadline, then `timeout`'s SIGKILL grace."""
    return pending + deadline + BERT_KILL_AFTER_MINUTES


# The precompile's maxRetry, fixed (bert.py): a change of the training's maxRetry must not change,
# and so replace and re-run, the precompile Job. One retry after a pod failure (a lost node).
BERT_PRECOMPILE_ATTEMPTS = 2


def bert_attempts(settings: Any, precompile: bool = False) -> int:
    """Volcano runs a Job at most ``maxRetry`` times in all (see the module's docstring)."""
    return BERT_PRECOMPILE_ATTEMPTS if precompile else settings.max_retry


def bert_await_minutes(settings: Any) -> int:
    """The precompile's wait: one attempt (pending, then the run's deadline) and the margin."""
    return (
        bert_attempt_minutes(settings.pending_timeout_minutes, settings.precompile_deadline_minutes)
        + AWAIT_MARGIN_MINUTES
    )


def ray_step_deadline_seconds(settings: Any, step: str) -> int:
    return settings.train_deadline_seconds if step == "train" else settings.step_deadline_minutes * 60


def ray_attempts(settings: Any, step: str) -> int:
    """The train step is retried ``maxRetries`` times (RayJob backoffLimit), each with a fresh deadline."""
    return settings.max_retries + 1 if step == "train" else 1


def ray_await_minutes(settings: Any, step: str) -> int:
    return ray_attempts(settings, step) * -(-ray_step_deadline_seconds(settings, step) // 60) + AWAIT_MARGIN_MINUTES


def nxd_deadline_minutes(settings: Any, compile_only: bool) -> int:
    return settings.compile_deadline_minutes if compile_only else settings.train_deadline_minutes


def nxd_await_minutes(settings: Any) -> int:
    return settings.compile_deadline_minutes + AWAIT_MARGIN_MINUTES


def trainium_steps(config: Any) -> list[TrainiumStep]:
    """Every enabled workload's Trainium steps, each bounded by its deadlines."""
    steps: list[TrainiumStep] = []
    if (bert := config.on("bert_pretraining")) is not None:
        runs = (
            [("bert-precompile", bert.precompile_deadline_minutes, "precompileDeadlineMinutes")]
            if bert.precompile
            else []
        )
        runs.append(("bert-train", bert.train_deadline_minutes, "trainDeadlineMinutes"))
        for name, deadline, key in runs:
            attempts = bert_attempts(bert, precompile=name == "bert-precompile")
            retry = f"maxRetry {bert.max_retry}" if name == "bert-train" else "the precompile's fixed maxRetry"
            restarts = attempts - 1
            minutes = (
                attempts * bert_attempt_minutes(bert.pending_timeout_minutes, deadline)
                + restarts * SILENT_NODE_REPAIR_MINUTES
            )
            steps.append(
                TrainiumStep(
                    "bertPretraining",
                    name,
                    bert.node_group,
                    bert.nodes,
                    minutes * 60,
                    f"{attempts} attempts ({retry}) x (pendingTimeoutMinutes "
                    f"{bert.pending_timeout_minutes} + {key} {deadline} + --kill-after {BERT_KILL_AFTER_MINUTES})"
                    f" + {restarts} x {SILENT_NODE_REPAIR_MINUTES} (a restart's wait for a silent node's repair)",
                    attempts,
                    key,
                    deadline,
                )
            )
    if (ray := config.on("ray_llama2")) is not None:
        for step in ray.steps:
            if step == "generate-data":
                continue  # on the head alone: no Trainium node
            key = "trainDeadlineSeconds" if step == "train" else "stepDeadlineMinutes"
            attempts = ray_attempts(ray, step)
            seconds = attempts * ray_step_deadline_seconds(ray, step) + ray.ttl_seconds_after_finished
            tries = f"{attempts} attempts (maxRetries {ray.max_retries}) x " if attempts > 1 else ""
            steps.append(
                TrainiumStep(
                    "rayLlama2",
                    RAY_JOB_NAMES[step],
                    ray.node_group,
                    ray.workers,
                    seconds,
                    f"{tries}{key} ({ray_step_deadline_seconds(ray, step)} s, start-up included) + ttlSecondsAfterFinished "
                    f"{ray.ttl_seconds_after_finished} s",
                    attempts,
                    key,
                    ray.train_deadline_seconds if step == "train" else ray.step_deadline_minutes,
                    1 if step == "train" else 60,
                    () if step == "train" else tuple(RAY_JOB_NAMES[o] for o in ray.steps if o not in (step, "train")),
                )
            )
    if (nxd := config.on("nxd_llama")) is not None:
        for name, on, compile_only, key in (
            ("llama2-compile", nxd.compile, True, "compileDeadlineMinutes"),
            ("llama2-train", nxd.train, False, "trainDeadlineMinutes"),
        ):
            if on:
                minutes = nxd_deadline_minutes(nxd, compile_only)
                steps.append(
                    TrainiumStep(
                        "nxdLlama",
                        name,
                        nxd.node_group,
                        nxd.nodes,
                        minutes * 60,
                        f"{key} ({minutes} min, scheduling and start-up included)",
                        deadline_key=key,
                        deadline_value=minutes,
                    )
                )
    if (check := config.on("cluster_check")) is not None:
        minutes = check.timeout_minutes
        # timeoutMinutes bounds every stage, the verdict Job included.
        stages = ("cluster-check-nodes", "cluster-check-allreduce", "cluster-check-verdict")
        steps.append(
            TrainiumStep(
                "clusterCheck",
                "cluster-check-nodes",
                check.node_group,
                check.nodes,
                minutes * 60,
                f"the per-node Job's timeoutMinutes ({minutes} min)",
                deadline_key="timeoutMinutes",
                deadline_value=minutes,
                shared_with=stages[1:],
            )
        )
        if check.nodes > 1:
            steps.append(
                TrainiumStep(
                    "clusterCheck",
                    "cluster-check-allreduce",
                    check.node_group,
                    check.nodes,
                    minutes * 60,
                    f"the all-reduce launcher's timeoutMinutes ({minutes} min)",
                    deadline_key="timeoutMinutes",
                    deadline_value=minutes,
                    shared_with=(stages[0], stages[2]),
                )
            )
    return steps
