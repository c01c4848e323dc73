"""The project's one goodput model: of the Trainium node-hours a workload's run pays for, the share that
trains, expected from its settings. Pure: settings and the file system's throughput in, figures out.

A run pays ``T + F`` hours on ``N`` nodes: ``T`` hours of training and ``F`` hours that cannot train (the
first start from zero nodes, a compile step before training, the autoscaler's scale-down tail). While
it trains, three things take time from the steps:
- failures: ``N * rate * (R + I / 2)`` of the time, where ``rate`` is failures per node-hour, ``R`` the
  downtime of one failure (detection plus recovery, weighted over FAILURE_CLASSES) and ``I / 2`` the work
  redone on average from the last checkpoint (``T / 2`` when the run is shorter than ``I``);
- checkpoints: ``B / I``, ``B`` the time one save blocks training and ``I`` the interval between saves;
  exactly ``floor(T / I) * B / T``, so a run that ends before its first save pays none. A synchronous save
  blocks for all of ``S``, the checkpoint's bytes at the file system's throughput. An asynchronous one
  (NxD's ``async_save``, which NxD Training turns on with ``exp_manager.async_checkpointing``) blocks for
  ``C``, the copy from the devices to host memory, and for whatever of the write is still running when
  the next save begins: ``B = C + max(0, S - I)``. Its files are marked complete (``done``) only when the
  next save begins, so a failure redoes one and a half intervals on average, not a half: the ``I / 2``
  above becomes ``3 I / 2``;
so goodput = ``T / (T + F) * (1 - N * rate * (R + k I) - B / I)``, ``k`` 1/2 or 3/2, never below 0.

A restart budget (the controller's retries) ends a run after that many failures: the probability that a
run's failures exceed it (Poisson with mean ``N * rate * (T + F)``) is reported beside the ratio.

The same model sets what the user leaves unset (``resolved``): the checkpoint interval at the Young/Daly
optimum, the restart budget from the run's expected failures over its length, and the training deadline
from its steps, each on a coarse grid (``preferred_count``, ``rounded_deadline_minutes``): they go into the
jobs' specs, where a change replaces a running job. ``stall_problems`` refuses a run whose saves block more than
checkpointStallLimit of each interval; ``deadline_warnings`` warns of a deadline set shorter than the run.

Every input is in one table, FIGURES, with its kind (M: measured by someone else, D: a documented setting
or bound, E: an estimate, with its reasoning) and source; docs/monitoring.md prints it
(``figure_table``). Extend the model here (more failure classes, an optimal interval), not beside it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from infra.facts import efs
from infra.specs.node_template import TRAINIUM_SCALE_DOWN_UNNEEDED, TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS
from workloads import bert_launch, deadlines, first_step, resumable
from workloads.first_step import FirstStep
from workloads.settings import (
    DEFAULT_FAILURE_RATE_PER_NODE_HOUR,
    MAX_RESTART_BUDGET,
    BertPretrainingSettings,
    NxdLlamaSettings,
    RayLlama2Settings,
    WorkloadsConfig,
    key_name,
)


@dataclass(frozen=True)
class Figure:
    value: float
    unit: str
    kind: str  # "M" measured elsewhere, "D" a documented setting or bound, "E" an estimate
    source: str


# The Neuron SDK's published NxD Llama-2-7B training rate: 93.3 sequences/s of 4,096 tokens on 16
# trn1.32xlarge (aws-neuron/aws-neuron-sdk general/benchmarks/trn1/training_data_decoder.csv at 1351ee1,
# SDK 2.16, TP 8, global batch 1,024).
_LLAMA_SEQ_PER_NODE_SECOND = 93.3 / 16

FIGURES: dict[str, Figure] = {
    "failureRatePerNodeHour": Figure(
        DEFAULT_FAILURE_RATE_PER_NODE_HOUR,
        "failures per node-hour",
        "M",
        "Llama 3 (arXiv 2407.21783 §3.3.4): 419 unexpected interruptions in 54 days on 2,048 hosts; "
        "the default of the workload stack's failureRatePerNodeHour",
    ),
    "podFailureDetectionMinutes": Figure(
        1, "min", "E", "a container that exits fails its pod at once; the controller reacts within a minute"
    ),
    "neuronRepairMinutes": Figure(
        1,
        "min",
        "D",
        "EKS node repair replaces a node 1 minute after a fatal Neuron condition (infra/specs/node_health.py)",
    ),
    "instanceLostDetectionMinutes": Figure(
        10,
        "min",
        "D",
        "the survivors' collectives time out after NEURON_RT_EXEC_TIMEOUT=600 s (workloads/bert_launch.py)",
    ),
    "silentNodeDetectionMinutes": Figure(
        deadlines.SILENT_NODE_REPAIR_MINUTES,
        "min",
        "D",
        "a node whose kubelet is gone is replaced after EKS's 30 min NotReady repair, +5 for its deletion "
        "(workloads/deadlines.py SILENT_NODE_REPAIR_MINUTES)",
    ),
    "scaleDownMinutes": Figure(
        TRAINIUM_SCALE_DOWN_UNNEEDED_SECONDS // 60,
        "min",
        "D",
        f"a Trainium group's cluster-autoscaler scale-down-unneeded-time, {TRAINIUM_SCALE_DOWN_UNNEEDED} "
        "(infra/specs/node_template.py; Karpenter's consolidateAfter by default): idle nodes are paid that long "
        "after the run",
    ),
    "bertSequencesPerNodeSecond": Figure(
        6449 / 2,
        "sequences/s per node",
        "M",
        "the BERT seed's log: 6,449 sequences/s on 2 trn1.32xlarge, bf16 (seeds/bert-torchx-eks-trn1-tutorial.md)",
    ),
    "llamaSequencesPerNodeSecond": Figure(
        _LLAMA_SEQ_PER_NODE_SECOND,
        "sequences/s per node",
        "M",
        "NxD Llama-2-7B: 93.3 sequences/s of 4,096 tokens on 16 trn1.32xlarge (aws-neuron-sdk "
        "general/benchmarks/trn1/training_data_decoder.csv, SDK 2.16); trn1n counted alike",
    ),
    "llamaGlobalBatch": Figure(
        1024,
        "sequences per step",
        "D",
        "global batch of both Llama-2-7B runs (docker/ray-llama2/ray_train_llama2.py GLOBAL_BATCH; NxD "
        "Training's examples/conf/megatron_llama_7B_config.yaml data.global_batch_size)",
    ),
    "bertShardMinutes": Figure(
        90,
        "min per dataset shard",
        "E",
        "the WikiCorpus HDF5 shards' sizes were not read; about 1.5 h of the seed's throughput per shard",
    ),
    "bertCheckpointGB": Figure(
        336e6 * 12 / 1e9,
        "GB",
        "E",
        "BERT-large's 336 M parameters in fp32 with LAMB's two fp32 moments (12 bytes a parameter)",
    ),
    "llamaCheckpointGB": Figure(
        6.74e9 * 14 / 1e9,
        "GB",
        "E",
        "Llama-2-7B's 6.74 B parameters: bf16 weights, fp32 master weights and AdamW's two fp32 moments "
        "(14 bytes a parameter, ZeRO-1 shards them but writes them all)",
    ),
    "hostCopyGBPerNodeSecond": Figure(
        1.6,
        "GB/s per node",
        "E",
        "no Trainium figure was found for copying a checkpoint from the devices to host memory, the part of an "
        "asynchronous save training waits for; pytorch/xla pull 5824 measured 5.1 s for a 2 B-parameter model's "
        "tensors (8 GB in fp32) before parallelising the copies, about 1.6 GB/s per host",
    ),
    "bertScriptMaxSteps": Figure(
        28125, "steps", "D", "the pinned BERT script's max_steps (workloads/settings.py trainSteps)"
    ),
    "nxdMaxSteps": Figure(
        20000, "steps", "D", "megatron_llama_7B_config.yaml trainer.max_steps (workloads/settings.py trainIters)"
    ),
    "rayMaxSteps": Figure(
        10000, "steps", "D", "docker/ray-llama2/ray_train_llama2.py TOTAL_STEPS (workloads/settings.py trainSteps)"
    ),
}


def figure(name: str) -> float:
    return FIGURES[name].value


@dataclass(frozen=True)
class FailureClass:
    name: str
    share: float
    detection_minutes: Callable[[int], float]  # of the run's hangTimeoutMinutes
    new_node: bool  # recovered on a replacement node, or on the nodes the job had


# The mix of failure classes is an estimate (no published breakdown for Trainium was found); the
# detection times are the project's settings where it has one.
FAILURE_CLASSES = (
    FailureClass("process or runtime error, node healthy", 0.40, lambda _: figure("podFailureDetectionMinutes"), False),
    FailureClass("fatal Neuron condition", 0.25, lambda _: figure("neuronRepairMinutes"), True),
    FailureClass("instance lost", 0.15, lambda _: figure("instanceLostDetectionMinutes"), True),
    # The liveness probe's limit and its failed reads (workloads/resumable.py detection_minutes).
    FailureClass("silent hang", 0.12, lambda hang: resumable.detection_minutes(hang), False),
    FailureClass("silent node", 0.08, lambda _: figure("silentNodeDetectionMinutes"), True),
)


def recovery_minutes(start: FirstStep, new_node: bool) -> float:
    """A failure's recovery, in the first-step model's phases (infra/facts/startup.py): the job's pods
    started again on nodes that are up, after a new node's own start when one replaces a failed node."""
    restart = first_step.minutes_of(first_step.RESTART_ON_WARM_NODES)
    return restart + (first_step.minutes_of(start.new_node) if new_node else 0.0)


