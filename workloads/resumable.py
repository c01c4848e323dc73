"""What the training jobs declare to resume and to be ended when hung: the run directory, the
environment that carries ``resilience.py`` into the pods, the shell around the training command,
and the liveness probe on the heartbeat. Pure: settings in, Kubernetes API dicts and strings out.

Why a liveness probe and not the gang watchdog: the kubelet ends the hung container itself, and
each controller already turns a dead container into the bounded whole-gang restart
(docs/resilience.md walks through each):
- Volcano Job (BERT, pods ``restartPolicy: Never``): the pod goes Failed, the ``PodFailed ->
  RestartJob`` policy restarts every task (volcano v1.15.1 job_controller_util.go applyPolicies),
  at most ``maxRetry`` attempts (state/running.go l.35-39, state/restarting.go l.35).
- MPIJob (NxD Training, workers ``restartPolicy: OnFailure``): the worker container restarts in place, the
  launcher's mpirun loses that rank and fails, and the launcher Job starts a new launcher pod
  (``restartPolicy: Never``) that reruns mpirun on every worker, at most ``runPolicy.backoffLimit``
  times (kubeflow/mpi-operator v0.8.0 mpi_job_controller.go newLauncherJob l.1542-1543, the same in
  v0.8.2, which also sets ``podReplacementPolicy: Failed`` there; the Job
  fails once ``failed > backoffLimit``). Workers must not be ``Never``: the operator never recreates
  a worker pod that exists, Failed or not (getOrCreateWorker l.1010-1024). Their containers outlive
  attempts, so each attempt announces itself (``ATTEMPT_MARKER``) and the probe counts per attempt.
- RayJob (Ray Train): the worker container dies, Ray Train's worker group fails, the job ends FAILED
  and KubeRay retries it on a new RayCluster while ``failed < backoffLimit + 1``
  (ray-project/kuberay v1.7.0 rayjob_controller.go checkBackoffLimitAndUpdateStatusIfNeeded
  l.518-557); a user livenessProbe is kept (common/pod.go initLivenessAndReadinessProbe l.775).
The kubelet records the probe's message in the pod's ``Unhealthy`` event (``kubectl describe pod``).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from workloads import resilience

ENV_NAME = "RESILIENCE_PY"
HEARTBEAT = "heartbeat"
# The probe's memory lives in the container: a restarted container starts counting afresh.
PROBE_STATE = "/tmp/heartbeat-probe.json"
# Where an attempt that runs in a long-lived container writes its process id when it starts.
ATTEMPT_MARKER = "/tmp/training-attempt"
# KubeRay v1.7.0's health check of a Ray node for the pinned Ray (2.53.0 and later: HTTP GET
# utils/constant.go RayNodeHealthPath; see resilience.unhealthy), at the dashboard agent's default
# port (rayStartParams sets no dashboard-agent-listen-port). On a worker it is the raylet's health
# (Ray 2.55.1 dashboard/modules/reporter/healthz_agent.py unified_health: 503 unless the raylet answers).
RAY_NODE_HEALTH_URL = "http://localhost:52365/api/healthz"
PROBE_PERIOD_SECONDS = 60
# Three failed reads in a row (an FSx hiccup is not a hang); a stall itself fails every read.
PROBE_FAILURES = 3


def source() -> str:
    return Path(resilience.__file__).read_text()


def env() -> dict[str, str]:
    """The variable the shell and the probe run ``resilience.py`` from."""
    return {ENV_NAME: source()}


def run_name(model: Mapping[str, Any]) -> str:
    """The run directory's name: a hash of the settings a checkpoint depends on. A change to any of
    them starts a new directory, so a restart never loads an incompatible checkpoint."""
    digest = hashlib.sha256(json.dumps(dict(model), sort_keys=True, default=str).encode()).hexdigest()
    return f"run-{digest[:12]}"


def call(*args: str) -> str:
    """Shell: run resilience.py from the environment with ``args``; an unset or empty variable is an
    error (bash exits 127), not ``python3 -c ""``, which does nothing and succeeds."""
    return f'python3 -c "${{{ENV_NAME}:?}}" ' + shlex.join(args)


def announce_attempt() -> str:
    """Shell, at the start of an attempt in a long-lived container: its process id to ATTEMPT_MARKER.
    $BASHPID, not $$: the kubelet turns ``$$`` in a container's command into ``$``."""
    return f"echo $BASHPID > {ATTEMPT_MARKER}"


# Processes that mpirun starts over ssh do not see the container's environment: the worker writes
# the file at start, and the ranks run it from there.
SCRIPT_FILE = "/tmp/resilience.py"


def with_script_file(command: list[str]) -> list[str]:
    """A container command that first writes resilience.py (from the environment) to SCRIPT_FILE."""
    return ["bash", "-c", f'printf "%s" "${ENV_NAME}" > {SCRIPT_FILE} && exec "$@"', "with-resilience", *command]


def call_file(*args: str, script: str = SCRIPT_FILE) -> str:
    """Shell: run ``script`` (by default SCRIPT_FILE) with ``args``."""
    return shlex.join(["python3", script, *args])


