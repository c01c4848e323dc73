"""The NxD Training image's launch path, run for real: the pinned train.sh and train_setup.sh
(aws-neuron/neuronx-distributed-training 9169aa0 examples/, copied below) under Open MPI's rank
variables, the train_resumable.sh that resilience.py writes from train.sh, the image's
nodelist_helper.py, and the NxD checkpoint rules (incomplete saves pruned, the newest complete one
resumed). Stubs only for what cannot run here: torchrun, neuron_parallel_compile and hostname,
each recording its argv."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from infra.facts import versions
from tests.test_resilience import SCRIPT_PATH, hydra_value, tear_like_a_lost_node, torch_save_like
from tools.push_images import BUILD_ARGS
from workloads import resilience

ROOT = Path(__file__).resolve().parent.parent
IMAGE_DIR = ROOT / "docker" / "nxd-llama"
RESILIENCE = ROOT / "workloads" / "resilience.py"

# examples/train.sh at 9169aa0, whole (no newline at its end).
TRAIN_SH = (
    "#!/usr/bin/env bash\n\nsource ./train_setup.sh\n\n: ${CONF_FILE:=megatron_gpt_config}\n\n"
    'CONF_FILE_PATH="./conf/${CONF_FILE}.yaml"\n\nif [ -f "$CONF_FILE_PATH" ]; then\n'
    "    devices=$(grep 'devices:' \"$CONF_FILE_PATH\" | awk '{print $2}')\n"
    "    export PROCESSES_PER_NODE=$devices\nelse\n"
    "    echo \"Error: YAML file '$CONF_FILE_PATH' not found!\"\nfi\n\n"
    'export DISTRIBUTED_ARGS="--nproc_per_node $PROCESSES_PER_NODE --nnodes $NTASKS --node_rank $NODEID '
    '--master_addr $MASTER_ADDR --master_port $MASTER_PORT"\necho $DISTRIBUTED_ARGS\n\n'
    'if [ "$COMPILE" = "1" ]; then\n    echo "compiling only run"\n    MAYBE_COMPILE="neuron_parallel_compile"\nfi\n\n'
    "$MAYBE_COMPILE torchrun $DISTRIBUTED_ARGS training_orchestrator.py  \\\n"
    "    --config-path=conf \\\n    --config-name=$CONF_FILE \\\n    trainer.devices=$PROCESSES_PER_NODE \\\n"
    "    trainer.num_nodes=$NTASKS \\\n"
    "    exp_manager.explicit_log_dir=$EXPLICIT_LOGDIR   2>&1  | tee -a $LOG_PATH/log"
)
# examples/train_setup.sh at 9169aa0: its MPI branch and what follows (the SLURM branch is not taken).
TRAIN_SETUP_SH = """#!/usr/bin/env bash

set -o pipefail
set -e

ulimit -n 65535