def downtime_hours(hang_timeout_minutes: int, start: FirstStep) -> float:
    """R: the expected downtime of one failure, detection plus recovery, over FAILURE_CLASSES."""
    return (
        sum(
            c.share * (c.detection_minutes(hang_timeout_minutes) + recovery_minutes(start, c.new_node))
            for c in FAILURE_CLASSES
        )
        / 60
    )


@dataclass(frozen=True)
class RunModel:
    """What the model needs of one run."""

    workload: str
    nodes: int
    failure_rate: float  # per node-hour
    downtime_hours: float  # R
    interval_hours: float  # I
    save_hours: float  # S
    train_hours: float  # T
    fixed_hours: float  # F
    restart_budget: int
    step_hours: float | None = None  # one training step, where the interval is set in steps
    copy_hours: float = 0.0  # C: an asynchronous save's copy from the devices to host memory
    asynchronous: bool = False
    checkpoint_gb: float = 0.0

    def blocking_hours(self, interval_hours: float) -> float:
        """B: how long one save holds training up, at ``interval_hours`` between saves."""
        if not self.asynchronous:
            return self.save_hours
        return self.copy_hours + max(0.0, self.save_hours - interval_hours)

    @property
    def redone_intervals(self) -> float:
        """k: the intervals of work a failure redoes on average. An asynchronous save is marked complete only
        when the next save begins (neuronx-distributed fbac349 src/neuronx_distributed/trainer/checkpoint.py:
        CheckpointIOState.begin calls wait_save, which writes the previous tag's ``done``), and the restart
        resumes from the newest save with ``done`` (workloads/resilience.py). Read at NxD fbac349 (release
        2.29) and NxD Training 9169aa0 (1.6.0), the newest sources mirrored here; the image runs NxD 0.19 and
        NxD Training 1.7.0, whose sources were not readable here (their pip index did not resolve)."""
        return 1.5 if self.asynchronous else 0.5