# The descriptor the run directory's lock is held on: opened by the training shell itself (not by a
# child), so the lock lasts as long as that shell, the command it execs and the processes that keep
# the descriptor open (torchrun's agent, the output filter). torchrun's workers close it and run in
# sessions of their own: the container's end ends them (BERT, the Ray head), and NxD Training's long-lived
# worker containers end an earlier attempt's leftovers first (resilience.reap, nxd_llama.rank_command).
LOCK_FD = 9
# How long an attempt waits for a lock held under its own job's name (resilience.lock), left by an
# earlier attempt on a node that was lost: Lustre drops a silent client's locks when it evicts it,
# PING_EVICT_TIMEOUT (6 ping intervals of obd_timeout / 4: 150 s at the default obd_timeout 100)
# plus up to 3 ping intervals (75 s) for the evictor to run (lustre-release v2_15_5
# lustre/include/obd_support.h, lustre/ptlrpc/pinger.c ping_evictor_main). Below how long the gang's
# other pods keep waiting for rank 0's rendezvous store meanwhile (600 s,
# bert_launch.RDZV_READ_TIMEOUT_SECONDS). On EFS (storage.kind: efs) the lock is an NFSv4 lock, which
# the server drops when the lost client's lease expires; EFS's lease time is not published where it
# could be read here, so the acceptance check shows it (docs/operations.md, "EFS: what the acceptance
# check must show").
LOCK_WAIT_SECONDS = 300


@dataclass(frozen=True)
class RunLock:
    """Who writes a run directory. ``owner`` names the job: the same for every attempt of one job, never
    the same for two jobs that can run at once. ``replica``: the shell word of the pod's index in its
    gang, whose pods all share the directory: only replica 0 takes the lock (and prunes); None when
    the command runs once per job. ``wait_seconds``: how long a lock held under ``owner`` is waited for."""

    run_dir: str
    owner: str
    replica: str | None = None
    wait_seconds: int = LOCK_WAIT_SECONDS


def take_lock(lock: RunLock, kind: str, run: Callable[..., str]) -> str:
    """Shell: open the run directory's lock file on LOCK_FD in this shell and take the lock
    (resilience.lock); fails (exit status 1, the reason on stderr) when another job holds it."""
    path = shlex.quote(f"{lock.run_dir}/{resilience.LOCK_NAME}")
    take = run("lock", kind, str(LOCK_FD), lock.run_dir, lock.owner, str(lock.wait_seconds))
    return f"exec {LOCK_FD}>>{path} && {take}"


def training_line(
    command: str, kind: str, directory: str, heartbeat: str, keep: int, lock: RunLock | None = None, script: str = ""
) -> str:
    """Shell: take the run directory's lock, drop BERT's incomplete and surplus checkpoints (both once
    per job: see RunLock; without ``lock``, only the prune), append the resume arguments to
    ``command`` (word-split on purpose: none, or flag and value), and filter its output through the
    heartbeat writer. pipefail keeps the training command's exit status. A failed look-up ends the
    attempt (exit 1) instead of training from step 0 beside the checkpoints it missed. resilience.py
    runs from the environment, or from the file ``script`` when given."""

    def run(*args: str) -> str:
        return call_file(*args, script=script) if script else call(*args)

    folders = shlex.join(sorted({directory, posixpath.dirname(heartbeat), *([lock.run_dir] if lock else [])}))
    writer = f"{run('prune', kind, directory, str(keep))} || exit 1;"
    if lock is not None:
        writer = f"{take_lock(lock, kind, run)} || exit 1; {writer}"
        if lock.replica is not None:
            writer = f"if [ {lock.replica} = 0 ]; then {writer} fi;"
    return (
        f"set -o pipefail; mkdir -p {folders} || exit 1; {writer} "
        f"resume_args=$({run('resume', kind, directory)}) || exit 1; "
        f"{command} $resume_args 2>&1 | {run('beat', kind, heartbeat)}"
    )


class ProbeTimeouts(Protocol):
    """What a workload's settings say about hangs (workloads/settings.py ResumableSettings; not
    imported: the TorchX component imports this module with the standard library alone)."""

    first_step_timeout_minutes: int
    hang_timeout_minutes: int


def liveness_probe(
    kind: str, heartbeat: str, settings: ProbeTimeouts, per_attempt: bool = False, health_url: str = ""
) -> dict[str, Any]:
    """Fails once the heartbeat's step has not moved for the workload's hangTimeoutMinutes
    (firstStepTimeoutMinutes until the first step of the container's life, or with ``per_attempt``
    of the attempt that announce_attempt started), or when ``health_url`` does not answer success."""
    options = [
        *(["--attempt", ATTEMPT_MARKER] if per_attempt else []),
        *(["--health", health_url] if health_url else []),
    ]
    check = call(
        "probe",
        kind,
        heartbeat,
        PROBE_STATE,
        str(settings.first_step_timeout_minutes * 60),
        str(settings.hang_timeout_minutes * 60),
        *options,
    )
    return {
        "exec": {"command": ["bash", "-c", check]},
        "periodSeconds": PROBE_PERIOD_SECONDS,
        "timeoutSeconds": 30,
        "failureThreshold": PROBE_FAILURES,
    }


def detection_minutes(hang_minutes: int) -> int:
    """The longest a hang runs before the kubelet ends it: the limit, then the failed reads."""
    return hang_minutes + -(-PROBE_PERIOD_SECONDS * PROBE_FAILURES // 60)