if [ -v OMPI_COMM_WORLD_RANK ]
then
    # MPI runs on EKS
    export CCOM_SOCKET_IFNAME=eth0
    NODELIST=`/nodelist_helper.py`
    HOSTS=(${NODELIST//\\ / })
    NODEID=$OMPI_COMM_WORLD_RANK
    NTASKS=$OMPI_COMM_WORLD_SIZE
    export EXPLICIT_LOGDIR=/shared/nemo_experiments/$POD_UID
    LOG_PATH=$EXPLICIT_LOGDIR/$NODEID/
    mkdir -p $LOG_PATH
    export FI_EFA_USE_DEVICE_RDMA=1
    export FI_PROVIDER=efa
    export FI_EFA_FORK_SAFE=1
fi

export XLA_DISABLE_FUNCTIONALIZATION=0

export HYDRA_FULL_ERROR=1
export MASTER_ADDR=${HOSTS[0]}
export MASTER_PORT=41000
export MALLOC_ARENA_MAX=128
export CREATE_TB_LOGGER=True
export CHECKPOINT_CALLBACK=True"""
# The name the kubelet gives worker 1 of MPIJob llama2-train in namespace ml (its /etc/hosts FQDN).
WORKER_1 = "llama2-train-worker-1.llama2-train.ml.svc.cluster.local"
BAR = "Epoch 0:   1%|          | {step}/10000 [01:02:03<3:04:05, 3.01s/it, loss=7.75, v_num=, global_step=1.20e+4]"


SHARD = "model/dp_rank_00_tp_rank_00_pp_rank_00.pt.tensors/tensor_0.pt"


def save(checkpoints: Path, step: int, done: bool) -> Path:
    """A save as NxD writes it with the config's save_xser (neuronx-distributed fbac349 trainer/checkpoint.py
    save_checkpoint): the callback's directory, its ``checkpoint`` marker, torch.save archives for the
    reference data, each tensor and user_content, ``done`` last."""
    directory = checkpoints / f"megatron_llama--step={step}-consumed_samples={step * 1024}.0.ckpt"
    (directory / SHARD).parent.mkdir(parents=True)
    (directory / "checkpoint").write_text("1")
    for name in ("model/dp_rank_00_tp_rank_00_pp_rank_00.pt", SHARD, "user_content.pt"):
        torch_save_like(directory / name)
    if done:
        (directory / "done").write_text("1")
    return directory


def stubs(tmp: Path, torchrun_rc: int = 0) -> Path:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    record = (
        f"{sys.executable} -c 'import json, os, sys; "
        f'open(os.environ["CALLS"], "a").write(json.dumps({{"program": sys.argv[1], "argv": sys.argv[2:], '
        f'"env": dict(os.environ)}}) + "\\n")\' "$(basename "$0")" "$@"\n'
    )
    (bin_dir / "torchrun").write_text(
        f"#!/bin/bash\n{record}printf '%s\\r' '{BAR.format(step=41)}' '{BAR.format(step=42)}'\necho\nexit {torchrun_rc}\n"
    )
    (bin_dir / "neuron_parallel_compile").write_text(f'#!/bin/bash\n{record}exec "$@"\n')
    (bin_dir / "hostname").write_text(f'#!/bin/bash\n[ "$1" = --fqdn ] && echo {WORKER_1}\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return bin_dir


def examples(tmp: Path, shared: Path) -> Path:
    """The image's examples directory; the absolute paths train_setup.sh names (/shared, /nodelist_helper.py)
    pointed into the test's directories, as the pod's volume and the image's file."""
    directory = tmp / "examples"
    (directory / "conf").mkdir(parents=True)
    (directory / "train.sh").write_text(TRAIN_SH)
    setup = TRAIN_SETUP_SH.replace("/nodelist_helper.py", str(IMAGE_DIR / "nodelist_helper.py"))
    (directory / "train_setup.sh").write_text(setup.replace("/shared/", f"{shared}/"))
    # examples/conf/megatron_llama_7B_config.yaml at 9169aa0: the line train.sh reads.
    (directory / "conf" / "megatron_llama_7B_config.yaml").write_text("trainer:\n  devices: 32\n  num_nodes: 1\n")
    return directory


def run_rank(directory: Path, bin_dir: Path, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # train_setup.sh raises the open-file limit to 65535 under `set -e`; in the pod the hard limit is the
    # node's container runtime's, here this machine's (which may be lower): bash(1) sources BASH_ENV
    # first in a non-interactive shell, and a function takes precedence over the builtin.
    limits = tmp / "limits.sh"
    limits.write_text('ulimit() { if [ "$*" = "-n 65535" ]; then return 0; fi; builtin ulimit "$@"; }\n')
    environment = {
        "BASH_ENV": str(limits),
        "PATH": f"{bin_dir}:{SCRIPT_PATH}",
        "CALLS": str(tmp / "calls.jsonl"),
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_SIZE": "4",
        "POD_UID": "run-0123456789ab",
        "CONF_FILE": "megatron_llama_7B_config",
        **env,
    }
    return subprocess.run(["bash", "./train_resumable.sh"], cwd=directory, env=environment, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def calls(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "calls.jsonl").read_text().splitlines()]


def resume_pick(checkpoints: Path, rank: str = "0") -> str | None:
    """What one rank's train_resumable.sh resumes from, as the pods compute it: resilience.py run as a program."""
    out = subprocess.run(
        ["python3", str(RESILIENCE), "resume", "nxdt", str(checkpoints)],
        env={"PATH": SCRIPT_PATH, "OMPI_COMM_WORLD_RANK": rank}, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    if not out.stdout.strip():
        return None
    key, value = out.stdout.strip().split("=", 1)
    assert key == "exp_manager.resume_from_checkpoint"
    return hydra_value(value)


def prune(checkpoints: Path, keep: int) -> subprocess.CompletedProcess[str]:
    """Rank 0's prune before the attempt, as nxd_llama.rank_command runs it."""
    return subprocess.run(["python3", str(RESILIENCE), "prune", "nxdt", str(checkpoints), str(keep)],
                          env={"PATH": SCRIPT_PATH}, capture_output=True, text=True, timeout=30)  # fmt: skip


def test_nxdt_resumes_from_the_newest_save_that_reads_back_whole_and_keeps_what_it_cannot_vouch_for(
    tmp_path: Path,
) -> None:
    """``done`` says every rank closed its files; the CRC-32 of every torch.save member says their bytes
    arrived. Torn (closed, pages lost) and cut (no ``done``) saves newer than the pick are set aside
    beside checkpoints/, not deleted; what is older than the pick and not kept goes."""
    checkpoints = tmp_path / "checkpoints"
    assert resume_pick(checkpoints) is None
    good = save(checkpoints, 200, True)
    older = save(checkpoints, 100, True)
    oldest = save(checkpoints, 50, True)
    cut_before = save(checkpoints, 150, False)  # an interrupted save older than a good one
    torn = save(checkpoints, 300, True)
    tear_like_a_lost_node(torn / SHARD)
    cut = save(checkpoints, 400, False)  # a save the pod died in: no `done`
    (checkpoints / "newest").write_text("x")  # NxD's own bookkeeping file is no checkpoint
    assert resume_pick(checkpoints) == str(good)
    # The verdicts are in the saves: the torn one's, and the pick's with what it covered.
    assert (torn / "torn.json").exists() and not (cut / "torn.json").exists()
    assert json.loads((good / "verified.json").read_text())[SHARD][0] == (good / SHARD).stat().st_size

    pruned = prune(checkpoints, 2)
    assert pruned.returncode == 0, pruned.stderr
    aside = tmp_path / "incomplete-checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == sorted([good.name, older.name, "newest"])
    assert sorted(p.name for p in aside.iterdir()) == sorted([torn.name, cut.name])
    assert f"removed {oldest}" in pruned.stderr and f"removed {cut_before}" in pruned.stderr
    assert "set aside" in pruned.stderr and f"removed {torn}" not in pruned.stderr
    # exp_manager's own pick, the newest *.ckpt by mtime under checkpoints/ (check_resume), is a good one.
    assert max(checkpoints.rglob("*.ckpt"), key=os.path.getmtime) in (good, older)
    assert resume_pick(checkpoints) == str(good)

    # The run goes on from 200 and saves 300 and 400 again, whole this time (the same names: the
    # set-aside ones are out of their way); once 400 passes, what was set aside before it goes.
    again_300, again_400 = save(checkpoints, 300, True), save(checkpoints, 400, True)
    assert resume_pick(checkpoints) == str(again_400)
    pruned = prune(checkpoints, 2)
    assert pruned.returncode == 0, pruned.stderr
    assert not list(aside.iterdir())
    assert sorted(p.name for p in checkpoints.iterdir()) == sorted([again_300.name, again_400.name, "newest"])


def test_nothing_that_reads_back_whole_means_a_fresh_start_and_nothing_deleted(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    torn = save(checkpoints, 100, True)
    tear_like_a_lost_node(torn / "user_content.pt")
    cut = save(checkpoints, 200, False)
    assert resume_pick(checkpoints) is None
    pruned = prune(checkpoints, 2)
    assert pruned.returncode == 0 and "removed" not in pruned.stderr
    # Nothing under checkpoints/ for exp_manager to resume from (it would take a torn one by mtime).
    assert not list(checkpoints.rglob("*.ckpt"))
    assert sorted(p.name for p in (tmp_path / "incomplete-checkpoints").iterdir()) == sorted([torn.name, cut.name])


def test_a_save_with_a_cut_shard_a_foreign_file_or_no_data_fails(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    good = save(checkpoints, 10, True)
    cut = save(checkpoints, 20, True)
    torch_save_like(cut / SHARD, cut=True)  # no central directory
    foreign = save(checkpoints, 30, True)
    (foreign / "model" / "notes.txt").write_text("not a torch.save archive")
    empty = checkpoints / "megatron_llama--step=40-consumed_samples=40960.0.ckpt"
    empty.mkdir()
    (empty / "done").write_text("1")
    assert resume_pick(checkpoints) == str(good)
    assert all((s / "torn.json").exists() for s in (cut, foreign, empty))


def test_a_reader_lost_while_writing_its_verdict_condemns_nothing(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    good = save(checkpoints, 10, True)
    (good / "verified.json.tmp").write_text('{"model/')  # the reader's node was lost mid-write
    assert resilience.nxdt_pick(str(checkpoints), read=True) == 10


def test_an_older_save_found_torn_takes_no_place_among_those_kept(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    older = save(checkpoints, 10, True)
    torn = save(checkpoints, 20, True)
    tear_like_a_lost_node(torn / SHARD)
    assert resilience.nxdt_pick(str(checkpoints), read=True) == 10  # 20 is found torn, 10 passes
    newest = save(checkpoints, 30, True)
    removed, moved = resilience.nxdt_prune(str(checkpoints), 2)
    assert removed == [str(torn)] and moved == []
    assert sorted(p.name for p in checkpoints.iterdir()) == sorted([older.name, newest.name])


def test_a_verdict_is_read_once_and_voided_by_a_changed_file(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    good = save(checkpoints, 10, True)
    assert resilience.nxdt_pick(str(checkpoints), read=True) == 10
    assert resilience.nxdt_verdict(str(good)) is True
    torch_save_like(good / SHARD)  # rewritten after the verdict (same size, new mtime)
    assert resilience.nxdt_verdict(str(good)) is None
    tear_like_a_lost_node(good / SHARD)
    assert resilience.nxdt_pick(str(checkpoints), read=True) is None
    assert resilience.nxdt_verdict(str(good)) is False


def test_the_other_ranks_wait_for_rank_0s_verdicts_and_pick_the_same_save(tmp_path: Path) -> None:
    """Ranks other than 0 never read a save: they wait until rank 0 has recorded a verdict on it, so
    every rank passes the same resume_from_checkpoint to the same training run."""
    checkpoints = tmp_path / "checkpoints"
    good = save(checkpoints, 100, True)
    torn = save(checkpoints, 200, True)
    tear_like_a_lost_node(torn / SHARD)
    waiting = subprocess.Popen(
        ["python3", str(RESILIENCE), "resume", "nxdt", str(checkpoints)],
        env={"PATH": SCRIPT_PATH, "OMPI_COMM_WORLD_RANK": "1"}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    with pytest.raises(subprocess.TimeoutExpired):
        waiting.wait(timeout=1.5)  # no verdict on 200 yet: rank 1 does not guess
    assert not (torn / "torn.json").exists() and not (good / "verified.json").exists()
    assert resume_pick(checkpoints, rank="0") == str(good)
    out, _ = waiting.communicate(timeout=10)
    assert waiting.returncode == 0 and hydra_value(out.strip().split("=", 1)[1]) == str(good)


def test_the_train_script_gets_the_overrides_before_its_last_line_or_is_refused() -> None:
    script = resilience.nxdt_script(TRAIN_SH, ["data.tokenizer.type=/shared/tok", "a=x\\=1"])
    assert script.endswith(
        "    trainer.num_nodes=$NTASKS \\\n    data.tokenizer.type=/shared/tok \\\n    'a=x\\=1' \\\n"
        "    exp_manager.explicit_log_dir=$EXPLICIT_LOGDIR   2>&1  | tee -a $LOG_PATH/log"
    )
    with pytest.raises(ValueError, match="explicit_log_dir"):
        resilience.nxdt_script(TRAIN_SH.replace("tee -a", "tee"), [])


def test_a_training_rank_runs_torchrun_with_its_rank_the_run_directory_and_the_resume(tmp_path: Path) -> None:
    """What one rank does on worker 1 of 4: resilience.py writes train_resumable.sh (with the data,
    tokenizer and cache overrides, checkpoints every 50 steps, 2 kept, the resume), then the pinned
    scripts start torchrun with node_rank from OMPI_COMM_WORLD_RANK, the world size as nnodes, worker
    0's name as master, and log to <run>/<rank>/log, which the heartbeat reads."""
    shared = tmp_path / "shared"
    run_dir = shared / "nemo_experiments" / "run-0123456789ab"
    kept = save(run_dir / "checkpoints", 200, True)
    directory, bin_dir = examples(tmp_path, shared), stubs(tmp_path)
    overrides = ["data.data_prefix=[1.0,/shared/data/redpajama_sample_text_document]",
                 "data.tokenizer.type=/shared/llama7b_tokenizer", "compiler_cache_url=/shared/neuron_cache"]  # fmt: skip
    write = subprocess.run(
        ["python3", str(RESILIENCE), "nxdt-script", "nxdt", "50", "2", str(run_dir / "checkpoints"), *overrides],
        cwd=directory, env={"PATH": SCRIPT_PATH}, capture_output=True, text=True,
    )  # fmt: skip
    assert write.returncode == 0, write.stderr
    result = run_rank(directory, bin_dir, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (torchrun,) = calls(tmp_path)
    master = "llama2-train-worker-0.llama2-train.ml.svc.cluster.local"
    argv = torchrun["argv"]
    assert argv[:11] == ["--nproc_per_node", "32", "--nnodes", "4", "--node_rank", "1", "--master_addr", master,
                         "--master_port", "41000", "training_orchestrator.py"]  # fmt: skip
    assert argv[11:15] == ["--config-path=conf", "--config-name=megatron_llama_7B_config", "trainer.devices=32",
                           "trainer.num_nodes=4"]  # fmt: skip
    assert argv[15:18] == overrides
    assert argv[18:20] == [
        "exp_manager.checkpoint_callback_params.every_n_train_steps=50",
        "exp_manager.checkpoint_callback_params.save_top_k=2",
    ]
    key, value = argv[20].split("=", 1)
    assert key == "exp_manager.resume_from_checkpoint" and hydra_value(value) == str(kept)
    assert argv[21:] == [f"exp_manager.explicit_log_dir={run_dir}"]
    assert torchrun["env"]["FI_PROVIDER"] == "efa" and torchrun["env"]["CCOM_SOCKET_IFNAME"] == "eth0"
    log = (run_dir / "1" / "log").read_text()
    assert resilience.last_step(log, "nxdt") == 42


def test_a_failed_torchrun_fails_the_rank_through_the_log_pipe(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    directory, bin_dir = examples(tmp_path, shared), stubs(tmp_path, torchrun_rc=3)
    (directory / "train_resumable.sh").write_text(resilience.nxdt_script(TRAIN_SH, []))
    result = run_rank(directory, bin_dir, tmp_path)
    assert result.returncode == 3  # train_setup.sh's `set -o pipefail`: tee does not hide it


def test_the_compile_run_wraps_torchrun_in_neuron_parallel_compile(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    directory, bin_dir = examples(tmp_path, shared), stubs(tmp_path)
    (directory / "train_resumable.sh").write_text(resilience.nxdt_script(TRAIN_SH, ["data.tokenizer.type=/t"]))
    result = run_rank(directory, bin_dir, tmp_path, COMPILE="1", OMPI_COMM_WORLD_RANK="0")
    assert result.returncode == 0, result.stdout + result.stderr
    compile_call, torchrun = calls(tmp_path)
    assert compile_call["program"] == "neuron_parallel_compile" and compile_call["argv"][0] == "torchrun"
    assert torchrun["argv"][4:6] == ["--node_rank", "0"] and "data.tokenizer.type=/t" in torchrun["argv"]


def test_the_node_list_is_every_worker_of_the_job_in_rank_order(tmp_path: Path) -> None:
    bin_dir = stubs(tmp_path)
    helper = str(IMAGE_DIR / "nodelist_helper.py")
    env = {"PATH": f"{bin_dir}:{SCRIPT_PATH}", "OMPI_COMM_WORLD_SIZE": "3"}
    out = subprocess.run(["python3", helper], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [WORKER_1.replace("worker-1", f"worker-{i}") for i in range(3)]
    outside = subprocess.run(["python3", helper], env={"PATH": env["PATH"]}, capture_output=True, text=True)
    assert outside.returncode == 1 and "mpirun" in outside.stderr


def test_the_image_pins_and_the_open_mpi_the_launcher_will_call() -> None:
    """The DLC (deep-learning-containers 2.30.0 pytorch/training/2.9.0/Dockerfile.neuronx) builds Open MPI
    4.1.5 with `./configure --enable-orterun-prefix-by-default` and no --prefix: /usr/local/bin."""
    text = (IMAGE_DIR / "Dockerfile").read_text()
    defaults = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.M))
    assert defaults["NEURON_DLC"] == versions.NEURON_DLC_PYTORCH_2_9 == BUILD_ARGS["nxd-llama"]["NEURON_DLC"]
    assert defaults["NXDT_EXAMPLES_COMMIT"] == versions.NXDT_EXAMPLES_COMMIT
    assert re.fullmatch(r"[0-9a-f]{40}", versions.NXDT_EXAMPLES_COMMIT)
    assert defaults["MEGATRON_LM_COMMIT"] == versions.MEGATRON_LM_COMMIT
    assert (
        'CMD ["/usr/local/bin/mpi-user", "/usr/local/bin/mpi-sshd"]' in text
        and "COPY --chmod=755 nodelist_helper.py /nodelist_helper.py" in text
    )


def test_the_node_list_reads_the_worker_index_from_the_pods_own_label() -> None:
    """Only the first DNS label names the worker: a namespace ending in -worker-<n> is not it."""
    import runpy

    hosts = runpy.run_path(str(IMAGE_DIR / "nodelist_helper.py"))["hosts"]
    assert hosts("llama2-train-worker-1.llama2-train.ml-worker-2.svc.cluster.local", 2) == [
        "llama2-train-worker-0.llama2-train.ml-worker-2.svc.cluster.local",
        "llama2-train-worker-1.llama2-train.ml-worker-2.svc.cluster.local",
    ]
    assert hosts("llama2-train-worker-3", 2) == ["llama2-train-worker-0", "llama2-train-worker-1"]


def test_the_ranks_write_their_script_in_the_examples_directory_as_the_namespace_id(tmp_path: Path) -> None:
    """mpirun starts the ranks in the image's examples directory (-wdir) as the namespace's id, and each
    first writes train_resumable.sh there (Hydra then its outputs/): the image makes that directory
    world-writable and sticky, which a root-owned 0755 one (git clone's) is not. Run for real as
    another user when the suite runs as root."""
    from workloads import nxd_llama

    dockerfile = (IMAGE_DIR / "Dockerfile").read_text()
    assert f"chmod 1777 {nxd_llama.EXAMPLES_DIR} " in dockerfile
    assert f"setpriv --reuid=20001 --regid=20001 --clear-groups touch {nxd_llama.EXAMPLES_DIR}/" in dockerfile
    if os.geteuid() != 0:
        pytest.skip("writing as another user needs root (.ci/run runs the suite as root)")
    # /tmp is world-traversable, unlike pytest's own 0700 directories.
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        base.chmod(0o755)
        directory = examples(base, base / "shared")
        as_id = ["setpriv", "--reuid=20001", "--regid=20001", "--clear-groups", "/usr/bin/python3", str(RESILIENCE)]
        write = [*as_id, "nxdt-script", "nxdt", "0", "0", "", "compiler_cache_url=/shared/neuron_cache"]
        for mode, works in ((0o755, False), (0o1777, True)):
            directory.chmod(mode)
            run = subprocess.run(write, cwd=directory, env={"PATH": SCRIPT_PATH}, capture_output=True, text=True)
            assert (run.returncode == 0) is works, (oct(mode), run.stderr)
            assert works or "Permission denied: 'train_resumable.sh'" in run.stderr, run.stderr
        assert (directory / "train_resumable.sh").stat().st_uid == 20001
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=True)


def test_the_image_builds_nemos_dataset_helpers_as_root() -> None:
    """NxD Training 9169aa0 gpt_dataset_patch.py has rank 0 call nemo's compile_helper() (make in
    site-packages, sys.exit(1) when it fails; nemo_toolkit 2.1.0 ships the sources only) on a dataset's
    first run: as the namespace's id it could not write there, so the image builds them as root and
    checks that they import."""
    dockerfile = (IMAGE_DIR / "Dockerfile").read_text()
    helpers = "nemo.collections.nlp.data.language_modeling.megatron"
    assert f'/{helpers.replace("nemo.", "", 1).replace(".", "/")}" \\' in dockerfile
    assert f'python3 -c "from {helpers} import helpers"' in dockerfile