def young_interval_hours(run: RunModel) -> float:
    """The checkpoint interval that minimises the time lost to saves and redone work: Young's first-order
    optimum sqrt(2 S M), M the job's mean time between failures, 1 / (N rate) (J. W. Young, "A first order
    approximation to the optimum checkpoint interval", Communications of the ACM 17(9), 1974). Daly's higher
    order estimate (Future Generation Computer Systems 22(3), 2006) differs from it by less than S when S is
    far below M, as here (seconds to minutes against days).

    The same minimum of ``B / I + k I / M`` in general: sqrt(B M / k), which is Young's for a synchronous
    save (B = S, k = 1/2). An asynchronous save blocks for C while its write fits in the interval, so its
    optimum is sqrt(C M / k), and never shorter than the write itself."""
    mtbf = 1 / (run.nodes * run.failure_rate)
    if not run.asynchronous:
        return math.sqrt(2 * run.save_hours * mtbf)
    return max(math.sqrt(run.copy_hours * mtbf / run.redone_intervals), run.save_hours)


@dataclass(frozen=True)
class Goodput:
    run: RunModel
    failure_loss: float  # share of training time
    checkpoint_loss: float  # share of training time
    fixed_loss: float  # share of paid time
    ratio: float
    expected_failures: float
    budget_exhausted: float  # probability the run's failures exceed its restart budget

    def as_json(self) -> dict[str, Any]:
        r = self.run
        young = young_interval_hours(r)
        at_young = expected(dataclasses.replace(r, interval_hours=young))
        return {
            "goodput": round(self.ratio, 6),
            "checkpointGB": round(r.checkpoint_gb, 3),
            "asynchronousSaves": r.asynchronous,
            "saveBlockingHours": round(r.blocking_hours(r.interval_hours), 6),
            "saveShare": round(save_share(r), 6),
            "checkpointIntervalSteps": round(r.interval_hours / r.step_hours) if r.step_hours else None,
            "savesInRun": math.floor(r.train_hours / r.interval_hours) if r.interval_hours > 0 else 0,
            "trainSteps": round(r.train_hours / r.step_hours) if r.step_hours else None,
            "youngDalyIntervalHours": round(young, 6),
            "youngDalyIntervalSteps": round(young / r.step_hours) if r.step_hours else None,
            "goodputAtYoungDaly": round(at_young.ratio, 6),
            "failureLoss": round(self.failure_loss, 6),
            "checkpointLoss": round(self.checkpoint_loss, 6),
            "fixedLoss": round(self.fixed_loss, 6),
            "expectedFailures": round(self.expected_failures, 6),
            "restartBudget": r.restart_budget,
            "restartBudgetExhausted": round(self.budget_exhausted, 6),
            "inputs": {
                "nodes": r.nodes,
                "failureRatePerNodeHour": r.failure_rate,
                "downtimeHours": round(r.downtime_hours, 6),
                "checkpointIntervalHours": round(r.interval_hours, 6),
                "checkpointSaveHours": round(r.save_hours, 6),
                "trainHours": round(r.train_hours, 6),
                "fixedHours": round(r.fixed_hours, 6),
            },
        }


def poisson_above(mean: float, budget: int) -> float:
    """P(X > budget) for X ~ Poisson(mean)."""
    return max(0.0, 1.0 - sum(math.exp(-mean) * mean**k / math.factorial(k) for k in range(budget + 1)))


def save_share(run: RunModel) -> float:
    """B / I: the share of each checkpoint interval training waits for its save."""
    return run.blocking_hours(run.interval_hours) / run.interval_hours if run.interval_hours > 0 else 0.0


def expected(run: RunModel) -> Goodput:
    # Work redone after a failure: k intervals, or half the run when it ends before the save it would resume from.
    redone = min(run.redone_intervals * run.interval_hours, run.train_hours / 2)
    failure = run.nodes * run.failure_rate * (run.downtime_hours + redone)
    # B / I over a long run; a run that ends before a save pays for the saves it makes.
    saves = math.floor(run.train_hours / run.interval_hours) if run.interval_hours > 0 else 0
    checkpoint = saves * run.blocking_hours(run.interval_hours) / run.train_hours if run.train_hours > 0 else 0.0
    paid = run.train_hours + run.fixed_hours
    training_share = run.train_hours / paid if paid > 0 else 0.0
    ratio = max(0.0, training_share * (1 - failure - checkpoint))
    failures = run.nodes * run.failure_rate * paid
    return Goodput(
        run, failure, checkpoint, 1 - training_share, ratio, failures, poisson_above(failures, run.restart_budget)
    )


def save_hours(checkpoint_gb: float, file_system_mbps: float) -> float:
    """S: one save's bytes at the file system's aggregate baseline throughput (MB/s, 10^6 bytes)."""
    return checkpoint_gb * 1000 / file_system_mbps / 3600


def copy_hours(checkpoint_gb: float, nodes: int) -> float:
    """C: an asynchronous save's copy from the devices to host memory, each node copying its share at once."""
    return checkpoint_gb / (nodes * figure("hostCopyGBPerNodeSecond")) / 3600


def storage_throughput_mbps(storage: Any) -> float | None:
    """The cluster's file system's baseline throughput from its exported ``storage`` (infra/contract.py
    Storage): EFS's modelled save throughput as exported, FSx's from its capacity and tier; None without a file
    system, or from a cluster stack that does not export its per-unit throughput (``throughput_warning`` says
    what that skips)."""
    if not storage.enabled:
        return None
    if storage.throughput_mbps:
        return float(storage.throughput_mbps)
    per_unit = storage.per_unit_storage_throughput or per_unit_write_mbps(storage.deployment_type)
    return lustre_throughput_mbps(storage.capacity_gib, per_unit) if per_unit else None


