"""The cluster stack's configuration: types and defaults.

Values come from the stack file (``Pulumi.<stack>.yaml``) under the project namespace
(``trainium-eks:<key>``); the region and profile are the AWS provider's ``aws:region`` and
``aws:profile``. Every setting has a default that makes the dev stack work.
``infra.validate.parse_stack_config`` either returns a fully validated ``StackConfig`` or
raises ``ConfigError`` naming each bad key, its value and what is allowed, before any
resource is declared; the rules across fields live in ``infra/config/rules.py``.
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from infra.config.base import ConfigModel, qualified_key
from infra.facts import versions
from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.facts.neuron import compatible_ami_release

PROJECT = "trainium-eks"

Environment = Literal["dev", "prod"]
# A stack named prod, or prod-<suffix> (prod-eu, prod-2...), is prod whatever its stack file says, so
# dropping the `environment` line cannot unprotect its data: the program refuses such a stack that sets
# another environment (infra/validate.py), and the policy pack's prod-data-protected reads the same
# name from each resource's URN.
PROD_STACK_PATTERN = r"prod(-[a-z0-9][a-z0-9-]*)?"


def is_prod_stack(stack: str) -> bool:
    return re.fullmatch(PROD_STACK_PATTERN, stack) is not None


LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
# CloudWatch Logs PutRetentionPolicy accepts only these retentions (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
FsxDeploymentType = Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"]
# MB/s/TiB each deployment type accepts; scratch has none.
# FSx CreateFileSystemLustreConfiguration.AutomaticBackupRetentionDays: 0 (off, the API's default)
# to 90 days; terraform-provider-aws aws_fsx_lustre_file_system validates IntBetween(0, 90).
MAX_BACKUP_RETENTION_DAYS = 90
# A retained file system keeps at least a week of daily backups unless its stack says more; prod
# may not keep less.
DEFAULT_BACKUP_RETENTION_DAYS = 7
# Training namespaces' UIDs and GIDs: above the system range (login.defs UID_MIN) and below 2^31, the
# largest a signed 32-bit id reaches; 65534 is `nobody`, what FSx root squash maps root to.
MIN_NAMESPACE_ID = 1000
MAX_NAMESPACE_ID = 2**31 - 1
SQUASHED_ID = 65534
DEFAULT_NAMESPACE_ID = 20001
PROD_MIN_BACKUP_RETENTION_DAYS = 7

FSX_THROUGHPUTS: dict[FsxDeploymentType, tuple[int, ...]] = {
    "PERSISTENT_2": (125, 250, 500, 1000),
    "PERSISTENT_1": (50, 100, 200),
    "SCRATCH_2": (),
}
S3Event = Literal["NEW", "CHANGED", "DELETED"]


class NetworkConfig(ConfigModel):
    vpc_cidr: str = Field(
        default="10.0.0.0/16", description="Primary VPC range (/16 to /24): public and private subnets."
    )
    secondary_cidr: str = Field(
        default="100.64.0.0/16",
        description="Secondary range (/16 to /24) for node and pod subnets, so pod IPs never exhaust the primary "
        "range; 100.64.0.0/10 or the primary's own RFC 1918 block.",
    )
    az_count: int = Field(default=2, ge=2, le=4, description="Zones used; the accelerator zone is always one of them.")
    nat_gateways: Literal["single", "per-az"] = Field(default="single", description="One NAT gateway, or one per zone.")


class EndpointAccessConfig(ConfigModel):
    """Who reaches the Kubernetes API. `pulumi up` itself needs it: the program installs the
    cluster software through it from wherever it runs."""

    public: bool = Field(default=True, description="Public API endpoint on.")
    private: bool = Field(default=True, description="Private API endpoint on (nodes use it).")
    public_cidrs: list[str] | None = Field(
        default=None,
        description="IPv4 ranges allowed to the public endpoint; unset: the whole internet in dev, required in prod. "
        "`pulumi up` refuses documentation ranges and, unless deployedFromVpc, a list without the deploying "
        "machine's public address.",
    )
    deployed_from_vpc: bool = Field(
        default=False,
        description="Declares that `pulumi up` runs inside the VPC (or a network routed to it); required for a "
        "private-only endpoint, which is unreachable from anywhere else. `pulumi up` then skips checking its own "
        "public address against publicCidrs.",
    )

    def effective_public_cidrs(self) -> list[str] | None:
        if not self.public:
            return None
        return self.public_cidrs if self.public_cidrs is not None else ["0.0.0.0/0"]


class CoreNodeGroupConfig(ConfigModel):
    """The always-on system nodes: CoreDNS, the controllers and operators, TensorBoard.
    Jobs' CPU pods go to the job-support group instead, which idles at zero."""

    # Two m6i.large carry every system pod with room to spare (infra/specs/system_capacity.py and its
    # tests sum the requests and count the pods against the ENI limit).
    instance_types: list[str] = Field(
        default=["m6i.large"],
        description="Instance types of the always-on system nodes (CoreDNS, controllers, operators, "
        "TensorBoard); refused when the system pods would not fit minSize of them.",
    )
    min_size: int = Field(
        default=2,
        ge=1,
        description="Fewest system nodes. Two or more: the leader-elected controllers and CoreDNS run two replicas, "
        "so one node or zone can go; 1: one replica each, and a core node or zone failure stops DNS and the "
        "controllers until the node is replaced: an instance failure in minutes, a node that stops reporting Ready "
        "by node auto repair after 30 minutes.",
    )
    desired_size: int = Field(default=2, ge=1, description="System nodes at creation.")
    max_size: int = Field(default=3, ge=1, description="Most system nodes cluster-autoscaler may run.")
    disk_size_gib: int = Field(default=50, ge=20, le=16384, description="Encrypted gp3 root volume per system node.")


