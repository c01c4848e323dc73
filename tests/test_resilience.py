"""Resume from the newest complete checkpoint, bounded whole-gang restarts, and hang detection
(issue 22, requirements 1-3): the pod-side functions (workloads/resilience.py) on real files, the
shell around the training command run for real, and what each job kind declares."""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from offline.runner import PlanResult
from tests.test_workload_config import refusal
from tests.test_workloads import manifest
from workloads import bert_launch, resilience, resumable

# What the pinned scripts print, copied from them.
# aws-neuron-samples d6e1754 dp_bert_large_hf_pretrain_hdf5.py l.152 (Logger.log), and the same
# line from data-on-eks a32d9f2 llama2_pretrain/logger.py l.64 (Ray prefixes a worker's output).
BERT_LINE = "LOG Tue Nov 24 21:00:00 2026 - (0, {step}) step_loss : 9.1234 learning_rate : 1.00e-04 throughput : 812.00 \n"
RAY_LINE = "(RayTrainWorker pid=4242, ip=10.0.1.7) " + BERT_LINE
# PyTorch Lightning's progress bar with NeMo's prog_bar metrics (neuronx-nemo-megatron d22aabf
# megatron_gpt_model.py l.452-461), redrawn with carriage returns.
NEMO_BAR = "Epoch 0: :   {step}it [01:02, 0.3it/s, loss=9.1, v_num=, reduced_train_loss=9.1, global_step={step}.0, consumed_samples=2.56e+4]\r"
# neuronx-nemo-megatron d22aabf nlp_overrides.py NLPCheckpointIOState.begin/end l.435-485.
NEMO_BEGAN = "[NeMo I 2026-11-24 21:00:00 nlp_overrides:436] Synchronous saving of checkpoint {name} began\n"
NEMO_DONE = "[NeMo I 2026-11-24 21:00:09 nlp_overrides:485] Synchronous saving of checkpoint {name} fully completed\n"
# test_llama.sh and llama_7b.sh at d22aabf (nemo/examples/nlp/language_modeling), the lines the
# rewrite touches with their neighbours.
TEST_LLAMA = (
    "    exp_manager.explicit_log_dir=$EXPLICIT_LOGDIR \\\n"
    "    +exp_manager.checkpoint_callback_params.train_time_interval=36000 \\\n"
    "    model.use_cpu_initialization=True   2>&1  | tee -a $LOG_PATH/log\n"
)
LLAMA_7B = ": ${TRAIN_ITERS:=10000}\n\nexport INIT_METHOD_STD=0.021\n\n./test_llama.sh\n"


