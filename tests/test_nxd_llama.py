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
from pathlib import Path

import pytest

from infra.facts import versions
from tests.test_resilience import SCRIPT_PATH, hydra_value
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


def save(checkpoints: Path, step: int, done: bool) -> Path:
    """A save as NxD writes it: a directory named by the callback, model shards inside, ``done`` last."""
    directory = checkpoints / f"megatron_llama--step={step}-consumed_samples={step * 1024}.0.ckpt"
    (directory / "model").mkdir(parents=True)
    (directory / "model" / "dp_rank_00_tp_rank_00_pp_rank_00.pt").write_bytes(b"x")
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


def test_nxdt_resumes_from_the_newest_save_with_its_done_marker_and_prunes_the_rest(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    assert resilience.resume_args("nxdt", str(checkpoints)) == []
    kept = save(checkpoints, 200, True)
    older = save(checkpoints, 100, True)
    oldest = save(checkpoints, 50, True)
    cut = save(checkpoints, 300, False)  # a save the pod died in: no `done`
    (checkpoints / "newest").write_text("x")  # NxD's own bookkeeping file is no checkpoint
    (override,) = resilience.resume_args("nxdt", str(checkpoints))
    key, value = override.split("=", 1)
    assert key == "exp_manager.resume_from_checkpoint" and hydra_value(value) == str(kept)
    removed = resilience.prune("nxdt", str(checkpoints), 2)
    assert sorted(removed) == sorted([str(cut), str(oldest)])
    assert sorted(p.name for p in checkpoints.iterdir()) == sorted([kept.name, older.name, "newest"])
    # exp_manager's own pick, the newest *.ckpt by mtime (check_resume), is now a complete one.
    assert max(checkpoints.rglob("*.ckpt"), key=os.path.getmtime) in (kept, older)


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
    assert 'CMD ["/usr/sbin/sshd", "-De"]' in text and "COPY --chmod=755 nodelist_helper.py /nodelist_helper.py" in text


def test_the_node_list_reads_the_worker_index_from_the_pods_own_label() -> None:
    """Only the first DNS label names the worker: a namespace ending in -worker-<n> is not it."""
    import runpy

    hosts = runpy.run_path(str(IMAGE_DIR / "nodelist_helper.py"))["hosts"]
    assert hosts("llama2-train-worker-1.llama2-train.ml-worker-2.svc.cluster.local", 2) == [
        "llama2-train-worker-0.llama2-train.ml-worker-2.svc.cluster.local",
        "llama2-train-worker-1.llama2-train.ml-worker-2.svc.cluster.local",
    ]
    assert hosts("llama2-train-worker-3", 2) == ["llama2-train-worker-0", "llama2-train-worker-1"]