# SCRATCH_2 takes no per-unit setting: the FSx for Lustre user guide's performance table gives its disk
# throughput per TiB as 200 MB/s read and 100 MB/s write (awsdocs/amazon-fsx-lustre-user-guide da580d8,
# doc_source/performance.md, "File system performance for previous generation SSD storage options"; its
# network baseline is 200). A write is bounded by the lower of network and disk throughput (the same page,
# "How Lustre file systems work"), and a checkpoint is a write: 100.
SCRATCH_2_WRITE_MBPS_PER_TIB = 100


def per_unit_write_mbps(deployment_type: str | None) -> int | None:
    """The per-unit write throughput of a deployment type that takes no per-unit setting; None for others."""
    return SCRATCH_2_WRITE_MBPS_PER_TIB if deployment_type == "SCRATCH_2" else None


def throughput_warning(config: WorkloadsConfig, storage: Any) -> str | None:
    """What a deploy against a cluster stack whose file system exports no throughput skips: the model's
    intervals, the write time in the deadlines, and the stall and hang-limit refusals (``stall_problems``)."""
    if not storage.enabled or storage_throughput_mbps(storage) is not None:
        return None
    runs = [name for name in ("bert_pretraining", "ray_llama2", "nxd_llama") if config.on(name) is not None]
    if not runs:
        return None
    return (
        f"{config.cluster_stack} exports no storage.perUnitStorageThroughput, so the goodput model does not know "
        "how long a checkpoint takes to write: checkpointEverySteps / checkpointEveryShards keep their defaults "
        "(100 steps, 1 shard) where unset, derived deadlines count no write time, and the checks that refuse saves "
        "that stall training (checkpointStallLimit) or outlast hangTimeoutMinutes are skipped. `pulumi up` the "
        "cluster stack first, then this one"
    )


def lustre_throughput_mbps(capacity_gib: float, per_unit_mbps_per_tib: float) -> float:
    """FSx for Lustre's baseline throughput: capacity in TiB times the per-unit throughput (FSx Lustre
    user guide, performance: "throughput per unit of storage")."""
    return capacity_gib / 1024 * per_unit_mbps_per_tib


# One worker per NeuronCore of a trn1.32xlarge (the seed's 32 per node, workloads/bert_launch.py).
BERT_WORKERS_PER_NODE = 32


def bert_step_hours(s: BertPretrainingSettings) -> float:
    batch, accum = bert_launch.batch_defaults(s.bf16)
    per_node = (s.batch_size or batch) * (s.grad_accum_steps or accum) * BERT_WORKERS_PER_NODE
    return per_node / figure("bertSequencesPerNodeSecond") / 3600


def llama_step_hours(nodes: int) -> float:
    return figure("llamaGlobalBatch") / (figure("llamaSequencesPerNodeSecond") * nodes) / 3600


def _bert(s: BertPretrainingSettings, rate: float, mbps: float, start: FirstStep) -> RunModel:
    steps = s.train_steps or figure("bertScriptMaxSteps")
    train = min(steps * bert_step_hours(s), s.train_deadline_minutes / 60)
    compile_minutes = first_step.minutes_of(start.cold_extra) if s.precompile else 0
    fixed = (start.warm_minutes + compile_minutes + figure("scaleDownMinutes")) / 60
    return RunModel(
        "bertPretraining",
        s.nodes,
        rate,
        downtime_hours(s.hang_timeout_minutes, start),
        s.checkpoint_every_shards * figure("bertShardMinutes") / 60,
        save_hours(figure("bertCheckpointGB"), mbps),
        train,
        fixed,
        deadlines.bert_attempts(s) - 1,
        checkpoint_gb=figure("bertCheckpointGB"),
    )


def _llama(
    workload: str,
    nodes: int,
    hang: int,
    every: int,
    steps: float,
    deadline_hours: float,
    compile_step: bool,
    budget: int,
    rate: float,
    mbps: float,
    start: FirstStep,
    asynchronous: bool = False,
) -> RunModel:
    """The two Llama-2-7B runs: their deadlines count from creation, the first start included."""
    step = llama_step_hours(nodes)
    first = start.warm_minutes / 60
    train = max(0.0, min(steps * step, deadline_hours - first))
    compile_hours = first_step.minutes_of(start.cold_extra) / 60 if compile_step else 0.0
    gb = figure("llamaCheckpointGB")
    return RunModel(
        workload,
        nodes,
        rate,
        downtime_hours(hang, start),
        every * step,
        save_hours(gb, mbps),
        train,
        first + compile_hours + figure("scaleDownMinutes") / 60,
        budget,
        step,
        copy_hours(gb, nodes),
        asynchronous,
        gb,
    )


def nxd_steps(s: NxdLlamaSettings) -> float:
    return s.train_iters or figure("nxdMaxSteps")


def ray_steps(s: RayLlama2Settings) -> float:
    return s.train_steps or figure("rayMaxSteps")


def bert_steps(s: BertPretrainingSettings) -> float:
    return s.train_steps or figure("bertScriptMaxSteps")


def _nxd(s: NxdLlamaSettings, rate: float, mbps: float, start: FirstStep) -> RunModel:
    return _llama(
        "nxdLlama",
        s.nodes,
        s.hang_timeout_minutes,
        s.checkpoint_every_steps,
        nxd_steps(s),
        s.train_deadline_minutes / 60,
        s.compile,
        s.max_restarts,
        rate,
        mbps,
        start,
        s.async_checkpoints,
    )


def _ray(s: RayLlama2Settings, rate: float, mbps: float, start: FirstStep) -> RunModel:
    # ray_train_llama2.py runs NxD's example unchanged, and it calls nxd.save_checkpoint without async_save
    # (neuronx-distributed fbac349 examples/training/llama/tp_zero1_llama_hf_pretrain/
    # tp_zero1_llama_hf_pretrain.py l.339-351): its saves are synchronous.
    return _llama(
        "rayLlama2",
        s.workers,
        s.hang_timeout_minutes,
        s.checkpoint_every_steps,
        ray_steps(s),
        s.train_deadline_seconds / 3600,
        "precompile" in s.steps,
        s.max_retries,
        rate,
        mbps,
        start,
    )


