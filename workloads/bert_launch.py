"""How BERT-large phase-1 pretraining is launched on Trainium: the command and environment.

Shared by the Volcano Job this project declares (``bert.py``) and the TorchX component for
`torchx run` (``torchx_trn1.py``), so both produce the same pods. No Pulumi or TorchX
imports: callers pass concrete values or TorchX macros for the replica and run ids.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Optional

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
    steps_this_run: Optional[int] = None
    bf16: bool = True
    precompile: bool = False
    cacheset: str = "bert-large"


# run_dp_bert_large_hf_pretrain_bf16_s128.sh (aws-neuron-samples, BERT_SAMPLES_COMMIT): bf16
# runs 16 x 32 per worker, full fp32 (`--enable_fp32`) halves the batch and doubles the
# accumulation, 8 x 64 (same 512 sequences per worker and step, twice the memory per sequence).
BF16_BATCH = (16, 32)
FP32_BATCH = (8, 64)


def batch_defaults(bf16: bool) -> tuple[int, int]:
    """(batch size, gradient accumulation micro-steps) of the pinned script for the precision."""
    return BF16_BATCH if bf16 else FP32_BATCH


def script_args(run: BertRun) -> list[str]:
    args = [
        "--batch_size", str(run.batch_size),
        "--grad_accum_usteps", str(run.grad_accum_steps),
        "--data_dir", run.data_dir,
        "--output_dir", run.output_dir,
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


def command(run: BertRun, rdzv_id: str) -> list[str]:
    """The container command: torchrun under neuron_parallel_compile for the precompile run."""
    line = shlex.join(torchrun(run, rdzv_id) + script_args(run))
    if run.precompile:
        return ["neuron_parallel_compile", line]
    return ["bash", "-c", line]


def environment(run: BertRun, replica_id: str) -> dict[str, str]:
    """The seed's environment; each replica gets its own compile cache inside the cache set."""
    cache = f"{run.cacheset}_{replica_id}"
    return {
        **EFA_ENV,
        "CCOM_SOCKET_IFNAME": "eth0",
        "NEURON_RT_RESET_CORES": "1",
        "XLA_TRANSFER_SEED_ASYNC": "1",
        "NEURON_CC_FLAGS": f"--cache_dir={CACHE_ROOT}/neuron_cache/{cache}",
        "HF_HOME": f"{CACHE_ROOT}/hf_cache/{cache}",
    }