class JobNodeGroupConfig(ConfigModel):
    """CPU nodes for the pods jobs need beside their Trainium workers (Ray heads, MPI launchers,
    staging Jobs, acceptance-test launchers). Idle at zero like the Trainium groups; tainted so
    system pods never land there and keep a node up."""

    # Ray heads ask for 6 vCPU / 30 GiB (seed) and RedPajama staging for 12 vCPU: 16 vCPU / 64 GiB.
    instance_types: list[str] = Field(
        default=["m6i.4xlarge"],
        description="Instance types of the job-support nodes (Ray heads, MPI launchers, staging and check Jobs); "
        "Ray heads ask for 6 vCPU / 30 GiB, which does not fit a 32 GiB node.",
    )
    min_size: int = Field(default=0, ge=0, description="Job-support nodes kept when idle (0: none, no cost).")
    desired_size: int = Field(default=0, ge=0, description="Job-support nodes at creation.")
    max_size: int = Field(default=4, ge=1, description="Most job-support nodes cluster-autoscaler may run.")
    disk_size_gib: int = Field(
        default=100, ge=20, le=16384, description="Encrypted gp3 root volume per job-support node."
    )


class CapacityReservationConfig(ConfigModel):
    id: str | None = Field(
        default=None,
        description="The reservation id, `cr-...`; required unless tags select the reservations (Karpenter only).",
    )
    tags: dict[str, str] | None = Field(
        default=None,
        description="nodeProvisioner karpenter only: launch into any reservation carrying all these tags (a value "
        "`*` matches any), instead of one id.",
    )
    type: Literal["on-demand", "capacity-block"] = Field(
        default="on-demand",
        description="`capacity-block` for EC2 Capacity Blocks for ML, `on-demand` for an On-Demand Capacity "
        "Reservation.",
    )