def workload_goodput(
    config: Any, file_system_mbps: float, starts: Mapping[str, FirstStep] | None = None
) -> list[Goodput]:
    """The expected goodput of every enabled training workload (the acceptance check trains nothing).
    ``starts``: per workload, the first-step model (workloads/first_step.py) for the node group it runs on;
    where not given, that of a group scaled from zero and burnt in (first_step.DEFAULT_GROUP)."""
    return [expected(r) for r in workload_runs(config, file_system_mbps, starts)]


def workload_runs(
    config: Any, file_system_mbps: float, starts: Mapping[str, FirstStep] | None = None
) -> list[RunModel]:
    rate = config.failure_rate_per_node_hour
    given = starts or {}

    def start(name: str, nodes: int) -> FirstStep:
        return given.get(name) or first_step.first_step(name, first_step.DEFAULT_GROUP, nodes)

    runs = []
    if (bert := config.on("bert_pretraining")) is not None:
        runs.append(_bert(bert, rate, file_system_mbps, start("bertPretraining", bert.nodes)))
    if (ray := config.on("ray_llama2")) is not None and "train" in ray.steps:
        runs.append(_ray(ray, rate, file_system_mbps, start("rayLlama2", ray.workers)))
    if (nxd := config.on("nxd_llama")) is not None and nxd.train:
        runs.append(_nxd(nxd, rate, file_system_mbps, start("nxdLlama", nxd.nodes)))
    return runs


# A derived restart budget is the smallest count a run's failures exceed with at most this probability
# (Poisson, the expected failures over the run's length): one run in a thousand stops for want of restarts.
BUDGET_EXCEEDED = 0.001
# A derived deadline's margin over the modelled step time: the step times are published throughputs on
# other software versions and layouts (FIGURES), not this project's measurements; half again.
STEP_TIME_MARGIN = 1.5


def restart_budget(nodes: int, rate: float, hours: float, floor: int) -> int:
    """The restarts a run of ``hours`` on ``nodes`` needs, so that its expected failures (``nodes * rate *
    hours``) exceed them with at most BUDGET_EXCEEDED; never fewer than ``floor`` (a count that also ends a
    crash loop early), never more than MAX_RESTART_BUDGET."""
    mean = nodes * rate * hours
    budget = floor
    while budget < MAX_RESTART_BUDGET and poisson_above(mean, budget) > BUDGET_EXCEEDED:
        budget += 1
    return budget


def derived_deadline_hours(run: RunModel, steps_hours: float, start_hours: float, restarts: int) -> float:
    """A deadline that fits the run: its start, its steps at the modelled step time with STEP_TIME_MARGIN,
    the time its saves block, and per restart the downtime and the most work a failure redoes (k + 1/2
    intervals, never more than the run's own steps, as in ``expected``). The downtime R leaves out the resume's
    read of the save (rank 0 reads it back, then every rank loads it: about twice S), under 0.05 points of
    goodput at these failure rates."""
    saves = math.floor(steps_hours / run.interval_hours) if run.interval_hours > 0 else 0
    redo = min((run.redone_intervals + 0.5) * run.interval_hours, steps_hours)
    return (
        start_hours
        + STEP_TIME_MARGIN * steps_hours
        + saves * run.blocking_hours(run.interval_hours)
        + restarts * (run.downtime_hours + redo)
    )


def _hang_floor_minutes(s: Any) -> int:
    """A deadline must outlast the liveness probe's detection of a hang, or the deadline ends a hung run that a
    restart would have saved (workloads/checks.py refuses that)."""
    return resumable.detection_minutes(max(s.hang_timeout_minutes, s.first_step_timeout_minutes)) + 1


def _interval_units(young_hours: float, unit_hours: float) -> int:
    return preferred_count(young_hours / unit_hours)


# Derived values go into the jobs' specs, and a changed spec replaces a running job (a week-long run loses a
# restart and up to k + 1/2 intervals of work): so they sit on a coarse grid, and a small change of a model
# input (a figure, failureRatePerNodeHour) moves them rarely. An interval past 10 units takes the nearest of
# the R10 preferred numbers (ISO 3: 10, 12, 16, 20, 25, 32, 40, 50, 63, 80, then x10), steps of about 25%: the
# loss the Young/Daly interval minimises, B/I + k I/M, grows by cosh(x) - 1, about x^2/2, of itself at a
# factor e^x off the optimum: under 0.8% at the grid's 13% at most. A deadline is rounded up: to the hour within a day, to 6
# hours within 4 days, to the day beyond.
PREFERRED = (1.0, 1.25, 1.6, 2.0, 2.5, 3.2, 4.0, 5.0, 6.3, 8.0)


def preferred_count(units: float) -> int:
    """``units`` (a count of steps or shards): up to 10 the nearest whole count, past it the nearest on the
    R10 grid."""
    if units <= 10:
        return max(1, round(units))
    grid = [round(m * 10**k) for k in range(1, 9) for m in PREFERRED]
    return min(grid, key=lambda g: abs(math.log(g / units)))


def rounded_deadline_minutes(hours: float) -> int:
    step = 1 if hours <= 24 else 6 if hours <= 96 else 24
    return math.ceil(hours / step - 1e-9) * step * 60


