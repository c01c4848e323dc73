"""The cluster stack's configuration: types and defaults.

Values come from the stack file (``Pulumi.<stack>.yaml``) under the project namespace
(``trainium-eks:<key>``); the region and profile are the AWS provider's ``aws:region`` and
``aws:profile``. Every setting has a default that makes the dev stack work.
``parse_stack_config`` either returns a fully validated ``StackConfig`` or raises
``ConfigError`` naming each bad key, its value and what is allowed, before any resource is
declared; the rules across fields live in ``infra/config_rules.py``.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from infra import versions
from infra.catalog import NEURON_INSTANCE_TYPES
from infra.config_base import PROFILE_KEY, REGION_KEY, ConfigModel, project_values, qualified_key, validated
from infra.errors import ConfigError

PROJECT = "trainium-eks"

Environment = Literal["dev", "prod"]
LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
# CloudWatch Logs PutRetentionPolicy accepts only these retentions (days).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)
FSX_DEPLOYMENT_TYPES = ("PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2")
# MB/s/TiB each deployment type accepts; scratch has none.
FSX_THROUGHPUTS: dict[str, tuple[int, ...]] = {
    "PERSISTENT_2": (125, 250, 500, 1000),
    "PERSISTENT_1": (50, 100, 200),
    "SCRATCH_2": (),
}
S3_EVENTS = ("NEW", "CHANGED", "DELETED")


class NetworkConfig(ConfigModel):
    vpc_cidr: str = "10.0.0.0/16"
    # Node and pod subnets live here, so the primary range is never exhausted by pod IPs.
    secondary_cidr: str = "100.64.0.0/16"
    az_count: int = Field(default=2, ge=2, le=4)
    nat_gateways: Literal["single", "per-az"] = "single"


class EndpointAccessConfig(ConfigModel):
    """Who reaches the Kubernetes API. `pulumi up` itself needs it: the program installs the
    cluster software through it from wherever it runs."""

    public: bool = True
    private: bool = True
    # None: the whole internet in dev; prod must name its deployers' egress ranges.
    public_cidrs: Optional[list[str]] = None
    # A private-only endpoint is reachable only from inside the VPC (or a peered network/VPN):
    # say so explicitly, since `pulumi up` from a laptop or hosted runner would then fail.
    deployed_from_vpc: bool = False

    def effective_public_cidrs(self) -> Optional[list[str]]:
        if not self.public:
            return None
        return self.public_cidrs if self.public_cidrs is not None else ["0.0.0.0/0"]


class CoreNodeGroupConfig(ConfigModel):
    """The always-on system nodes: CoreDNS, the controllers and operators, etcd, TensorBoard.
    Jobs' CPU pods go to the job-support group instead, which idles at zero."""

    # Two m6i.large carry every system pod with room to spare (infra/system_capacity.py and its
    # tests sum the requests and count the pods against the ENI limit).
    instance_types: list[str] = Field(
        default=["m6i.large"], description="EC2 instance types of the always-on system node group."
    )
    min_size: int = Field(default=2, ge=1, description="Fewest system nodes (two zones, so CoreDNS survives one).")
    desired_size: int = Field(default=2, ge=1, description="System nodes at creation; cluster-autoscaler owns it after.")
    max_size: int = Field(default=3, ge=1, description="Most system nodes cluster-autoscaler may run.")
    disk_size_gib: int = Field(default=50, ge=20, le=16384, description="gp3 root volume per system node, GiB.")


class JobNodeGroupConfig(ConfigModel):
    """CPU nodes for the pods jobs need beside their Trainium workers (Ray heads, MPI launchers,
    staging Jobs, acceptance-test launchers). Idle at zero like the Trainium groups; tainted so
    system pods never land there and keep a node up."""

    # Ray heads ask for 6 vCPU / 30 GiB (seed) and RedPajama staging for 12 vCPU: 16 vCPU / 64 GiB.
    instance_types: list[str] = Field(
        default=["m6i.4xlarge"], description="EC2 instance types of the job-support node group (scales from zero)."
    )
    min_size: int = Field(default=0, ge=0, description="Job-support nodes kept when idle (0: none, no cost).")
    desired_size: int = Field(default=0, ge=0, description="Job-support nodes at creation; cluster-autoscaler owns it after.")
    max_size: int = Field(default=4, ge=1, description="Most job-support nodes cluster-autoscaler may run.")
    disk_size_gib: int = Field(default=100, ge=20, le=16384, description="gp3 root volume per job-support node, GiB.")


