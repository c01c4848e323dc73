"""The cluster stack's configuration: types, defaults, and every rule a value must obey.

Values come from the stack file (``Pulumi.<stack>.yaml``) under the project namespace
(``trainium-eks:<key>``); the region is the AWS provider's ``aws:region``. Every setting has
a default that makes the dev stack work. ``parse_stack_config`` either returns a fully
validated ``StackConfig`` or raises ``ConfigError`` naming each bad key, its value and what
is allowed, before any resource is declared.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal, Optional

from pydantic import Field

from infra import versions
from infra.catalog import NEURON_INSTANCE_TYPES
from infra.config_base import REGION_KEY, ConfigModel, project_values, qualified_key, validated
from infra.errors import ConfigError

PROJECT = "trainium-eks"

LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
# Ranges AWS accepts as a VPC secondary CIDR besides the primary's own private block.
SECONDARY_CIDR_RANGES = tuple(
    ipaddress.ip_network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.19.0.0/16")
)
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,37}[a-z0-9]$"
AZ_ID_PATTERN = r"^[a-z]{3,5}[0-9]?-az[0-9]+$"
IAM_PRINCIPAL_PATTERN = r"^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]+$"
CAPACITY_RESERVATION_PATTERN = r"^cr-[0-9a-f]{8,17}$"




class NetworkConfig(ConfigModel):
    vpc_cidr: str = "10.0.0.0/16"
    # Node and pod subnets live here, so the primary range is never exhausted by pod IPs.
    secondary_cidr: str = "100.64.0.0/16"
    az_count: int = Field(default=2, ge=2, le=4)
    nat_gateways: Literal["single", "per-az"] = "single"


class EndpointAccessConfig(ConfigModel):
    public: bool = True
    private: bool = True
    public_cidrs: list[str] = ["0.0.0.0/0"]


class CoreNodeGroupConfig(ConfigModel):
    # Ray heads ask for 6 vCPU / 30 GiB (seed), which does not fit a 32 GiB node.
    instance_types: list[str] = ["m6i.4xlarge"]
    min_size: int = Field(default=2, ge=1)
    desired_size: int = Field(default=2, ge=1)
    max_size: int = Field(default=4, ge=1)
    disk_size_gib: int = Field(default=100, ge=20)


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
    az_id: Optional[str] = None
    root_volume_gib: int = Field(default=200, ge=50)
    ami_release_version: Optional[str] = None
    labels: dict[str, str] = {}

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


class FeaturesConfig(ConfigModel):
    """On/off switches for the cluster software layered on the cluster."""

    neuron_device_plugin: bool = True
    # Packs multi-device pods onto topologically adjacent Neuron devices; worth it when pods
    # ask for fewer devices than a node has (inference, small fine-tunes), not for whole-node jobs.
    neuron_scheduler_extension: bool = False
    efa_device_plugin: bool = True
    fsx_csi: bool = True
    volcano: bool = True
    torchx_etcd: bool = True
    kuberay: bool = True
    mpi_operator: bool = True
    cluster_autoscaler: bool = True
    metrics_server: bool = True
    observability: bool = True


FSX_DEPLOYMENT_TYPES = ("PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2")
# MB/s/TiB each deployment type accepts; scratch has none.
FSX_THROUGHPUTS: dict[str, tuple[int, ...]] = {
    "PERSISTENT_2": (125, 250, 500, 1000),
    "PERSISTENT_1": (50, 100, 200),
    "SCRATCH_2": (),
}


class StorageConfig(ConfigModel):
    """The FSx for Lustre StorageClass and the `fsx-claim` PVC in every training namespace."""

    deployment_type: Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"] = "PERSISTENT_2"
    per_unit_storage_throughput: Optional[int] = 125
    capacity_gib: int = 1200
    lustre_version: Literal["2.15", "2.12"] = "2.15"
    compression: Literal["LZ4", "NONE"] = "LZ4"
    s3_import_path: Optional[str] = None
    s3_export_path: Optional[str] = None
    kms_key_id: Optional[str] = None
    reclaim_policy: Literal["Delete", "Retain"] = "Delete"
    claim_name: str = "fsx-claim"


class QueueConfig(ConfigModel):
    name: str
    weight: int = Field(default=1, ge=1)
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
    cluster_name: str = "trainium"
    kubernetes_version: str = versions.KUBERNETES_VERSION
    addon_versions: dict[str, str] = {}
    network: NetworkConfig = NetworkConfig()
    endpoint_access: EndpointAccessConfig = EndpointAccessConfig()
    cluster_admins: list[str] = []
    log_types: list[str] = list(LOG_TYPES)
    core_node_group: CoreNodeGroupConfig = CoreNodeGroupConfig()
    accelerator_node_groups: list[AcceleratorNodeGroupConfig] = Field(default_factory=_default_accelerator_groups)
    features: FeaturesConfig = FeaturesConfig()
    training_namespaces: list[str] = ["default"]
    storage: StorageConfig = StorageConfig()
    volcano_queues: list[QueueConfig] = Field(default_factory=_default_queues)
    training_data_buckets: list[str] = []
    # Let `pulumi destroy` delete repositories that still hold images (off in prod).
    ecr_force_delete: bool = True
    tags: dict[str, str] = {}

    def resolved_addon_versions(self) -> dict[str, str]:
        """Every EKS add-on with its build: the pinned table, overridden by ``addonVersions``."""
        return {**versions.EKS_ADDON_VERSIONS, **self.addon_versions}


# --- reading -------------------------------------------------------------------------------


def raw_from_pulumi_config(all_config: dict[str, str]) -> dict[str, Any]:
    """Pick this project's keys (and the region) out of the engine's flat config map."""
    raw = project_values(all_config, PROJECT)
    if REGION_KEY in all_config:
        raw["region"] = all_config[REGION_KEY]
    return raw


def parse_stack_config(raw: dict[str, Any]) -> StackConfig:
    """Validate raw config into a ``StackConfig`` or raise ``ConfigError`` listing every problem."""
    config = validated(StackConfig, raw, key_name)
    problems = semantic_problems(config)
    if problems:
        raise ConfigError(problems)
    return config


def key_name(loc: tuple[Any, ...]) -> str:
    return qualified_key(PROJECT, loc)


# --- rules across fields -------------------------------------------------------------------


def semantic_problems(config: StackConfig) -> list[str]:
    problems: list[str] = []
    problems += _region_problems(config)
    problems += _cluster_problems(config)
    problems += _network_problems(config.network)
    problems += _endpoint_problems(config.endpoint_access)
    problems += _size_problems("coreNodeGroup", config.core_node_group)
    problems += _accelerator_problems(config.accelerator_node_groups)
    problems += _software_problems(config)
    return problems


def _region_problems(config: StackConfig) -> list[str]:
    if not re.fullmatch(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$", config.region):
        return [f"{REGION_KEY} = {config.region!r}: not an AWS region name (for example us-west-2)"]
    return []


def _cluster_problems(config: StackConfig) -> list[str]:
    problems = []
    if not re.fullmatch(NAME_PATTERN, config.cluster_name):
        problems.append(
            f"{key_name(('clusterName',))} = {config.cluster_name!r}: must be 2-39 characters of lower-case letters, "
            "digits and '-', starting with a letter"
        )
    unknown_addons = sorted(set(config.addon_versions) - set(versions.EKS_ADDON_VERSIONS))
    for addon in unknown_addons:
        problems.append(
            f"{key_name(('addonVersions', addon))}: unknown add-on; allowed: {', '.join(versions.EKS_ADDON_VERSIONS)}"
        )
    if config.kubernetes_version != versions.KUBERNETES_VERSION:
        missing = [a for a in versions.EKS_ADDON_VERSIONS if a not in config.addon_versions]
        if missing:
            problems.append(
                f"{key_name(('kubernetesVersion',))} = {config.kubernetes_version!r}: the pinned add-on builds are for "
                f"{versions.KUBERNETES_VERSION}; set addonVersions for {', '.join(missing)} to use another version"
            )
    for i, arn in enumerate(config.cluster_admins):
        if not re.fullmatch(IAM_PRINCIPAL_PATTERN, arn):
            problems.append(
                f"{key_name(('clusterAdmins', i))} = {arn!r}: must be an IAM role or user ARN "
                "(arn:aws:iam::<account>:role/<name>)"
            )
    for i, log_type in enumerate(config.log_types):
        if log_type not in LOG_TYPES:
            problems.append(f"{key_name(('logTypes', i))} = {log_type!r}: allowed: {', '.join(LOG_TYPES)}")
    return problems


def _parse_network(key: str, value: str, problems: list[str]) -> Optional[ipaddress.IPv4Network]:
    try:
        return ipaddress.IPv4Network(value)
    except ValueError as exc:
        problems.append(f"{key} = {value!r}: not a valid IPv4 CIDR block with host bits zero ({exc})")
        return None


def _network_problems(network: NetworkConfig) -> list[str]:
    problems: list[str] = []
    vpc_key, secondary_key = key_name(("network", "vpcCidr")), key_name(("network", "secondaryCidr"))
    vpc = _parse_network(vpc_key, network.vpc_cidr, problems)
    secondary = _parse_network(secondary_key, network.secondary_cidr, problems)
    for key, block in ((vpc_key, vpc), (secondary_key, secondary)):
        if block is not None and not 16 <= block.prefixlen <= 24:
            problems.append(f"{key} = '{block}': prefix must be between /16 and /24 to hold the subnets")
    if vpc is not None and secondary is not None:
        if vpc.overlaps(secondary):
            problems.append(f"{secondary_key} = '{secondary}': overlaps {vpc_key} '{vpc}'")
        elif not any(secondary.subnet_of(r) for r in SECONDARY_CIDR_RANGES):
            allowed = ", ".join(str(r) for r in SECONDARY_CIDR_RANGES)
            problems.append(f"{secondary_key} = '{secondary}': must lie within one of {allowed}")
    return problems


def _endpoint_problems(access: EndpointAccessConfig) -> list[str]:
    problems = []
    if not access.public and not access.private:
        problems.append(f"{key_name(('endpointAccess',))}: public and private are both false; enable at least one")
    for i, cidr in enumerate(access.public_cidrs):
        _parse_network(key_name(("endpointAccess", "publicCidrs", i)), cidr, problems)
    return problems


def _size_problems(key: str, group: Any) -> list[str]:
    if group.min_size <= group.desired_size <= group.max_size:
        return []
    return [
        f"{key}: sizes must satisfy minSize <= desiredSize <= maxSize "
        f"(got minSize={group.min_size}, desiredSize={group.desired_size}, maxSize={group.max_size})"
    ]


def _accelerator_problems(groups: list[AcceleratorNodeGroupConfig]) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    allowed_types = ", ".join(NEURON_INSTANCE_TYPES)
    for i, group in enumerate(groups):
        key = key_name(("acceleratorNodeGroups", i))
        if not re.fullmatch(NAME_PATTERN, group.name):
            problems.append(
                f"{key}.name = {group.name!r}: must be 2-39 characters of lower-case letters, digits and '-'"
            )
        if group.name in seen:
            problems.append(f"{key}.name = {group.name!r}: duplicate node group name; names must be unique")
        seen.add(group.name)
        problems += _size_problems(key, group)
        facts = NEURON_INSTANCE_TYPES.get(group.instance_type)
        if facts is None:
            problems.append(
                f"{key}.instanceType = {group.instance_type!r}: not a supported Neuron instance type; "
                f"allowed: {allowed_types}"
            )
            continue
        if group.efa and not facts.efa_supported:
            efa_types = ", ".join(t for t, f in NEURON_INSTANCE_TYPES.items() if f.efa_supported)
            problems.append(
                f"{key}.efa = true: {group.instance_type} has no EFA; EFA types: {efa_types} (or set efa: false)"
            )
        if group.capacity_reservation is not None:
            if group.placement_group:
                problems.append(
                    f"{key}.placementGroup = true: cannot be combined with capacityReservation "
                    f"{group.capacity_reservation.id!r}; launches into reservations fail inside a cluster "
                    "placement group (remove placementGroup or the reservation)"
                )
            if not re.fullmatch(CAPACITY_RESERVATION_PATTERN, group.capacity_reservation.id):
                problems.append(
                    f"{key}.capacityReservation.id = {group.capacity_reservation.id!r}: "
                    "must look like cr-0123456789abcdef0"
                )
        if group.az_id is not None and not re.fullmatch(AZ_ID_PATTERN, group.az_id):
            problems.append(f"{key}.azId = {group.az_id!r}: not an availability zone id (for example usw2-az4)")
    return problems


DNS_LABEL = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P)?$"
BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"


def fsx_capacity_problem(capacity_gib: int) -> Optional[str]:
    """FSx for Lustre SSD capacity comes in 1200 GiB, 2400 GiB, then multiples of 2400 GiB."""
    if capacity_gib in (1200, 2400) or (capacity_gib > 2400 and capacity_gib % 2400 == 0):
        return None
    lower = 1200 if capacity_gib < 2400 else max(2400, capacity_gib // 2400 * 2400)
    upper = 1200 if capacity_gib < 1200 else (2400 if capacity_gib < 2400 else lower + 2400)
    nearest = sorted({lower, upper})
    return f"allowed: 1200, 2400, or a multiple of 2400 (nearest: {' or '.join(map(str, nearest))})"


def _software_problems(config: StackConfig) -> list[str]:
    problems: list[str] = []
    storage, skey = config.storage, (lambda *k: key_name(("storage", *k)))
    capacity = fsx_capacity_problem(storage.capacity_gib)
    if capacity:
        problems.append(f"{skey('capacityGib')} = {storage.capacity_gib}: {capacity}")
    allowed = FSX_THROUGHPUTS[storage.deployment_type]
    if allowed and storage.per_unit_storage_throughput not in allowed:
        problems.append(
            f"{skey('perUnitStorageThroughput')} = {storage.per_unit_storage_throughput}: "
            f"{storage.deployment_type} allows {', '.join(map(str, allowed))}"
        )
    if not allowed and storage.per_unit_storage_throughput is not None:
        problems.append(f"{skey('perUnitStorageThroughput')}: {storage.deployment_type} takes none; set it to null")
    for field_, path in (("s3ImportPath", storage.s3_import_path), ("s3ExportPath", storage.s3_export_path)):
        if path is None:
            continue
        if not re.fullmatch(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", path):
            problems.append(f"{skey(field_)} = {path!r}: must be an s3://bucket[/prefix] URL")
        if storage.deployment_type == "PERSISTENT_2":
            # The CSI driver passes these to CreateFileSystem, which takes them only for
            # SCRATCH and PERSISTENT_1; PERSISTENT_2 links S3 through data repository associations.
            problems.append(
                f"{skey(field_)} = {path!r}: not available with deploymentType PERSISTENT_2; "
                "use SCRATCH_2 or PERSISTENT_1 for S3 import/export"
            )
    if storage.s3_export_path and not storage.s3_import_path:
        problems.append(f"{skey('s3ExportPath')}: needs s3ImportPath as well")
    if storage.kms_key_id and storage.deployment_type == "SCRATCH_2":
        problems.append(f"{skey('kmsKeyId')}: SCRATCH_2 file systems cannot use a customer KMS key")
    if not re.fullmatch(DNS_LABEL, storage.claim_name):
        problems.append(f"{skey('claimName')} = {storage.claim_name!r}: not a valid Kubernetes name")

    if not config.training_namespaces:
        problems.append(f"{key_name(('trainingNamespaces',))}: list at least one namespace (default: [default])")
    seen: set[str] = set()
    for i, namespace in enumerate(config.training_namespaces):
        key = key_name(("trainingNamespaces", i))
        if not re.fullmatch(DNS_LABEL, namespace):
            problems.append(f"{key} = {namespace!r}: not a valid Kubernetes namespace name")
        if namespace in ("kube-system", "kube-public", "kube-node-lease"):
            problems.append(f"{key} = {namespace!r}: a system namespace; use your own or default")
        if namespace in seen:
            problems.append(f"{key} = {namespace!r}: listed twice")
        seen.add(namespace)

    names: set[str] = set()
    for i, queue in enumerate(config.volcano_queues):
        key = key_name(("volcanoQueues", i))
        if not re.fullmatch(DNS_LABEL, queue.name):
            problems.append(f"{key}.name = {queue.name!r}: not a valid Kubernetes name")
        if queue.name in names:
            problems.append(f"{key}.name = {queue.name!r}: duplicate queue name")
        names.add(queue.name)
        for field_, value in (("cpu", queue.cpu), ("memory", queue.memory)):
            if value is not None and not re.fullmatch(QUANTITY, value):
                problems.append(f"{key}.{field_} = {value!r}: not a Kubernetes quantity (for example 500 or 1500Gi)")

    for i, bucket in enumerate(config.training_data_buckets):
        if not re.fullmatch(BUCKET, bucket):
            problems.append(
                f"{key_name(('trainingDataBuckets', i))} = {bucket!r}: not an S3 bucket name (names only, no s3://)"
            )

    features = config.features
    if features.torchx_etcd and not features.volcano:
        problems.append(
            f"{key_name(('features', 'torchxEtcd'))} = true: TorchX jobs are gang-scheduled by Volcano; "
            "turn volcano on or torchxEtcd off"
        )
    return problems
