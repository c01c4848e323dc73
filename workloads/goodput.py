"""The project's one goodput model: of the Trainium node-hours a workload's run pays for, the share that
trains, expected from its settings. Pure: settings and the file system's throughput in, figures out.

A run pays ``T + F`` hours on ``N`` nodes: ``T`` hours of training and ``F`` hours that cannot train (the
first start from zero nodes, a compile step before training, the autoscaler's scale-down tail). While
it trains, three things take time from the steps:
- failures: ``N * rate * (R + I / 2)`` of the time, where ``rate`` is failures per node-hour, ``R`` the
  downtime of one failure (detection plus recovery, weighted over FAILURE_CLASSES) and ``I / 2`` the work
  redone on average from the last checkpoint (``T / 2`` when the run is shorter than ``I``);
- checkpoints: ``S / I``, every pinned script saving synchronously (``S`` the time one save takes at the
  file system's throughput, ``I`` the interval between saves); exactly ``floor(T / I) * S / T``, so a run
  that ends before its first save pays none;
so goodput = ``T / (T + F) * (1 - N * rate * (R + I / 2) - S / I)``, never below 0.

A restart budget (the controller's retries) ends a run after that many failures: the probability that a
run's failures exceed it (Poisson with mean ``N * rate * (T + F)``) is reported beside the ratio.

Every input is in one table, FIGURES, with its kind (M: measured by someone else, D: a documented setting
or bound, E: an estimate, with its reasoning) and source; docs/monitoring.md prints it
(``figure_table``). Extend the model here (more failure classes, an optimal interval), not beside it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from workloads import bert_launch, deadlines, first_step, resumable
from workloads.first_step import FirstStep
from workloads.settings import (
    DEFAULT_FAILURE_RATE_PER_NODE_HOUR,
    BertPretrainingSettings,
    NxdLlamaSettings,
    RayLlama2Settings,
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
        10,
        "min",
        "D",
        "cluster-autoscaler scale-down-unneeded-time 10m (infra/components/autoscaling.py): idle nodes are paid "
        "that long after the run",
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


# A share of training time spent in synchronous saves past which the plan warns (and names the cheaper
# fixes): one save in twenty intervals.
CHECKPOINT_STALL_WARNING = 0.05


def young_interval_hours(run: RunModel) -> float:
    """The checkpoint interval that minimises the time lost to saves and redone work: Young's first-order
    optimum sqrt(2 S M), M the job's mean time between failures, 1 / (N rate) (J. W. Young, "A first order
    approximation to the optimum checkpoint interval", Communications of the ACM 17(9), 1974). Daly's higher
    order estimate (Future Generation Computer Systems 22(3), 2006) differs from it by less than S when S is
    far below M, as here (seconds to minutes against days)."""
    return math.sqrt(2 * run.save_hours / (run.nodes * run.failure_rate))


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


def expected(run: RunModel) -> Goodput:
    # Work redone after a failure: half an interval, or half the run when it ends before its first save.
    redone = min(run.interval_hours, run.train_hours) / 2
    failure = run.nodes * run.failure_rate * (run.downtime_hours + redone)
    # S / I over a long run; a run that ends before a save pays for the saves it makes.
    saves = math.floor(run.train_hours / run.interval_hours) if run.interval_hours > 0 else 0
    checkpoint = saves * run.save_hours / run.train_hours if run.train_hours > 0 else 0.0
    paid = run.train_hours + run.fixed_hours
    training_share = run.train_hours / paid if paid > 0 else 0.0
    ratio = max(0.0, training_share * (1 - failure - checkpoint))
    failures = run.nodes * run.failure_rate * paid
    return Goodput(
        run, failure, checkpoint, 1 - training_share, ratio, failures, poisson_above(failures, run.restart_budget)
    )


def save_hours(checkpoint_gb: float, file_system_mbps: float) -> float:
    """S: one synchronous save at the file system's aggregate baseline throughput (MB/s, 10^6 bytes)."""
    return checkpoint_gb * 1000 / file_system_mbps / 3600


def lustre_throughput_mbps(capacity_gib: float, per_unit_mbps_per_tib: float) -> float:
    """FSx for Lustre's baseline throughput: capacity in TiB times the per-unit throughput (FSx Lustre
    user guide, performance: "throughput per unit of storage")."""
    return capacity_gib / 1024 * per_unit_mbps_per_tib


# One worker per NeuronCore of a trn1.32xlarge (the seed's 32 per node, workloads/bert_launch.py).
BERT_WORKERS_PER_NODE = 32


def _bert(s: BertPretrainingSettings, rate: float, mbps: float, start: FirstStep) -> RunModel:
    batch, accum = bert_launch.batch_defaults(s.bf16)
    per_node = (s.batch_size or batch) * (s.grad_accum_steps or accum) * BERT_WORKERS_PER_NODE
    step_seconds = per_node / figure("bertSequencesPerNodeSecond")
    steps = s.train_steps or figure("bertScriptMaxSteps")
    train = min(steps * step_seconds / 3600, s.train_deadline_minutes / 60)
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
) -> RunModel:
    """The two Llama-2-7B runs: their deadlines count from creation, the first start included."""
    step_seconds = figure("llamaGlobalBatch") / (figure("llamaSequencesPerNodeSecond") * nodes)
    first = start.warm_minutes / 60
    train = max(0.0, min(steps * step_seconds / 3600, deadline_hours - first))
    compile_hours = first_step.minutes_of(start.cold_extra) / 60 if compile_step else 0.0
    return RunModel(
        workload,
        nodes,
        rate,
        downtime_hours(hang, start),
        every * step_seconds / 3600,
        save_hours(figure("llamaCheckpointGB"), mbps),
        train,
        first + compile_hours + figure("scaleDownMinutes") / 60,
        budget,
        step_seconds / 3600,
    )


def _nxd(s: NxdLlamaSettings, rate: float, mbps: float, start: FirstStep) -> RunModel:
    steps = s.train_iters or figure("nxdMaxSteps")
    return _llama(
        "nxdLlama",
        s.nodes,
        s.hang_timeout_minutes,
        s.checkpoint_every_steps,
        steps,
        s.train_deadline_minutes / 60,
        s.compile,
        s.max_restarts,
        rate,
        mbps,
        start,
    )


def _ray(s: RayLlama2Settings, rate: float, mbps: float, start: FirstStep) -> RunModel:
    steps = s.train_steps or figure("rayMaxSteps")
    return _llama(
        "rayLlama2",
        s.workers,
        s.hang_timeout_minutes,
        s.checkpoint_every_steps,
        steps,
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
    return [expected(r) for r in runs]


def figure_table() -> list[tuple[str, str, str, str]]:
    """(input, value with unit, kind, source) of every figure, for the docs."""
    return [(name, f"{f.value:.4g} {f.unit}", f.kind, f.source) for name, f in FIGURES.items()]
