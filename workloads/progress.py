"""Where the progress exporter (progress_exporter.py) finds each workload's runs, and what a step of each
trains. Pure: settings in, the exporter's arguments out.

Every path is under the exporter's read-only mount of the namespace's claim at SHARED_MOUNT, where the
training pods' own mounts put them: BERT's ``outputDir`` under its /data mount, NxD Training's and Ray's
run roots under /shared (bert_launch.DATA_MOUNT, nxd_llama.EXPERIMENTS_DIR, ray_llama2.OUTPUT_ROOT).
"""

from __future__ import annotations

import posixpath
from typing import Any

from workloads import bert_launch, goodput, nxd_llama, ray_llama2, resumable

SHARED_MOUNT = "/shared"
EXPORTER_FILE = "progress_exporter.py"
# The exporter imports resilience.py's step patterns and checkpoint names: one ConfigMap ships both.
SHIPPED_FILES = (EXPORTER_FILE, "resilience.py")
# Not one of the well-known exporter ports (prometheus/prometheus wiki "Default port allocations" lists
# 9100 node-exporter, 9400 and up for others); the scrape selects the pods by label, not by port.
PORT = 9469
# WikiCorpus's pre-tokenized set is at sequence length 128 (bertPretraining.dataDir's default name).
BERT_TOKENS_PER_SAMPLE = 128
LLAMA_TOKENS_PER_SAMPLE = 4096


def bert_root(output_dir: str) -> str:
    """BERT's ``outputDir`` (under its pods' /data) as the exporter sees it (under /shared)."""
    return posixpath.join(SHARED_MOUNT, posixpath.relpath(output_dir, bert_launch.DATA_MOUNT))


# workload (the pods' part-of label) -> (kind of its heartbeat, run root, heartbeat in a run directory,
# checkpoints in a run directory).
LAYOUT = {
    "ray-llama2": ("ray", ray_llama2.OUTPUT_ROOT, resumable.HEARTBEAT, "checkpoints"),
    "nxd-llama": ("nxdt", nxd_llama.EXPERIMENTS_DIR, "0/log", "checkpoints"),
}


def exported_workloads(
    sizes: dict[str, tuple[int, int]], bert_output_dir: str = "/data/output"
) -> list[dict[str, Any]]:
    """The exporter's runs argument: for each workload in ``sizes`` (part-of label -> samples per step,
    tokens per sample), where its runs are and what their files are called."""
    layout = {"bert-pretraining": ("bert", bert_root(bert_output_dir), resumable.HEARTBEAT, ""), **LAYOUT}
    return [
        {
            "workload": name,
            "kind": layout[name][0],
            "root": layout[name][1],
            "heartbeat": layout[name][2],
            "checkpoints": layout[name][3],
            "samplesPerStep": samples,
            "tokensPerSample": tokens,
        }
        for name, (samples, tokens) in sizes.items()
    ]


def workload_sizes(config: Any) -> dict[str, tuple[int, int]]:
    """Samples per step and tokens per sample of every enabled training workload."""
    sizes: dict[str, tuple[int, int]] = {}
    if (bert := config.on("bert_pretraining")) is not None:
        batch, accum = bert_launch.batch_defaults(bert.bf16)
        per_node = (bert.batch_size or batch) * (bert.grad_accum_steps or accum) * goodput.BERT_WORKERS_PER_NODE
        sizes["bert-pretraining"] = (per_node * bert.nodes, BERT_TOKENS_PER_SAMPLE)
    llama_batch = int(goodput.figure("llamaGlobalBatch"))
    if config.on("ray_llama2") is not None:
        sizes["ray-llama2"] = (llama_batch, LLAMA_TOKENS_PER_SAMPLE)
    if config.on("nxd_llama") is not None:
        sizes["nxd-llama"] = (llama_batch, LLAMA_TOKENS_PER_SAMPLE)
    return sizes