class AcceleratorNodeGroupConfig(ConfigModel):
    name: str = Field(description="Unique; becomes the EKS node group name.")
    instance_type: str = Field(
        description="A Trainium or Inferentia type: " + ", ".join(sorted(NEURON_INSTANCE_TYPES)) + "."
    )
    min_size: int = Field(default=0, ge=0, description="Fewest nodes; 0 lets the group idle at no instance cost.")
    desired_size: int = Field(default=0, ge=0, description="Nodes at creation; cluster-autoscaler owns it afterwards.")
    max_size: int = Field(ge=1, description="Most nodes cluster-autoscaler may start.")
    efa: bool | None = Field(default=None, description="EFA interfaces; unset: on exactly when the type has EFA.")
    efa_interface_type: Literal["efa-only", "efa"] = Field(
        default="efa-only",
        description="Type of the interfaces on cards 1 and up: `efa-only` takes no IP address (VPC CNI >= 1.18.4), "
        "`efa` works everywhere.",
    )
    placement_group: bool | None = Field(
        default=None,
        description="A cluster placement group; unset: on unless a capacity reservation is targeted (placement "
        "groups break launches into reservations).",
    )
    capacity_reservation: CapacityReservationConfig | None = Field(
        default=None, description="An On-Demand Capacity Reservation or Capacity Block to launch into."
    )
    az_id: str | None = Field(
        default=None,
        description="Zone id (e.g. usw2-az4); unset: the zone offering every type. Required with an on-demand "
        "reservation: reservations are zonal.",
    )
    root_volume_gib: int = Field(default=200, ge=50, le=16384, description="Encrypted gp3 root volume per node.")
    ami_release_version: str | None = Field(
        default=None,
        description="The Neuron AMI release, built for kubernetesVersion (e.g. 1.35.6-20260625), whose Neuron driver "
        "the training images run on; unset means the latest AMI at creation, refused while its driver fails them "
        "(docs/node-health.md).",
    )
    labels: dict[str, str] = Field(default={}, description="Extra node labels (Kubernetes label syntax).")
    auto_repair: bool = Field(
        default=True, description="EKS node auto-repair: replace a node whose Neuron, EFA or kubelet health goes bad."
    )
    burn_in: bool = Field(
        default=True,
        description="Health-gate new nodes: each registers tainted, and a burn-in on it (Neuron devices and cores, "
        "an all-reduce over its NeuronCores, EFA interfaces, locked-memory limit, FSx mount; 13 minutes at most) removes "
        "the taint when every check passes, or else labels the node with the failed check and taints it so that its "
        "provisioner replaces it as an empty node.",
    )
    device_allocation: Literal["device-plugin", "dra"] = Field(
        default="device-plugin",
        description="How pods get the nodes' Neuron devices and EFA interfaces: `device-plugin`, as extended resources "
        "(aws.amazon.com/neuron, vpc.amazonaws.com/efa); `dra`, by Dynamic Resource Allocation claims, whole nodes at "
        "LNC 2 (the Neuron DRA driver, and aws-dranet for EFA; the cluster exports each group's ResourceClaimTemplate). "
        "`dra` only on trn2.48xlarge and trn2u.48xlarge, Kubernetes 1.35 (1.34 without cluster-autoscaler), "
        "nodeProvisioner cluster-autoscaler, and minSize 1 or more, on a Capacity Block too (docs/dra.md).",
    )
    spot: bool = Field(
        default=False,
        description="nodeProvisioner karpenter only: allow Spot capacity too, which Karpenter then prefers to "
        "on-demand (after reservations); a Spot interruption ends the training run on that node (SIGTERM "
        "about a minute after EC2's 2-minute warning). Not with a Capacity Block.",
    )

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

    @property
    def dra(self) -> bool:
        return self.device_allocation == "dra"


class MonitoringConfig(ConfigModel):
    """Prometheus for the goodput ledger and the training alerts (docs/monitoring.md); the CloudWatch path
    (features.observability) is separate and stays."""

    prometheus: Literal["off", "managed", "in-cluster"] = Field(
        default="off",
        description="`managed`: an Amazon Managed Service for Prometheus workspace with the goodput recording and "
        "alerting rules, an AWS managed collector scraping kube-state-metrics, neuron-monitor on the Trainium nodes, "
        "the EFA exporter on the EFA nodes and node-exporter on every node (all installed with it) and the workload "
        "stacks' progress exporters, and its Alertmanager sending the alerts to SNS; `in-cluster`: the same agents, "
        "scrape jobs, rules and SNS alerts in a Prometheus and an Alertmanager on the system nodes, its data on an "
        "EBS gp3 volume (retentionDays, volumeGib); `off`: none of it.",
    )
    grafana: Literal["off", "in-cluster"] = Field(
        default="off",
        description="`in-cluster`: a Grafana on the system nodes with the fleet, job and cost dashboards and the "
        "Prometheus as its data source (the in-cluster one, or the managed workspace signed with SigV4), reached "
        "with `kubectl port-forward` only, its admin password generated into a Secret; needs `prometheus` on.",
    )
    retention_days: int = Field(
        default=15,
        ge=1,
        le=3650,
        description="With `prometheus: in-cluster`: days of samples kept (Prometheus' own default); older ones go, "
        "and so do the oldest once the data fills 80% of the volume.",
    )
    volume_gib: int = Field(
        default=50,
        ge=10,
        le=16384,
        description="With `prometheus: in-cluster`: the size of the Prometheus server's EBS gp3 volume (billed "
        "while it exists, idle or not).",
    )
    alert_topic_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$",
        description="An existing SNS topic the alerts go to (its policy must let aps.amazonaws.com publish); unset: "
        "the stack creates `<cluster>-training-alerts`.",
    )
    alert_emails: list[str] = Field(
        default=[],
        description="Addresses subscribed by email to the stack's own alert topic; each gets a confirmation email "
        "from AWS Notifications and receives nothing until it confirms. Not with alertTopicArn (subscribe to your "
        "own topic there).",
    )
    idle_node_alert_minutes: int = Field(
        default=30,
        ge=15,
        le=1440,
        description="A Trainium node that runs no training pod this long raises TrainiumNodeIdle; keep it above "
        "a Trainium group's 3-minute scale-down delay (infra/specs/node_template.py) and the instance's termination.",
    )

    @property
    def ebs_volumes(self) -> bool:
        """Whether anything makes EBS volumes, and so needs the EBS CSI add-on: the in-cluster Prometheus's server
        and Alertmanager do (infra/specs/monitoring.py EBS_STORAGE_CLASS); nothing else in the cluster does."""
        return self.prometheus == "in-cluster"


