"""The workload stacks' configuration: which workloads run, and how each is sized.

Keys live under ``trainium-workloads:`` in ``workloads/Pulumi.<stack>.yaml``. A workload is
on when its key is present (``enabled: false`` keeps the settings but switches it off).
Shapes and ranges are checked here; whether the cluster can run what is asked for (node
group, size, queue, installed software) is checked against its outputs in ``checks.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator

from infra.config.base import (
    PROFILE_KEY,
    ConfigModel,
    describe,
    project_values,
    qualified_key,
    rules_beside_type_errors,
    with_stray_keys_refused,
)
from infra.config.errors import ConfigError
from infra.config.models import PROJECT as CLUSTER_PROJECT
from infra.config.naming import PROFILE_PATTERN, dns_label_problem
from infra.facts import versions

PROJECT = "trainium-workloads"
# Restarts a run may be given: a budget the goodput model derives from a week on 64 nodes at a high failure
# rate needs about 15; past 50 a crash-looping configuration would burn days of nodes before it stopped.
MAX_RESTART_BUDGET = 50
STACK_NAME_PATTERN = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
CACHESET_PATTERN = r"^[A-Za-z0-9_-]+$"
IMAGE_TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"


class WorkloadSettings(ConfigModel):
    enabled: bool = Field(default=True, description="false keeps the settings but switches the workload off.")
    image_tag: str = Field(
        default=versions.TRAINING_IMAGE_TAG,
        pattern=IMAGE_TAG_PATTERN,
        description="Tag of the training images in the cluster's ECR repositories.",
    )


class AcceleratedWorkloadSettings(WorkloadSettings):
    node_group: str = Field(description="The cluster stack's accelerator node group the job runs on.")


# From zero Trainium nodes a gang waits for the nodes to boot and join (~5 min), the device
# plugins to register (~2 min) and a 10+ GB image to pull (~5-10 min): 45 minutes is about twice that.
PENDING_TIMEOUT_MINUTES = 45
# Waits measured in minutes stay within a day: scale-up from zero takes 15-20 minutes, so a larger number
# is almost always seconds written as minutes (2700 for 45 minutes would hold nodes for 45 hours).
MAX_WAIT_MINUTES = 1440


class GangTimeoutSettings(AcceleratedWorkloadSettings):
    pending_timeout_minutes: int = Field(
        default=PENDING_TIMEOUT_MINUTES,
        ge=15,
        le=MAX_WAIT_MINUTES,
        description="How long the job's gang may stay unscheduled or starting (scale-up from zero and the image "
        "pull included) before the job is ended and its Trainium nodes released; at least 15. The gang watchdog "
        "ends Volcano Jobs (TerminateJob) and MPIJobs (suspend) that pass it; a restarted BERT attempt gets 35 "
        "minutes more, for a silent node's repair (docs/resilience.md).",
    )


class ResumableSettings(GangTimeoutSettings):
    """A training run that checkpoints to FSx, resumes from its newest complete checkpoint on every
    restart, and is ended when its step counter stops (workloads/resumable.py, docs/resilience.md)."""

    checkpoints_to_keep: int = Field(
        default=2,
        ge=1,
        le=20,
        description="Complete checkpoints kept in the run directory, newest first; at least 2 with NxD Training's "
        "asyncCheckpoints.",
    )
    hang_timeout_minutes: int = Field(
        default=30,
        ge=10,
        le=1440,
        description="The training pods' liveness probe fails once the training step has not advanced for this long "
        "(a checkpoint save included: keep it above the longest save), and the job restarts from its last checkpoint.",
    )
    first_step_timeout_minutes: int = Field(
        default=60,
        ge=10,
        le=1440,
        description="Like hangTimeoutMinutes, for the time from an attempt's start to its first step (rendezvous, "
        "checkpoint load, compiled graphs loaded from the cache).",
    )


class BertPretrainingSettings(ResumableSettings):
    nodes: int = Field(default=2, ge=1, description="Trainium nodes (one pod each, 32 workers per node).")
    queue: str = Field(default="test", description="Volcano queue.")
    cacheset: str = Field(
        default="bert-large",
        pattern=CACHESET_PATTERN,
        description="Prefix of the Neuron compile cache on FSx; jobs running at the same time must not share one.",
    )
    batch_size: int | None = Field(
        default=None,
        ge=1,
        description="Per-worker batch; unset: the pinned run script's value for the precision (bf16 16, fp32 8).",
    )
    grad_accum_steps: int | None = Field(
        default=None, ge=1, description="Gradient accumulation; unset: the run script's (bf16 32, fp32 64)."
    )
    precompile: bool = Field(default=True, description="Run neuron_parallel_compile first, then train.")
    precompile_steps: int = Field(default=10, ge=1, description="Steps of the precompile run.")
    train_steps: int | None = Field(
        default=None, ge=1, description="Steps of this run (--steps_this_run); unset: the script's max_steps."
    )
    bf16: bool = Field(default=True, description="Train in bf16 (false: fp32).")
    data_dir: str = Field(
        default="/data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128",
        description="Dataset under the pods' FSx mount (/data).",
    )
    output_dir: str = Field(
        default="/data/output",
        description="Under /data: each run's checkpoints and logs go to run-<hash of the model settings> below it.",
    )
    checkpoint_every_shards: int = Field(
        default=1,
        ge=1,
        description="Checkpoint after every this many dataset shards "
        "(the script's --shards_per_ckpt; it counts steps per shard, not time); unset: the Young/Daly optimum for "
        "the run's nodes, failureRatePerNodeHour and the cluster's file system throughput, as the plan shows it "
        "(workloads/goodput.py), 1 when the cluster exports no throughput.",
    )
    # Volcano's mutating webhook turns 0 into its default 3 (volcano v1.15.1
    # pkg/webhooks/admission/jobs/mutate/mutate_job.go): the live spec would then differ from
    # ours on every `pulumi up`, which replaces (kills) a running job. So at least 1.
    max_retry: int = Field(
        default=3,
        ge=1,
        description="Attempts Volcano allows in all, the first included: a pod failure "
        "restarts the gang while fewer than maxRetry have run (1: never retried); unset: 3, or more where the run's "
        "expected failures over its length need them (workloads/goodput.py restart_budget).",
    )
    # Each attempt (the first and every Volcano retry) is cut at its deadline: the run's command
    # runs under `timeout`, whose exit code 124 ends the job (bert.py DEADLINE_EXIT_CODE).
    precompile_deadline_minutes: int = Field(
        default=120,
        ge=10,
        description="Deadline of each attempt of the precompile run once its pods run; "
        "`pulumi up` waits pendingTimeoutMinutes + this + 5 minutes for it.",
    )
    train_deadline_minutes: int = Field(
        default=2880,
        ge=10,
        description="Deadline of each attempt of the training run once its pods run; unset: derived from the run's "
        "steps (trainSteps, else the script's 28125) x the modelled step time x a margin, plus its start and saves "
        "(workloads/goodput.py derived_deadline_hours).",
    )


RayStep = Literal["generate-data", "precompile", "train"]
RAY_STEPS: tuple[RayStep, ...] = get_args(RayStep)
# The seed's RayJob names, one per step.
RAY_JOB_NAMES = {
    "generate-data": "llama2-generate-pretraining-test-data",
    "precompile": "llama2-precompilation-job",
    "train": "llama2-pretraining-job",
}


class RayLlama2Settings(ResumableSettings):
    workers: int = Field(default=2, ge=1, description="Ray workers, one per Trainium node.")
    queue: str = Field(default="llama2-training-queue", description="Volcano queue.")
    # KubeRay counts it, like the train step's deadline, from the RayJob's start: it must stay shorter.
    pending_timeout_minutes: int = Field(
        default=30,
        ge=15,
        le=MAX_WAIT_MINUTES,
        description="preRunningDeadlineSeconds of every step, in minutes: a RayJob whose cluster does not run its "
        "job by then (scale-up from zero and the image pull included) fails and releases its nodes; at least 15, "
        "and shorter than every step's deadline.",
    )
    head_cpu: str = Field(default="6", description="Ray head CPU request (on a core node).")
    head_memory: str = Field(default="30Gi", description="Ray head memory request.")
    worker_cpu: str = Field(default="120", description="Ray worker CPU request.")
    worker_memory: str = Field(default="440Gi", description="Ray worker memory request.")
    # The train step's default deadline is 40 minutes: the shared 60-minute first-step limit could
    # never act before it (checks.py refuses that), so Ray's is shorter.
    first_step_timeout_minutes: int = Field(
        default=30,
        ge=10,
        le=1440,
        description="Like hangTimeoutMinutes, for the time from an attempt's start to its first step (rendezvous, "
        "checkpoint load, compiled graphs loaded from the cache).",
    )
    steps: list[RayStep] = Field(
        default=list(RAY_STEPS),
        description="RayJobs to submit, each after the one before has succeeded; drop leading steps to skip them.",
    )
    step_deadline_minutes: int = Field(
        default=180,
        ge=20,
        description="activeDeadlineSeconds of the generate-data and precompile RayJobs, "
        "counted from their creation (cluster start-up included); `pulumi up` waits this + 5 minutes for each.",
    )
    # KubeRay counts activeDeadlineSeconds from the RayJob's creation, cluster start-up included
    # (ray-project/kuberay v1.7.0 ray-operator/controllers/ray/rayjob_controller.go): from zero
    # Trainium nodes, booting them and pulling a 10+ GB image takes 10-15 minutes, so the seed's
    # 600 s (written for an already running cluster) would kill training before it starts.
    train_steps: int | None = Field(
        default=None,
        ge=1,
        description="Steps of the train step (ray_train_llama2.py --steps_this_run); unset: the script's 10000, "
        "which the deadline cuts, so the train RayJob then ends Failed (DeadlineExceeded).",
    )
    train_deadline_seconds: int = Field(
        default=2400,
        ge=1200,
        description="activeDeadlineSeconds of the train RayJob, counted from its creation (cluster start-up "
        "included); the job fails and its cluster goes once it passes. Unset: derived from the run's steps "
        "(trainSteps, else the script's 10000) x the modelled step time x a margin, plus its start and saves "
        "(workloads/goodput.py derived_deadline_hours).",
    )
    ttl_seconds_after_finished: int = Field(
        default=60, ge=0, description="Seconds a finished RayJob's cluster lives on."
    )
    checkpoint_every_steps: int = Field(
        default=100,
        ge=1,
        description="Checkpoint the train step every this many steps (ray_train_llama2.py --checkpoint_freq); unset: "
        "the Young/Daly optimum for the run's workers, failureRatePerNodeHour and the cluster's file system "
        "throughput, as the plan shows it (workloads/goodput.py), 100 when the cluster exports no throughput.",
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        le=MAX_RESTART_BUDGET,
        description="RayJob backoffLimit of the train step: failed runs "
        "retried on a new RayCluster, each from the last checkpoint (not after its deadline); unset: 2, or more "
        "where the run's expected failures over its length need them (workloads/goodput.py restart_budget).",
    )


class NxdLlamaSettings(ResumableSettings):
    nodes: int = Field(default=4, ge=1, description="Trainium nodes, one rank each; must divide the global batch.")
    queue: str = Field(default="test", description="Volcano queue (the seed names none).")
    compile: bool = Field(default=True, description="Run the compile MPIJob first.")
    train: bool = Field(default=True, description="Run the training MPIJob.")
    tokenizer_path: str = Field(default="/shared/llama7b_tokenizer", description="Tokenizer under /shared.")
    dataset_path: str = Field(
        default="/shared/data/redpajama_sample_text_document", description="Preprocessed dataset prefix under /shared."
    )
    train_iters: int | None = Field(
        default=None, ge=1, description="Training iterations; unset: megatron_llama_7B_config.yaml's max_steps, 20000."
    )
    # runPolicy.activeDeadlineSeconds, which the MPI operator puts on the launcher Job; with the
    # launcher created at start-up (nxd_llama.py) it counts from the MPIJob's creation, so it
    # also ends a gang that never gets scheduled.
    compile_deadline_minutes: int = Field(
        default=180,
        ge=20,
        description="Deadline of the compile MPIJob from its creation (scheduling and "
        "start-up included); `pulumi up` waits this + 5 minutes for it.",
    )
    train_deadline_minutes: int = Field(
        default=4320,
        ge=20,
        description="Deadline of the training MPIJob from its creation; unset: derived from the run's steps "
        "(trainIters, else the config's 20000) x the modelled step time x a margin, plus its start, saves and "
        "restarts (workloads/goodput.py derived_deadline_hours).",
    )
    checkpoint_every_steps: int = Field(
        default=100,
        ge=1,
        description="Checkpoint the training run every this many steps (exp_manager every_n_train_steps); unset: the "
        "Young/Daly optimum for the run's nodes, failureRatePerNodeHour and the cluster's file system throughput, as "
        "the plan shows it (workloads/goodput.py), 100 when the cluster exports no throughput.",
    )
    async_checkpoints: bool = Field(
        default=True,
        description="Save checkpoints asynchronously (exp_manager.async_checkpointing): training waits only for the "
        "copy from the devices to host memory, and a thread writes the files while the next steps run; the newest "
        "save counts as complete once the next one starts (docs/resilience.md), so checkpointsToKeep must be at "
        "least 2. Each node holds its share of the checkpoint in host memory while it writes: about 24 GB of "
        "Llama-2-7B's 94 GB on 4 nodes, all 94 GB on 1. NxD Training's known issues (docs/general/known_issues.rst, "
        "'During async_checkpointing') warn of host OOM at low node counts, for a saver that forked a process: "
        "false if a worker is OOM-killed during a save.",
    )
    max_restarts: int = Field(
        default=3,
        ge=0,
        le=MAX_RESTART_BUDGET,
        description="runPolicy.backoffLimit: how often a new launcher "
        "pod reruns mpirun on every worker after a failure, each run from the last checkpoint "
        "(maxRestarts + 1 runs in all); unset: 3, or more where the run's expected failures over its length need "
        "them (workloads/goodput.py restart_budget).",
    )


class ClusterCheckSettings(GangTimeoutSettings):
    """The acceptance test: is a node group fit for distributed training? (workloads/cluster_check.py)"""

    nodes: int = Field(
        default=2,
        ge=1,
        description="Nodes to check; 2 or more also runs the nccom-test all-reduce across them (needs EFA).",
    )
    queue: str = Field(default="test", description="Volcano queue of the all-reduce MPIJob (when Volcano is on).")
    bus_bandwidth_floor: float | None = Field(
        default=None,
        gt=0,
        alias="busBandwidthFloorGBps",
        description="Lowest acceptable all-reduce bus bandwidth at 1 GiB, in nccom-test's GB/s; unset: the default "
        "for the group's instance type (workloads/cluster_check.py DEFAULT_FLOORS), required for other types.",
    )
    fsx_test_mib: int = Field(default=1024, ge=64, le=16384, description="MiB each node writes and reads back on FSx.")
    # From zero a stage waits for a trn1 node to boot and join (~5 min), the Neuron and EFA device
    # plugins to register (~2 min) and the multi-GB nxd-llama image to pull (10+ GB, ~5-10 min;
    # the launcher's job-support node too): 30 minutes leaves about twice that.
    timeout_minutes: int = Field(
        default=60,
        ge=30,
        le=MAX_WAIT_MINUTES,
        description="Deadline of each stage (the per-node Job, the all-reduce's launcher; the "
        "verdict gets 15 minutes more), scale-up from zero included; at least 30.",
    )
    run_id: str = Field(
        default="1",
        pattern=r"^[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?$",
        description="Change it to run the check again with unchanged settings (a finished check is not re-run).",
    )


class LoadBalancerSettings(ConfigModel):
    allowed_cidrs: list[str] = Field(
        description="IPv4 source ranges allowed to reach the load balancer; required, never the internet."
    )
    internal: bool = Field(default=True, description="Internal (inside the VPC) or internet-facing.")
    certificate_arn: str | None = Field(
        default=None,
        description="ACM certificate of the HTTPS listener; required: the proxy's password never travels unencrypted.",
    )
    username: str = Field(
        default="admin", pattern=r"^[A-Za-z0-9_.-]{1,32}$", description="User name of the password proxy."
    )


class TensorBoardSettings(WorkloadSettings):
    # Not the whole volume: TensorBoard walks its log directories on every reload, and /shared holds
    # the datasets, Hugging Face caches and thousands of compile-cache directories (a constant
    # metadata load on Lustre). The runs' roots, not their event directories: those are named at
    # run time and sit beside the checkpoints, which each reload walks too (tensorboard_viewer.py
    # RELOAD_INTERVAL_SECONDS).
    log_dirs: list[str] = Field(
        default=["/shared/output", "/shared/nemo_experiments", "/shared/llama2_output"],
        min_length=1,
        description="Directories under /shared shown as runs, each under its last path component (BERT's output "
        "(/data/output in its pods), NxD Training's nemo_experiments, Ray's llama2_output); TensorBoard walks each "
        "whole tree, checkpoints included, every 5 minutes.",
    )
    load_balancer: LoadBalancerSettings | None = Field(
        default=None, description="Adds a password proxy and a load balancer limited to allowedCidrs."
    )


class DataStagingSettings(WorkloadSettings):
    image_tag: str = Field(
        default=versions.STAGING_IMAGE_TAG,
        pattern=IMAGE_TAG_PATTERN,
        description="Tag of the staging Jobs' images (cmd-shell, nxd-llama); default "
        "STAGING_IMAGE_TAG, not the training tag, so a training-image bump leaves them alone.",
    )
    wikicorpus: bool = Field(
        default=True, description="Stage the BERT WikiCorpus from the public Neuron bucket under /data."
    )
    redpajama: bool = Field(
        default=False,
        description="Stage the RedPajama sample, the Llama-2 tokenizer and the Megatron preprocessing (needs hfToken).",
    )
    cmd_shell: bool = Field(
        default=False, description="A long-running pod with the FSx volume at /data and /shared, for hands-on work."
    )
    # Each staging Job first waits for a job-support node to start from zero and pull its image, as a
    # gang does (PENDING_TIMEOUT_MINUTES); checks.py also holds it above the RedPajama preprocessing.
    timeout_minutes: int = Field(
        default=240,
        ge=15,
        le=MAX_WAIT_MINUTES,
        description="How long `pulumi up` waits for each staging Job, a job-support node's start from zero included.",
    )


# Llama 3 (arXiv 2407.21783 §3.3.4): 419 unexpected interruptions in 54 days of training on 2,048 hosts,
# about one per 6,300 host-hours; the only published rate found from a fleet this size.
DEFAULT_FAILURE_RATE_PER_NODE_HOUR = 419 / (54 * 24 * 2048)


class ProgressExporterSettings(ConfigModel):
    enabled: bool = Field(default=True, description="false keeps the key but switches the exporter off.")


# Set with `pulumi config set --secret`; a refusal never repeats their value.
SECRET_KEYS = frozenset({"hfToken", "hf_token"})


class WorkloadsConfig(ConfigModel):
    profile: str | None = Field(
        default=None,
        pattern=PROFILE_PATTERN,
        description="The AWS CLI profile this stack deploys with (`aws:profile`), added to the cluster's "
        "profile-free kubeconfig for this program's own access.",
    )
    cluster_stack: str = Field(
        pattern=STACK_NAME_PATTERN, description="The cluster stack, as `<organization>/trainium-eks/<stack>`."
    )

    @field_validator("cluster_stack")
    @classmethod
    def _names_the_cluster_project(cls, value: str) -> str:
        project = value.split("/")[1]
        if project != CLUSTER_PROJECT:
            raise ValueError(
                f"names the project {project!r}, not the cluster project {CLUSTER_PROJECT!r} the workloads read "
                f"their cluster from; allowed: <organization>/{CLUSTER_PROJECT}/<stack>"
            )
        return value

    namespace: str = Field(default="default", description="Training namespace of the cluster the workloads run in.")

    @field_validator("namespace")
    @classmethod
    def _is_a_namespace_name(cls, value: str) -> str:
        problem = dns_label_problem(value)
        if problem:
            raise ValueError(f"{problem} (a Kubernetes namespace name, such as default or research)")
        return value

    hf_token: str | None = Field(
        default=None,
        min_length=1,
        description="Hugging Face token for the gated Llama-2 tokenizer; set it with `pulumi config set --secret`.",
    )
    data_staging: DataStagingSettings | None = Field(default=None, description="Dataset staging Jobs.")
    bert_pretraining: BertPretrainingSettings | None = Field(
        default=None, description="BERT-large pretraining with TorchX's layout on Volcano."
    )
    ray_llama2: RayLlama2Settings | None = Field(default=None, description="Llama-2-7B with Ray Train on KubeRay.")
    nxd_llama: NxdLlamaSettings | None = Field(
        default=None, description="Llama-2-7B with NxD Training on the MPI operator."
    )
    tensorboard: TensorBoardSettings | None = Field(default=None, description="TensorBoard on the FSx volume.")
    progress_exporter: ProgressExporterSettings | None = Field(
        default=None,
        description="Serves each training run's step, throughput and checkpoints, read from its files on FSx, as "
        "Prometheus metrics for the goodput ledger and alerts (workloads/progress_exporter.py, docs/monitoring.md).",
    )
    cluster_check: ClusterCheckSettings | None = Field(
        default=None,
        description="Cluster acceptance test: per-node Neuron/EFA/FSx checks and an all-reduce across nodes.",
    )
    failure_rate_per_node_hour: float = Field(
        default=DEFAULT_FAILURE_RATE_PER_NODE_HOUR,
        gt=0,
        lt=1,
        description="Failures per Trainium node-hour the goodput model expects (workloads/goodput.py): the plan's "
        "goodput, and the checkpoint intervals, restart budgets and deadlines it derives where the stack file "
        "leaves them unset, which go into the jobs' specs (a change that moves one replaces a running job); "
        "default: Llama 3's 419 unexpected interruptions in 54 days on 2,048 hosts (arXiv 2407.21783).",
    )
    checkpoint_stall_warning: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="Share of a checkpoint interval a run may spend blocked in its saves before the plan warns "
        "(workloads/goodput.py), naming the cheaper fixes.",
    )
    checkpoint_stall_limit: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="Share of a checkpoint interval spent blocked in saves past which the plan refuses the run; above "
        "checkpointStallWarning.",
    )
    end_of_support_acknowledged: dict[str, str] = Field(
        default={},
        description="Pins of the images this stack runs kept past their end of support, each named (e.g. "
        "neuron-sdk-2.21) with the reason; the plan refuses such a pin otherwise (infra/facts/support.py) and "
        "warns 90 days ahead.",
    )

    def on(self, name: str) -> Any:
        """The settings of workload ``name`` when it is switched on, else None."""
        settings = getattr(self, name)
        return settings if settings is not None and settings.enabled else None


def key_name(loc: tuple[Any, ...]) -> str:
    return qualified_key(PROJECT, loc)


# Workload keys that no longer exist, and what replaced each: said by name, not as a misspelling.
REPLACED_KEYS = {
    "nemoLlama2": "the MPI operator's Llama-2 job now runs NxD Training (neuronx-nemo-megatron is "
    "archived): rename the key to nxdLlama, whose settings keep their names (docs/workloads.md)",
}


def parse_workloads_config(
    all_config: dict[str, str], rules: Callable[[WorkloadsConfig], list[str]] | None = None
) -> WorkloadsConfig:
    """The validated configuration, or ``ConfigError`` naming every bad key. ``rules``: the rules that
    need no cluster (workloads/checks.py ``config_problems``), reported beside type errors, which would
    otherwise stop the run before the cluster's outputs are read and the rules run with them."""
    return with_stray_keys_refused(all_config, PROJECT, lambda: _parsed(all_config, rules))


def _parsed(all_config: dict[str, str], rules: Callable[[WorkloadsConfig], list[str]] | None) -> WorkloadsConfig:
    raw = project_values(all_config, PROJECT)
    if replaced := [f"{key_name((k,))}: no longer a workload: {why}" for k, why in REPLACED_KEYS.items() if k in raw]:
        raise ConfigError(replaced)
    if PROFILE_KEY in all_config:
        raw["profile"] = all_config[PROFILE_KEY]
    try:
        return WorkloadsConfig.model_validate(raw)
    except ValidationError as error:
        problems = [describe(err, key_name, SECRET_KEYS, WorkloadsConfig) for err in error.errors()]
        if rules is not None:
            problems += rules_beside_type_errors(WorkloadsConfig, raw, error, key_name, rules)
        raise ConfigError(problems) from None
