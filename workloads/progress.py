"""Where the progress exporter (progress_exporter.py) finds each workload's runs, and what a step of each
trains. Pure: settings in, the exporter's arguments out.

Every path is under the exporter's read-only mount of the namespace's claim at SHARED_MOUNT, where the
training pods' own mounts put them: BERT's ``outputDir`` under its /data mount, NxD Training's and Ray's
run roots under /shared (bert_launch.DATA_MOUNT, nxd_llama.EXPERIMENTS_DIR, ray_llama2.OUTPUT_ROOT).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from workloads import bert_launch, deadlines, goodput, nxd_llama, ray_llama2, resumable

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


@dataclass(frozen=True)
class Exported:
    """What the exporter serves of a workload beside its files: from its settings."""

    samples_per_step: int
    tokens_per_sample: int
    restart_budget: int
    checkpoint_interval_steps: int | None  # None: BERT's interval is in dataset shards


def exported_workloads(workloads: dict[str, Exported], bert_output_dir: str = "/data/output") -> list[dict[str, Any]]:
    """The exporter's runs argument: for each workload (by its part-of label), where its runs are, what
    their files are called, and what its settings say."""
    layout = {"bert-pretraining": ("bert", bert_root(bert_output_dir), resumable.HEARTBEAT, ""), **LAYOUT}
    return [
        {
            "workload": name,
            "kind": layout[name][0],
            "root": layout[name][1],
            "heartbeat": layout[name][2],
            "checkpoints": layout[name][3],
            "samplesPerStep": w.samples_per_step,
            "tokensPerSample": w.tokens_per_sample,
            "restartBudget": w.restart_budget,
            **({"checkpointIntervalSteps": w.checkpoint_interval_steps} if w.checkpoint_interval_steps else {}),
        }
        for name, w in workloads.items()
    ]


def exported(config: Any) -> dict[str, Exported]:
    """Every enabled training workload's settings as the exporter serves them."""
    found: dict[str, Exported] = {}
    if (bert := config.on("bert_pretraining")) is not None:
        batch, accum = bert_launch.batch_defaults(bert.bf16)
        per_node = (bert.batch_size or batch) * (bert.grad_accum_steps or accum) * goodput.BERT_WORKERS_PER_NODE
        found["bert-pretraining"] = Exported(
            per_node * bert.nodes, BERT_TOKENS_PER_SAMPLE, deadlines.bert_attempts(bert) - 1, None
        )
    llama_batch = int(goodput.figure("llamaGlobalBatch"))
    if (ray := config.on("ray_llama2")) is not None:
        found["ray-llama2"] = Exported(
            llama_batch, LLAMA_TOKENS_PER_SAMPLE, ray.max_retries, ray.checkpoint_every_steps
        )
    if (nxd := config.on("nxd_llama")) is not None:
        found["nxd-llama"] = Exported(
            llama_batch, LLAMA_TOKENS_PER_SAMPLE, nxd.max_restarts, nxd.checkpoint_every_steps
        )
    return found