class FeaturesConfig(ConfigModel):
    """On/off switches for the cluster software layered on the cluster."""

    neuron_device_plugin: bool = Field(default=True, description="Neuron device plugin and node problem detector.")
    neuron_scheduler_extension: bool = Field(
        default=False,
        description="Packs multi-device pods onto adjacent Neuron devices; worth it when pods take part of a node, "
        "not for whole-node training jobs.",
    )
    neuron_node_recovery: bool = Field(
        default=False,
        description="The Neuron node problem detector marks a node with Neuron hardware errors unhealthy in its "
        "Auto Scaling group so EC2 replaces it (needs neuronDevicePlugin).",
    )
    efa_device_plugin: bool = Field(default=True, description="EFA device plugin, tolerating the Neuron taint.")
    fsx_csi: bool = Field(
        default=True,
        description="The shared training file system of storage.kind (FSx for Lustre or EFS), its CSI driver and claims.",
    )
    volcano: bool = Field(default=True, description="Volcano gang scheduler and its queues.")
    kuberay: bool = Field(default=True, description="KubeRay operator.")
    mpi_operator: bool = Field(default=True, description="Kubeflow MPI operator.")
    cluster_autoscaler: bool = Field(default=True, description="cluster-autoscaler (scales groups up from zero).")
    metrics_server: bool = Field(default=True, description="metrics-server.")
    observability: bool = Field(
        default=True,
        description="CloudWatch observability add-on, a dashboard (NeuronCores, "
        "training restarts, failed pods) and a restart alarm per training namespace.",
    )
    node_monitoring_agent: bool = Field(
        default=True,
        description="EKS node monitoring agent: reports Neuron, EFA, kernel and storage faults as node conditions, "
        "which node auto-repair acts on.",
    )
    session_manager: bool = Field(
        default=False,
        description="Attach AmazonSSMManagedInstanceCore to the node role, for a shell on a node through SSM "
        "Session Manager (neuron-top, neuron-ls). Off: its ssm:GetParameter(s) on every parameter of the account "
        "would belong to every process holding the node's credentials.",
    )


class DataRepositoryConfig(ConfigModel):
    """An S3 link of the training file system: a data repository association."""

    file_system_path: str = Field(
        description="Where the bucket appears in the file system, inside a training namespace's directory, e.g. "
        "/default/datasets (its pods see it under their mount)."
    )
    s3_path: str = Field(description="The linked S3 location, s3://bucket[/prefix].")
    auto_import: list[S3Event] = Field(
        default=list(get_args(S3Event)), description="S3 events that flow into the file system."
    )
    auto_export: list[S3Event] = Field(
        default=[],
        description="File-system changes that flow back to S3: NEW, CHANGED; DELETED is refused, since it would "
        "repeat every delete on the file system in the bucket.",
    )
    import_metadata_on_create: bool = Field(
        default=True, description="Import the bucket's listing when the link is created."
    )


class CheckpointExportConfig(ConfigModel):
    """A schedule that exports what changed under some file-system paths to the S3 buckets linked there."""

    schedule: str = Field(
        description="When an export starts: an EventBridge Scheduler rate(...) or cron(...) expression in UTC, "
        "e.g. rate(6 hours) or cron(0 */6 * * ? *)."
    )
    paths: list[str] = Field(
        description="File-system paths to export, e.g. /nemo_experiments; each inside the fileSystemPath of a "
        "storage.dataRepositories entry whose autoExport is empty (files go to that entry's s3Path)."
    )