def derived(config: WorkloadsConfig, file_system_mbps: float | None) -> dict[str, dict[str, Any]]:
    """Per workload (its settings' field names), what the goodput model sets where the user has not: the
    checkpoint interval at the Young/Daly optimum (only with the file system's throughput), the restart
    budget for the run's expected failures, and the deadline from its steps. Each on a group scaled from zero
    (first_step.DEFAULT_GROUP), so the program and the plan derive the same values. Without the throughput
    the deadline counts no time for the writes (an infinite throughput), only an asynchronous save's copy."""
    rate = config.failure_rate_per_node_hour
    found: dict[str, dict[str, Any]] = {}
    mbps = file_system_mbps
    if (bert := config.on("bert_pretraining")) is not None:
        update: dict[str, Any] = {}
        start = first_step.first_step("bertPretraining", first_step.DEFAULT_GROUP, bert.nodes)
        run = _bert(bert, rate, mbps or math.inf, start)
        shard = figure("bertShardMinutes") / 60
        if mbps is not None and "checkpoint_every_shards" not in bert.model_fields_set:
            update["checkpoint_every_shards"] = _interval_units(young_interval_hours(run), shard)
            run = dataclasses.replace(run, interval_hours=update["checkpoint_every_shards"] * shard)
        hours = bert_steps(bert) * bert_step_hours(bert)
        if "max_retry" not in bert.model_fields_set:
            default = BertPretrainingSettings.model_fields["max_retry"].default
            update["max_retry"] = restart_budget(bert.nodes, rate, hours, default - 1) + 1
        if "train_deadline_minutes" not in bert.model_fields_set:
            # Each attempt's deadline counts once its pods run: a restart on nodes that are up, then the steps.
            restart = first_step.minutes_of(first_step.RESTART_ON_WARM_NODES) / 60
            minutes = rounded_deadline_minutes(derived_deadline_hours(run, hours, restart, 0))
            update["train_deadline_minutes"] = max(minutes, _hang_floor_minutes(bert))
        found["bert_pretraining"] = update
    llamas: list[tuple[str, str, Any, int, float, str, Callable[[Any, float, float, FirstStep], RunModel]]] = []
    if (ray := config.on("ray_llama2")) is not None and "train" in ray.steps:
        llamas.append(("ray_llama2", "rayLlama2", ray, ray.workers, ray_steps(ray), "max_retries", _ray))
    if (nxd := config.on("nxd_llama")) is not None and nxd.train:
        llamas.append(("nxd_llama", "nxdLlama", nxd, nxd.nodes, nxd_steps(nxd), "max_restarts", _nxd))
    for field, workload, s, nodes, steps, budget_key, build in llamas:
        update = {}
        start = first_step.first_step(workload, first_step.DEFAULT_GROUP, nodes)
        run = build(s, rate, mbps or math.inf, start)
        step_hours = llama_step_hours(nodes)
        if mbps is not None and "checkpoint_every_steps" not in s.model_fields_set:
            update["checkpoint_every_steps"] = _interval_units(young_interval_hours(run), step_hours)
            run = dataclasses.replace(run, interval_hours=update["checkpoint_every_steps"] * step_hours)
        hours = steps * step_hours
        first = start.warm_minutes / 60
        budget = getattr(s, budget_key)
        if budget_key not in s.model_fields_set:
            budget = restart_budget(nodes, rate, first + hours, type(s).model_fields[budget_key].default)
            update[budget_key] = budget
        if field == "nxd_llama" and "train_deadline_minutes" not in s.model_fields_set:
            # From the MPIJob's creation, every restart included (runPolicy.activeDeadlineSeconds).
            minutes = rounded_deadline_minutes(derived_deadline_hours(run, hours, first, budget))
            update["train_deadline_minutes"] = max(minutes, _hang_floor_minutes(s))
        if field == "ray_llama2" and "train_deadline_seconds" not in s.model_fields_set:
            # From each attempt's start, its cluster's start-up included: a retry gets the deadline afresh.
            minutes = rounded_deadline_minutes(derived_deadline_hours(run, hours, first, 0))
            update["train_deadline_seconds"] = max(minutes, _hang_floor_minutes(s), 20) * 60
        found[field] = update
    return {name: update for name, update in found.items() if update}


# Per workload: the deadline key, its field, and the unit its value is in (minutes of 60 s or seconds).
_DEADLINES = {
    "bert_pretraining": ("trainDeadlineMinutes", "train_deadline_minutes", 60),
    "ray_llama2": ("trainDeadlineSeconds", "train_deadline_seconds", 1),
    "nxd_llama": ("trainDeadlineMinutes", "train_deadline_minutes", 60),
}


def deadline_warnings(config: WorkloadsConfig, file_system_mbps: float | None) -> list[str]:
    """A deadline set in the stack file that is shorter than the run the model expects, its start and its steps
    at the modelled step time (no margin, no saves, no restart): the deadline would end the run before its last
    step, as a failure that is not retried. With the value the model derives when the deadline is left unset.
    ``config``: the stack file's settings, before ``resolved``."""
    found = []
    for run in workload_runs(config, file_system_mbps or math.inf):
        field = _CAMEL[run.workload]
        s = getattr(config, field)
        key, name, unit_seconds = _DEADLINES[field]
        if name not in s.model_fields_set:
            continue
        if run.step_hours:
            steps = ray_steps(s) if field == "ray_llama2" else nxd_steps(s)
            step_hours, nodes = run.step_hours, run.nodes
            start = first_step.first_step(run.workload, first_step.DEFAULT_GROUP, nodes).warm_minutes / 60
            begins = "start from zero nodes"
        else:
            steps, step_hours = bert_steps(s), bert_step_hours(s)
            start = first_step.minutes_of(first_step.RESTART_ON_WARM_NODES) / 60  # counted once its pods run
            begins = "start on nodes that are up"
        needed = start + steps * step_hours
        deadline_hours = getattr(s, name) * unit_seconds / 3600
        if deadline_hours >= needed:
            continue
        unset = type(s).model_validate(s.model_dump(include=s.model_fields_set - {name}))
        derives = getattr(resolved(config.model_copy(update={field: unset}), file_system_mbps), field)
        derived_value = getattr(derives, name)
        found.append(
            f"{key_name((run.workload, key))} = {getattr(s, name)}: shorter than the run the goodput model expects, "
            f"a {start * 60:.0f}-minute {begins} and {steps:.0f} steps of {step_hours * 3600:.1f} s, "
            f"{needed * 60:,.0f} minutes in all ({deadline_hours * 60:,.0f} allowed): the deadline ends the run before "
            f"its last step, as a failure that is not retried. Unset, the model derives {key} = {derived_value} (a "
            "margin on the step time, the saves and the restarts included); or train fewer steps"
        )
    return found


