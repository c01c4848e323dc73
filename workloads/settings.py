"""The workload stacks' configuration: which workloads run, and how each is sized.

Keys live under ``trainium-workloads:`` in ``workloads/Pulumi.<stack>.yaml``. A workload is
on when its key is present (``enabled: false`` keeps the settings but switches it off).
Shapes and ranges are checked here; whether the cluster can run what is asked for (node
group, size, queue, installed software) is checked against its outputs in ``checks.py``.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from infra import versions
from infra.config_base import PROFILE_KEY, ConfigModel, project_values, qualified_key, validated
from infra.naming_rules import PROFILE_PATTERN

PROJECT = "trainium-workloads"
STACK_NAME_PATTERN = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
CACHESET_PATTERN = r"^[A-Za-z0-9_-]+$"
IMAGE_TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"


class WorkloadSettings(ConfigModel):
    enabled: bool = True
    image_tag: str = Field(default=versions.TRAINING_IMAGE_TAG, pattern=IMAGE_TAG_PATTERN)


class AcceleratedWorkloadSettings(WorkloadSettings):
    # The cluster stack's accelerator node group the job runs on.
    node_group: str


class BertPretrainingSettings(AcceleratedWorkloadSettings):
    nodes: int = Field(default=2, ge=1)
    queue: str = "test"
    # Prefix of the Neuron compile cache on FSx; jobs running at the same time must not share one.
    cacheset: str = Field(default="bert-large", pattern=CACHESET_PATTERN)
    # Per-worker batch and accumulation; unset: the pinned run script's values for the precision
    # (bf16 16 x 32, fp32 8 x 64), so the global batch stays 512 per worker either way.
    batch_size: Optional[int] = Field(default=None, ge=1)
    grad_accum_steps: Optional[int] = Field(default=None, ge=1)
    # Run neuron_parallel_compile for this many steps first, then train.
    precompile: bool = True
    precompile_steps: int = Field(default=10, ge=1)
    # Steps of this training run (--steps_this_run); unset trains to the script's max_steps.
    train_steps: Optional[int] = Field(default=None, ge=1)
    bf16: bool = True
    # Both under the FSx mount of the BERT pods (/data).
    data_dir: str = "/data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
    output_dir: str = "/data/output"
    # Volcano's mutating webhook turns 0 into its default 3 (volcano v1.15.1
    # pkg/webhooks/admission/jobs/mutate/mutate_job.go): the live spec would then differ from
    # ours on every `pulumi up`, which replaces (kills) a running job. So at least 1.
    max_retry: int = Field(default=3, ge=1)
    precompile_timeout_minutes: int = Field(default=120, ge=1)


RAY_STEPS = ("generate-data", "precompile", "train")


class RayLlama2Settings(AcceleratedWorkloadSettings):
    workers: int = Field(default=2, ge=1)
    queue: str = "llama2-training-queue"
    head_cpu: str = "6"
    head_memory: str = "30Gi"
    worker_cpu: str = "120"
    worker_memory: str = "440Gi"
    # RayJobs to submit, each after the one before has succeeded; drop leading steps to skip them.
    steps: list[Literal["generate-data", "precompile", "train"]] = list(RAY_STEPS)
    step_timeout_minutes: int = Field(default=180, ge=1)
    # KubeRay counts activeDeadlineSeconds from the RayJob's creation, cluster start-up included
    # (ray-project/kuberay v1.7.0 ray-operator/controllers/ray/rayjob_controller.go): from zero
    # Trainium nodes, booting them and pulling a 10+ GB image takes 10-15 minutes, so the seed's
    # 600 s (written for an already running cluster) would kill training before it starts.
    train_deadline_seconds: Optional[int] = Field(default=2400, ge=1200)
    ttl_seconds_after_finished: int = Field(default=60, ge=0)


class NemoLlama2Settings(AcceleratedWorkloadSettings):
    nodes: int = Field(default=4, ge=1)
    # The NeMo seed names no queue; `test` is the one the cluster stack always creates.
    queue: str = "test"
    compile: bool = True
    train: bool = True
    tokenizer_path: str = "/shared/llama7b_tokenizer"
    dataset_path: str = "/shared/data/redpajama_sample_text_document"
    # Unset: the training script's own default (llama_7b.sh: 10000).
    train_iters: Optional[int] = Field(default=None, ge=1)
    compile_timeout_minutes: int = Field(default=180, ge=1)


class ClusterCheckSettings(AcceleratedWorkloadSettings):
    """The acceptance test: is a node group fit for distributed training? (workloads/cluster_check.py)"""

    nodes: int = Field(default=2, ge=1, description="Nodes to check; 2 or more also runs the nccom-test all-reduce across them (needs EFA).")
    queue: str = Field(default="test", description="Volcano queue of the all-reduce MPIJob (when Volcano is on).")
    bus_bandwidth_floor: Optional[float] = Field(
        default=None,
        gt=0,
        alias="busBandwidthFloorGBps",
        description="Lowest acceptable all-reduce bus bandwidth at 1 GiB, in nccom-test's GB/s; unset: the default "
        "for the group's instance type (workloads/cluster_check.py DEFAULT_FLOORS), required for other types.",
    )
    fsx_test_mib: int = Field(default=1024, ge=64, le=16384, description="MiB each node writes and reads back on FSx.")
    timeout_minutes: int = Field(
        default=60, ge=15, description="How long `pulumi up` waits for each stage, scale-up from zero included."
    )
    run_id: str = Field(
        default="1",
        pattern=r"^[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?$",
        description="Change it to run the check again with unchanged settings (a finished check is not re-run).",
    )


class LoadBalancerSettings(ConfigModel):
    # IPv4 source ranges allowed to reach the load balancer; required, never the internet.
    allowed_cidrs: list[str]
    internal: bool = True
    # ACM certificate for HTTPS on the load balancer; required when it is not internal.
    certificate_arn: Optional[str] = None
    username: str = Field(default="admin", pattern=r"^[A-Za-z0-9_.-]{1,32}$")


class TensorBoardSettings(WorkloadSettings):
    # The whole FSx volume, as the seeds' viewers showed it: BERT's output (/data/output in its
    # pods, /shared/output here) and NeMo's /shared/nemo_experiments both appear as runs.
    log_dir: str = "/shared"
    load_balancer: Optional[LoadBalancerSettings] = None


class DataStagingSettings(WorkloadSettings):
    # The BERT WikiCorpus tar from the public Neuron bucket, extracted under /data.
    wikicorpus: bool = True
    # The RedPajama sample, the Llama-2 tokenizer and the Megatron preprocessing (needs hfToken).
    redpajama: bool = False
    # A long-running pod with the FSx volume at /data and /shared, for hands-on work.
    cmd_shell: bool = False
    timeout_minutes: int = Field(default=240, ge=1)


# Set with `pulumi config set --secret`; a refusal never repeats their value.
SECRET_KEYS = frozenset({"hfToken", "hf_token"})


class WorkloadsConfig(ConfigModel):
    # The AWS CLI profile this stack deploys with (aws:profile); the cluster's exported
    # kubeconfig carries none, so it is added for this program's own Kubernetes access.
    profile: Optional[str] = Field(default=None, pattern=PROFILE_PATTERN)
    # The cluster stack, as `<organization>/trainium-eks/<stack>`.
    cluster_stack: str = Field(pattern=STACK_NAME_PATTERN)
    namespace: str = Field(default="default", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    # Hugging Face token for the gated Llama-2 tokenizer; set it with `pulumi config set --secret`.
    hf_token: Optional[str] = Field(default=None, min_length=1)
    data_staging: Optional[DataStagingSettings] = None
    bert_pretraining: Optional[BertPretrainingSettings] = None
    ray_llama2: Optional[RayLlama2Settings] = None
    nemo_llama2: Optional[NemoLlama2Settings] = None
    tensorboard: Optional[TensorBoardSettings] = None
    cluster_check: Optional[ClusterCheckSettings] = Field(
        default=None, description="Cluster acceptance test: per-node Neuron/EFA/FSx checks and an all-reduce across nodes."
    )

    def on(self, name: str) -> Any:
        """The settings of workload ``name`` when it is switched on, else None."""
        settings = getattr(self, name)
        return settings if settings is not None and settings.enabled else None


def key_name(loc: tuple[Any, ...]) -> str:
    return qualified_key(PROJECT, loc)


def parse_workloads_config(all_config: dict[str, str]) -> WorkloadsConfig:
    """The validated configuration, or ``ConfigError`` naming every bad key."""
    raw = project_values(all_config, PROJECT)
    if PROFILE_KEY in all_config:
        raw["profile"] = all_config[PROFILE_KEY]
    return validated(WorkloadsConfig, raw, key_name, secret_keys=SECRET_KEYS)