# Days without access after which EFS moves a file to Infrequent Access: the values its lifecycle policy
# takes (EFS API LifecyclePolicy.TransitionToIA; pulumi-aws 7.51.1 efs/_inputs.py FileSystemLifecyclePolicy).
EFS_INFREQUENT_ACCESS_DAYS = (1, 7, 14, 30, 60, 90, 180, 270, 365)
# The StorageConfig keys that describe an FSx for Lustre file system alone: with `kind: efs` each is refused
# when the stack file sets it (infra/config/rules.py), and the keys EFS alone reads are refused with fsx.
FSX_ONLY_STORAGE_KEYS = (
    "deployment_type",
    "per_unit_storage_throughput",
    "capacity_gib",
    "lustre_version",
    "compression",
    "data_repositories",
    "checkpoint_export",
    "retain",
    "backup_retention_days",
    "backup_start_time",
    "root_claims",
    "root_data_owners",
    "dynamic_reclaim_policy",
)
EFS_ONLY_STORAGE_KEYS = ("infrequent_access_after_days",)


class StorageConfig(ConfigModel):
    """The training file system (one per cluster), its S3 links, and the dynamic class."""

    kind: Literal["fsx", "efs"] = Field(
        default="fsx",
        description="The shared training file system: `fsx` (FSx for Lustre, sized by throughput) or `efs` (one "
        "Regional Amazon EFS file system, Elastic throughput, an access point per namespace; dev stacks only: no "
        "backups or protection, and the FSx-only keys are refused). Changing it deletes the old file system and "
        "every claim on it (docs/operations.md, Switching the file system).",
    )
    infrequent_access_after_days: int = Field(
        default=7,
        description=f"efs: days without access after which a file moves to EFS Infrequent Access (one of "
        f"{', '.join(map(str, EFS_INFREQUENT_ACCESS_DAYS))}); it moves back to Standard on its first access.",
    )
    deployment_type: FsxDeploymentType = Field(
        default="PERSISTENT_2", description="FSx for Lustre deployment type; changing it replaces the file system."
    )
    per_unit_storage_throughput: int | None = Field(
        default=125,
        description="MB/s per TiB: 125/250/500/1000 for PERSISTENT_2, 50/100/200 for PERSISTENT_1, none for SCRATCH_2.",
    )
    capacity_gib: int = Field(
        default=1200,
        description="1200, 2400, then multiples of 2400; growing is in place, shrinking replaces the file system.",
    )
    lustre_version: Literal["2.15", "2.12"] = Field(
        default="2.15", description="Lustre version (2.15 for PERSISTENT_2)."
    )
    compression: Literal["LZ4", "NONE"] = Field(
        default="LZ4", description="Data compression (the bill is per provisioned GiB either way)."
    )
    data_repositories: list[DataRepositoryConfig] = Field(
        default=[], description="S3 links (at most 8, no nesting, a bucket once)."
    )
    checkpoint_export: CheckpointExportConfig | None = Field(
        default=None,
        description="Export new and changed files under some paths to their linked buckets on a schedule (an FSx "
        "export data repository task); unset: none. docs/operations.md says how to restore from S3.",
    )
    kms_key_id: str | None = Field(
        default=None,
        description="KMS key ARN the file system is encrypted with; unset: the service's own key (FSx's or EFS's).",
    )
    retain: bool | None = Field(
        default=None,
        description="Protect the file system from `pulumi destroy` and keep a final backup; unset: on in prod.",
    )
    backup_retention_days: int | None = Field(
        default=None,
        description="Days FSx keeps the file system's daily automatic backups, 0-90 (0: none); changing it is in "
        "place. Unset: 7 where the file system is retained, else 0. At least 7 in prod; SCRATCH_2 takes none.",
    )
    backup_start_time: str = Field(
        default="05:00", description="When the daily automatic backup starts (HH:MM, UTC), with backups on."
    )
    claim_name: str = Field(
        default="fsx-claim",
        description="The prefix of each training namespace's claims: `<claimName>-<namespace>` mounts only its own "
        "directory, `/<namespace>` of the file system; `<claimName>` itself is the root claim of storage.rootClaims.",
    )
    shared_directories: dict[str, dict[str, Literal["read-only", "read-write"]]] = Field(
        default={},
        description="Per training namespace, the other training namespaces whose directory it may mount too, each "
        "`read-only` or `read-write`: it gets the claim `<claimName>-<owner>` for each (read-only: mounted `ro`).",
    )
    root_claims: Literal["mounted", "migrated", "retired"] = Field(
        default="retired",
        description="The root claims `<claimName>` of a stack whose namespaces mounted the file system's root "
        "(an older version's default, `mounted`, which is refused now: the pods run as their namespace's id and "
        "cannot write the root). `migrated` (each namespace's data moved into its directory: rootDataOwners): the "
        "workload stacks mount the directory claims `<claimName>-<namespace>`; the root claims stay for pods "
        "still holding them. `retired`: there are none (stop every pod that mounts one first: "
        "docs/operations.md).",
    )
    root_data_owners: dict[str, str] = Field(
        default={},
        description="Entries at the file system's root (top-level names, as workloads wrote them under /shared) "
        "and the training namespace each belongs to: a Job moves each into `/<namespace>/<entry>` and lists what "
        "it leaves at the root. Stop the namespace's workloads first.",
    )
    dynamic_reclaim_policy: Literal["Delete", "Retain"] = Field(
        default="Delete", description="Reclaim policy of the `fsx-lustre` StorageClass for extra, per-job volumes."
    )


