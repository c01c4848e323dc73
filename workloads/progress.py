"""The progress exporter (progress_exporter.py) in a training namespace: where it finds each workload's runs,
what a step of each trains, and the pod that serves them (``progressExporter`` in the workload stack).

Every path is under the exporter's read-only mount of the namespace's claim at SHARED_MOUNT, where the
training pods' own mounts put them: BERT's ``outputDir`` under its /data mount, NxD Training's and Ray's
run roots under /shared (bert_launch.DATA_MOUNT, nxd_llama.EXPERIMENTS_DIR, ray_llama2.OUTPUT_ROOT).
"""

from __future__ import annotations

import copy
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from infra.facts import versions
from infra.specs import system_pods
from workloads import bert_launch, deadlines, goodput, nxd_llama, pods, ray_llama2, resilience, resumable
from workloads.kube import declare

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
# bertPretraining.outputDir's default (workloads/settings.py).
BERT_OUTPUT_DIR = "/data/output"


def bert_root(output_dir: str) -> str:
    """BERT's ``outputDir`` (under its pods' /data) as the exporter sees it (under /shared)."""
    return posixpath.join(SHARED_MOUNT, posixpath.relpath(output_dir, bert_launch.DATA_MOUNT))


# workload (the pods' part-of label) -> (kind of its heartbeat, run root, heartbeat in a run directory,
# checkpoints in a run directory, the writer's lock record in a run directory: resumable.RunLock's run_dir).
LAYOUT = {
    "ray-llama2": ("ray", ray_llama2.OUTPUT_ROOT, resumable.HEARTBEAT, "checkpoints", resilience.HOLDER_NAME),
    "nxd-llama": (
        "nxdt",
        nxd_llama.EXPERIMENTS_DIR,
        "0/log",
        "checkpoints",
        f"{nxd_llama.LOCK_SUBDIR}/{resilience.HOLDER_NAME}",
    ),
}


@dataclass(frozen=True)
class Exported:
    """What the exporter serves of a workload beside its files: from its settings."""

    samples_per_step: int
    tokens_per_sample: int
    restart_budget: int
    checkpoint_interval_steps: int | None  # None: BERT's interval is in dataset shards
    live_seconds: int  # live_seconds(): how long a run stays served after its last sign of life
    # An asynchronous save is written while training steps on (nxdLlama's asyncCheckpoints): not time lost.
    asynchronous_saves: bool = False


def exported_workloads(workloads: dict[str, Exported], bert_output_dir: str = BERT_OUTPUT_DIR) -> list[dict[str, Any]]:
    """The exporter's runs argument: for each workload (by its part-of label), where its runs are, what
    their files are called, and what its settings say."""
    bert = ("bert", bert_root(bert_output_dir), resumable.HEARTBEAT, "", resilience.HOLDER_NAME)
    layout = {"bert-pretraining": bert, **LAYOUT}
    return [
        {
            "workload": name,
            "kind": layout[name][0],
            "root": layout[name][1],
            "heartbeat": layout[name][2],
            "checkpoints": layout[name][3],
            "holder": layout[name][4],
            "liveSeconds": w.live_seconds,
            "samplesPerStep": w.samples_per_step,
            "tokensPerSample": w.tokens_per_sample,
            "restartBudget": w.restart_budget,
            **({"checkpointIntervalSteps": w.checkpoint_interval_steps} if w.checkpoint_interval_steps else {}),
            **({"asynchronousSaves": True} if w.asynchronous_saves else {}),
        }
        for name, w in workloads.items()
    ]


def live_seconds(settings: resumable.ProbeTimeouts) -> int:
    """The longest an attempt of a run can stay silent (no step line, no new attempt taking the lock) before
    its liveness probe ends it (resumable.detection_minutes of the longer of its two limits): a run silent
    for longer has ended, and the ledger and the alerts read it no more."""
    return resumable.detection_minutes(max(settings.first_step_timeout_minutes, settings.hang_timeout_minutes)) * 60


