"""One writer per run directory, run for real: the training shells the jobs declare (BERT's
replicas, the NxD Training ranks, the Ray train step) against fake training processes in a temporary run
directory, two jobs at once, restarts, and concurrent prunes.

The lock is flock(2) on ``<run dir>/.lock``, opened by the training shell (resumable.take_lock) and
taken by ``resilience.py lock``; on FSx for Lustre mounted with ``flock`` it is cluster-wide
(lustre-release v2_15_5 lustre/llite/file.c ll_file_flock), here it is the local file system's:
the same system call, the same semantics between processes.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from offline.plan.runner import PlanResult
from tests.test_resilience import SCRIPT_PATH, torch_save_like
from tests.test_workloads import manifest
from workloads import nxd_llama, resilience, resumable

BERT_STEP = "LOG Tue Nov 24 21:00:00 2026 - (0, {step}) step_loss : 9.1234 learning_rate : 1.00e-04 throughput : 8.0"


def fake_trainer(path: Path) -> Path:
    """A stand-in for torchrun: notes its start in $STARTED, prints a step, and holds the run until
    $RELEASE exists (at most 60 s), then exits 0."""
    path.write_text(
        "#!/bin/sh\n"
        'echo "args: $*" > "$STARTED"\n'
        f"echo '{BERT_STEP.format(step=7)}'\n"
        'i=0; while [ ! -e "$RELEASE" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done\n'
    )
    path.chmod(0o755)
    return path


class Job:
    """One job's training shell (resumable.training_line, as the BERT pods run it) on ``run_dir``."""

    def __init__(self, tmp: Path, run_dir: Path, owner: str, replica: str = "0", wait: int = 300) -> None:
        self.started, self.release = tmp / f"started-{owner.replace('/', '_')}-{replica}", tmp / f"release-{owner}"
        self.started.unlink(missing_ok=True)
        trainer = fake_trainer(tmp / "trainer")
        writer = resumable.RunLock(str(run_dir), owner, replica, wait)
        line = resumable.training_line(str(trainer), "bert", str(run_dir), f"{run_dir}/heartbeat", 1, writer)
        env = {"PATH": SCRIPT_PATH, "STARTED": str(self.started), "RELEASE": str(self.release), **resumable.env()}
        self.process = subprocess.Popen(
            ["bash", "-c", line], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def wait_started(self) -> None:
        for _ in range(300):
            if self.started.exists():
                return
            assert self.process.poll() is None, self.process.communicate()
            time.sleep(0.05)
        raise AssertionError("the trainer never started")

    def finish(self) -> tuple[int, str, str]:
        self.release.parent.mkdir(parents=True, exist_ok=True)
        self.release.write_text("")
        out, err = self.process.communicate(timeout=60)
        return self.process.returncode, out, err


def files(run_dir: Path) -> list[str]:
    """What is in the run directory besides the heartbeat (which either replica's output writes)."""
    return sorted(n for n in os.listdir(run_dir) if n != resumable.HEARTBEAT)


def holder_of(run_dir: Path) -> dict[str, Any]:
    return resilience.holder(str(run_dir))


def test_a_second_job_is_refused_while_the_first_trains_and_the_lock_goes_with_the_training(tmp_path: Path) -> None:
    run_dir = tmp_path / "output" / "run-8cabc7b1f14a"
    stack = Job(tmp_path, run_dir, "default/bert-train")
    stack.wait_started()
    # The lock outlives `resilience.py lock` itself: the shell holds it, and the trainer it started.
    assert holder_of(run_dir)["owner"] == "default/bert-train"
    hand_run = Job(tmp_path, run_dir, "bert-x7k2m")
    code, out, err = hand_run.process.wait(timeout=60), *hand_run.process.communicate()
    assert code == 1 and not hand_run.started.exists(), (out, err)
    assert re.fullmatch(
        rf"run directory {run_dir} is in use by job default/bert-train \(pod {re.escape(socket.gethostname())}, "
        rf"pid {stack.process.pid}, since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\): one job writes a run directory at a "
        r"time, so this job \(bert-x7k2m\) stops before it overwrites or prunes that job's checkpoints\. Let that "
        r"job end first, or give this one its own run directory\n",
        err,
    ), err
    assert stack.finish()[0] == 0
    # Released when the training process exited: the next attempt of the stack's job takes it at once.
    restart = Job(tmp_path, run_dir, "default/bert-train", wait=0)
    restart.wait_started()
    assert holder_of(run_dir)["pid"] == restart.process.pid
    assert restart.finish()[0] == 0
    later = Job(tmp_path, run_dir, "bert-x7k2m")
    later.wait_started()
    assert later.finish()[0] == 0 and holder_of(run_dir)["owner"] == "bert-x7k2m"


def test_a_restarted_attempt_waits_a_bounded_time_for_its_own_jobs_lingering_lock(tmp_path: Path) -> None:
    """After a node loss the dead client's lock stays until Lustre evicts it: held under the job's own
    name, it is waited for (resumable.LOCK_WAIT_SECONDS in the pods) rather than refused at once."""
    run_dir = tmp_path / "run"
    lost = Job(tmp_path, run_dir, "default/bert-train")
    lost.wait_started()
    restart = Job(tmp_path, run_dir, "default/bert-train", wait=1)
    code, _, err = restart.process.wait(timeout=60), *restart.process.communicate()
    assert code == 1 and not restart.started.exists()
    assert err.startswith(
        f"run directory {run_dir} is still locked by an earlier attempt of this job, job default/bert-train (pod "
    ) and err.endswith("after 1 s: a lost node keeps its lock until Lustre evicts its client\n")
    patient = Job(tmp_path, run_dir, "default/bert-train", wait=60)
    time.sleep(0.5)
    assert patient.process.poll() is None and not patient.started.exists()  # still waiting
    assert lost.finish()[0] == 0  # Lustre evicted the lost client
    patient.wait_started()
    assert patient.finish()[0] == 0


def test_only_replica_0_takes_the_lock_and_prunes(tmp_path: Path) -> None:
    """A gang's pods share the run directory: replica 1 neither locks nor prunes, so it starts beside
    replica 0 (which holds the lock) and leaves the checkpoints to it."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    torch_save_like(run_dir / "ckpt_10.pt")
    torch_save_like(run_dir / "ckpt_20.pt", cut=True)
    peer = Job(tmp_path, run_dir, "default/bert-train", replica="1")
    peer.wait_started()
    assert files(run_dir) == ["ckpt_10.pt", "ckpt_20.pt"]  # no lock, no prune
    first = Job(tmp_path, run_dir, "default/bert-train", replica="0")
    first.wait_started()
    # The cut save, newer than the one that passed, is set aside (resilience.bert_prune).
    assert files(run_dir) == [".lock", ".lock-holder", "ckpt_10.pt", "incomplete-checkpoints"]
    assert first.finish()[0] == 0 and peer.finish()[0] == 0
    assert f"--resume_ckpt_path {run_dir}/ckpt_10.pt" in first.started.read_text()
    assert f"--resume_ckpt_path {run_dir}/ckpt_10.pt" in peer.started.read_text()


def waiting_in_fifo_open(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "wait_for_partner"  # Linux fs/pipe.c fifo_open
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="needs Linux /proc/<pid>/wchan")
def test_two_concurrent_prunes_that_cannot_read_a_checkpoint_both_stop_and_remove_nothing(tmp_path: Path) -> None:
    """A FIFO as the newest checkpoint holds both prunes in its open (a FIFO's open waits for a writer),
    which shows they read it; once let go, seeking it fails in the kernel, as a read of a file on a
    failing file system would. That is no verdict on the bytes: both end their attempt (exit 1), and
    neither removes the cut saves, which only a newer checkpoint that reads back whole would condemn."""
    for step in (1, 2, 3):
        torch_save_like(tmp_path / f"ckpt_{step}.pt", cut=True)
    torch_save_like(tmp_path / "ckpt_9.pt")
    gate = tmp_path / "ckpt_12.pt"
    os.mkfifo(gate)
    before = sorted(os.listdir(tmp_path))
    command = ["bash", "-c", resumable.call("prune", "bert", str(tmp_path), "1")]
    env = {"PATH": SCRIPT_PATH, **resumable.env()}
    prunes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in "ab"]
    for _ in range(600):
        if all(waiting_in_fifo_open(p.pid) or any(waiting_in_fifo_open(c) for c in children(p.pid)) for p in prunes):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the prunes never reached the FIFO")
    writer = os.open(gate, os.O_WRONLY)  # lets both go on
    try:
        results = [p.communicate(timeout=60) for p in prunes]
    finally:
        os.close(writer)
    assert [p.returncode for p in prunes] == [1, 1], results
    assert all(f"cannot read checkpoint file {gate}" in err.decode() for _, err in results), results
    assert sorted(os.listdir(tmp_path)) == before


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """$(NAME) of a defined variable becomes its value; anything else stays (kubernetes
    third_party/forked/golang/expansion/expand.go)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)


def bert_pod_command(result: PlanResult, replica: int, root: Path) -> list[str]:
    """A bert-train pod's command as the kubelet starts it, with /data/ in root."""
    task = manifest(result, "Job", "bert-train")["spec"]["tasks"][replica]
    container = task["template"]["spec"]["containers"][0]
    downward = {"VOLCANO_PODGROUP": "bert-train-5f0c", "VOLCANO_JOB_VERSION": "0"}
    return [kubelet_expand(c, downward).replace("/data/", f"{root}/data/") for c in container["command"]]


def stub_torchrun(bin_dir: Path) -> None:
    bin_dir.mkdir(exist_ok=True)
    fake_trainer(bin_dir / "torchrun")


def test_the_stack_pods_replica_0_holds_the_lock_for_the_run_and_replica_1_joins_it(
    workloads_dev: PlanResult, tmp_path: Path
) -> None:
    stub_torchrun(tmp_path / "bin")
    shipped = next(
        e["value"]
        for e in manifest(workloads_dev, "Job", "bert-train")["spec"]["tasks"][0]["template"]["spec"]["containers"][0][
            "env"
        ]
        if e["name"] == resumable.ENV_NAME
    )
    pods = []
    for replica in (0, 1):
        env = {
            "PATH": f"{tmp_path / 'bin'}:{SCRIPT_PATH}",
            resumable.ENV_NAME: shipped,
            "STARTED": str(tmp_path / f"started-{replica}"),
            "RELEASE": str(tmp_path / "release"),
        }
        command = bert_pod_command(workloads_dev, replica, tmp_path)
        assert command[:3] == ["timeout", "--kill-after=300", "3600"]  # dev's 60-minute deadline
        pods.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for _ in range(300):
            if (tmp_path / f"started-{replica}").exists():
                break
            time.sleep(0.05)
    run_dir = next((tmp_path / "data" / "output").iterdir())
    assert holder_of(run_dir)["owner"] == "default/bert-train"  # bert.py: <namespace>/<job>
    other = subprocess.run(
        ["bash", "-c", f"exec 9>>{run_dir}/.lock && {resumable.call('lock', 'bert', '9', str(run_dir), 'x/y', '0')}"],
        env={"PATH": SCRIPT_PATH, **resumable.env()},
        capture_output=True,
        text=True,
    )
    assert other.returncode == 1 and "is in use by job default/bert-train" in other.stderr
    (tmp_path / "release").write_text("")
    assert [p.wait(timeout=60) for p in pods] == [0, 0]
    assert all((tmp_path / f"started-{r}").exists() for r in (0, 1))


def nxd_rank_line(workloads_all: PlanResult, tmp_path: Path) -> str:
    """The rank command of the NxD training MPIJob's launcher, pointed at tmp_path: /shared/ under it, and
    the worker's /tmp/resilience.py and attempt marker beside it."""
    launcher = manifest(workloads_all, "MPIJob", "llama2-train")["spec"]["mpiReplicaSpecs"]["Launcher"]
    rank_line = launcher["template"]["spec"]["containers"][0]["command"][-1]
    script = tmp_path / "resilience.py"
    script.write_text(resumable.source())
    line = rank_line.replace("/shared/", f"{tmp_path}/shared/").replace(resumable.SCRIPT_FILE, str(script))
    return line.replace(resumable.ATTEMPT_MARKER, str(tmp_path / "attempt"))


def test_nxd_rank_0_holds_the_lock_and_the_other_ranks_do_not(workloads_all: PlanResult, tmp_path: Path) -> None:
    """The rank command mpirun starts on every worker (nxd_llama.rank_command), with Open MPI's
    OMPI_COMM_WORLD_RANK (train_setup.sh reads the same variable), /shared/ in a temp root and the
    worker's /tmp/resilience.py beside it. The pinned train.sh is a stand-in with the line the
    rewrite needs (resilience.nxdt_script), which notes its start."""
    line = nxd_rank_line(workloads_all, tmp_path)
    match = re.search(r"mkdir -p (\S+)/checkpoints (\S+) && exec 9>>", line)
    assert match, line
    run_dir = Path(match.group(2))  # the lock's directory (nxd_llama.LOCK_SUBDIR)
    assert run_dir == Path(match.group(1)) / nxd_llama.LOCK_SUBDIR
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "train.sh").write_text('echo started > "$STARTED"\nexit 0\n' + resilience.NXDT_LAST_OVERRIDE)
    other = Job(tmp_path, run_dir, "team-b/llama2-train")
    other.wait_started()

    def rank(number: int) -> tuple[int, str, bool]:
        started = tmp_path / f"rank-{number}-started"
        started.unlink(missing_ok=True)
        result = subprocess.run(
            ["bash", "-c", line],
            cwd=examples,
            env={"PATH": SCRIPT_PATH, "OMPI_COMM_WORLD_RANK": str(number), "STARTED": str(started)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        return result.returncode, result.stderr, started.exists()

    code, err, started = rank(0)
    assert (code, started) == (1, False) and f"run directory {run_dir} is in use by job team-b/llama2-train" in err
    assert rank(1)[::2] == (0, True)  # the other ranks neither lock nor wait
    assert other.finish()[0] == 0
    assert rank(0)[::2] == (0, True)
    assert holder_of(run_dir)["owner"] == "default/llama2-train"  # <namespace>/<MPIJob>


def check_resume_moves(log_dir: Path) -> None:
    """What NxD Training's exp_manager does on global rank 0 when it resumes from a checkpoint
    (neuronx-distributed-training 9169aa0 src/neuronx_distributed_training/utils/exp_manager.py
    check_resume): every file at the top of the log directory moves into a new run_<n>/."""
    moving = [child for child in log_dir.iterdir() if child.is_file()]
    if moving:
        target = log_dir / f"run_{sum(1 for d in log_dir.glob('run_*') if d.is_dir())}"
        target.mkdir()
        for child in moving:
            os.replace(child, target / child.name)


def test_the_nxd_lock_survives_exp_managers_move_of_the_log_directorys_files(
    workloads_all: PlanResult, tmp_path: Path
) -> None:
    """Rank 0 trains with the lock held while exp_manager tidies its log directory (the run directory):
    a second job must still be refused. A lock file at the top of the run directory would be moved
    away with the held lock, and the second job would lock a new file of the same name."""
    line = nxd_rank_line(workloads_all, tmp_path)
    run_dir, lock_dir = (Path(p) for p in re.search(r"mkdir -p (\S+)/checkpoints (\S+) && exec 9>>", line).groups())
    examples = tmp_path / "examples"
    examples.mkdir()
    started, release = tmp_path / "started", tmp_path / "release"
    (examples / "train.sh").write_text(
        'echo started > "$STARTED"\nwhile [ ! -e "$RELEASE" ]; do sleep 0.05; done\nexit 0\n'
        + resilience.NXDT_LAST_OVERRIDE
    )
    env = {"PATH": SCRIPT_PATH, "OMPI_COMM_WORLD_RANK": "0", "STARTED": str(started), "RELEASE": str(release)}
    rank0 = subprocess.Popen(["bash", "-c", line], cwd=examples, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        for _ in range(600):
            if started.exists():
                break
            assert rank0.poll() is None, rank0.communicate()
            time.sleep(0.05)
        (run_dir / "hparams.yaml").write_text("{}")  # what exp_manager itself leaves there
        check_resume_moves(run_dir)
        assert (lock_dir / resilience.LOCK_NAME).exists() and (run_dir / "run_0" / "hparams.yaml").exists()
        take = resumable.call("lock", "nxdt", "9", str(lock_dir), "team-b/llama2-train", "0")
        other = subprocess.run(
            ["bash", "-c", f"exec 9>>{lock_dir}/{resilience.LOCK_NAME} && {take}"],
            env={"PATH": SCRIPT_PATH, **resumable.env()}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert other.returncode == 1 and "is in use by job default/llama2-train" in other.stderr
    finally:
        release.write_text("")
        rank0.communicate(timeout=60)
    assert rank0.returncode == 0


def test_a_new_nxd_attempt_ends_what_an_earlier_one_left_running_in_its_container(tmp_path: Path) -> None:
    """torchrun's workers live in sessions of their own without the lock's descriptor, so a rank whose
    agent was SIGKILLed leaves them running in the long-lived worker container. The next attempt's rank
    ends the processes marked with the same run directory and another attempt (SIGTERM, then SIGKILL),
    and leaves its own and every other run's alone."""
    run_dir = str(tmp_path / "run")

    def process(marker: str | None, ignore_term: bool = False) -> subprocess.Popen[bytes]:
        env = {"PATH": SCRIPT_PATH}
        if marker is not None:
            env[resilience.RUN_ATTEMPT_ENV] = marker
        trap = "trap '' TERM; " if ignore_term else ""
        return subprocess.Popen(["bash", "-c", f"{trap}sleep 60 & wait"], env=env, start_new_session=True)

    orphan, stubborn = process(f"{run_dir} 111"), process(f"{run_dir} 112", ignore_term=True)
    current, other_run, unmarked = process(f"{run_dir} 222"), process(f"{run_dir}-b 111"), process(None)
    time.sleep(0.2)  # their environments are readable once exec'd
    try:
        ended = resilience.reap(run_dir, "222", grace_seconds=0.5)
        assert set(ended) >= {orphan.pid, stubborn.pid}
        assert orphan.wait(timeout=10) != 0 and stubborn.wait(timeout=10) != 0  # the second one by SIGKILL
        assert current.poll() is None and other_run.poll() is None and unmarked.poll() is None
    finally:
        for p in (orphan, stubborn, current, other_run, unmarked):
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