class QueueConfig(ConfigModel):
    name: str = Field(description="Queue name jobs submit to.")
    weight: int = Field(default=1, ge=1, le=65535, description="Share of the cluster against other queues.")
    reclaimable: bool = Field(default=True, description="Others may reclaim what this queue borrowed.")
    cpu: str | None = Field(default=None, description="Cap on the CPU its jobs hold at once (a Kubernetes quantity).")
    memory: str | None = Field(
        default=None, description="Cap on the memory its jobs hold at once (a Kubernetes quantity)."
    )


def _default_queues() -> list[QueueConfig]:
    # `test` is what the seeds' TorchX runs submit to; the Ray seed caps its queue.
    return [QueueConfig(name="test"), QueueConfig(name="llama2-training-queue", cpu="500", memory="1500Gi")]


def _default_accelerator_groups(
    kubernetes_version: str = versions.KUBERNETES_VERSION,
) -> list[AcceleratorNodeGroupConfig]:
    # The seeds' groups, idle by default: a trn1.32xlarge costs about $21.50 an hour. Pinned to the
    # AMI release whose Neuron driver the training images run on: the latest AMI's fails them all
    # (infra/facts/neuron.py), so an unpinned group is refused.
    release = compatible_ami_release(kubernetes_version)
    return [
        AcceleratorNodeGroupConfig(
            name="trn1-32xl-ng1", instance_type="trn1.32xlarge", max_size=4, ami_release_version=release
        ),
        AcceleratorNodeGroupConfig(
            name="trn1n-32xl-ng", instance_type="trn1n.32xlarge", max_size=2, ami_release_version=release
        ),
    ]


NodeProvisioner = Literal["cluster-autoscaler", "karpenter"]


# EKS user guide, "Amazon EKS service quotas": "Nodes per managed node group", 450 by default, adjustable.
DEFAULT_NODES_PER_MANAGED_NODE_GROUP = 450


class ServiceQuotasConfig(ConfigModel):
    """The account's applied value of an adjustable AWS quota the plan holds the stack to, where it was
    raised above AWS's default (infra/config/aws_limits.py): the plan cannot read it offline."""

    nodes_per_managed_node_group: int = Field(
        default=DEFAULT_NODES_PER_MANAGED_NODE_GROUP,
        ge=1,
        description='EKS "Nodes per managed node group" (default 450): every managed node group\'s maxSize stays '
        "within it. Set it only once Service Quotas shows the raised value.",
    )


class KarpenterConfig(ConfigModel):
    """How Karpenter treats the Trainium nodes it starts (nodeProvisioner: karpenter)."""

    expire_after: str = Field(
        default="720h",
        description="Longest life of a Trainium node (Go duration, or Never); when it ends the node drains even "
        "under a running job, so it bounds how stale an AMI gets.",
    )
    termination_grace_period: str = Field(
        default="24h",
        description="How long a node Karpenter drains (at expireAfter, an AWS Health event) keeps "
        "the training pods it may not evict (karpenter.sh/do-not-disrupt) before deleting them, which sends "
        "SIGTERM; they run until then, and no pinned script checkpoints on SIGTERM. Capacity Block and Spot "
        "groups use at most 8m and 90s, inside EC2's notice.",
    )
    consolidate_after: str = Field(
        default="3m",
        description="How long a Trainium node stays empty before Karpenter removes it; a node waiting for its "
        "gang is held instead (infra/specs/gang_hold.py), as under cluster-autoscaler's own 3 minutes.",
    )