def torch_save_like(path: Path, size: int = 4096, cut: bool = False) -> None:
    """torch.save writes a zip archive (PyTorchStreamWriter) whose central directory comes last; a
    save cut short by a dying pod lacks it."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", os.urandom(size))
    if cut:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])


def test_bert_resumes_from_the_newest_complete_checkpoint_never_a_cut_one(tmp_path: Path) -> None:
    """The script's own --resume_ckpt takes the highest ckpt_<n>.pt, whole or not (l.461-463): the
    pick goes to --resume_ckpt_path instead."""
    assert resilience.resume_args("bert", str(tmp_path)) == []  # first attempt: from step 0
    torch_save_like(tmp_path / "ckpt_400.pt")
    torch_save_like(tmp_path / "ckpt_800.pt")
    torch_save_like(tmp_path / "ckpt_1200.pt", cut=True)  # the save the node died in
    assert resilience.bert_steps(str(tmp_path)) == {400: True, 800: True, 1200: False}
    assert resilience.resume_args("bert", str(tmp_path)) == ["--resume_ckpt", "--resume_ckpt_path", f"{tmp_path}/ckpt_800.pt"]
    # The script keeps N only among its own run's saves (a deque, l.594-600): the next attempt
    # drops the cut one and what is beyond N across attempts.
    assert resilience.prune("bert", str(tmp_path), 1) == [f"{tmp_path}/ckpt_400.pt", f"{tmp_path}/ckpt_1200.pt"]
    assert sorted(os.listdir(tmp_path)) == ["ckpt_800.pt"]


def test_selection_and_pruning_rules() -> None:
    steps = {100: True, 200: True, 300: False, 50: True}
    assert resilience.newest_complete(steps) == 200
    assert resilience.newest_complete({300: False}) is None
    assert resilience.to_delete(steps, keep=2) == [50, 300]
    assert resilience.to_delete(steps, keep=5) == [300]


def test_ray_resumes_from_the_newest_nxd_checkpoint_with_its_done_marker(tmp_path: Path) -> None:
    """neuronx-distributed SDK 2.18.0 (8520967) trainer/checkpoint.py: <dir>/<tag>/done is written
    after every rank saved, and list_checkpoint_tags counts only tags that have it
    (checkpoint_storage.py l.83-95); the script loads tag step_<loading_step> (l.472-481)."""
    for step, done in ((100, True), (200, True), (300, False)):
        (tmp_path / f"step_{step}").mkdir()
        if done:
            (tmp_path / f"step_{step}" / "done").write_text("1")
    (tmp_path / "step_400").write_text("a file, not a checkpoint")
    assert resilience.resume_args("ray", str(tmp_path)) == ["--resume_ckpt", "--loading_step", "200"]
    assert resilience.resume_args("ray", str(tmp_path / "missing")) == []


def test_nemo_resumes_from_the_newest_save_its_log_reports_complete(tmp_path: Path) -> None:
    checkpoints, log = tmp_path / "checkpoints", tmp_path / "log"
    names = {step: f"megatron_llama--step={step}-consumed_samples={step * 256}.0.ckpt" for step in (100, 200, 300)}
    for rank in range(8):  # TP 8: one file per rank (model_utils.py inject_model_parallel_rank)
        (checkpoints / f"mp_rank_{rank:02d}").mkdir(parents=True)
        for name in names.values():
            (checkpoints / f"mp_rank_{rank:02d}" / name).write_text("x")
    log.write_text("".join([NEMO_BEGAN.format(name=names[100]), NEMO_DONE.format(name=names[100]),
                            NEMO_BAR.format(step=150), NEMO_BEGAN.format(name=names[200]), NEMO_DONE.format(name=names[200]),
                            NEMO_BEGAN.format(name=names[300])]))  # the pod died saving step 300
    expected = f"model.resume_from_checkpoint={checkpoints}/{names[200]}"
    assert resilience.resume_args("nemo", str(checkpoints), str(log)) == [expected]
    # A completed save since removed by save_top_k is not picked.
    for rank in range(8):
        (checkpoints / f"mp_rank_{rank:02d}" / names[200]).unlink()
    assert resilience.resume_args("nemo", str(checkpoints), str(log)) == [
        f"model.resume_from_checkpoint={checkpoints}/{names[100]}"]
    assert resilience.resume_args("nemo", str(tmp_path / "none"), str(tmp_path / "nolog")) == []


def test_the_nemo_scripts_are_rewritten_to_checkpoint_by_steps_and_resume() -> None:
    llama, test = resilience.nemo_scripts(LLAMA_7B, TEST_LLAMA, 50, 3, ["model.resume_from_checkpoint=/x/a.ckpt"])
    assert llama.endswith("./test_llama_resumable.sh\n") and "./test_llama.sh" not in llama
    assert "train_time_interval" not in test
    assert ("    +exp_manager.checkpoint_callback_params.every_n_train_steps=50 \\\n"
            "    exp_manager.checkpoint_callback_params.save_top_k=3 \\\n"
            "    model.resume_from_checkpoint=/x/a.ckpt \\\n"
            "    model.use_cpu_initialization=True") in test
    # A different pinned script is refused, not silently left checkpointing every 10 hours.
    with pytest.raises(ValueError, match="train_time_interval"):
        resilience.nemo_scripts(LLAMA_7B, TEST_LLAMA.replace("36000", "7200"), 50, 3, [])


@pytest.mark.parametrize(("kind", "text", "step"), [
    ("bert", BERT_LINE.format(step=7) + "Checkpointing...\n" + BERT_LINE.format(step=8), 8),
    ("ray", RAY_LINE.format(step=12), 12),
    ("nemo", NEMO_BAR.format(step=3) + NEMO_BAR.format(step=4) + NEMO_DONE.format(name="a--step=4.ckpt"), 4),
    ("bert", "Rank 3 working on shard x\n", None),
])  # fmt: skip
def test_the_heartbeat_is_the_step_counter_the_scripts_print(kind: str, text: str, step: int | None) -> None:
    assert resilience.last_step(text, kind) == step


def test_the_probe_fails_only_when_the_step_stops_advancing() -> None:
    first, hang = 3600, 1800
    state = resilience.observe(None, 500, 0)  # a step left by the attempt before
    assert resilience.stalled(state, 3600, first, hang) is None  # start-up gets firstStepTimeout
    assert "no new step since the container started" in resilience.stalled(state, 3601, first, hang)
    state = resilience.observe(state, 401, 3000)  # resumed from 400: any change is progress
    state = resilience.observe(state, 402, 3010)
    assert state == {"step": 402, "since": 3010, "advanced": True}
    assert resilience.stalled(resilience.observe(state, 402, 4810), 4810, first, hang) is None
    verdict = resilience.stalled(resilience.observe(state, 402, 4811), 4811, first, hang)
    assert verdict == "training hung: step 402, unchanged for 1801 s (limit 1800 s)"


def test_the_probe_keeps_its_memory_in_the_container(tmp_path: Path) -> None:
    heartbeat, state = tmp_path / "heartbeat", tmp_path / "state.json"
    assert resilience.probe("bert", str(heartbeat), str(state), 600, 300, 1000.0) is None  # no heartbeat yet
    heartbeat.write_text(BERT_LINE.format(step=1))
    assert resilience.probe("bert", str(heartbeat), str(state), 600, 300, 1100.0) is None
    assert json.loads(state.read_text()) == {"step": 1, "since": 1100.0, "advanced": True}
    assert resilience.probe("bert", str(heartbeat), str(state), 600, 300, 1401.0).startswith("training hung: step 1")


def test_the_training_shell_resumes_writes_the_heartbeat_and_keeps_the_exit_status(tmp_path: Path) -> None:
    """The shell resumable.training_line builds, run for real with a stand-in for torchrun that
    echoes its arguments, prints two step lines and exits 3."""
    run_dir, heartbeat = tmp_path / "run", tmp_path / "run" / "heartbeat"
    run_dir.mkdir()
    torch_save_like(run_dir / "ckpt_20.pt")
    torch_save_like(run_dir / "ckpt_30.pt", cut=True)
    fake = tmp_path / "trainer"
    fake.write_text('#!/bin/sh\necho "args: $*"\n' + "".join(f"echo '{BERT_LINE.format(step=s).strip()}'\n" for s in (21, 22)) + "exit 3\n")
    fake.chmod(0o755)
    line = resumable.training_line(f"{fake} --output_dir {run_dir}", "bert", str(run_dir), str(heartbeat), 2)
    result = subprocess.run(["bash", "-c", line], env={"PATH": os.environ["PATH"], **resumable.env()},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr  # pipefail: the trainer's status, not the filter's
    assert f"args: --output_dir {run_dir} --resume_ckpt --resume_ckpt_path {run_dir}/ckpt_20.pt" in result.stdout
    assert "(0, 22) step_loss" in result.stdout and resilience.last_step(heartbeat.read_text(), "bert") == 22
    assert sorted(os.listdir(run_dir)) == ["ckpt_20.pt", "heartbeat"]  # the cut save is gone


def test_a_change_to_model_settings_starts_a_new_run_directory() -> None:
    base = bert_launch.BertRun(nnodes=2, nproc_per_node=32, etcd_endpoint="etcd:2379")
    same = [bert_launch.BertRun(nnodes=2, nproc_per_node=32, etcd_endpoint="etcd:2379", steps_this_run=500,
                                checkpoint_every_shards=3, checkpoints_to_keep=5, cacheset="other")]
    changed = [bert_launch.BertRun(nnodes=4, nproc_per_node=32, etcd_endpoint="etcd:2379"),
               bert_launch.BertRun(nnodes=2, nproc_per_node=32, etcd_endpoint="etcd:2379", batch_size=8),
               bert_launch.BertRun(nnodes=2, nproc_per_node=32, etcd_endpoint="etcd:2379", bf16=False)]
    assert re.fullmatch(r"/data/output/run-[0-9a-f]{12}", bert_launch.run_dir(base))
    assert {bert_launch.run_dir(r) for r in same} == {bert_launch.run_dir(base)}
    assert len({bert_launch.run_dir(r) for r in [base, *changed]}) == 4


def container(template: dict[str, Any]) -> dict[str, Any]:
    return template["spec"]["containers"][0]


def run_probe(probe: dict[str, Any], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(probe["exec"]["command"], env={"PATH": os.environ["PATH"], **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_bert_training_pods_carry_the_probe_and_volcano_restarts_the_gang(workloads_dev: PlanResult) -> None:
    """A probe failure kills the container; with restartPolicy Never the pod goes Failed and the
    PodFailed -> RestartJob policy restarts every task (volcano v1.15.1 job_controller_util.go
    applyPolicies), at most maxRetry attempts. The exit code is not `timeout`'s 124: coreutils
    src/timeout.c (v8.32, Ubuntu 22.04's, l.182-184 and l.573-574) sets timed_out only on its own
    SIGALRM and returns 124 only then, so the kubelet's SIGTERM is not taken for the deadline."""
    train = manifest(workloads_dev, "Job", "bert-train")["spec"]
    precompile = manifest(workloads_dev, "Job", "bert-precompile")["spec"]
    for task in train["tasks"]:
        assert task["template"]["spec"]["restartPolicy"] == "Never"
        assert {"event": "PodFailed", "action": "RestartJob"} in task["policies"]
        probe = container(task["template"])["livenessProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] <= 300
        assert "probe bert /data/output/run-" in probe["exec"]["command"][-1]
        assert "RESILIENCE_PY" in {e["name"] for e in container(task["template"])["env"]}
    assert train["maxRetry"] == 2  # dev: Pulumi.dev.yaml maxRetry
    assert all("livenessProbe" not in container(t["template"]) for t in precompile["tasks"])


def test_the_declared_probe_command_runs(workloads_dev: PlanResult, tmp_path: Path) -> None:
    c = container(manifest(workloads_dev, "Job", "bert-train")["spec"]["tasks"][0]["template"])
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    probe = json.loads(json.dumps(c["livenessProbe"]).replace("/data/output", str(tmp_path)).replace(
        resumable.PROBE_STATE, str(tmp_path / "state.json")))
    assert run_probe(probe, env, tmp_path).returncode == 0  # starting: within firstStepTimeoutMinutes
    state = json.loads((tmp_path / "state.json").read_text())
    (tmp_path / "state.json").write_text(json.dumps({**state, "since": state["since"] - 3601 * 24}))
    stuck = run_probe(probe, env, tmp_path)
    assert stuck.returncode == 1 and stuck.stdout.startswith("training hung: no new step")


def test_nemo_workers_restart_in_place_and_the_launcher_reruns_every_rank(workloads_all: PlanResult) -> None:
    """kubeflow/mpi-operator v0.8.0: runPolicy.backoffLimit becomes the launcher Job's
    (mpi_job_controller.go l.1542-1543); workers default to restartPolicy Never
    (v2beta1/constants.go DefaultRestartPolicy) and a worker pod that exists is never recreated
    (getOrCreateWorker l.1010-1024), so training workers restart OnFailure."""
    train = manifest(workloads_all, "MPIJob", "llama2-train")["spec"]
    compile_ = manifest(workloads_all, "MPIJob", "llama2-compile")["spec"]
    assert train["runPolicy"]["backoffLimit"] == 3  # maxRestarts' default
    worker = train["mpiReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == "OnFailure"
    assert "probe nemo /shared/nemo_experiments/run-" in container(worker["template"])["livenessProbe"]["exec"]["command"][-1]
    # The ranks mpirun starts over ssh do not see the container's environment: the worker writes
    # resilience.py to a file when it starts, and the ranks run it from there.
    assert container(worker["template"])["command"] == resumable.with_script_file(["/usr/sbin/sshd", "-De"])
    command = container(train["mpiReplicaSpecs"]["Launcher"]["template"])["command"]
    assert command[-1].startswith("python3 /tmp/resilience.py nemo-scripts nemo 100 2 /shared/nemo_experiments/run-")
    assert command[-1].endswith("/0/log && exec ./llama_7b_resumable.sh")
    assert "livenessProbe" not in container(compile_["mpiReplicaSpecs"]["Worker"]["template"])
    assert compile_["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][-1] == "./llama_7b.sh"


def test_the_ray_train_step_retries_on_a_new_cluster_from_its_checkpoint(workloads_dev: PlanResult) -> None:
    """kuberay v1.7.0 rayjob_types.go: backoffLimit, "each retry creates a new RayCluster";
    rayjob_controller.go l.542-556 retries a Failed job unless its deadline ended it."""
    jobs = {n: manifest(workloads_dev, "RayJob", n)["spec"] for n in
            ("llama2-precompilation-job", "llama2-pretraining-job")}
    train = jobs["llama2-pretraining-job"]
    assert train["backoffLimit"] == 2 and "backoffLimit" not in jobs["llama2-precompilation-job"]
    worker = container(train["rayClusterSpec"]["workerGroupSpecs"][0]["template"])
    assert "probe ray /shared/llama2_output/run-" in worker["livenessProbe"]["exec"]["command"][-1]
    assert "RESILIENCE_PY" in train["runtimeEnvYAML"]
    assert re.search(r"--checkpoint_freq 100 --num_kept_checkpoint 2 \$\(python3 -c \"\$RESILIENCE_PY\" resume ray "
                     r"/shared/llama2_output/run-[0-9a-f]{12}/checkpoints\)", train["entrypoint"])
    precompile_worker = container(jobs["llama2-precompilation-job"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"])
    assert "livenessProbe" not in precompile_worker


def test_resilience_settings_are_refused_out_of_range(workloads_with) -> None:
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "hangTimeoutMinutes": 5})
    assert problem.startswith("trainium-workloads:bertPretraining.hangTimeoutMinutes = 5") and "10" in problem


def test_the_worker_command_writes_the_script_file_then_runs_its_own(tmp_path: Path) -> None:
    command = resumable.with_script_file(["sh", "-c", "echo started"])
    command[2] = command[2].replace(resumable.SCRIPT_FILE, str(tmp_path / "r.py"))
    result = subprocess.run(command, env={"PATH": os.environ["PATH"], **resumable.env()}, capture_output=True, text=True)
    assert result.stdout == "started\n" and (tmp_path / "r.py").read_text() == resumable.source()


def test_the_stack_names_the_run_directories_its_jobs_use(workloads_dev: PlanResult) -> None:
    runs = workloads_dev.outputs["workloads"]["runDirectories"]
    assert set(runs) == {"bertPretraining", "rayLlama2"}  # NeMo is off in dev
    bert_line = container(manifest(workloads_dev, "Job", "bert-train")["spec"]["tasks"][0]["template"])["command"][-1]
    assert f"--output_dir {runs['bertPretraining']} " in bert_line
    assert f"--output_dir {runs['rayLlama2']} " in manifest(workloads_dev, "RayJob", "llama2-pretraining-job")["spec"]["entrypoint"]


def test_a_hang_limit_the_deadline_would_beat_is_refused(workloads_with) -> None:
    """dev's BERT deadline is 60 minutes: a 58-minute limit is ended 61 minutes after the last step."""
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "trainDeadlineMinutes": 60,
                                                          "hangTimeoutMinutes": 58})
    assert problem.startswith("trainium-workloads:bertPretraining.hangTimeoutMinutes = 58: a hang is ended 61 minutes")
    assert "(trainDeadlineMinutes, 60 minutes)" in problem
    workloads_with(bertPretraining={"nodeGroup": "trn1-32xl-ng1", "trainDeadlineMinutes": 60, "hangTimeoutMinutes": 56})
