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
from workloads.pods import EFA_ENV, IDENTITY_ENV

SCRIPT = "dp_bert_large_hf_pretrain_hdf5.py"
CACHE_ROOT = "/data"
DATA_MOUNT = "/data"


@dataclass(frozen=True)
class BertRun:
    nnodes: int
    nproc_per_node: int
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
# dp_bert_hf_pretrain/dp_bert_large_hf_pretrain_hdf5.py l.561, 573-600; l.283 reads
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


# torchrun's c10d rendezvous as TorchX 0.7.0's dist.ddp sets it up (pytorch/torchx v0.7.0
# torchx/components/dist.py l.225-239, 256-272): the torchrun whose endpoint host is this machine hosts
# the rendezvous store (a TCPStore) on RDZV_PORT and the others connect to it. TorchX names rank 0's
# host with its rank0_env macro (schedulers/kubernetes_scheduler.py app_to_resource l.366-377):
# TORCHX_RANK0_HOST, which it sets to localhost, in the first replica of the first role,
# VC_<ROLE>_0_HOSTS in every other; Volcano v1.15.1's svc plugin gives every pod of the job that
# variable, `<job>-<role>-0-0.<job>`, resolvable through the job's headless Service, which publishes
# pods before they are ready (pkg/controllers/job/plugins/svc/svc.go l.86-111, 303-338).
# torch 2.9.0 (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py _create_tcp_store
# l.137-187, utils.py _matches_machine_hostname l.116-125): localhost always hosts, a host name that
# is another machine's never does. The store is rank 0's torchrun's: every attempt of a job, a
# Volcano RestartJob included (all pods replaced), starts from an empty one, so a run id is never
# found finished by a later attempt. MASTER_ADDR is not the endpoint's host: the rendezvous' rank 0
# opens a second store and publishes its own socket.getfqdn() (dynamic_rendezvous.py l.1205-1219,
# api.py RendezvousStoreInfo.build l.88-99), which every node resolves.
RDZV_PORT = 29500  # dist.ddp's rdzv_port default (l.175)
ROLE = "worker"
RANK0_HOST_ENV = f"VC_{ROLE.upper()}_0_HOSTS"
RANK0_LOCAL_ENV = "TORCHX_RANK0_HOST"
# How long the others keep connecting to a store not up yet (the TCPStore timeout covers its
# initialization, torch 2.9.0 TCPStore docs; c10d's default read_timeout is 60 s): rank 0's torchrun
# starts only once its pod has pulled the image and its shell holds the run directory's lock, which it
# may wait resumable.LOCK_WAIT_SECONDS for. As long as c10d's join_timeout (600 s default,
# dynamic_rendezvous.py create_handler l.1402-1404).
RDZV_READ_TIMEOUT_SECONDS = 600


def rank0_host_env(replica: int) -> str:
    """The variable holding rank 0's host in ``replica``'s pod: what TorchX's rank0_env becomes there."""
    return RANK0_LOCAL_ENV if replica == 0 else RANK0_HOST_ENV


def rank0_env(replica: int) -> dict[str, str]:
    """What TorchX adds to the first replica's environment for its rank0_env."""
    return {RANK0_LOCAL_ENV: "localhost"} if replica == 0 else {}


def rdzv_endpoint(host_env: str) -> str:
    """rank 0's host and the store's port. The kubelet expands ``$(NAME)`` from the container's
    environment, Volcano's and TorchX's variables included (kubernetes pkg/kubelet/container/helpers.go
    ExpandContainerCommandAndArgs), before any shell or neuron_parallel_compile sees the command."""
    return f"$({host_env}):{RDZV_PORT}"


def torchrun(run: BertRun, rdzv_id: str, host_env: str) -> list[str]:
    return [
        "torchrun",
        "--rdzv_backend", "c10d",
        "--rdzv_endpoint", rdzv_endpoint(host_env),
        "--rdzv_conf", f"read_timeout={RDZV_READ_TIMEOUT_SECONDS}",
        "--rdzv_id", rdzv_id,
        "--nnodes", str(run.nnodes),
        "--nproc_per_node", str(run.nproc_per_node),
        "--tee", "3",
        SCRIPT,
    ]  # fmt: skip


def command(run: BertRun, rdzv_id: str, host_env: str, owner: str, replica: str) -> list[str]:
    """The container command: torchrun under neuron_parallel_compile for the precompile run; the
    training run continues from its run directory's newest complete checkpoint (resilience.py),
    and its output feeds the heartbeat. Replica 0 of the training gang holds the run directory's
    lock under ``owner``, the job's name, for its whole run (resumable.RunLock). ``host_env`` names
    the variable holding rank 0's host (``rank0_host_env``, or TorchX's rank0_env macro)."""
    line = shlex.join(torchrun(run, rdzv_id, host_env) + script_args(run))
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
        # The namespace's id has no passwd entry in the image: HOME and the user name (pods.IDENTITY_ENV).
        **IDENTITY_ENV,
        **({} if run.precompile else resumable.env()),
    }