class CapacityReservationConfig(ConfigModel):
    id: str
    # `capacity-block` for EC2 Capacity Blocks for ML, `on-demand` for an ODCR.
    type: Literal["on-demand", "capacity-block"] = "on-demand"


class AcceleratorNodeGroupConfig(ConfigModel):
    name: str
    instance_type: str
    min_size: int = Field(default=0, ge=0)
    desired_size: int = Field(default=0, ge=0)
    max_size: int = Field(ge=1)
    # None: on exactly when the instance type supports EFA.
    efa: Optional[bool] = None
    # `efa-only` interfaces take no IP address (VPC CNI >= 1.18.4); `efa` works everywhere.
    efa_interface_type: Literal["efa-only", "efa"] = "efa-only"
    # None: on, unless a capacity reservation is targeted (placement groups break those).
    placement_group: Optional[bool] = None
    capacity_reservation: Optional[CapacityReservationConfig] = None
    # Required with a capacity reservation: reservations are zonal.
    az_id: Optional[str] = None
    root_volume_gib: int = Field(default=200, ge=50, le=16384)
    ami_release_version: Optional[str] = None
    labels: dict[str, str] = {}
    # EKS node auto-repair: replace a node whose Neuron/EFA/kubelet health goes bad.
    auto_repair: bool = True

    @property
    def efa_enabled(self) -> bool:
        if self.efa is not None:
            return self.efa
        return NEURON_INSTANCE_TYPES[self.instance_type].efa_supported

    @property
    def placement_group_enabled(self) -> bool:
        if self.placement_group is not None:
            return self.placement_group
        return self.capacity_reservation is None

    @property
    def capacity_block(self) -> bool:
        return self.capacity_reservation is not None and self.capacity_reservation.type == "capacity-block"


class FeaturesConfig(ConfigModel):
    """On/off switches for the cluster software layered on the cluster."""

    neuron_device_plugin: bool = True
    # Packs multi-device pods onto topologically adjacent Neuron devices; worth it when pods
    # ask for fewer devices than a node has (inference, small fine-tunes), not for whole-node jobs.
    neuron_scheduler_extension: bool = False
    # The Neuron node problem detector's recovery: marks a node with Neuron hardware errors
    # unhealthy in its Auto Scaling group so EC2 replaces it (needs the node problem detector).
    neuron_node_recovery: bool = False
    efa_device_plugin: bool = True
    fsx_csi: bool = True
    volcano: bool = True
    torchx_etcd: bool = True
    kuberay: bool = True
    mpi_operator: bool = True
    cluster_autoscaler: bool = True
    metrics_server: bool = True
    observability: bool = True
    # The EKS node monitoring agent reports Neuron, EFA, kernel and storage faults as node
    # conditions, which node auto-repair acts on.
    node_monitoring_agent: bool = True


class DataRepositoryConfig(ConfigModel):
    """An S3 link of the training file system: a data repository association."""

    file_system_path: str
    s3_path: str
    # What S3 changes flow into the file system, and which file-system changes flow back.
    auto_import: list[Literal["NEW", "CHANGED", "DELETED"]] = list(S3_EVENTS)
    auto_export: list[Literal["NEW", "CHANGED", "DELETED"]] = []
    import_metadata_on_create: bool = True


class StorageConfig(ConfigModel):
    """The training file system (one per cluster), its S3 links, and the dynamic class."""

    deployment_type: Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"] = "PERSISTENT_2"
    per_unit_storage_throughput: Optional[int] = 125
    capacity_gib: int = 1200
    lustre_version: Literal["2.15", "2.12"] = "2.15"
    compression: Literal["LZ4", "NONE"] = "LZ4"
    # S3 links, as data repository associations (what PERSISTENT_2 supports).
    data_repositories: list[DataRepositoryConfig] = []
    kms_key_id: Optional[str] = None
    # None: on in prod. Protects the file system from `pulumi destroy` and keeps a final backup.
    retain: Optional[bool] = None
    claim_name: str = "fsx-claim"
    # The `fsx-lustre` StorageClass for extra, per-job volumes the CSI driver creates.
    dynamic_reclaim_policy: Literal["Delete", "Retain"] = "Delete"