class StackConfig(ConfigModel):
    @model_validator(mode="before")
    @classmethod
    def _default_groups_follow_kubernetes_version(cls, raw: Any) -> Any:
        """The default groups' AMI release is the one for the stack's kubernetesVersion, so raising
        it alone keeps them on a release built for it."""
        if isinstance(raw, dict) and not {"acceleratorNodeGroups", "accelerator_node_groups"} & set(raw):
            version = raw.get("kubernetesVersion", raw.get("kubernetes_version", versions.KUBERNETES_VERSION))
            if isinstance(version, str):
                raw = {**raw, "acceleratorNodeGroups": _default_accelerator_groups(version)}
        return raw

    region: str = Field(description="The AWS region (`aws:region`).")
    profile: str | None = Field(
        default=None,
        description="The AWS CLI profile `pulumi up` authenticates with (`aws:profile`), also used for the "
        "program's own Kubernetes access.",
    )
    environment: Environment = Field(
        default="dev",
        description="prod refuses settings fine for experiments (an API open to the internet...) and protects the "
        f"file system; unset: prod for a stack named prod or prod-<suffix> ({PROD_STACK_PATTERN}), which may not "
        "set another, else dev.",
    )
    cluster_name: str = Field(default="trainium", description="EKS cluster name; prefixes most resource names.")

    @field_validator("cluster_name", mode="before")
    @classmethod
    def _cluster_name_not_empty(cls, value: Any) -> Any:
        """An empty name gets the naming rule (infra/config/rules.py), not only "at least 1 character"."""
        if value == "":
            raise ValueError(
                "empty; must be 2-39 characters of lower-case letters, digits and '-', starting with a letter "
                "(or leave the key out for the default, trainium)"
            )
        return value

    kubernetes_version: str = Field(
        default=versions.KUBERNETES_VERSION,
        description=f"EKS Kubernetes version, one EKS offers ({', '.join(versions.EKS_KUBERNETES_VERSIONS)}); add-on "
        "builds and every node group follow it, the node groups after the control plane.",
    )
    upgrade_policy: Literal["STANDARD", "EXTENDED"] = Field(
        default="STANDARD",
        description="STANDARD: EKS upgrades the control plane when standard support ends; EXTENDED keeps an old "
        "version running at $0.60/h instead of $0.10/h.",
    )
    end_of_support_acknowledged: dict[str, str] = Field(
        default={},
        description="Pins kept past their end of support, each named (e.g. kubernetes-1.34) with the reason; the "
        "plan refuses such a pin otherwise (infra/facts/support.py) and warns 90 days ahead.",
    )
    replacements_acknowledged: dict[str, str] = Field(
        default={},
        description="Data stores (the FSx file system, its data repository associations, its volume and claims, "
        "KMS keys; by Pulumi resource name) a change may replace or delete, each with the reason; the plan diff "
        "refuses any other data-store replacement or deletion. A protected (prod) file system still cannot be "
        "replaced.",
    )
    addon_versions: dict[str, str] = Field(
        default={},
        description="Exact builds per EKS add-on (vX.Y.Z-eksbuild.N); the rest resolve to AWS's default build for "
        "the Kubernetes version at deploy time.",
    )
    network: NetworkConfig = Field(default=NetworkConfig(), description="The VPC.")
    endpoint_access: EndpointAccessConfig = Field(
        default=EndpointAccessConfig(), description="Who reaches the Kubernetes API."
    )
    cluster_admins: list[str] = Field(
        default=[], description="IAM role/user ARNs given cluster-admin access entries; the creator has EKS's own."
    )
    cluster_viewers: list[str] = Field(
        default=[],
        description="IAM role/user ARNs given read access to every "
        "object, Secrets included (AmazonEKSAdminViewPolicy): the pipeline's preview role.",
    )
    log_types: list[str] = Field(default=list(LOG_TYPES), description="Control-plane log types.")
    log_retention_days: int = Field(
        default=90, description="Retention of the control-plane log group (a CloudWatch retention value)."
    )
    core_node_group: CoreNodeGroupConfig = Field(
        default=CoreNodeGroupConfig(), description="The on-demand core node group."
    )
    job_node_group: JobNodeGroupConfig = Field(
        default_factory=JobNodeGroupConfig, description="CPU nodes for jobs' support pods, scaled from zero."
    )
    accelerator_node_groups: list[AcceleratorNodeGroupConfig] = Field(
        default_factory=_default_accelerator_groups,
        description="Trainium node groups (default: the seeds' two, "
        "idle at zero, on the AMI release infra/facts/neuron.py COMPATIBLE_AMI_RELEASES records for kubernetesVersion).",
    )
    node_provisioner: NodeProvisioner = Field(
        default="cluster-autoscaler",
        description="What starts Trainium nodes: `cluster-autoscaler` scales one managed node group per "
        "acceleratorNodeGroups entry; `karpenter` turns each entry into a Karpenter NodePool and EC2NodeClass "
        "(docs/provisioners.md). The core and job-support groups stay managed node groups either way.",
    )
    karpenter: KarpenterConfig = Field(
        default_factory=KarpenterConfig, description="Karpenter's node lifetimes (nodeProvisioner: karpenter)."
    )
    features: FeaturesConfig = Field(default=FeaturesConfig(), description="Cluster software switches.")
    monitoring: MonitoringConfig = Field(
        default_factory=MonitoringConfig, description="Prometheus for the goodput ledger and the training alerts."
    )
    service_quotas: ServiceQuotasConfig = Field(
        default_factory=ServiceQuotasConfig,
        description="Adjustable AWS quotas this account has raised above their defaults (the plan holds the stack to "
        "these values).",
    )
    training_namespaces: list[str] = Field(
        default=["default"],
        description="Namespaces that get the FSx claim and the `training` service account.",
    )
    namespace_ids: dict[str, int] = Field(
        default={"default": DEFAULT_NAMESPACE_ID},
        description="Per training namespace, the number that is both the UID and the GID its training pods run as "
        "and its directory of the file system belongs to (`/<namespace>`, mode 2770): one per training namespace, "
        f"each unique, {MIN_NAMESPACE_ID}-{MAX_NAMESPACE_ID} (65534 is the root squash's `nobody`).",
    )
    storage: StorageConfig = Field(default=StorageConfig(), description="The training file system.")
    volcano_queues: list[QueueConfig] = Field(default_factory=_default_queues, description="Volcano queues.")
    training_data_buckets: list[str] = Field(
        default=[],
        description="Buckets the `training` service account of "
        "every training namespace may read (unless namespaceDataBuckets names "
        "the namespace).",
    )
    namespace_data_buckets: dict[str, list[str]] = Field(
        default={},
        description="Per training namespace, the only buckets its `training` service account may read, instead of "
        "trainingDataBuckets: each namespace has its own IAM role.",
    )
    ecr_force_delete: bool | None = Field(
        default=None,
        description="Let `pulumi destroy` delete repositories that still hold images; unset: true in dev, false in "
        "prod, which refuses true.",
    )
    tags: dict[str, str] = Field(
        default={},
        description="Tags added to every taggable resource (besides the "
        "program's own project, cluster and stack, which they may not override).",
    )
    permissions_boundary: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9+=,.@_-]{1,128}$",
        description="Name of the managed policy every IAM role of the stack carries as its permissions boundary: "
        "the bootstrap stack's boundary for this stack (its output permissionsBoundaries), without which "
        "the pipeline's deploy role may create no role; unset: no boundary (an administrator's deploy into an "
        "account without the bootstrap).",
    )

    @property
    def force_delete_registries(self) -> bool:
        """Derived from the environment when unset, so dropping the key cannot arm prod's repositories."""
        return self.ecr_force_delete if self.ecr_force_delete is not None else self.environment != "prod"

    @property
    def retain_storage(self) -> bool:
        return self.storage.retain if self.storage.retain is not None else self.environment == "prod"

    @property
    def storage_backup_retention_days(self) -> int:
        """Days of automatic backups: what the stack sets, else a week for a retained file system."""
        if self.storage.backup_retention_days is not None:
            return self.storage.backup_retention_days
        persistent = self.storage.deployment_type != "SCRATCH_2"
        return DEFAULT_BACKUP_RETENTION_DAYS if persistent and self.retain_storage else 0

    def data_buckets(self, namespace: str) -> list[str]:
        """The buckets the training role of ``namespace`` reads."""
        return self.namespace_data_buckets.get(namespace, self.training_data_buckets)


def key_name(loc: tuple[Any, ...]) -> str:
    return qualified_key(PROJECT, loc)
