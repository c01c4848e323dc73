"""How BERT-large phase-1 pretraining is launched on Trainium: the command and environment.

Shared by the Volcano Job this project declares (``bert.py``) and the TorchX component for
`torchx run` (``torchx_trn1.py``), so both produce the same pods. No Pulumi or TorchX
imports: callers pass concrete values or TorchX macros for the replica and run ids.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from infra.facts import versions
from workloads import resumable
from workloads.compile_cache import cache_dir
from workloads.pods import EFA_ENV

SCRIPT = "dp_bert_large_hf_pretrain_hdf5.py"
CACHE_ROOT = "/data"
DATA_MOUNT = "/data"


@dataclass(frozen=True)
class BertRun:
    nnodes: int
    nproc_per_node: int
    etcd_endpoint: str
    batch_size: int = 16
    grad_accum_steps: int = 32
    data_dir: str = "/data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
    output_dir: str = "/data/output"
    steps_this_run: int | None = None
    bf16: bool = True
    precompile: bool = False
    cacheset: str = "bert-large"
    checkpoint_every_shards: int = 1
    checkpoints_to_keep: int = 2


def model_settings(run: BertRun) -> dict[str, object]:
    """What a checkpoint depends on: the script, the Neuron SDK the image is built on (its torch-neuronx
    writes the checkpoint), the model's precision, the data and the global batch (world size x batch x
    accumulation). Not the steps of a run or the deadlines: a longer run continues the same one (the
    learning-rate schedule runs to the script's fixed max_steps)."""
    return {
        "script": versions.BERT_SAMPLES_COMMIT,
        "neuron_sdk_image": versions.NEURON_DLC_PYTORCH_2_9,  # bert-pretrain's base (tools/push_images.py)
        "nnodes": run.nnodes,
        "nproc_per_node": run.nproc_per_node,
        "batch_size": run.batch_size,
        "grad_accum_steps": run.grad_accum_steps,
        "bf16": run.bf16,
        "data_dir": run.data_dir,
    }


def run_dir(run: BertRun) -> str:
    """Checkpoints, logs and the heartbeat of every run with these model settings."""
    return f"{run.output_dir}/{resumable.run_name(model_settings(run))}"


def heartbeat(run: BertRun) -> str:
    return f"{run_dir(run)}/{resumable.HEARTBEAT}"


# run_dp_bert_large_hf_pretrain_bf16_s128.sh (aws-neuron-samples, BERT_SAMPLES_COMMIT): bf16
# runs 16 x 32 per worker, full fp32 (`--enable_fp32`) halves the batch and doubles the
# accumulation, 8 x 64 (same 512 sequences per worker and step, twice the memory per sequence).
BF16_BATCH = (16, 32)
FP32_BATCH = (8, 64)


def batch_defaults(bf16: bool) -> tuple[int, int]:
    """(batch size, gradient accumulation micro-steps) of the pinned script for the precision."""
    return BF16_BATCH if bf16 else FP32_BATCH


# The precompile saves no checkpoint: the pinned script writes and prunes them only
# `if is_root and not extract_graphs_only` (BERT_SAMPLES_COMMIT, torch-neuronx/training/
# dp_bert_hf_pretrain/dp_bert_large_hf_pretrain_hdf5.py l.560, 572-600; l.282 reads
# NEURON_EXTRACT_GRAPHS_ONLY, which neuron_parallel_compile sets for its trial run, Neuron docs
# "PyTorch NeuronX Environment Variables"). So it gets fixed values, not the training's: a new
# checkpoint interval must not change (and so replace and re-run) the precompile Job.
PRECOMPILE_CHECKPOINTS = (1, 1)


def script_args(run: BertRun) -> list[str]:
    every, keep = PRECOMPILE_CHECKPOINTS if run.precompile else (run.checkpoint_every_shards, run.checkpoints_to_keep)
    args = [
        "--batch_size", str(run.batch_size),
        "--grad_accum_usteps", str(run.grad_accum_steps),
        "--data_dir", run.data_dir,
        "--output_dir", run_dir(run),
        "--shards_per_ckpt", str(every),
        "--num_ckpts_to_keep", str(keep),
    ]  # fmt: skip
    if run.steps_this_run is not None:
        args += ["--steps_this_run", str(run.steps_this_run)]
    # The pinned script trains in bf16 (model.to(torch.bfloat16)) unless told otherwise;
    # XLA_DOWNCAST_BF16, which the seed set, is deprecated from torch-xla 2.4.
    if not run.bf16:
        args += ["--enable_fp32", "--optimizer", "AdamW"]
    return args


def torchrun(run: BertRun, rdzv_id: str) -> list[str]:
    return [
        "torchrun",
        "--rdzv_backend", "etcd",
        "--rdzv_endpoint", run.etcd_endpoint,
        "--rdzv_id", rdzv_id,
        "--nnodes", str(run.nnodes),
        "--nproc_per_node", str(run.nproc_per_node),
        "--tee", "3",
        SCRIPT,
    ]  # fmt: skip


def command(run: BertRun, rdzv_id: str, owner: str, replica: str) -> list[str]:
    """The container command: torchrun under neuron_parallel_compile for the precompile run; the
    training run continues from its run directory's newest complete checkpoint (resilience.py),
    and its output feeds the heartbeat. Replica 0 of the training gang holds the run directory's
    lock under ``owner``, the job's name, for its whole run (resumable.RunLock)."""
    line = shlex.join(torchrun(run, rdzv_id) + script_args(run))
    if run.precompile:
        return ["neuron_parallel_compile", line]
    writer = resumable.RunLock(run_dir(run), owner, replica)
    keep = run.checkpoints_to_keep
    return ["bash", "-c", resumable.training_line(line, "bert", run_dir(run), heartbeat(run), keep, writer)]


# Each attempt runs under coreutils `timeout`: SIGTERM at the deadline (torchrun passes it to its
# workers), SIGKILL this much later (workloads/deadlines.py BERT_KILL_AFTER_MINUTES counts it: a test
# holds the two equal). Exit status 124 once the deadline has passed.
KILL_AFTER_SECONDS = 5 * 60


def with_deadline(command: list[str], minutes: int) -> list[str]:
    return ["timeout", f"--kill-after={KILL_AFTER_SECONDS}", f"{minutes * 60}", *command]


# For pods that cannot read their Volcano annotations (TorchX 0.7.0's Kubernetes scheduler writes
# every env var as a literal value, torchx/schedulers/kubernetes_scheduler.py role_to_pod, and
# Volcano v1.15.1 puts the Job version only in annotations, pkg/controllers/job/
# job_controller_util.go createJobPod; its env plugin adds just the task index): each pod picks
# `<base>-<n>` for the smallest n whose etcd rendezvous is not closed. torch elastic's etcd
# rendezvous (torch/distributed/elastic/rendezvous/etcd_rendezvous.py) keeps its state at
# /torchelastic/p2p/run_<run id>/rdzv/active_version and marks it {"status": "closed"} when an
# agent shuts down after its run ended, success or failure; agents killed by a signal leave it
# open, and a new gang joining an open run replaces the dead members (handle_existing_rendezvous).
# Volcano creates a retry's pods only once the old ones have terminated (pkg/controllers/job/
# state/restarting.go: Restarting -> Pending when no pod is left terminating), so every pod of an
# attempt sees the same closed runs and picks the same id.
RDZV_ID_PLACEHOLDER = "@RDZV_ID@"
PICK_RDZV_ID = """\
import json, sys, time, urllib.error, urllib.request
base, endpoint = sys.argv[1:3]
n, deadline = 0, time.time() + 600
while True:
    run_id = f"{base}-{n}"
    url = f"http://{endpoint}/v2/keys/torchelastic/p2p/run_{run_id}/rdzv/active_version"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            closed = json.loads(json.load(response)["node"]["value"])["status"] == "closed"
    except urllib.error.HTTPError as error:
        if error.code != 404:
            raise
        closed = False
    except OSError:
        if time.time() > deadline:
            raise
        time.sleep(5)  # etcd not reachable yet
        continue
    if not closed:
        print(run_id)
        break
    n += 1
"""
# bash puts the picked id in place of the placeholder in every argument, then runs the command.
# The kubelet leaves `$(python3 ...)` alone: it expands only $(NAME) of the container's own env
# vars (kubernetes third_party/forked/golang/expansion/expand.go returns unknown ones as is).
WITH_FRESH_RDZV_ID = 'set -e; id=$(python3 -c "$1" "$2" "$3"); shift 3; exec "${@//' + RDZV_ID_PLACEHOLDER + '/$id}"'


def command_with_fresh_rdzv_id(run: BertRun, base_id: str, owner: str, replica: str) -> list[str]:
    """``command`` with a rendezvous id picked at run time from etcd (see PICK_RDZV_ID)."""
    script = ["bash", "-c", WITH_FRESH_RDZV_ID, "fresh-rdzv-id", PICK_RDZV_ID, base_id, run.etcd_endpoint]
    return script + command(run, RDZV_ID_PLACEHOLDER, owner, replica)


def environment(run: BertRun, replica_id: str) -> dict[str, str]:
    """The seed's environment; each replica gets its own directory in the shared compile cache
    (what Neuron's training troubleshooting guide advises for caches on shared file systems), and
    replica i of the training run reads what replica i of the precompile run wrote."""
    cache = f"{run.cacheset}_{replica_id}"
    return {
        # run_dp_bert_large_hf_pretrain_bf16_s128.sh (BERT_SAMPLES_COMMIT) exports these two for
        # every run, and BUCKET_CAP_MB for multi-node ones.
        "NEURON_RT_EXEC_TIMEOUT": "600",
        "NEURON_RT_STOCHASTIC_ROUNDING_SEED": "0",
        "BUCKET_CAP_MB": "512",
        **EFA_ENV,
        "CCOM_SOCKET_IFNAME": "eth0",
        "NEURON_RT_RESET_CORES": "1",
        "XLA_TRANSFER_SEED_ASYNC": "1",
        "NEURON_CC_FLAGS": f"--cache_dir={cache_dir(CACHE_ROOT, cache)}",
        "HF_HOME": f"{CACHE_ROOT}/hf_cache/{cache}",
        **({} if run.precompile else resumable.env()),
    }