class QueueConfig(ConfigModel):
    name: str
    weight: int = Field(default=1, ge=1, le=65535)
    reclaimable: bool = True
    # Optional caps on what the queue's jobs may hold at once, as Kubernetes quantities.
    cpu: Optional[str] = None
    memory: Optional[str] = None


def _default_queues() -> list[QueueConfig]:
    # `test` is what the seeds' TorchX runs submit to; the Ray seed caps its queue.
    return [QueueConfig(name="test"), QueueConfig(name="llama2-training-queue", cpu="500", memory="1500Gi")]


def _default_accelerator_groups() -> list[AcceleratorNodeGroupConfig]:
    # The seeds' groups, idle by default: a trn1.32xlarge costs about $21.50 an hour.
    return [
        AcceleratorNodeGroupConfig(name="trn1-32xl-ng1", instance_type="trn1.32xlarge", max_size=4),
        AcceleratorNodeGroupConfig(name="trn1n-32xl-ng", instance_type="trn1n.32xlarge", max_size=2),
    ]


class StackConfig(ConfigModel):
    region: str
    # The AWS CLI profile `pulumi up` authenticates with (aws:profile), also used for the
    # program's own Kubernetes access.
    profile: Optional[str] = None
    # prod refuses settings that are fine for experiments (an API open to the internet...).
    environment: Environment = "dev"
    cluster_name: str = "trainium"
    kubernetes_version: str = versions.KUBERNETES_VERSION
    # STANDARD: the cluster must be upgraded before standard support ends; EXTENDED keeps an
    # old version running at $0.60/h instead of $0.10/h.
    upgrade_policy: Literal["STANDARD", "EXTENDED"] = "STANDARD"
    # Optional exact builds per EKS add-on; the rest resolve to AWS's default build for the
    # cluster's Kubernetes version at deploy time.
    addon_versions: dict[str, str] = {}
    network: NetworkConfig = NetworkConfig()
    endpoint_access: EndpointAccessConfig = EndpointAccessConfig()
    cluster_admins: list[str] = []
    log_types: list[str] = list(LOG_TYPES)
    log_retention_days: int = 90
    core_node_group: CoreNodeGroupConfig = CoreNodeGroupConfig()
    job_node_group: JobNodeGroupConfig = Field(
        default_factory=JobNodeGroupConfig, description="CPU nodes for jobs' support pods, scaled from zero."
    )
    accelerator_node_groups: list[AcceleratorNodeGroupConfig] = Field(default_factory=_default_accelerator_groups)
    features: FeaturesConfig = FeaturesConfig()
    training_namespaces: list[str] = ["default"]
    storage: StorageConfig = StorageConfig()
    volcano_queues: list[QueueConfig] = Field(default_factory=_default_queues)
    training_data_buckets: list[str] = []
    # Let `pulumi destroy` delete repositories that still hold images (off in prod).
    ecr_force_delete: bool = True
    tags: dict[str, str] = {}

    @property
    def retain_storage(self) -> bool:
        return self.storage.retain if self.storage.retain is not None else self.environment == "prod"


# --- reading -------------------------------------------------------------------------------


def raw_from_pulumi_config(all_config: dict[str, str]) -> dict[str, Any]:
    """Pick this project's keys (and the AWS provider's region and profile) out of the
    engine's flat config map."""
    raw = project_values(all_config, PROJECT)
    if REGION_KEY in all_config:
        raw["region"] = all_config[REGION_KEY]
    if PROFILE_KEY in all_config:
        raw["profile"] = all_config[PROFILE_KEY]
    return raw


def parse_stack_config(raw: dict[str, Any]) -> StackConfig:
    """Validate raw config into a ``StackConfig`` or raise ``ConfigError`` listing every problem."""
    from infra.config_rules import semantic_problems

    config = validated(StackConfig, raw, key_name)
    problems = semantic_problems(config)
    if problems:
        raise ConfigError(problems)
    return config


def key_name(loc: tuple[Any, ...]) -> str:
    return qualified_key(PROJECT, loc)