def exported(config: Any) -> dict[str, Exported]:
    """Every enabled training workload's settings as the exporter serves them."""
    found: dict[str, Exported] = {}
    if (bert := config.on("bert_pretraining")) is not None:
        batch, accum = bert_launch.batch_defaults(bert.bf16)
        per_node = (bert.batch_size or batch) * (bert.grad_accum_steps or accum) * goodput.BERT_WORKERS_PER_NODE
        found["bert-pretraining"] = Exported(
            per_node * bert.nodes, BERT_TOKENS_PER_SAMPLE, deadlines.bert_attempts(bert) - 1, None, live_seconds(bert)
        )
    llama_batch = int(goodput.figure("llamaGlobalBatch"))
    if (ray := config.on("ray_llama2")) is not None:
        found["ray-llama2"] = Exported(
            llama_batch, LLAMA_TOKENS_PER_SAMPLE, ray.max_retries, ray.checkpoint_every_steps, live_seconds(ray)
        )
    if (nxd := config.on("nxd_llama")) is not None:
        found["nxd-llama"] = Exported(
            llama_batch,
            LLAMA_TOKENS_PER_SAMPLE,
            nxd.max_restarts,
            nxd.checkpoint_every_steps,
            live_seconds(nxd),
            nxd.async_checkpoints,
        )
    return found


NAME = "progress-exporter"
LABELS = {"app.kubernetes.io/name": NAME}
# The ConfigMap's files, where the container reads them.
SCRIPT_DIR = "/opt/progress"


def shipped_files() -> dict[str, str]:
    """The exporter and resilience.py, as they are in the repository (never reformatted: the pod runs them)."""
    here = Path(__file__).parent
    return {name: (here / name).read_text() for name in SHIPPED_FILES}


def command(workloads: dict[str, Exported], bert_output_dir: str = BERT_OUTPUT_DIR) -> list[str]:
    """The container's command: the exporter from the ConfigMap, with the runs it serves."""
    runs = json.dumps(exported_workloads(workloads, bert_output_dir), separators=(",", ":"))
    return ["python", f"{SCRIPT_DIR}/{EXPORTER_FILE}", str(PORT), runs]


@dataclass(frozen=True)
class ProgressLayout:
    namespace: str
    claim: str
    core_node_selector: Mapping[str, str]
    namespace_id: int
    workloads: dict[str, Exported]
    bert_output_dir: str = BERT_OUTPUT_DIR


def manifests(layout: ProgressLayout) -> list[dict[str, Any]]:
    """A ConfigMap with the scripts, a NetworkPolicy opening the metrics port only, and one read-only pod on
    the system nodes as the namespace's id (the one user its directory lets read)."""
    meta = {"name": NAME, "namespace": layout.namespace, "labels": LABELS}
    container = {
        "name": "exporter",
        "image": versions.PYTHON_SLIM_IMAGE,
        "command": command(layout.workloads, layout.bert_output_dir),
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, *pods.env_list(pods.IDENTITY_ENV)],
        "ports": [{"name": "metrics", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": PORT}, "periodSeconds": 30, "timeoutSeconds": 20},
        # A scrape reads every run's heartbeat tail and lists its checkpoints on Lustre: a slow answer is
        # the file system's, so only a process that stops answering for long is restarted.
        "livenessProbe": {
            "httpGet": {"path": "/metrics", "port": PORT},
            "periodSeconds": 60,
            "timeoutSeconds": 30,
            "failureThreshold": 5,
        },
        "resources": copy.deepcopy(system_pods.PROGRESS_EXPORTER_RESOURCES),
        "securityContext": pods.container_security_context(read_only_root=True),
        "volumeMounts": [
            {**pods.claim_mount(SHARED_MOUNT), "readOnly": True},
            {"name": "scripts", "mountPath": SCRIPT_DIR, "readOnly": True},
        ],
    }
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": shipped_files()},
        pods.network_policy(NAME, layout.namespace, LABELS, [pods.from_anywhere([PORT])]),
        pods.system_deployment(
            meta,
            LABELS,
            layout.core_node_selector,
            run_as_user=layout.namespace_id,
            containers=[container],
            volumes=[pods.claim_volume(layout.claim), {"name": "scripts", "configMap": {"name": NAME}}],
        ),
    ]


class ProgressExporter(pulumi.ComponentResource):
    def __init__(self, name: str, layout: ProgressLayout, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:workloads:ProgressExporter", name, None, opts)
        declared: list[pulumi.Resource] = []
        for manifest in manifests(layout):
            declared.append(declare(manifest, self, declared[-1:]))
        self.register_outputs({})