def resolved(config: WorkloadsConfig, file_system_mbps: float | None) -> WorkloadsConfig:
    """``config`` with what ``derived`` sets filled in; what the user set stays."""
    updates = {
        name: getattr(config, name).model_copy(update=update)
        for name, update in derived(config, file_system_mbps).items()
    }
    return config.model_copy(update=updates) if updates else config


def minimum_interval_hours(run: RunModel, share: float) -> float:
    """The shortest interval whose saves block at most ``share`` of it (the blocking share falls as the
    interval grows)."""
    if not run.asynchronous:
        return run.save_hours / share
    overlapping = (run.copy_hours + run.save_hours) / (1 + share)  # the write still running at the next save
    return overlapping if overlapping <= run.save_hours else max(run.save_hours, run.copy_hours / share)


_CAMEL = {"bertPretraining": "bert_pretraining", "rayLlama2": "ray_llama2", "nxdLlama": "nxd_llama"}


def least_file_system_mbps(run: RunModel, share: float) -> float | None:
    """The slowest file system whose saves block at most ``share`` of the interval; None where none does. A
    synchronous save blocks for its write: S' <= share I. An asynchronous one for the copy and what of the write
    outlasts the interval, C + max(0, S' - I) <= share I: S' <= (1 + share) I - C, and no tier helps when the
    copy alone, C, is over share I."""
    mb = run.checkpoint_gb * 1000
    if not run.asynchronous:
        return mb / (share * run.interval_hours * 3600)
    write_hours = (1 + share) * run.interval_hours - run.copy_hours
    if run.copy_hours > share * run.interval_hours or write_hours <= 0:
        return None
    return mb / (write_hours * 3600)


def _stall(run: RunModel, config: WorkloadsConfig, mbps: float, share: float, key: str) -> str:
    """What one run's saves cost against ``share`` (the setting ``key``), and the fixes, cheapest first."""
    s = getattr(config, _CAMEL[run.workload])
    blocking = run.blocking_hours(run.interval_hours)
    if run.step_hours:
        interval_key, value, unit_hours = "checkpointEverySteps", s.checkpoint_every_steps, run.step_hours
    else:
        interval_key, value = "checkpointEveryShards", s.checkpoint_every_shards
        unit_hours = figure("bertShardMinutes") / 60
    least = math.ceil(minimum_interval_hours(run, share) / unit_hours - 1e-9)
    young = _interval_units(young_interval_hours(run), unit_hours)
    at_young = expected(dataclasses.replace(run, interval_hours=young * unit_hours)).ratio
    fixes = []
    if run.workload == "nxdLlama" and not run.asynchronous:
        fixes.append("asyncCheckpoints: true (training then waits only for the copy to host memory)")
    fixes.append(
        f"{interval_key} of at least {least} ({young}, the Young/Daly optimum, gives goodput {at_young:.1%}; "
        "a longer interval redoes more work after a failure)"
    )
    if (tier := least_file_system_mbps(run, share)) is None:
        fixes.append(
            f"no faster file system helps: the copy to host memory alone blocks {run.copy_hours * 3600:,.0f} s, over "
            f"{share:.0%} of the interval"
        )
    else:
        fixes.append(
            f"a file system of at least {tier:,.0f} MB/s (the cluster stack's storage.perUnitStorageThroughput and "
            f"capacityGib; now {mbps:,.0f} MB/s)"
        )
    return (
        f"{key_name((run.workload, interval_key))} = {value}: saves block {save_share(run):.1%} of each interval "
        f"({run.checkpoint_gb:.0f} GB, {'asynchronous' if run.asynchronous else 'synchronous'}: "
        f"{blocking * 3600:,.0f} s every {run.interval_hours * 3600:,.0f} s), over {key_name((key,))} {share}; "
        f"allowed: at most {share:.0%} of the interval. Fixes, cheapest first: " + "; or ".join(fixes)
    )


def stall_problems(config: WorkloadsConfig, file_system_mbps: float | None) -> list[str]:
    """A run whose saves block more than checkpointStallLimit of each interval, or block the step counter longer
    than the liveness probe allows (the probe would end every save as a hang). Needs the throughput."""
    problems = []
    warn, limit = config.checkpoint_stall_warning, config.checkpoint_stall_limit
    if warn >= limit:
        problems.append(
            f"{key_name(('checkpointStallWarning',))} = {warn}: not below {key_name(('checkpointStallLimit',))} "
            f"({limit}); allowed: a warning share under the limit"
        )
    if file_system_mbps is None:
        return problems
    for run in workload_runs(config, file_system_mbps):
        if save_share(run) > limit:
            problems.append(_stall(run, config, file_system_mbps, limit, "checkpointStallLimit"))
        s = getattr(config, _CAMEL[run.workload])
        # Between two step lines around a save: the step, then the save.
        blocking_minutes = (run.blocking_hours(run.interval_hours) + (run.step_hours or 0.0)) * 60
        if s.hang_timeout_minutes <= blocking_minutes:
            fixes = [f"{key_name((run.workload, 'hangTimeoutMinutes'))} of at least {math.floor(blocking_minutes) + 1}"]
            if run.workload == "nxdLlama" and not run.asynchronous:
                fixes.append("asyncCheckpoints: true (a save then holds the counter only for the copy to host memory)")
            fixes.append(
                "a faster file system tier (the cluster stack's storage.perUnitStorageThroughput and capacityGib)"
                + (
                    ", or a checkpoint interval longer than the write, which then overlaps the steps"
                    if run.asynchronous
                    else ""
                )
            )
            problems.append(
                f"{key_name((run.workload, 'hangTimeoutMinutes'))} = {s.hang_timeout_minutes}: a step and its save "
                f"hold the step counter for {blocking_minutes:.1f} minutes, which the liveness probe would end as a "
                f"hang; allowed: at least {math.floor(blocking_minutes) + 1}. Fixes: " + "; or ".join(fixes)
            )
    return problems


def stall_warnings(config: WorkloadsConfig, file_system_mbps: float | None) -> dict[str, str]:
    """Per workload whose saves block more than checkpointStallWarning of each interval (and no more than the
    limit, which ``stall_problems`` refuses), the warning with the cheaper fixes."""
    if file_system_mbps is None:
        return {}
    return {
        run.workload: _stall(run, config, file_system_mbps, config.checkpoint_stall_warning, "checkpointStallWarning")
        for run in workload_runs(config, file_system_mbps)
        if config.checkpoint_stall_warning < save_share(run) <= config.checkpoint_stall_limit
    }


# The file systems' baseline throughputs the scenarios use, as the cluster stacks configure them (the tests
# check them against the plans): prod 4,800 GiB at 250 MB/s/TiB; dev's EFS (storage.kind: efs) at the save
# throughput modelled from EFS's published limits (infra/facts/efs.py).
PROD_FILE_SYSTEM_MBPS = lustre_throughput_mbps(4800, 250)
DEV_FILE_SYSTEM_MBPS = efs.SAVE_THROUGHPUT_MBPS
WEEK_HOURS = 168.0


@dataclass(frozen=True)
class Scenario:
    """A week of paid time for one run, with the settings the workload stack derives; ``target`` is the goal
    the model is held to, and is shown met or not, never reached by changing an input."""

    name: str
    target: float
    workloads: Mapping[str, Any]  # the stack file's values, as `trainium-workloads:<key>` takes them
    file_system_mbps: float


_PROD_NXD = {"nodeGroup": "trn1-32xl-ng1", "nodes": 4}
SCENARIOS = (
    Scenario("prod: NxD Llama-2-7B, 4 trn1.32xlarge", 0.98, {"nxdLlama": _PROD_NXD}, PROD_FILE_SYSTEM_MBPS),
    Scenario(
        "prod, synchronous saves", 0.98, {"nxdLlama": {**_PROD_NXD, "asyncCheckpoints": False}}, PROD_FILE_SYSTEM_MBPS
    ),
    Scenario("prod's file system, 64 nodes", 0.95, {"nxdLlama": {**_PROD_NXD, "nodes": 64}}, PROD_FILE_SYSTEM_MBPS),
    Scenario(
        "64 nodes at OPT-175B's rate (5.9e-4)",
        0.95,
        {"nxdLlama": {**_PROD_NXD, "nodes": 64}, "failureRatePerNodeHour": 5.9e-4},
        PROD_FILE_SYSTEM_MBPS,
    ),
    Scenario("dev's file system, 4 nodes", 0.95, {"nxdLlama": _PROD_NXD}, DEV_FILE_SYSTEM_MBPS),
    Scenario(
        "dev's file system, synchronous saves",
        0.95,
        {"nxdLlama": {**_PROD_NXD, "asyncCheckpoints": False}},
        DEV_FILE_SYSTEM_MBPS,
    ),
)


def week(config: WorkloadsConfig, file_system_mbps: float) -> list[Goodput]:
    """Each run of ``config`` (resolved as the program resolves it) paying for one week: it trains for the
    week less its fixed hours, whatever its step count or deadline."""
    settings = resolved(config, file_system_mbps)
    return [
        expected(dataclasses.replace(run, train_hours=WEEK_HOURS - run.fixed_hours))
        for run in workload_runs(settings, file_system_mbps)
    ]


def scenario_config(scenario: Scenario) -> WorkloadsConfig:
    from workloads.settings import PROJECT, parse_workloads_config

    values = {f"{PROJECT}:clusterStack": "organization/trainium-eks/prod"}
    workloads = dict(scenario.workloads)
    # A run of a week's steps, so the restart budget and the deadline are derived for a week.
    nxd = dict(workloads["nxdLlama"])
    nxd.setdefault("trainIters", math.floor(WEEK_HOURS / llama_step_hours(nxd["nodes"])))
    workloads["nxdLlama"] = nxd
    for key, value in workloads.items():
        values[f"{PROJECT}:{key}"] = value if isinstance(value, str) else json.dumps(value)
    return parse_workloads_config(values)


def scenario_goodput(scenario: Scenario) -> Goodput:
    (found,) = week(scenario_config(scenario), scenario.file_system_mbps)
    return found


def scenario_table() -> list[tuple[str, ...]]:
    """(scenario, file system, interval, blocked per save, failures a week, restart budget and the chance a
    week exhausts it, goodput, target), for the docs."""
    rows: list[tuple[str, ...]] = []
    for scenario in SCENARIOS:
        g = scenario_goodput(scenario)
        r = g.run
        met = "met" if g.ratio >= scenario.target else "**not met**"
        rows.append(
            (
                scenario.name,
                f"{scenario.file_system_mbps:,.0f} MB/s",
                f"{round(r.interval_hours / r.step_hours)} steps ({r.interval_hours:.2f} h)" if r.step_hours else "",
                f"{r.blocking_hours(r.interval_hours) * 3600:,.0f} s {'async' if r.asynchronous else 'sync'}",
                f"{g.expected_failures:.2f}",
                f"{r.restart_budget} ({g.budget_exhausted:.2%})",
                f"{g.ratio:.1%}",
                f"{scenario.target:.0%} {met}",
            )
        )
    return rows


def figure_table() -> list[tuple[str, str, str, str]]:
    """(input, value with unit, kind, source) of every figure, for the docs."""
    return [(name, f"{f.value:.4g} {f.unit}", f.kind, f.source) for name, f in FIGURES.items()]
